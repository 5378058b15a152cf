"""``synthenv score``: score BF programs on a task and show what each case printed."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Annotated

import tyro

from synthenv.compilers import DEFAULT_BACKEND
from synthenv.errors import UserError
from synthenv.language import COMMANDS, EOS_CHAR


@dataclass(frozen=True)
class ScoreCommand:
    """Score BF programs on a task: reward, solved, and per case the status and the output next
    to the expected output. Quote programs (they contain shell characters); put -- before
    programs that start with '-', e.g. synthenv score --task add -- '-[+]' ',>,[<+>-]<.'"""

    programs: Annotated[tuple[str, ...], tyro.conf.Positional, tyro.conf.arg(metavar="PROGRAM")]
    """BF programs ('_' = EOS ends a program; characters other than ><+-[]., and
    spaces are ignored, with a warning)."""
    task: str = "reverse"
    """Task: a registered name ('synthenv tasks' lists them), a generated task's name or a JSON task file."""
    backend: str = DEFAULT_BACKEND
    """Compiler backend: traditional, cpu, neural or hybrid."""
    engine: str = "auto"
    """Engine: auto, torch, native, cuda (reference with the cpu backend)."""
    device: str = "cpu"
    """Torch device to score on."""
    cases: bool = True
    """Show the per-case table (status, input, output, expected)."""
    strict: bool = False
    """Refuse programs with characters other than BF commands and spaces (exit code 2) instead of
    ignoring them with a warning."""

    def run(self) -> int:
        from synthenv import api, tasks

        if not self.programs:
            raise UserError("give at least one BF program, e.g. synthenv score --task reverse ',[.,]'")
        for index, program in enumerate(self.programs):
            self._check_characters(index, program)
        task = tasks.from_spec(self.task)
        result = api.score(list(self.programs), task, self.backend, self.engine, self.device)
        print(f"task {task.name}: base {task.base}{', text' if task.text else ''}, {task.num_cases} cases, "
              f"max_steps {task.max_steps}; {task.dialect.describe()}")
        for index, program in enumerate(self.programs):
            print()
            print(format_program(result, index, program, self.cases))
        return 0


    def _check_characters(self, index: int, program: str) -> None:
        """Warn on stderr (or, with ``strict``, raise) when ``program`` has characters that are ignored."""
        ignored = ignored_characters(program)
        if not ignored:
            return
        kept = "".join(c for c in program.partition(EOS_CHAR)[0] if c in COMMANDS)
        message = (f"program {index + 1} {program!r:.60} has characters that are not BF commands, "
                   f"{''.join(dict.fromkeys(ignored))!r}")
        if self.strict:
            raise UserError(f"{message}; write only ><+-[]., (and '_' = EOS), or drop --strict to ignore them")
        scored = f"{kept!r:.60}" if kept else "the empty program"
        print(f"synthenv score: warning: {message}: ignored, so it is scored as {scored} (--strict makes this an "
              "error)", file=sys.stderr)


def ignored_characters(program: str) -> str:
    """The characters of ``program`` before its EOS that are neither BF commands nor whitespace.

    >>> ignored_characters("hello, world.")
    'helloworld'
    >>> ignored_characters(",[.,] _ anything")
    ''
    """
    return "".join(c for c in program.partition(EOS_CHAR)[0] if c not in COMMANDS and not c.isspace())


def format_program(result, index: int, program: str, cases: bool = True) -> str:
    """One program's verdict as text: header line, then (if ``cases``) one line per case.

    # sync point: reads results back to the host (display only).
    """
    from synthenv.language import Status

    task = result.task
    status = Status(int(result.program_status[index])).name
    solved = "yes" if bool(result.solved[index]) else "no"
    lines = [f"program {index + 1}: {program!r}",
             f"  reward {float(result.rewards[index]):.6f}   solved {solved}   status {status}"]
    if not cases:
        return "\n".join(lines)
    rows = [("case", "status", "ok", "input", "output", "expected")]
    for case, (inputs, expected) in enumerate(task.cases):
        case_status = Status(int(result.status[index, case]))
        shown = _values(task, result.output(index, case), int(result.output_lengths[index, case]))
        if case_status != Status.OK:
            shown = "-"  # a failed case exposes no output (synthenv.execution)
        correct = "ok" if bool(result.case_correct[index, case]) else "x"
        rows.append((str(case), case_status.name.lower(), correct, _values(task, inputs), shown,
                     _values(task, task.dialect.judged(expected))))
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def _values(task, values, total: int | None = None) -> str:
    text = task.show(values)
    if total is not None and total > len(values):
        text += f" ... ({total} values)"
    return text
