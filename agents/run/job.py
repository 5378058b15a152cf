"""One training job: its settings (``TrainConfig``) and each seed's outcome (``RunResult``).

A *member* is one seed's run inside a job: S seeds of one configuration train as one batched job,
each an independent run unless the job shares programs between them (``share_every``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated

import tyro

from synthenv import tasks
from synthenv.checks import require_finite, require_nonnegative_int, require_positive_int_fields, require_seed
from synthenv.compilers import DEFAULT_BACKEND
from synthenv.language import DEFAULT_MAX_LEN, MAX_LEN, TEXT_MAX_LEN

from ..registry import default_config

DEFAULT_NPE = 20_000_000
"""Default budget per seed: PQT's largest (20 M programs executed)."""


@dataclass(frozen=True)
class TrainConfig:
    """One training job: an algorithm on a task, for one or more seeds.

    >>> from synthenv.agents import train
    >>> config = TrainConfig(task="print-hello", algo="random", npe=10_000, seeds=(0,), log_dir=None,
    ...                      progress=False, max_len=10)
    >>> train(config)[0].npe  # two batches of 4 096 random programs; a third would pass the budget
    8192
    """

    task: str = "reverse"
    """Task: a registered name ('synthenv tasks' lists them) or the path of a JSON task file (my_task.json: name,
    base, cases)."""
    algo: str = "islands"
    """Algorithm: a name of synthenv.agents.names() (islands: synthenv's agent; ppo: it with a PPO-trained edit
    policy; mutation: the elitist mutation baseline; pqt, pg-pqt, reinforce, ga, random: the PQT paper's
    baselines)."""
    npe: int | None = DEFAULT_NPE
    """Budget per seed: programs executed (NPE, as the PQT paper counts it: replays do not count); None: no
    NPE budget."""
    seconds: float | None = None
    """Wall-clock budget of the whole job in seconds (checked at each sync point); whichever budget binds
    first ends the run; None: the NPE budget only."""
    seeds: Annotated[tuple[int, ...], tyro.conf.Suppress] = (0,)
    """Seeds; several seeds run as one batched job, each an independent run (at the command line: --seed and
    --num-seeds)."""
    algo_config: Annotated[object, tyro.conf.Suppress] = None
    """The algorithm's config (the type of default_config(algo)); None: its defaults."""
    backend: str = DEFAULT_BACKEND
    """Compiler backend of the env ('cpu': the host reference pipeline)."""
    engine: str = "auto"
    """Engine of the env (auto: native C on the CPU, CUDA on a GPU, else torch)."""
    device: str = "cpu"
    """Torch device of the env, the policy and all training state."""
    max_len: int | None = None
    """L, the most tokens a program may have; None: 100 (PQT's) on a task of ints, 256 on a text task
    (synthenv.language.TEXT_MAX_LEN)."""
    stop_on_success: bool = True
    """Stop a seed when one of its programs solves the task (PQT's protocol)."""
    log_dir: str | None = "runs"
    """TensorBoard root: logs go to log_dir/{task}__{algo}__{seed}__{unix_time}; None: no logs."""
    log_every: int = 10
    """Steps between host syncs (logging, progress bar, stop and budget checks, checkpoints)."""
    checkpoint: str | None = None
    """Checkpoint file, written every checkpoint_every steps and at the end; None: no checkpoints."""
    checkpoint_every: int = 100
    """Steps between checkpoints (rounded up to a multiple of log_every)."""
    resume: str | None = None
    """Checkpoint to resume from (same task, algorithm, seeds and settings; npe and seconds may grow)."""
    max_train_steps: int | None = None
    """Stop after this many steps in total (None: only the budgets and success stop the job)."""
    policy_out: str | None = None
    """Save the fine-tuned edit policy at the end of the run to this file (the seed whose policy was updated most;
    among equals the first to solve, else the best), to start another run from it (--policy PATH); ppo
    only."""
    share_every: int = 0
    """Steps between exchanges of the members' best programs, across ranks under torchrun (rounded up to a
    multiple of log_every): an island model over all seeds of the islands, ppo and PQT agents (ga, random and
    mutation keep no queue: they share nothing); 0: none, each seed is an independent run."""
    progress: bool = True
    """Show a progress bar."""

    def __post_init__(self) -> None:
        tasks.from_spec(self.task)  # unknown name or malformed task file: a clear error now
        default_config(self.algo)  # an unknown name: the registry's error, with the valid names
        if self.npe is not None and (not isinstance(self.npe, int) or isinstance(self.npe, bool) or self.npe < 1):
            raise ValueError(f"npe must be a positive int (programs per seed) or None (no NPE budget), got "
                             f"{self.npe!r}")
        if self.seconds is not None:
            require_finite("seconds", self.seconds, low=0.0, low_open=True)
        seeds = tuple(self.seeds)
        if not seeds or len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be distinct non-negative ints, got {self.seeds!r}")
        for seed in seeds:
            require_seed("seed", seed, allow_none=False)
        object.__setattr__(self, "seeds", seeds)
        require_positive_int_fields(self, "log_every", "checkpoint_every")
        if self.max_len is not None:
            require_positive_int_fields(self, "max_len")
            if self.max_len > MAX_LEN:
                raise ValueError(f"max_len must be at most {MAX_LEN} tokens, got {self.max_len}")
        if self.max_train_steps is not None:
            require_positive_int_fields(self, "max_train_steps")
        require_nonnegative_int("share_every", self.share_every, "steps; 0: no sharing")


    def for_task(self, task) -> TrainConfig:
        """This config with ``max_len`` set for ``task`` where it is None (``TEXT_MAX_LEN`` on a text task)."""
        if self.max_len is not None:
            return self
        return dataclasses.replace(self, max_len=TEXT_MAX_LEN if task.text else DEFAULT_MAX_LEN)

    def comparable(self, algo_config: object) -> dict:
        """The settings a resumed run must share with its checkpoint (all but the budgets and outputs)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in RESUMABLE}
        fields["algo_config"] = repr(algo_config)
        fields["seeds"] = list(fields["seeds"])
        return fields


RESUMABLE = ("npe", "seconds", "log_dir", "log_every", "checkpoint", "checkpoint_every", "resume",
              "max_train_steps", "progress", "policy_out")
"""The settings a resumed run may change."""


@dataclass(frozen=True)
class RunResult:
    """The outcome of one seed."""

    task: str
    algo: str
    seed: int
    solved: bool
    """A program written by the agent solved the task."""
    npe: int
    """Programs executed: until the solving batch if solved, else the whole budget used."""
    seconds: float
    """Wall-clock seconds of the job until the solving step if solved, else until the job ended."""
    best_program: str
    best_reward: float
    run_dir: str | None
    programs_per_s: float
    """Programs executed per second by the whole job (all seeds, the agent included)."""
    minimal_program: str | None = None
    """When solved: ``best_program`` with commands deleted while it still solves every case
    (``tasks.minimize.minimal_equivalent``, confirmed by the reference interpreter); else None."""
