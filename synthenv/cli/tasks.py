"""``synthenv tasks``: list the registered tasks, or the first tasks of a generated split."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional


@dataclass(frozen=True)
class TasksCommand:
    """List tasks with their cell base, number of cases and step limit; with --generated, the tasks
    gen-{split}-{start} to gen-{split}-{start+count-1} of a generated split with their family and program."""

    suite: Literal["all", "paper", "tuning", "starter", "user"] = "all"
    """Which tasks: the 26 paper tasks, the 2 tuning tasks, the starter tasks, user-registered ones, or all."""
    generated: Optional[Literal["train", "test"]] = None
    """List generated tasks of this split instead of the registered ones."""
    count: int = 10
    """How many generated tasks to list (with --generated)."""
    start: int = 0
    """The index of the first generated task to list (with --generated)."""

    def __post_init__(self) -> None:
        from synthenv.checks import require_positive_int

        require_positive_int("count", self.count)
        if not isinstance(self.start, int) or self.start < 0:
            raise ValueError(f"start must be a non-negative int, got {self.start!r}")

    def run(self) -> int:
        from synthenv import tasks

        if self.generated is not None:
            return self._run_generated()
        rows = [tasks.get(name) for name in tasks.names(self.suite)]
        width = max((len(t.name) for t in rows), default=4)
        print(f"{'task':<{width}}  base  cases  max_steps  description")
        for t in rows:
            print(f"{t.name:<{width}}  {t.base:>4}  {t.num_cases:>5}  {t.max_steps:>9}  {t.description}")
        return 0

    def _run_generated(self) -> int:
        from synthenv.tasks import generated

        rows = [generated.generate(self.generated, i) for i in range(self.start, self.start + self.count)]
        width = max(len(r.task.name) for r in rows)
        family_width = max(len(r.family) for r in rows)
        print(f"{'task':<{width}}  base  cases  {'family':<{family_width}}  program")
        for r in rows:
            print(f"{r.task.name:<{width}}  {r.task.base:>4}  {r.task.num_cases:>5}  {r.family:<{family_width}}  "
                  f"{r.program}")
        return 0
