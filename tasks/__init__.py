"""Tasks: the 26 PQT paper tasks, the 2 tuning tasks and user tasks, in one registry.

>>> from synthenv import tasks
>>> tasks.get("reverse").num_cases
16
>>> len(tasks.names("paper"))
26
"""

from __future__ import annotations

from synthenv.registry import Registry, UnknownNameError
from .pqt import BUILDERS, PAPER_TASKS, TUNING_TASKS
from .py2random import Py2Random
from .starter import BUILDERS as STARTER_BUILDERS
from .starter import STARTER_TASKS
from .files import TaskFileError, is_task_file, load_task_file
from .task import CaseTensors, Task

__all__ = ["Task", "CaseTensors", "Py2Random", "get", "names", "register", "unregister", "resolve", "PAPER_TASKS",
           "TUNING_TASKS", "STARTER_TASKS", "from_spec", "load_task_file", "TaskFileError"]

_registry: Registry[Task] = Registry("task", cache=True)
for _name in (*PAPER_TASKS, *TUNING_TASKS):
    _registry.register(_name, BUILDERS[_name])
for _name in STARTER_TASKS:
    _registry.register(_name, STARTER_BUILDERS[_name])
BUILTIN = frozenset((*PAPER_TASKS, *TUNING_TASKS, *STARTER_TASKS))

SUITES = ("all", "paper", "tuning", "starter", "user")


def get(name: str) -> Task:
    """The task registered as ``name`` (an unknown name gets a "did you mean" error)."""
    return _registry.get(name)


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
    """A ``Task`` from a task, a registered name, or the path of a JSON task file (``*.json``,
    see ``synthenv.tasks.files``): what ``synthenv train --task`` accepts."""
    if isinstance(spec, str) and is_task_file(spec):
        return load_task_file(spec)
    return resolve(spec)


UnknownTaskError = UnknownNameError
