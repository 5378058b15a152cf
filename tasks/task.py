"""``Task``: a named set of (input, expected output) cases, the cell base, the step limit and the dialect.

Inputs and outputs are lists of ints, or text: ``Task.from_pairs`` takes strings and stores their UTF-8
bytes (base 256), and a text task (``text=True``) shows them as text.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from synthenv import reference
from synthenv.dialect import STANDARD, Dialect
from synthenv.language import COMMANDS, DEFAULT_MAX_STEPS, Status

Case = tuple[tuple[int, ...], tuple[int, ...]]
Values = "Sequence[int] | str | bytes"

MAX_BASE = 2**31 - 1
"""Largest cell base: every engine keeps cells and the base in int32, so values stay below 2**31 - 1."""
MAX_STEPS = 1_000_000
"""Largest step limit: each running program holds a tape of ``max_steps`` cells (4 MB at this cap), and a
program that never halts costs this many steps per case (docs/limits.md)."""
MAX_CASES = 1024
"""Most cases a task may have (every engine holds ``[N, K, O]`` outputs)."""
MAX_CASE_VALUES = 4096
"""Most values in one case's input or expected output."""
MAX_NAME_LENGTH = 100
"""Longest task name: a name is a label (run folders are built from it), not a path."""


@dataclass(frozen=True)
class CaseTensors:
    """A task's cases as padded device tensors (K cases)."""

    inputs: torch.Tensor  # [K, I] int32, zero-padded
    input_lengths: torch.Tensor  # [K] int32
    expected: torch.Tensor  # [K, O] int32, zero-padded (O >= 1)
    expected_lengths: torch.Tensor  # [K] int32

    @property
    def num_cases(self) -> int:
        return int(self.inputs.shape[0])


@dataclass(frozen=True)
class Task:
    """A program-synthesis task: cases in PQT's format (docs/semantics.md §3), run in a dialect.

    Attributes:
        name: a label, e.g. ``"reverse"``: 1 to ``MAX_NAME_LENGTH`` printable characters, no path separator.
        cases: ``((inputs, expected_output), ...)``, tuples of ints (1 to ``MAX_CASES`` cases, each part at
            most ``MAX_CASE_VALUES`` values).
        base: cells hold integers in ``[0, base)``; inputs and outputs must lie in that range;
            2 <= base <= ``MAX_BASE`` (2**31 - 1).
        max_steps: a run fails once its raw step count reaches this (PQT: 5000); at most
            ``MAX_STEPS``.
        dialect: how programs run and are judged (``synthenv.dialect``: a ``Dialect``, a preset's name or a
            mapping of fields): ``STANDARD`` unless given; the PQT tasks and the generated tasks have ``PQT``.
        solution: a known BF solution, when there is one.
        description: one line for listings.
        text: the inputs and outputs are text (bytes of UTF-8): tools show them as text.
    """

    name: str
    cases: tuple[Case, ...]
    base: int = 256
    max_steps: int = DEFAULT_MAX_STEPS
    dialect: Dialect = STANDARD
    solution: str | None = None
    description: str = ""
    text: bool = False
    _tensor_cache: dict = field(default_factory=dict, init=False, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        check_name(self.name)
        if not isinstance(self.base, int) or isinstance(self.base, bool) or not 2 <= self.base <= MAX_BASE:
            raise ValueError(f"base must be an int in [2, {MAX_BASE}] (cells are int32 in every engine), got "
                             f"{self.base!r}")
        if (not isinstance(self.max_steps, int) or isinstance(self.max_steps, bool)
                or not 1 <= self.max_steps <= MAX_STEPS):
            raise ValueError(f"max_steps must be an int in [1, {MAX_STEPS}] (each running program keeps a tape of "
                             f"max_steps cells; docs/limits.md), got {self.max_steps!r}")
        object.__setattr__(self, "dialect", Dialect.parse(self.dialect))  # a Dialect, a preset's name or fields
        if not isinstance(self.cases, Sequence) or isinstance(self.cases, (str, bytes)):
            raise ValueError(f"task {self.name!r}: cases must be a sequence of (inputs, expected_output) pairs, got "
                             f"{type(self.cases).__name__}")
        if not 1 <= len(self.cases) <= MAX_CASES:
            raise ValueError(f"task {self.name!r} needs 1 to {MAX_CASES} (input, output) cases (docs/limits.md), got "
                             f"{len(self.cases)}")
        cases = tuple(_as_case(case, self.base, i) for i, case in enumerate(self.cases))
        object.__setattr__(self, "cases", cases)

    @property
    def strict_syntax(self) -> bool:
        """Whether programs with unmatched brackets fail (``SYNTAX_ERROR``): the dialect's bracket rule."""
        return self.dialect.strict

    @property
    def num_cases(self) -> int:
        return len(self.cases)

    @property
    def max_output_length(self) -> int:
        """The longest expected output, as the dialect judges it (without trailing whitespace under ``rstrip``)."""
        return max(len(self.dialect.judged(out)) for _, out in self.cases)

    def tensors(self, device: torch.device | str | None = None) -> CaseTensors:
        """The cases as padded int32 tensors on ``device`` (built once per device); the expected outputs as the
        dialect judges them."""
        device = torch.device(device if device is not None else "cpu")
        key = str(device)
        if key not in self._tensor_cache:
            self._tensor_cache[key] = _case_tensors(self.cases, self.dialect, device)
        return self._tensor_cache[key]

    def show(self, values: Sequence[int]) -> str:
        """``values`` as this task shows them: text (``repr`` of the decoded bytes) for a text task, else a list.

        >>> print(Task.from_pairs("hi", [("a", "A")]).show([72, 105, 10]), Task.from_pairs("n", [([1], [2])]).show([7]))
        'Hi\\n' [7]
        """
        if self.text:
            return repr(bytes(v & 0xFF for v in values).decode("utf-8", "backslashreplace"))
        return "[" + ", ".join(str(v) for v in values) + "]"

    @classmethod
    def from_pairs(
        cls,
        name: str,
        pairs: Sequence[tuple[Values, Values]],
        base: int = 256,
        max_steps: int = DEFAULT_MAX_STEPS,
        description: str = "",
        solution: str | None = None,
        dialect: Dialect | str | dict | None = None,
    ) -> Task:
        """A task from explicit (input, expected output) pairs: int lists, or text (``str``, stored as its UTF-8
        bytes; the task is then a text task in base 256). ``dialect``: a ``Dialect``, a preset name or fields
        (``Dialect.parse``); the standard dialect by default.

        >>> t = Task.from_pairs("inc", [([1], [2]), ([5], [6])], base=10)
        >>> t.num_cases, t.base, t.dialect.left_edge
        (2, 10, 'error')
        >>> shout = Task.from_pairs("shout", [("hi", "HI!"), ("ok", "OK!")])
        >>> shout.cases[0], shout.text
        (((104, 105), (72, 73, 33)), True)
        """
        text = any(isinstance(part, str) for pair in pairs for part in _pair(pair))
        cases = tuple((as_values(i), as_values(o)) for i, o in map(_pair, pairs))
        return cls(name, cases, base, max_steps, Dialect.parse(dialect), solution=solution, description=description,
                   text=text)

    @classmethod
    def from_program(
        cls,
        name: str,
        solution: str,
        make_input: Callable[[random.Random], Sequence[int]],
        num_cases: int = 16,
        base: int = 256,
        max_steps: int = DEFAULT_MAX_STEPS,
        seed: int = 6849275409234,
        description: str = "",
        rng: Callable[[int], object] | None = None,
        dialect: Dialect | str | dict | None = None,
    ) -> Task:
        """A task whose expected outputs are what a reference BF program prints.

        ``make_input(rng)`` draws one input list from a generator seeded with ``seed`` (a
        ``random.Random`` unless ``rng`` builds another), once per case, in order. The program
        must succeed on every input, in ``dialect`` (the standard dialect by default).

        >>> t = Task.from_program("echo1", ",.", lambda r: [r.randrange(1, 9)], num_cases=3)
        >>> all(inp == out for inp, out in t.cases)
        True
        """
        if any(c not in COMMANDS for c in solution):
            raise ValueError(f"solution must contain only BF commands {COMMANDS!r}, got {solution!r}")
        generator = (rng or random.Random)(seed)
        dialect = Dialect.parse(dialect)
        cases = []
        for _ in range(num_cases):
            inputs = list(make_input(generator))
            outcome = reference.run(solution, inputs, base, max_steps, dialect)
            if outcome.status != Status.OK:
                raise ValueError(
                    f"reference program {solution!r} ended with {outcome.status.name} on input {inputs}; "
                    "a task's reference program must succeed on every generated input"
                )
            cases.append((tuple(inputs), outcome.output))
        return cls(name, tuple(cases), base, max_steps, dialect, solution=solution, description=description)


def check_name(name: object) -> None:
    """Raise ``ValueError`` unless ``name`` is a task name: a label of 1 to ``MAX_NAME_LENGTH`` printable
    characters with no path separator, not ``.`` or ``..`` (run folders and file names are built from it).

    >>> check_name("../x")
    Traceback (most recent call last):
        ...
    ValueError: a task name is a label of 1 to 100 printable characters without '/' or '\\' (it names run folders), got '../x'; e.g. 'my-task'
    """
    if (not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME_LENGTH or not name.isprintable()
            or "/" in name or "\\" in name or name.strip(".") == "" or name != name.strip()):
        shown = repr(name) if not isinstance(name, str) or len(name) <= 120 else repr(name[:120]) + "..."
        raise ValueError(f"a task name is a label of 1 to {MAX_NAME_LENGTH} printable characters without '/' or '\\' "
                         f"(it names run folders), got {shown}; e.g. 'my-task'")


def as_values(part: Values) -> tuple[int, ...]:
    """A case's input or output as ints: text (``str``) as its UTF-8 bytes, ``bytes`` as they are; anything else is
    returned as it is (``Task`` checks it).

    >>> as_values("é!"), as_values(b"ok"), as_values([1, 2])
    ((195, 169, 33), (111, 107), [1, 2])
    """
    if isinstance(part, str):
        return tuple(part.encode("utf-8"))
    if isinstance(part, (bytes, bytearray)):
        return tuple(part)
    return part  # checked by _as_case


def _pair(pair: object) -> tuple:
    try:
        inputs, expected = pair  # type: ignore[misc]
    except (TypeError, ValueError):
        raise ValueError(f"each pair must be (inputs, expected_output), got {pair!r:.80}") from None
    return inputs, expected


def _as_case(case: object, base: int, index: int) -> Case:
    try:
        inputs, expected = case  # type: ignore[misc]
        if any(len(part) > MAX_CASE_VALUES for part in (inputs, expected)):
            raise OverflowError
        inputs, expected = tuple(int(v) for v in inputs), tuple(int(v) for v in expected)
    except OverflowError:
        raise ValueError(f"case {index}: an input or expected output holds more than {MAX_CASE_VALUES} values "
                         "(docs/limits.md)") from None
    except (TypeError, ValueError) as error:
        raise ValueError(f"case {index} must be a pair (inputs, expected_output) of int lists, got {case!r:.80}"
                         ) from error
    for what, values in (("input", inputs), ("expected output", expected)):
        bad = [v for v in values if not 0 <= v < base]
        if bad:
            # Out-of-range cells make `+`/`-` non-modular (docs/semantics.md §1); synthenv's folded IR
            # relies on cells staying in [0, base), and no PQT task leaves it.
            raise ValueError(f"case {index}: {what} values must lie in [0, base={base}), got {bad}; raise base")
    return inputs, expected


def _pad(rows: Sequence[Sequence[int]], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(1, max(len(r) for r in rows))
    out = torch.zeros((len(rows), width), dtype=torch.int32)
    for k, row in enumerate(rows):
        if row:
            out[k, : len(row)] = torch.tensor(row, dtype=torch.int32)
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.int32)
    return out.to(device), lengths.to(device)


def _case_tensors(cases: Sequence[Case], dialect: Dialect, device: torch.device) -> CaseTensors:
    inputs, input_lengths = _pad([i for i, _ in cases], device)
    expected, expected_lengths = _pad([dialect.judged(o) for _, o in cases], device)
    return CaseTensors(inputs, input_lengths, expected, expected_lengths)
