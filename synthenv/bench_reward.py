"""How fast ``synthenv.llm.Reward`` scores a GRPO batch, beside a plain-Python interpreter doing the same work
(``synthenv bench-reward``).

The completions are what a code model writes: a sentence, a fenced ``bf`` block, a closing sentence; one in eight
holds no program. The programs are the shipped library's (solutions of generated training tasks) with 0-3 random
edits, so that most of them run and many fail; rows cycle over the suite's tasks, ``group`` completions per prompt
as GRPO samples them. The plain-Python reward extracts the program the same way and scores it with the reference
interpreter (``synthenv.reference.score_program``, every case of the task): both give the same rewards, checked on
every batch.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass

from synthenv import reference
from synthenv.language import COMMANDS
from synthenv.llm import INVALID, Reward, extract_program, suite
from synthenv.tasks import Task

PROSE = ("Here is a program that solves the task.", "This reads the input and prints the answer:",
         "The following Brainfuck program should work.")
CLOSING = ("It loops until the input ends.", "Each cell is cleared before use.", "")


def completions(count: int, seed: int = 0) -> list[str]:
    """``count`` completions of realistic shape (module docstring), the same for a seed."""
    from synthenv.agents.search.library import load_library

    programs = load_library("shipped", "int").programs
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        if rng.random() < 1 / 8:
            out.append("I am not sure how to write this in Brainfuck; it needs a loop over the input.")
            continue
        program = list(rng.choice(programs))
        for _ in range(rng.randrange(4)):
            position = rng.randrange(len(program) + 1)
            kind = rng.randrange(3)
            if kind == 0 and program:
                program[min(position, len(program) - 1)] = rng.choice(COMMANDS)
            elif kind == 1:
                program.insert(position, rng.choice(COMMANDS))
            elif program:
                del program[min(position, len(program) - 1)]
        out.append(f"{rng.choice(PROSE)}\n```bf\n{''.join(program)}\n```\n{rng.choice(CLOSING)}")
    return out


def python_reward(completions: list[str], task_names: list[str], tasks: dict[str, Task]) -> list[float]:
    """The PQT reward of each completion by the plain-Python reference interpreter, one program at a time."""
    scores = []
    for completion, name in zip(completions, task_names):
        program = extract_program(completion)
        if program is None:
            scores.append(INVALID["pqt"])
            continue
        task = tasks[name]
        scores.append(reference.score_program(program, task.cases, task.base, task.max_steps, task.dialect).reward)
    return scores


@dataclass(frozen=True)
class RewardRate:
    """Completions scored per second at one batch size (warm-up excluded): synthenv's reward over ``repeats``
    timed calls (median, min, max), the plain-Python reward over ``python_repeats``."""

    batch: int
    synthenv_per_s: float
    synthenv_min: float
    synthenv_max: float
    python_per_s: float
    python_min: float
    python_max: float
    repeats: int
    python_repeats: int

    @property
    def ratio(self) -> float:
        return self.synthenv_per_s / self.python_per_s


def measure(batch: int, suite_spec: str = "paper", group: int = 16, repeats: int = 5, python_repeats: int = 1,
            engine: str = "auto", device: str = "cpu", seed: int = 0) -> RewardRate:
    """Time both rewards on one batch of ``batch`` completions (``group`` per task, cycling over the suite).

    Raises:
        AssertionError: the two rewards disagree on a completion (a bug: they must be equal).
    """
    tasks = {task.name: task for task in suite(suite_spec)}
    names = list(tasks)
    rows = completions(batch, seed)
    row_tasks = [names[(i // group) % len(names)] for i in range(batch)]
    reward = Reward(list(tasks.values()), kind="pqt", engine=engine, device=device)
    fast = reward(completions=rows, task=row_tasks)  # warm-up (builds, caches), and the answer to check
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        reward(completions=rows, task=row_tasks)
        rates.append(batch / (time.perf_counter() - started))
    slow_rates = []
    for _ in range(python_repeats):
        started = time.perf_counter()
        slow = python_reward(rows, row_tasks, tasks)
        slow_rates.append(batch / (time.perf_counter() - started))
    wrong = [i for i, (a, b) in enumerate(zip(fast, slow)) if abs(a - b) > 1e-9]
    assert not wrong, f"the rewards disagree on {len(wrong)} completions, first row {wrong[0]}: {fast[wrong[0]]} " \
                      f"against the reference's {slow[wrong[0]]}"
    return RewardRate(batch, statistics.median(rates), min(rates), max(rates), statistics.median(slow_rates),
                      min(slow_rates), max(slow_rates), repeats, python_repeats)
