"""What the search knows of a task before it runs a program: its domain's knowledge and its outputs' constants.

- **The domain** (``domain``): a task of ints, or a text task. Each has the library and program prior learned from
  the generated training tasks of its kind (``library.SHIPPED``, ``prior.DOMAIN_PRIORS``): PQT's grammar for ints,
  the text grammar (``tasks.text_grammar``) for text.
- **The constants of a text task's outputs** (``constant_pieces``): a program synthesized from examples may read
  them, as a person would. Text that every expected output starts with, ends with or is, is printed by a piece of
  code (``tasks.text_grammar.print_text``); the pieces are whole programs of the first generation, wrapped around
  the library's short programs (a greeting around an echo), and idioms the islands put into parents. A piece
  clears its cell and the next before it prints, so that it can stand anywhere in a program.

>>> from synthenv.tasks import Task
>>> greet = Task.from_pairs("greet", [("Ada", "Hi, Ada!"), ("Bo", "Hi, Bo!"), ("Cy", "Hi, Cy!"), ("Di", "Hi, Di!")])
>>> len(constant_pieces(greet)), domain(greet)  # "Hi, " and "!"; four different outputs are not a verdict
(2, 'text')
"""

from __future__ import annotations

import os

import torch

from synthenv.language import encode_batch
from synthenv.tasks import Task
from synthenv.tasks.py2random import Py2Random
from synthenv.tasks.text_grammar import print_text

from .variation import member_uniform

CLEAR = "[-]>[-]<"
"""What a piece does first: clear its cell and the next (the printing counts down the next)."""
WRAPPED_LENGTH = 24
"""The library's programs of at most this many commands are wrapped in a text task's prefix and suffix."""


def domain(task: Task | None) -> str:
    """``"text"`` for a text task, else ``"int"``."""
    return "text" if task is not None and task.text else "int"


def _common_prefix(texts: list[bytes]) -> bytes:
    return os.path.commonprefix(texts)


def constant_pieces(task: Task | None) -> list[str]:
    """Programs printing the constant parts of ``task``'s expected outputs (as ``task.dialect`` judges them): what
    every output starts with, what every output ends with, and each whole output when there are at most 3 different
    ones (a verdict such as yes or no). None for a task of ints."""
    if task is None or not task.text:
        return []
    outputs = [bytes(v & 0xFF for v in task.dialect.judged(out)) for _, out in task.cases]
    prefix = _common_prefix(outputs)
    suffix = _common_prefix([o[::-1] for o in outputs])[::-1]
    texts = [prefix, suffix]
    if len(set(outputs)) <= 3:
        texts += sorted(set(outputs))
    rng = Py2Random(0)
    pieces = []
    for text in dict.fromkeys(t for t in texts if t):
        pieces.append(CLEAR + print_text(rng, text.decode("latin-1")))
    return pieces


def first_programs(task: Task | None, library_programs: list[str], max_len: int) -> list[str]:
    """The task-derived programs a first generation runs besides the library: the constant pieces alone, the prefix
    and suffix together, and wrapped around each short library program (``WRAPPED_LENGTH``)."""
    pieces = constant_pieces(task)
    if not pieces:
        return []
    outputs = [bytes(v & 0xFF for v in task.dialect.judged(out)) for _, out in task.cases]
    prefix = _common_prefix(outputs)
    suffix = _common_prefix([o[::-1] for o in outputs])[::-1]
    rng = Py2Random(0)
    head = CLEAR + print_text(rng, prefix.decode("latin-1")) if prefix else ""
    tail = ">" + CLEAR + print_text(rng, suffix.decode("latin-1")) if suffix else ""
    programs = list(pieces) + ([head + tail] if head and tail else [])
    if head or tail:
        short = [program for program in library_programs if len(program) <= WRAPPED_LENGTH]
        programs += [head + program + tail for program in dict.fromkeys(short + reading_loops(library_programs))]
    return [program for program in dict.fromkeys(programs) if len(program) <= max_len]


def reading_loops(programs: list[str]) -> list[str]:
    """The top-level loops that read (``,[...]`` with a ``,`` in the loop) of ``programs`` of at most
    ``WRAPPED_LENGTH`` commands, each once, in order: the library's idioms for walking the input (``,[.,]``).

    >>> reading_loops([">++.,[.,]>++.", ",[+.,]", ",[>+<-]"])
    [',[.,]', ',[+.,]']
    """
    found = []
    for program in programs:
        depth, start = 0, None
        for i, c in enumerate(program):
            if c == "[":
                if depth == 0:
                    start = i
                depth += 1
            elif c == "]" and depth:
                depth -= 1
                if depth == 0 and start and program[start - 1] == ",":
                    loop = program[start - 1: i + 1]
                    if "," in loop[1:] and len(loop) <= WRAPPED_LENGTH:
                        found.append(loop)
    return list(dict.fromkeys(found))


class WithPieces:
    """A source of idioms (``variation.random_programs``' arguments) that draws the task's constant pieces in
    ``share`` of its draws and ``fresh``'s programs in the others; the pieces longer than the programs are left out.

    >>> import torch
    >>> source = WithPieces(["+.", "++."], lambda g, shape, L, longest, device: torch.zeros((1, *shape, L),
    ...                     dtype=torch.int64), share=1.0, max_len=4)
    >>> source([torch.Generator().manual_seed(0)], (3,), 4, 4, torch.device("cpu"))[0].tolist()
    [[3, 3, 7, 0], [3, 7, 0, 0], [3, 3, 7, 0]]
    """

    def __init__(self, pieces: list[str], fresh, share: float, max_len: int):
        fitting = [piece for piece in pieces if len(piece) <= max_len]
        self.pool = encode_batch(fitting, max_len) if fitting else None
        self.fresh, self.share = fresh, share
        self._on: dict = {}

    def __call__(self, generators, shape: tuple[int, ...], max_len: int, longest: int, device):
        programs = self.fresh(generators, shape, max_len, longest, device)  # [S, *shape, L]
        if self.pool is None:
            return programs
        pool = self._on.get(device)
        if pool is None:
            pool = self._on[device] = self.pool.to(device)
        draws = member_uniform(generators, (*shape, 2), device)
        picks = pool[(draws[..., 1] * len(pool)).long().clamp(max=len(pool) - 1)]  # [S, *shape, L]
        return torch.where((draws[..., 0] < self.share)[..., None], picks, programs)
