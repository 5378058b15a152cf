"""Tasks: the 26 PQT paper tasks, the 2 tuning tasks and user tasks, in one registry, and generated tasks.

Generated tasks (``synthenv.tasks.generated``) are not registered one by one: ``get`` builds
``gen-{split}-{index}`` on demand, and ``expand`` turns suite specs such as ``"generated-test:50"``
into task names for tables.

>>> from synthenv import tasks
>>> tasks.get("reverse").num_cases
16
>>> len(tasks.names("paper"))
26
>>> tasks.expand("generated-test:3"), tasks.get("gen-test-2").name
(['gen-test-0', 'gen-test-1', 'gen-test-2'], 'gen-test-2')
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from synthenv.errors import UserError
from synthenv.registry import Registry, UnknownNameError, unknown_name_message
from . import esolang, generated
from .pqt import BUILDERS, PAPER_TASKS, TUNING_TASKS
from .py2random import Py2Random
from .starter import BUILDERS as STARTER_BUILDERS
from .starter import STARTER_TASKS
from .files import TaskFileError, is_task_file, load_task_file
from .task import CaseTensors, Task

__all__ = ["Task", "CaseTensors", "Py2Random", "get", "names", "register", "unregister", "resolve", "PAPER_TASKS",
           "TUNING_TASKS", "STARTER_TASKS", "from_spec", "load_task_file", "TaskFileError", "expand", "generated"]

_registry: Registry[Task] = Registry("task", cache=True)
for _name in (*PAPER_TASKS, *TUNING_TASKS):
    _registry.register(_name, BUILDERS[_name])
for _name in STARTER_TASKS:
    _registry.register(_name, STARTER_BUILDERS[_name])
BUILTIN = frozenset((*PAPER_TASKS, *TUNING_TASKS, *STARTER_TASKS))

SUITES = ("all", "paper", "tuning", "starter", "user")


GENERATED_NAMES = "gen-train-<index> and gen-test-<index>"


def get(name: str) -> Task:
    """The task registered as ``name``, or the generated task ``gen-{split}-{index}`` (an unknown name gets
    a "did you mean" error)."""
    if isinstance(name, str) and name.startswith("gen-") and name not in _registry:
        return _generated(name)
    try:
        return _registry.get(name)
    except UnknownNameError as error:
        raise UnknownNameError(f"{error} Generated tasks are named {GENERATED_NAMES}.") from None


@functools.lru_cache(maxsize=1024)
def _generated(name: str) -> Task:
    return generated.generate(*generated.parse_name(name)).task


def names(suite: str = "all") -> list[str]:
    """Registered task names: ``"paper"`` (26), ``"tuning"`` (2), ``"starter"`` (quick-start tasks outside
    the paper), ``"user"`` or ``"all"``."""
    if suite == "paper":
        return list(PAPER_TASKS)
    if suite == "tuning":
        return list(TUNING_TASKS)
    if suite == "starter":
        return list(STARTER_TASKS)
    if suite == "user":
        return [n for n in _registry.names() if n not in BUILTIN]
    if suite == "all":
        return _registry.names()
    raise ValueError(f"suite must be one of {SUITES}, got {suite!r}")


def register(task: Task, overwrite: bool = False) -> None:
    """Make a user ``Task`` available by name (to ``get``, the envs and the CLI)."""
    if not isinstance(task, Task):
        raise TypeError(f"register expects a Task, got {type(task).__name__}; build one with Task.from_pairs")
    if _is_generated_name(task.name):
        raise ValueError(f"task names {GENERATED_NAMES} are the generated tasks'; rename {task.name!r}")
    _registry.register(task.name, lambda: task, overwrite=overwrite)


def unregister(name: str) -> None:
    """Remove a user task registered with ``register`` (the built-in tasks stay)."""
    if name in BUILTIN:
        raise ValueError(f"{name!r} is a built-in task and cannot be unregistered; only user tasks "
                         f"({', '.join(names('user')) or 'none registered'}) can")
    _registry.unregister(name)


def resolve(task: Task | str) -> Task:
    """A ``Task`` from a task or a registered name."""
    if isinstance(task, Task):
        return task
    if isinstance(task, str):
        return get(task)
    raise TypeError(f"task must be a Task or a task name (str), got {type(task).__name__}")


def from_spec(spec: Task | str) -> Task:
    """A ``Task`` from a task, a registered name, a generated task's name (``gen-test-7``), the path of a
    JSON task file (``*.json``, see ``synthenv.tasks.files``) or an EsoLang-Bench problem (``esolang:PATH#E01``,
    see ``synthenv.tasks.esolang``): what ``synthenv train --task`` accepts."""
    if esolang.is_spec(spec):
        return esolang.from_spec(spec)
    if isinstance(spec, str) and is_task_file(spec):
        return load_task_file(spec)
    return resolve(spec)


SUITE_SPECS = ("paper", "tuning", "tune", "starter", "user", "all", "generated-train:<count>",
               "generated-test:<count>", "generated-test:<start>:<stop>", "generated-unseen:<count>",
               "esolang:<path>", "esolang:<path>#<tier or id>")
"""What ``expand`` accepts besides task names and task files."""

_GENERATED_SPEC = re.compile(r"generated-(?P<split>[^:]*):(?P<first>[0-9]+)(?::(?P<second>[0-9]+))?")


def expand(specs: str | Sequence[str]) -> list[str]:
    """Task names for table rows, in order: a suite (``"paper"``: the 26, ``"tuning"`` or ``"tune"``,
    ``"starter"``, ``"user"``, ``"all"``: every registered task), a slice of a generated split
    (``"generated-test:50"``: the first 50 test tasks; ``"generated-train:100:200"``: train tasks 100 to 199), the
    first test tasks that no solution of the training tasks the shipped policy saw solves (``"generated-unseen:20"``,
    ``generated.unseen``), EsoLang-Bench's problems (``"esolang:PATH"``, ``"esolang:PATH#easy"``: one spec each,
    ``synthenv.tasks.esolang``), or a task name or ``*.json`` task file, which stays as it is. Each name is checked;
    a task file is read later.

    >>> expand(["tune", "add", "generated-train:2"])
    ['reverse-tune', 'remove-char-tune', 'add', 'gen-train-0', 'gen-train-1']
    """
    if isinstance(specs, str):
        specs = [specs]
    names_out: list[str] = []
    for spec in specs:
        if not isinstance(spec, str):
            raise TypeError(f"task specs must be strings, got {spec!r} ({type(spec).__name__})")
        if spec in ("paper", "tuning", "starter", "user", "all"):
            names_out += names(spec)
        elif spec == "tune":
            names_out += names("tuning")
        elif spec.startswith("generated-"):
            names_out += _expand_generated(spec)
        elif esolang.is_spec(spec):
            names_out += esolang.expand(spec)
        elif is_task_file(spec) or spec in _registry or _is_generated_name(spec):
            names_out.append(spec)
        elif spec.startswith("gen-"):
            generated.parse_name(spec)  # raises the error that says what is wrong with the name
        else:
            raise UnknownNameError(unknown_name_message("task spec", spec, [*SUITE_SPECS, *names()])
                                   + f" Generated tasks are named {GENERATED_NAMES}; a task file ends in .json.")
    return names_out


def _expand_generated(spec: str) -> list[str]:
    if spec.startswith("generated-unseen"):
        count = spec.removeprefix("generated-unseen:")
        if not re.fullmatch(r"[1-9][0-9]{0,5}", count) or int(count) > generated.MAX_SUITE_TASKS:
            raise UserError(f"the unseen test tasks are generated-unseen:<count> with count in 1 .. "
                            f"{generated.MAX_SUITE_TASKS} (docs/limits.md), got {spec!r}; e.g. 'generated-unseen:20'")
        return [f"gen-test-{i}" for i in generated.unseen(int(count))]
    match = _GENERATED_SPEC.fullmatch(spec)
    if match is None:
        raise UserError(f"a generated suite is generated-<split>:<count> or generated-<split>:<start>:<stop> "
                        f"(splits: {', '.join(generated.SPLITS)}), got {spec!r}; e.g. 'generated-test:50'")
    split = match["split"]
    generated.check_split(split, spec)
    start, stop = (0, int(match["first"])) if match["second"] is None else (int(match["first"]), int(match["second"]))
    if not start < stop <= generated.MAX_INDEX:
        raise UserError(f"{spec!r} selects no generated tasks: it needs start < stop <= 2**40, got start {start} and "
                        f"stop {stop}; e.g. 'generated-{split}:50'")
    if stop - start > generated.MAX_SUITE_TASKS:
        raise UserError(f"{spec!r} names {stop - start} generated tasks, more than the {generated.MAX_SUITE_TASKS} one "
                        f"suite may (synthenv.tasks.generated.MAX_SUITE_TASKS, docs/limits.md); split it into "
                        f"slices, e.g. 'generated-{split}:{start}:{start + generated.MAX_SUITE_TASKS}'")
    return [f"gen-{split}-{i}" for i in range(start, stop)]


def _is_generated_name(name: str) -> bool:
    try:
        generated.parse_name(name)
    except UserError:
        return False
    return True
