"""The oracle: a deliberately simple, one-program-at-a-time BF interpreter in plain Python.

Everything else in synthenv (compilers, engines, scoring) is tested against this module.
It follows docs/semantics.md §1 literally (as PQT's ``common/bf.py``, ``evaluate``, does), command by
command, with no optimisation at all, and every dialect of ``synthenv.dialect`` (docs/semantics.md §5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from synthenv.dialect import PQT, Dialect
from synthenv.language import DEFAULT_MAX_STEPS, Status


@dataclass(frozen=True)
class CaseRun:
    """What one program did on one input: its output, outcome and raw step count."""

    output: tuple[int, ...]
    status: Status
    steps: int


def match_brackets(code: str) -> tuple[dict[int, int], bool]:
    """Map each matched bracket position to its partner; report whether all brackets match.

    docs/semantics.md §1: a ``]`` with no open ``[`` and a ``[`` never closed are unmatched; they are
    left out of the map (the interpreter treats them as one-step no-ops).
    """
    stack: list[int] = []
    partner: dict[int, int] = {}
    balanced = True
    for position, command in enumerate(code):
        if command == "[":
            stack.append(position)
        elif command == "]":
            if not stack:
                balanced = False
                continue
            start = stack.pop()
            partner[start] = position
            partner[position] = start
    if stack:
        balanced = False
    return partner, balanced


def run(
    code: str,
    inputs: Sequence[int] = (),
    base: int = 256,
    max_steps: int = DEFAULT_MAX_STEPS,
    dialect: Dialect = PQT,
) -> CaseRun:
    """Run BF ``code`` on ``inputs`` exactly as an interpreter of ``dialect`` does (PQT's by default).

    Args:
        code: BF source; only the eight command characters may appear.
        inputs: values read by ``,`` in order; then what the dialect's end of input says.
        base: cells hold integers in ``[0, base)``.
        max_steps: the run fails once the raw step count reaches this.
        dialect: brackets, left edge, end of input (``synthenv.dialect``). Under strict brackets a
            program with an unmatched bracket is not run (``SYNTAX_ERROR``, 0 steps); under an error left
            edge, ``<`` on cell 0 ends the run (``LEFT_EDGE``, the ``<`` counted as a step). The output is
            what was printed (``Dialect.judged`` trims it for comparison).

    >>> run(",[>,]+[,<.]", [3, 1, 2]).output
    (2, 1, 3, 0)
    >>> run("<+.", dialect=Dialect(left_edge="error"))
    CaseRun(output=(), status=<Status.LEFT_EDGE: 4>, steps=1)
    """
    partner, balanced = match_brackets(code)
    if dialect.strict and not balanced:
        return CaseRun((), Status.SYNTAX_ERROR, 0)
    ring = dialect.ring(max_steps)  # 0 unless the tape is a ring
    eof = dialect.end_of_input_value(base)
    cells = [0] * max(ring, 1)
    cell = 0  # pointer
    pc = 0
    steps = 0
    next_input = 0
    output: list[int] = []
    while pc < len(code):
        command = code[pc]
        if command == ">":
            cell += 1
            if ring:
                cell %= ring
            elif cell == len(cells):
                cells.append(0)
        elif command == "<":
            if cell > 0:
                cell -= 1
            elif dialect.left_edge == "error":
                return CaseRun(tuple(output), Status.LEFT_EDGE, steps + 1)
            elif ring:
                cell = ring - 1
            # clamp: docs/semantics.md §1, `<` on cell 0 stays there
        elif command == "+":
            cells[cell] = cells[cell] + 1 if cells[cell] < base - 1 else 0
        elif command == "-":
            cells[cell] = cells[cell] - 1 if cells[cell] > 0 else base - 1
        elif command == "[":
            if cells[cell] == 0 and pc in partner:
                pc = partner[pc]
        elif command == "]":
            if cells[cell] != 0 and pc in partner:
                pc = partner[pc]
        elif command == ".":
            output.append(cells[cell])
        elif command == ",":
            if next_input < len(inputs):
                cells[cell] = inputs[next_input]
                next_input += 1
            elif eof is not None:
                cells[cell] = eof
        else:
            raise ValueError(f"not a BF command: {command!r} at position {pc}; use text_to_tokens first")
        pc += 1
        steps += 1
        if steps >= max_steps:
            return CaseRun(tuple(output), Status.STEP_LIMIT, steps)
    return CaseRun(tuple(output), Status.OK, steps)


def case_reward(output: Sequence[int], expected: Sequence[int], base: int) -> float:
    """PQT's per-case reward (docs/semantics.md §2), including the correct and length bonuses.

    >>> case_reward([2, 1, 0], [2, 1, 0], 256)
    4.0
    """
    distance = 0
    for t, want in enumerate(expected):
        distance += abs(output[t] - want) if t < len(output) else base
    distance += base * max(0, len(output) - len(expected))
    unit = base * len(expected) or base
    reward = (unit - distance) / unit
    if list(output) == list(expected):
        reward += 2.0 + 1.0  # correct bonus + full length bonus (success-rate setting)
    return reward


@dataclass(frozen=True)
class ProgramScore:
    """The oracle's verdict on one program over a task's cases."""

    reward: float
    solved: bool
    runs: tuple[CaseRun, ...]

    @property
    def failed(self) -> bool:
        return any(r.status != Status.OK for r in self.runs)


def score_program(
    code: str,
    cases: Sequence[tuple[Sequence[int], Sequence[int]]],
    base: int,
    max_steps: int = DEFAULT_MAX_STEPS,
    dialect: Dialect = PQT,
    stop_at_failure: bool = True,
) -> ProgramScore:
    """Score ``code`` on ``cases`` the way PQT's task manager does (docs/semantics.md §2), in ``dialect``.

    Cases run in order; PQT stops at the first failing case (``stop_at_failure=False`` runs
    them all: each is independent) and any failure fails the whole program with reward
    ``-2 / (4 * #cases)``. Outputs and expected outputs are compared as ``dialect.judged`` has them.

    >>> score_program(",[>,]<[.<]", [([1, 2], [2, 1, 0])], 256).reward
    -0.5
    """
    runs = []
    for inputs, _ in cases:
        runs.append(run(code, inputs, base, max_steps, dialect))
        if stop_at_failure and runs[-1].status != Status.OK:
            break
    runs = tuple(runs)
    scale = 4.0 * len(cases)
    if any(r.status != Status.OK for r in runs):
        return ProgramScore(-2.0 / scale, False, runs)
    judged = [(dialect.judged(r.output), dialect.judged(expected)) for r, (_, expected) in zip(runs, cases)]
    total = sum(case_reward(output, expected, base) for output, expected in judged)
    solved = all(output == expected for output, expected in judged)
    return ProgramScore(total / scale, solved, runs)


def solves(code: str, task) -> bool:
    """Whether ``code`` solves ``task`` (a ``synthenv.tasks.Task``) in the task's dialect, by this interpreter.

    >>> from synthenv import tasks
    >>> solves(",[>,]+[,<.]", tasks.get("reverse")), solves(",[.,]", tasks.get("reverse"))
    (True, False)
    """
    return score_program(code, task.cases, task.base, task.max_steps, task.dialect).solved
