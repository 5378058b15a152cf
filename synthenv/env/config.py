"""``EnvConfig``: the frozen configuration of a synthenv environment (both modes)."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Annotated

import torch
import tyro
from gymnasium.vector import AutoresetMode

from synthenv import tasks as task_registry
from synthenv.checks import require_seed
from synthenv.compilers import DEFAULT_BACKEND
from synthenv.dialect import Dialect
from synthenv.language import DEFAULT_MAX_LEN, MAX_LEN
from synthenv.registry import unknown_name_message
from synthenv.tasks import Task


class Mode(str, enum.Enum):
    """What one action is.

    - ``PROGRAM``: a whole program per env (``[N, L]`` tokens); one step compiles, runs and
      scores all N programs (the fast path).
    - ``TOKEN``: one token per env (``[N]``); the program grows a token per step and is scored
      when it ends (the classic MDP, for SB3 and friends).
    """

    PROGRAM = "program"
    TOKEN = "token"


MODES = tuple(m.value for m in Mode)
AUTORESET_MODES = tuple(m.value for m in AutoresetMode)  # Gymnasium's values: NextStep, SameStep, Disabled


@dataclass(frozen=True)
class EnvConfig:
    """Everything that defines a ``SynthVecEnv``; checked once, here, not on the step path.

    >>> EnvConfig(task="reverse", num_envs=8, mode="token").mode
    <Mode.TOKEN: 'token'>
    """

    task: Annotated[str | Task, tyro.conf.arg(constructor=str)] = "reverse"
    """Registered task name (``synthenv.tasks.names()``), or a ``Task`` object in Python."""
    num_envs: int = 1
    """N, the number of environments stepped together."""
    mode: Annotated[Mode, tyro.conf.EnumChoicesFromValues] = Mode.PROGRAM
    """``program`` (an action is N whole programs) or ``token`` (an action is one token per env)."""
    autoreset_mode: Annotated[AutoresetMode, tyro.conf.EnumChoicesFromValues] = AutoresetMode.SAME_STEP
    """Gymnasium's autoreset mode (``gymnasium.vector.AutoresetMode`` or its value ``SameStep``,
    ``NextStep``, ``Disabled``): when an env whose episode ended starts its next one (see
    ``SynthVecEnv``). ``SameStep``: in the step that ends it, the last observation in
    ``info["final_obs"]`` (one-round program-mode episodes never spend a step on a reset)."""
    backend: str = DEFAULT_BACKEND
    """Compiler backend (``synthenv.compilers.names()``)."""
    engine: str = "auto"
    """Engine that runs compiled programs: ``auto``, ``torch``, ``native``, ``cuda`` (``reference``
    with the ``cpu`` backend)."""
    device: str = "cpu"
    """Torch device that holds all env state, actions and returns (``cpu``, ``cuda``, ``cuda:1``...)."""
    max_len: int = DEFAULT_MAX_LEN
    """L, tokens per program (PQT: 100; at most ``synthenv.language.MAX_LEN`` = 4096). Program mode:
    the action width; token mode: the most tokens a program can have before it ends."""
    iterations: int = 1
    """Program mode: write -> compile -> run -> test rounds per episode (truncated after the last)."""
    seed: int | None = None
    """Seed of the env's torch generator at the first ``reset()`` without a seed, in [0, 2**64)
    (None: fresh entropy)."""
    base: int | None = None
    """Override of the task's cell base (None: the task's own)."""
    max_steps: int | None = None
    """Override of the task's step limit (None: the task's own, PQT 5000)."""
    strict_syntax: bool | None = None
    """Override of the task's bracket rule: True fails unbalanced programs (None: the task's own)."""
    dialect: Dialect | str | None = None
    """Override of the task's dialect (``synthenv.dialect``): a ``Dialect`` or a preset name (``pqt``,
    ``standard``, ``esolang``); None: the task's own. ``strict_syntax`` applies after it."""
    allow_eos: bool = True
    """Whether EOS is legal in token-mode action masks and in ``sample_actions`` (PQT's protocol
    writes exactly ``max_len`` tokens: False). Actions are never rejected for it."""
    validate_actions: bool = True
    """Check every action's token range (a host sync per step); False for maximum speed."""
    lazy_scoring: bool = False
    """Token mode: skip compile/run/score on steps where no program ended, checked on the host (a
    sync point per step). Worth it for small N or numpy-facing use (``SynthEnv`` turns it on);
    off by default so that the vector env's step stays free of host syncs."""
    cuda_graphs: bool = False
    """Program mode on a CUDA device with the cuda engine: capture the step's compile, run and
    score as a CUDA graph once and replay it every step (synthenv/env/graphs.py). Off by default:
    not yet run on a GPU (``synthenv doctor --gpu-suite`` checks it against eager steps)."""

    def __post_init__(self) -> None:
        task_registry.resolve(self.task)  # wrong type or unknown name -> error with a "did you mean" hint
        object.__setattr__(self, "mode", _as_mode(self.mode))
        object.__setattr__(self, "autoreset_mode", as_autoreset_mode(self.autoreset_mode))
        _check_int("num_envs", self.num_envs, 1)
        if self.num_envs > MAX_NUM_ENVS:
            raise ValueError(f"num_envs must be an int in [1, {MAX_NUM_ENVS}] (synthenv.env.config.MAX_NUM_ENVS, "
                             f"docs/limits.md), got {self.num_envs}; step batches of at most that many in turn")
        _check_int("max_len", self.max_len, 1)
        if self.max_len > MAX_LEN:
            raise ValueError(f"max_len must be an int in [1, {MAX_LEN}], got {self.max_len!r}: longer programs would "
                             f"exhaust memory (see synthenv.language.MAX_LEN); PQT writes 100-token programs")
        _check_int("iterations", self.iterations, 1)
        if self.iterations != 1 and self.mode is Mode.TOKEN:
            raise ValueError(f"iterations={self.iterations} applies to program mode only; token mode writes one "
                             "program per episode: drop iterations or use mode='program'")
        if self.lazy_scoring and self.mode is Mode.PROGRAM:
            raise ValueError("lazy_scoring=True applies to token mode only (program mode scores every step); "
                             "drop it or use mode='token'")
        if not isinstance(self.cuda_graphs, bool):
            raise TypeError(f"cuda_graphs must be True or False, got {self.cuda_graphs!r}")
        if self.cuda_graphs and self.mode is not Mode.PROGRAM:
            raise ValueError("cuda_graphs=True applies to program mode only (token mode's step is too small to "
                             "gain); drop it or use mode='program'")
        require_seed("seed", self.seed)
        if self.base is not None:
            _check_int("base", self.base, 2)
        if self.max_steps is not None:
            _check_int("max_steps", self.max_steps, 1)
        if self.strict_syntax is not None and not isinstance(self.strict_syntax, bool):
            raise TypeError(f"strict_syntax must be None, True or False, got {self.strict_syntax!r}")
        if self.dialect is not None:
            object.__setattr__(self, "dialect", Dialect.parse(self.dialect))
        try:
            torch.device(self.device)
        except (RuntimeError, TypeError) as error:
            raise ValueError(f"device must be a torch device string like 'cpu' or 'cuda:0', got {self.device!r}") \
                from error

    @property
    def task_name(self) -> str:
        return self.task.name if isinstance(self.task, Task) else self.task

    def resolve_task(self) -> Task:
        """The task the env runs: the named (or given) task with this config's overrides."""
        task = task_registry.resolve(self.task)
        overrides = {name: getattr(self, name) for name in ("base", "max_steps", "dialect")
                     if getattr(self, name) is not None}
        if self.strict_syntax is not None:
            brackets = "strict" if self.strict_syntax else "lenient"
            overrides["dialect"] = dataclasses.replace(overrides.get("dialect", task.dialect), brackets=brackets)
        if not overrides:
            return task
        return dataclasses.replace(task, **overrides)  # Task re-checks its cases against the new base


def _as_mode(mode: object) -> Mode:
    if isinstance(mode, Mode):
        return mode
    try:
        return Mode(mode)
    except ValueError:
        raise ValueError(unknown_name_message("mode", mode, list(MODES))) from None


def as_autoreset_mode(mode: object) -> AutoresetMode:
    """An ``AutoresetMode`` from itself, its value (``"NextStep"``) or its name (``"next_step"``).

    >>> as_autoreset_mode("NextStep")
    <AutoresetMode.NEXT_STEP: 'NextStep'>
    """
    if isinstance(mode, AutoresetMode):
        return mode
    if isinstance(mode, str):
        for member in AutoresetMode:
            if mode in (member.value, member.name, member.name.lower()):
                return member
    raise ValueError(unknown_name_message("autoreset_mode", mode, list(AUTORESET_MODES))
                     + " Pass one of them or a gymnasium.vector.AutoresetMode, e.g. autoreset_mode='NextStep'")


MAX_NUM_ENVS = 2**22
"""The most envs one ``SynthVecEnv`` holds (4 194 304; docs/limits.md)."""
MAX_BATCH_VALUES = 2**28
"""The most values the N envs' state holds together (programs, outputs, lengths and statuses: ``N * (L + K * (O +
2))``): 268 435 456, 1-2 GiB; docs/limits.md."""


def check_batch_size(config: EnvConfig, task: Task) -> None:
    """Raise ``ValueError`` before anything is allocated if the N envs of ``config`` on ``task`` would hold more than
    ``MAX_BATCH_VALUES`` values (each env: its L tokens, and per case its O output values, length and status).

    >>> check_batch_size(EnvConfig(task="reverse", num_envs=4096), task_registry.get("reverse"))
    """
    per_env = config.max_len + task.num_cases * (task.max_output_length + 2)
    if config.num_envs * per_env > MAX_BATCH_VALUES:
        most = MAX_BATCH_VALUES // per_env
        raise ValueError(f"num_envs={config.num_envs} envs of {per_env} values each (L={config.max_len} tokens, "
                         f"{task.num_cases} cases of up to {task.max_output_length} output values) exceed "
                         f"{MAX_BATCH_VALUES} values (synthenv.env.config.MAX_BATCH_VALUES, docs/limits.md); use "
                         f"num_envs <= {most} and step the batches in turn")


def _check_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
