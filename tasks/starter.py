"""Starter tasks: not in the PQT paper, small enough that an agent solves them in minutes on a laptop CPU.

They exist so that ``synthenv train``'s quick start ends in a solved task, and as a first check
that a new agent learns at all. Their test sets are drawn like PQT's (``Py2Random`` from PQT's
seed), with expected outputs from a reference program.
"""

from __future__ import annotations

from collections.abc import Callable

from synthenv.dialect import PQT

from .pqt import NUM_CASES, SEED
from .py2random import Py2Random
from .task import Task


def zero_terminated(rand: Py2Random) -> list[int]:
    """1 to 5 nonzero values, then 0."""
    return [rand.randrange(1, 256) for _ in range(rand.randrange(1, 6))] + [0]


def echo() -> Task:
    return Task.from_program("echo", ",[.,]", zero_terminated, NUM_CASES, 256, seed=SEED,
                             description="starter: echo a 0-terminated input (without the 0)", rng=Py2Random,
                             dialect=PQT)


STARTER_TASKS = ("echo",)

BUILDERS: dict[str, Callable[[], Task]] = {"echo": echo}
