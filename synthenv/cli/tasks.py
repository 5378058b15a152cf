"""``synthenv tasks``: list the registered tasks, the first tasks of a generated split, or one task's cases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional


@dataclass(frozen=True)
class TasksCommand:
    """List tasks with their cell base, number of cases, step limit and dialect; with --generated, the tasks
    gen-{split}-{start} to gen-{split}-{start+count-1} of a generated split with their family and program; with
    --task, one task's dialect and cases (text shown as text)."""

    suite: Literal["all", "paper", "tuning", "starter", "user"] = "all"
    """Which tasks: the 26 paper tasks, the 2 tuning tasks, the starter tasks, user-registered ones, or all."""
    generated: Optional[Literal["train", "test", "tune", "text-train", "text-tune", "text-test", "beyond-tune",
                                "beyond-test"]] = None
    """List generated tasks of this split instead of the registered ones (text-*: text tasks; beyond-*: families the
    training split never samples)."""
    count: int = 10
    """How many generated tasks to list (with --generated)."""
    start: int = 0
    """The index of the first generated task to list (with --generated)."""
    task: Optional[str] = None
    """Show this task's dialect and cases: a registered name, a generated task's name or a JSON task file."""

    def __post_init__(self) -> None:
        from synthenv.checks import require_positive_int

        require_positive_int("count", self.count)
        if not isinstance(self.start, int) or self.start < 0:
            raise ValueError(f"start must be a non-negative int, got {self.start!r}")

    def run(self) -> int:
        from synthenv import tasks

        if self.task is not None:
            print(describe_task(tasks.from_spec(self.task)))
            return 0
        if self.generated is not None:
            return self._run_generated()
        rows = [tasks.get(name) for name in tasks.names(self.suite)]
        width = max((len(t.name) for t in rows), default=4)
        print(f"{'task':<{width}}  base  cases  max_steps  {'dialect':<8}  description")
        for t in rows:
            print(f"{t.name:<{width}}  {t.base:>4}  {t.num_cases:>5}  {t.max_steps:>9}  {dialect_name(t):<8}  "
                  f"{t.description}")
        return 0

    def _run_generated(self) -> int:
        from synthenv.tasks import generated

        rows = [generated.generate(self.generated, i) for i in range(self.start, self.start + self.count)]
        width = max(len(r.task.name) for r in rows)
        family_width = max(len(r.family) for r in rows)
        print(f"{'task':<{width}}  base  cases  {'family':<{family_width}}  program")
        for r in rows:
            print(f"{r.task.name:<{width}}  {r.task.base:>4}  {r.task.num_cases:>5}  {r.family:<{family_width}}  "
                  f"{r.program}" + (f"   e.g. {r.task.show(r.task.cases[0][0])} -> {r.task.show(r.task.cases[0][1])}"
                                    if r.task.text else ""))
        return 0


def dialect_name(task) -> str:
    """The preset a task's dialect is (``pqt``, ``standard``, ``esolang``), else ``custom``."""
    from synthenv.dialect import PRESETS

    return next((name for name, dialect in PRESETS.items() if dialect == task.dialect), "custom")


def describe_task(task) -> str:
    """A task as ``synthenv tasks --task`` shows it: its settings, dialect, then one line per case (text as text).

    >>> from synthenv.tasks import Task
    >>> print(describe_task(Task.from_pairs("shout", [("hi", "HI!")], description="upper-case, then '!'")))
    shout: upper-case, then '!'
      base 256 (text), 1 cases, max_steps 5000
      dialect standard: strict brackets, left edge is an error, end of input 0, exact output
      case  input  expected output
      0     'hi'   'HI!'
    """
    lines = [f"{task.name}: {task.description}" if task.description else task.name,
             f"  base {task.base}{' (text)' if task.text else ''}, {task.num_cases} cases, max_steps {task.max_steps}",
             f"  dialect {dialect_name(task)}: {task.dialect.describe()}"]
    if task.solution:
        lines.append(f"  known solution: {task.solution}")
    rows = [("case", "input", "expected output")]
    rows += [(str(k), task.show(inputs), task.show(expected)) for k, (inputs, expected) in enumerate(task.cases)]
    widths = [max(len(row[c]) for row in rows) for c in range(3)]
    lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)
