"""``synthenv tasks``: list the registered tasks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class TasksCommand:
    """List tasks with their cell base, number of cases and step limit."""

    suite: Literal["all", "paper", "tuning", "user"] = "all"
    """Which tasks: the 26 paper tasks, the 2 tuning tasks, user-registered ones, or all."""

    def run(self) -> int:
        from synthenv import tasks

        rows = [tasks.get(name) for name in tasks.names(self.suite)]
        width = max((len(t.name) for t in rows), default=4)
        print(f"{'task':<{width}}  base  cases  max_steps  description")
        for t in rows:
            print(f"{t.name:<{width}}  {t.base:>4}  {t.num_cases:>5}  {t.max_steps:>9}  {t.description}")
        return 0
