"""Programs synthenv already knows, and the tasks they solve: the known solutions of the paper and tuning tasks
(``tasks.solutions``), every program of at most ``TINY_LENGTH`` commands, and the solutions of the generated
training tasks (``train_solutions``, the default agent's shipped library).

The task generator drops a task that any of them solves (decontamination: ``tasks.generated``), and reports
held-out tasks that no training solution solves apart (``seen``).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from synthenv.dialect import PQT
from synthenv.language import COMMANDS

from .pqt import BUILDERS
from .runner import case_correct, runner, solved
from .solutions import KNOWN_SOLUTIONS
from .task import Task

TINY_LENGTH = 3
"""Tasks that some program of at most this many commands solves are dropped."""


SEEN_TASKS = 4000
"""The training tasks whose solutions ``TRAIN_SOLUTIONS`` holds: 0 .. 3999, what the shipped edit policy was
pretrained on."""
TRAIN_SOLUTIONS = Path(__file__).resolve().parent / "train_solutions.txt"
"""The unique solutions of training tasks 0 .. ``SEEN_TASKS`` - 1, one per line after ``#`` comment lines (written by
``synthenv library``; the default agent's shipped library of known programs)."""


TEXT_SEEN_TASKS = 2000
"""The text training tasks (split ``text-train``) whose solutions ``TEXT_SOLUTIONS`` holds: 0 .. 1999."""
TEXT_SOLUTIONS = Path(__file__).resolve().parent / "text_solutions.txt"
"""The unique solutions of text training tasks 0 .. ``TEXT_SEEN_TASKS`` - 1 (written by ``synthenv library --split
text-train``; the library of known programs the default agent runs first on a text task)."""


def train_solutions() -> tuple[str, ...]:
    """The programs of ``TRAIN_SOLUTIONS``, in order."""
    return solutions_in(TRAIN_SOLUTIONS)


@functools.cache
def solutions_in(path: Path) -> tuple[str, ...]:
    """The programs of a solutions file of the package (one per line after ``#`` comment lines), read once."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return tuple(line for line in lines if line and not line.startswith("#"))


def seen(task: Task) -> bool:
    """Whether a solution of training tasks 0 .. ``SEEN_TASKS`` - 1 solves ``task``: its test set cannot tell it
    apart from a task an agent pretrained on those tasks has seen (the stream is not de-duplicated, and many short
    programs recur).

    >>> from synthenv.tasks.generated import generate
    >>> seen(generate("test", 0).task), seen(generate("test", 1).task)
    (True, False)
    """
    runs = runner().run(_seen_programs(), task, None, early_abort=True)
    return bool(solved(runs, task).any())


@functools.cache
def _seen_programs():
    return runner().compile(list(train_solutions()))


def solves_a_known_task(program: str) -> list[str]:
    """The paper and tuning tasks that ``program`` solves (their test sets cannot tell it apart).

    >>> solves_a_known_task(",>,[<+>-]<.>.")
    ['add']
    """
    return known_tasks_solved([program])[0]


def known_tasks_solved(programs: Sequence[str]) -> list[list[str]]:
    """For each of ``programs``, the paper and tuning tasks it solves (``solves_a_known_task``), in one batch.

    >>> known_tasks_solved([",>,[<+>-]<.>.", ",."])
    [['add'], []]
    """
    run, compiled, found = runner(), None, [set() for _ in programs]
    for union in _union_tasks():
        compiled = compiled if compiled is not None else run.compile(list(programs))
        correct = case_correct(run.run(compiled, union.task, None, early_abort=False), union.task)  # [N, K]
        for name, (a, b) in union.slices.items():
            for row in correct[:, a:b].all(1).nonzero()[0]:
                found[row].add(name)
    return [[name for name in KNOWN_SOLUTIONS if name in names] for names in found]


TINY_PROGRAMS = tuple("".join(p) for n in range(1, TINY_LENGTH + 1) for p in itertools.product(COMMANDS, repeat=n))


@functools.cache
def screen_programs():
    """Every program of at most ``TINY_LENGTH`` commands, then the known solutions, compiled once."""
    return runner().compile([*TINY_PROGRAMS, *KNOWN_SOLUTIONS.values()])


@dataclass(frozen=True)
class _Union:
    task: Task  # the cases of every paper and tuning task of one base, one after another
    slices: dict[str, tuple[int, int]]  # task name -> its cases' range


@functools.cache
def _union_tasks() -> tuple[_Union, ...]:
    known = [BUILDERS[name]() for name in KNOWN_SOLUTIONS]
    unions = []
    for base in sorted({t.base for t in known}):
        cases, slices = [], {}
        for t in known:
            if t.base == base:
                slices[t.name] = (len(cases), len(cases) + t.num_cases)
                cases += t.cases
        unions.append(_Union(Task(f"known-tasks-base-{base}", tuple(cases), base, dialect=PQT), slices))
    return tuple(unions)
