"""``Task``: a named set of (input, expected output) cases, the cell base and the step limit."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from synthenv import reference
from synthenv.language import COMMANDS, DEFAULT_MAX_STEPS, Status

Case = tuple[tuple[int, ...], tuple[int, ...]]

MAX_BASE = 2**31
"""Largest cell base: every engine keeps cells in int32, so values must stay below 2**31."""
MAX_STEPS = 2**31 - 1
"""Largest step limit: step counts are int32 in the IR, the kernels and ``Execution.steps``."""


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
    """A program-synthesis task in PQT's format (docs/semantics.md §3).

    Attributes:
        name: registry name, e.g. ``"reverse"``.
        cases: ``((inputs, expected_output), ...)``, tuples of ints.
        base: cells hold integers in ``[0, base)``; inputs and outputs must lie in that range;
            2 <= base <= ``MAX_BASE`` (2**31).
        max_steps: a run fails once its raw step count reaches this (PQT: 5000); at most
            ``MAX_STEPS`` (2**31 - 1).
        strict_syntax: programs with unmatched brackets fail with ``syntax_error`` instead of
            treating those brackets as no-ops (PQT's default is False).
        solution: a known BF solution, when there is one.
        description: one line for listings.
    """

    name: str
    cases: tuple[Case, ...]
    base: int = 256
    max_steps: int = DEFAULT_MAX_STEPS
    strict_syntax: bool = False
    solution: str | None = None
    description: str = ""
    _tensor_cache: dict = field(default_factory=dict, init=False, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.base, int) or isinstance(self.base, bool) or not 2 <= self.base <= MAX_BASE:
            raise ValueError(f"base must be an int in [2, {MAX_BASE}] (cells are int32 in every engine), got "
                             f"{self.base!r}")
        if (not isinstance(self.max_steps, int) or isinstance(self.max_steps, bool)
                or not 1 <= self.max_steps <= MAX_STEPS):
            raise ValueError(f"max_steps must be an int in [1, {MAX_STEPS}] (step counts are int32 in every engine), "
                             f"got {self.max_steps!r}")
        cases = tuple(_as_case(case, self.base, i) for i, case in enumerate(self.cases))
        if not cases:
            raise ValueError(f"task {self.name!r} needs at least one (input, output) case")
        object.__setattr__(self, "cases", cases)

    @property
    def num_cases(self) -> int:
        return len(self.cases)

    @property
    def max_output_length(self) -> int:
        return max(len(out) for _, out in self.cases)

    def tensors(self, device: torch.device | str | None = None) -> CaseTensors:
        """The cases as padded int32 tensors on ``device`` (built once per device)."""
        device = torch.device(device if device is not None else "cpu")
        key = str(device)
        if key not in self._tensor_cache:
            self._tensor_cache[key] = _case_tensors(self.cases, device)
        return self._tensor_cache[key]

    @classmethod
    def from_pairs(
        cls,
        name: str,
        pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
        base: int = 256,
        max_steps: int = DEFAULT_MAX_STEPS,
        description: str = "",
        solution: str | None = None,
    ) -> Task:
        """A task from explicit (input, expected output) pairs.

        >>> t = Task.from_pairs("inc", [([1], [2]), ([5], [6])], base=10)
        >>> t.num_cases, t.base
        (2, 10)
        """
        cases = tuple((tuple(i), tuple(o)) for i, o in pairs)
        return cls(name, cases, base, max_steps, solution=solution, description=description)

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
    ) -> Task:
        """A task whose expected outputs are what a reference BF program prints.

        ``make_input(rng)`` draws one input list from a generator seeded with ``seed`` (a
        ``random.Random`` unless ``rng`` builds another), once per case, in order. The program
        must succeed on every input.

        >>> t = Task.from_program("echo1", ",.", lambda r: [r.randrange(1, 9)], num_cases=3)
        >>> all(inp == out for inp, out in t.cases)
        True
        """
        if any(c not in COMMANDS for c in solution):
            raise ValueError(f"solution must contain only BF commands {COMMANDS!r}, got {solution!r}")
        generator = (rng or random.Random)(seed)
        cases = []
        for _ in range(num_cases):
            inputs = list(make_input(generator))
            outcome = reference.run(solution, inputs, base, max_steps)
            if outcome.status != Status.OK:
                raise ValueError(
                    f"reference program {solution!r} ended with {outcome.status.name} on input {inputs}; "
                    "a task's reference program must succeed on every generated input"
                )
            cases.append((tuple(inputs), outcome.output))
        return cls(name, tuple(cases), base, max_steps, solution=solution, description=description)


def _as_case(case: object, base: int, index: int) -> Case:
    try:
        inputs, expected = case  # type: ignore[misc]
        inputs, expected = tuple(int(v) for v in inputs), tuple(int(v) for v in expected)
    except (TypeError, ValueError) as error:
        raise ValueError(f"case {index} must be a pair (inputs, expected_output) of int lists, got {case!r}") from error
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


def _case_tensors(cases: Sequence[Case], device: torch.device) -> CaseTensors:
    inputs, input_lengths = _pad([i for i, _ in cases], device)
    expected, expected_lengths = _pad([o for _, o in cases], device)
    return CaseTensors(inputs, input_lengths, expected, expected_lengths)
