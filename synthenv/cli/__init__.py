"""The ``synthenv`` command line, generated from typed configs with tyro.

Each command is a frozen dataclass (fields documented, defaults shown in ``--help``) with a
``run()`` method, in its own module; ``COMMANDS`` lists them. ``synthenv <command> --help``.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

# command name -> (module, config class). Each config is a frozen dataclass with run().
COMMANDS: dict[str, tuple[str, str]] = {
    "tasks": ("synthenv.cli.tasks", "TasksCommand"),
    "score": ("synthenv.cli.score", "ScoreCommand"),
    "bench": ("synthenv.cli.bench", "BenchCommand"),
    "train-compiler": ("synthenv.cli.train_compiler", "TrainCompilerCommand"),
    "compiler-report": ("synthenv.cli.compiler_report", "CompilerReportCommand"),
    "train": ("synthenv.cli.train", "TrainCommand"),
    "table": ("synthenv.cli.table", "TableCommand"),
    "doctor": ("synthenv.cli.doctor", "DoctorCommand"),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``synthenv`` script; returns the process exit code."""
    import tyro

    configs = {name: getattr(importlib.import_module(module), cls) for name, (module, cls) in COMMANDS.items()}
    config = tyro.extras.subcommand_cli_from_dict(
        configs,
        prog="synthenv",
        description="synthenv: compile, run and score BF programs at scale; train synthesis agents.",
        args=argv,
    )
    try:
        return int(config.run() or 0)
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
