"""A library of known programs: what the default agent runs first on a new task.

An agent that has seen thousands of tasks should not rediscover on every task the programs that solved
them. The default agent's first generation runs every program of its library before any fresh program
(``first_generation``): a task that a known program solves is solved at once, and the elitist phase starts
from the known programs that score best, the idioms of related tasks, instead of from fresh ones alone
(``IslandsConfig.library_kept``: how many of them its queue is offered). Running them costs one generation: the
shipped library (``SHIPPED``) holds the unique solutions of generated training tasks 0-3999 (the tasks the shipped
edit policy was pretrained on), 2 660 programs of 4 to 30 commands, fewer than the default's 4 096 programs a
generation. None of them solves a paper or tuning task (the stream is
decontaminated); held-out generated tasks that one of them solves are ``tasks.known.seen``.

A library file is plain text: one BF program per line, ``#`` starts a comment line, blank lines are skipped, and
a line holding any other character is refused (``read_library``). ``synthenv library`` writes one: the solutions of
generated training tasks, and with ``--from-runs DIR`` the solutions that runs of the default agent found, so that
an agent that has solved tasks starts the next one from their solutions.

>>> library = Library([",[->+<]>.", ",."])
>>> generators = [torch.Generator().manual_seed(0)]
>>> children = torch.zeros((1, 4, 12), dtype=torch.int64)  # the fresh first generation of one member
>>> from synthenv.language import decode_batch
>>> decode_batch(library.first_generation(children, generators)[0])
[',[->+<]>.', ',.', '', '']
"""

from __future__ import annotations

import functools
import os
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from synthenv.tasks import generated, known

from synthenv import storage
from synthenv.errors import UserError
from synthenv.language import COMMANDS, encode_batch

from ..run.data import run_solutions
from .variation import member_uniform

SHIPPED = {"int": known.TRAIN_SOLUTIONS, "text": known.TEXT_SOLUTIONS}
"""The libraries shipped in the package, one per domain (``agents.search.knowledge``): for tasks of ints,
``tasks/train_solutions.txt``; for text tasks, ``tasks/text_solutions.txt`` (BENCHMARKS.md: the commands that
reproduce them); ``tasks.known.seen`` asks whether a program of the first solves a task."""


class Library:
    """Known programs (BF text, unique, in order) and how they enter a search's first generation."""

    def __init__(self, programs: Iterable[str]):
        self.programs = list(dict.fromkeys(program for program in programs if program))
        self._tokens: dict[tuple[int, torch.device], torch.Tensor] = {}

    def __len__(self) -> int:
        return len(self.programs)

    def tokens(self, max_len: int, device: torch.device) -> torch.Tensor:
        """``[N, max_len]`` the programs of at most ``max_len`` commands (the others cannot be written)."""
        key = (max_len, device)
        if key not in self._tokens:
            fitting = [program for program in self.programs if len(program) <= max_len]
            if self.programs and not fitting:
                warnings.warn(f"every program of the library ({len(self.programs)}, the shortest "
                              f"{min(map(len, self.programs))} commands) is longer than max_len {max_len}: the "
                              "search starts without it; raise --max-len or give a library of shorter programs",
                              stacklevel=2)
            self._tokens[key] = encode_batch(fitting, max_len).to(device) if fitting else \
                torch.zeros((0, max_len), dtype=torch.int64, device=device)
        return self._tokens[key]

    def first_generation(self, children: torch.Tensor, generators: list[torch.Generator]) -> torch.Tensor:
        """``children [S, B, L]`` (a fresh first generation) with the library's programs in its first slots: all of
        them where they fit in B, else B of them drawn without replacement from each member's generator."""
        _, b, length = children.shape
        known = self.tokens(length, children.device)
        n = len(known)
        if not n:
            return children
        if n <= b:
            children[:, :n] = known
            return children
        picks = member_uniform(generators, (n,), children.device).argsort(dim=1)[:, :b]  # [S, B]
        return known[picks]


def read_library(path: str | os.PathLike) -> Library:
    """The library file at ``path`` (see the module docstring); a bad line is refused with its number."""
    fix = "library (--library) is 'shipped', 'none' or the path of a file synthenv library --out wrote"
    try:
        text = storage.read_bytes(path, "the library file", missing=fix).decode("utf-8", errors="replace")
    except storage.FileSizeError as error:
        raise UserError(f"{error}; {fix}") from None
    programs = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        bad = next((char for char in line if char not in COMMANDS), None)
        if bad is not None:
            raise UserError(f"{str(path)!r} line {number}: {bad!r} is not a BF command ({COMMANDS}); a library file "
                            "holds one program per line and '#' comment lines (synthenv library writes one)")
        programs.append(line)
    if not programs:
        raise UserError(f"{str(path)!r} holds no program; a library file holds one BF program per line "
                        "(synthenv library writes one)")
    return Library(programs)


def write_library(path: str | os.PathLike, library: Library, header: Iterable[str] = ()) -> None:
    """Write ``library`` to ``path``, after ``header`` lines as comments (what it holds, the command)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# {line}" for line in header] + library.programs
    storage.write_text(path, "\n".join(lines) + "\n", "library file")


def build_library(tasks: int, from_runs: str | os.PathLike | None = None,
                  split: str = "train") -> tuple[Library, dict[str, int]]:
    """The solutions of generated tasks 0 .. ``tasks`` - 1 of ``split``, then those that the runs under ``from_runs``
    found; with how many programs each source gave (before duplicates are dropped)."""
    programs = [program for _, program in generated.pairs(split, 0, tasks)]
    counts = {"tasks": len(programs)}
    if from_runs is not None:
        solutions = run_solutions(from_runs)
        counts["runs"] = len(solutions)
        programs += solutions
    return Library(programs), counts


@dataclass(frozen=True)
class LibraryConfig:
    """Writing a library file (``synthenv library``)."""

    tasks: int = known.SEEN_TASKS
    """Generated training tasks 0 .. tasks - 1 whose solutions it holds (0: none)."""
    split: str = "train"
    """The generated split the tasks are from: train (the library of tasks of ints) or text-train (of text tasks)."""
    from_runs: str | None = None
    """A folder of runs of the default agent (synthenv train with logs): the solutions they found are added."""
    out: str = "runs/library.txt"
    """Where the library is written."""

    def __post_init__(self) -> None:
        generated.check_task_count("tasks", self.tasks, "generated training tasks")
        if self.split not in ("train", "text-train"):
            raise ValueError(f"split must be 'train' or 'text-train' (the training splits), got {self.split!r}")
        if not self.tasks and self.from_runs is None:
            raise ValueError("tasks=0 and no from_runs leaves the library empty; give tasks > 0 or from_runs")


def make_library(config: LibraryConfig, log=print) -> Library:
    """Build the library ``config`` names, write it to ``config.out`` with a header; returns it."""
    started = time.perf_counter()
    library, counts = build_library(config.tasks, config.from_runs, config.split)
    if not len(library):
        raise UserError(f"the runs under {config.from_runs!r} solved no task, and tasks=0: the library would be "
                        "empty; give tasks > 0 or runs that solved")
    command = f"synthenv library --tasks {config.tasks}" + (f" --split {config.split}" if config.split != "train" else "") + \
        (f" --from-runs {config.from_runs}" if config.from_runs is not None else "") + f" --out {config.out}"
    sources = f"the solutions of generated {config.split} tasks 0-{config.tasks - 1}" if config.tasks else ""
    if config.from_runs is not None:
        sources += (" and " if sources else "") + f"{counts['runs']} solutions found by runs under {config.from_runs}"
    write_library(config.out, library, [f"{len(library)} unique programs: {sources}.", command])
    log(f"wrote {config.out}: {len(library)} unique programs ({sources}) in {time.perf_counter() - started:.1f} s")
    return library


def load_library(name: str, domain: str = "int") -> Library | None:
    """The library ``IslandsConfig.library`` names: the one shipped for ``domain`` (read once per process), None for
    ``none``, or a library file."""
    if name == "none":
        return None
    return _shipped(domain) if name == "shipped" else read_library(name)


@functools.cache
def _shipped(domain: str) -> Library:
    return Library(known.solutions_in(SHIPPED[domain]))  # the package's own file, read once for known.seen too


def require_library(name: str, value: object) -> None:
    """Raise ``ValueError`` unless ``value`` names a library: ``shipped``, ``none`` or a path."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be 'shipped', 'none' or the path of a library file (synthenv library "
                         f"--out), got {value!r}")
