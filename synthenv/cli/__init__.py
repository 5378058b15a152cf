"""The ``synthenv`` command line, generated from typed configs with tyro.

Each command is a frozen dataclass (fields documented, defaults shown in ``--help``) with a
``run()`` method, in its own module; ``COMMANDS`` lists them. ``synthenv <command> --help``.

Errors: a mistake the user can fix (a ``synthenv.errors.UserError``, any
``ValueError`` or ``TypeError`` from checking options, a path that cannot be read or written)
prints one line, ``synthenv <command>: error: <message>``, and exits with code 2; so do tyro's
own parse errors (an unknown flag, a value of the wrong type, a missing command): the first
paragraph of tyro's message box, on one line, with the command whose ``--help`` lists the
options. Ctrl-C prints one line and exits with 130. Anything else is a bug in
synthenv and keeps its traceback; ``SYNTHENV_TRACEBACK=1`` shows the traceback of user errors too.
Under torchrun the lines name the rank (``synthenv train (rank 1): error: ...``), and a rank that
stops because another failed prints that rank's error in one line and exits with 1.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import os
import re
import sys
from collections.abc import Callable, Sequence

import tyro

from synthenv.cli.train import algo_from_argv, command_type, other_algorithms_hint
from synthenv.distributed import EXIT_RANK_FAILED, RankFailed
from synthenv.errors import USER_ERRORS, describe
from synthenv.registry import unknown_name_message

# command name -> (module, config class). Each config is a frozen dataclass with run().
COMMANDS: dict[str, tuple[str, str]] = {
    "tasks": ("synthenv.cli.tasks", "TasksCommand"),
    "score": ("synthenv.cli.score", "ScoreCommand"),
    "bench": ("synthenv.cli.bench", "BenchCommand"),
    "train-compiler": ("synthenv.cli.train_compiler", "TrainCompilerCommand"),
    "compiler-report": ("synthenv.cli.compiler_report", "CompilerReportCommand"),
    "train": ("synthenv.cli.train", "TrainCommand"),
    "pretrain": ("synthenv.cli.pretrain", "PretrainCommand"),
    "fit-prior": ("synthenv.cli.fit_prior", "FitPriorCommand"),
    "library": ("synthenv.cli.library", "LibraryCommand"),
    "table": ("synthenv.cli.table", "TableCommand"),
    "bench-agents": ("synthenv.cli.bench_agents", "BenchAgentsCommand"),
    "bench-reward": ("synthenv.cli.bench_reward", "BenchRewardCommand"),
    "doctor": ("synthenv.cli.doctor", "DoctorCommand"),
}

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``synthenv`` script; returns the process exit code."""
    configs = {name: getattr(importlib.import_module(module), cls) for name, (module, cls) in COMMANDS.items()}
    args = list(sys.argv[1:] if argv is None else argv)
    hint = str  # what to say after tyro's refusal of the arguments (worked out only then): nothing
    if args[:1] == ["train"]:  # the chosen algorithm's config fields become options of their own
        algo = algo_from_argv(args[1:])
        configs["train"] = command_type(algo)
        hint = functools.partial(other_algorithms_hint, args[1:], algo)
    command = args[0] if args and args[0] in configs else ""
    if not args or not (command or args[0].startswith("-")):
        _report("", unknown_name_message("command", args[0], list(configs)) if args else
                f"no command given. Valid commands: {', '.join(configs)} (synthenv --help says what each does)")
        return EXIT_USER_ERROR
    try:
        config = _parse(configs, args, command, hint)  # building a config checks it: errors are the user's
        if config is None:
            return EXIT_USER_ERROR
        return int(config.run() or 0)
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt as interrupt:  # a command may say what it kept: KeyboardInterrupt("saved ...")
        _report(command, "interrupted (Ctrl-C)" + (f"; {interrupt}" if str(interrupt) else ""), prefix="")
        return EXIT_INTERRUPTED
    except USER_ERRORS as error:
        if os.environ.get("SYNTHENV_TRACEBACK"):
            raise
        _report(command, describe(error))
        return EXIT_USER_ERROR
    except Exception as error:
        if not isinstance(error, RankFailed) or os.environ.get("SYNTHENV_TRACEBACK"):
            raise
        _report(command, describe(error))
        return EXIT_RANK_FAILED


def _parse(configs: dict, args: list[str], command: str, hint: Callable[[], str] = str):
    """The config of ``command`` (``""``: none named yet), or None when tyro refused the arguments (said in one
    line, ``hint()`` after it). ``--help``, warnings and errors raised while a config checks itself pass through unchanged;
    ``SYNTHENV_TRACEBACK=1`` shows tyro's own message box."""
    captured, refused = io.StringIO(), False
    try:
        with contextlib.redirect_stderr(captured):
            return tyro.extras.subcommand_cli_from_dict(
                configs,
                prog="synthenv",
                description="synthenv: compile, run and score BF programs at scale; train synthesis agents.",
                args=args,
            )
    except SystemExit as exit_info:
        if exit_info.code in (0, None) or os.environ.get("SYNTHENV_TRACEBACK"):
            raise
        refused = True
        help_command = f"synthenv {command}".rstrip()
        _report(command, f"{parse_error_line(captured.getvalue())} (see {help_command} --help){hint()}")
        return None
    finally:
        if not refused:
            sys.stderr.write(captured.getvalue())


def parse_error_line(box: str) -> str:
    """The first paragraph of tyro's error message (its text up to the first rule), on one line: from its box, or
    from the box-less form rich draws in some environments, pytest's among them (the title on a line of its own above
    a rule of dashes).

    >>> parse_error_line("╭─ Value error ──╮\\n│ Error parsing --seed: 'x' │\\n│ ──── │\\n│ Argument helptext: │\\n╰──╯")
    "Error parsing --seed: 'x'"
    >>> parse_error_line(" Value error \\n ----- \\n  Error parsing --seed: 'x' \\n  -----\\n  For full helptext \\n")
    "Error parsing --seed: 'x'"
    """
    text = re.sub(r"\x1b\[[0-9;]*m", "", box)  # colours, should a terminal have asked for them
    paragraphs: list[list[str]] = [[]]
    for line in text.splitlines():
        line = line.strip().strip("│").strip()
        if line.startswith(("╭", "╰")) or not line:
            continue
        if set(line) <= set("─━- "):
            paragraphs.append([])
        else:
            paragraphs[-1].append(line)
    paragraphs = [paragraph for paragraph in paragraphs if paragraph]
    if "╭" not in text and len(paragraphs) > 1:
        paragraphs = paragraphs[1:]  # the box-less form: its first paragraph is the title
    return " ".join(" ".join(paragraphs[0] if paragraphs else []).split()) or "the arguments did not parse"


def _report(command: str, message: str, prefix: str = "error: ") -> None:
    name = f"synthenv {command}" if command else "synthenv"
    if os.environ.get("WORLD_SIZE", "1") not in ("", "1") and "RANK" in os.environ:  # launched by torchrun
        name += f" (rank {os.environ['RANK']})"
    print(f"{name}: {prefix}{message}", file=sys.stderr, flush=True)
