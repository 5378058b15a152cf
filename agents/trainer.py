"""The training loop: an algorithm writes programs, the program-mode env runs and scores them.

S seeds of one configuration train as one job: the env holds S x B programs per step, each
member's slice of B. NPE (number of programs executed) is counted as PQT counts it: programs
sampled from the policy or population, not replays. A member stops counting when one of its
programs solves the task (stop on success) or its budget is spent; the job ends when all have,
or when the wall-clock budget (``seconds``) is spent, whichever binds first.

The step path has no host synchronisation; the loop syncs every ``log_every`` steps (logging,
stop and budget checks, checkpoints), at the points marked ``# sync point``.

An algorithm may pause members: with ``set_running(running)`` it learns which members are still
running (known on the host: budgets each step, solves at sync points), and after each ``propose``
its ``stepped`` lists the members that wrote programs (the others' rows are empty programs, which
count no NPE and are not tracked). The default agent uses it to stop spending the env on finished
members and to give its cheap elitist phase a fair share of a job whose other members have moved
on to the islands; each member's NPE then counts its own programs only.

With ``share_every`` the members stop being independent runs: every ``share_every`` steps each
member's queue of best programs (an algorithm's ``queue``, a ``ProgramQueue``) receives the best
programs of every member, an island model. Under torchrun a ``Team`` (``synthenv.distributed``)
joins the job's ranks: each trains its share of the seeds, the stop decision at each sync point is
taken by all ranks together, and the sharing spans all ranks' members.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from synthenv import tasks
from synthenv.checkpoint import RESUME_FIX, CheckpointError, load_checkpoint, require_keys, save_checkpoint
from synthenv.checks import (require_finite, require_positive_int_fields, require_seed, require_writable,
                             resolve_device)
from synthenv.env import SynthVecEnv
from synthenv.compilers import DEFAULT_BACKEND
from synthenv.distributed import Team, rank_checkpoint, resume_checkpoint
from synthenv.language import DEFAULT_MAX_LEN, MAX_LEN, decode_batch

from . import make
from .common import MemberMasks, batch_statistics
from .feedback import Feedback, feedback_features
from .logger import RunLogger, run_dir_name
from .priority_queue import ProgramQueue

DEFAULT_NPE = 20_000_000
"""Default budget per seed: PQT's largest (20 M programs executed)."""


@dataclass(frozen=True)
class TrainConfig:
    """One training job: an algorithm on a task, for one or more seeds.

    >>> config = TrainConfig(task="print-hello", algo="random", npe=10_000, seeds=(0,), log_dir=None,
    ...                      progress=False, max_len=10)
    >>> train(config)[0].npe  # two batches of 4 096 random programs; a third would pass the budget
    8192
    """

    task: str = "echo"
    """Task: a registered name (``synthenv tasks``) or the path of a JSON task file (``*.json``)."""
    algo: str = "ppo"
    """Algorithm (``synthenv.agents.names()``)."""
    npe: int = DEFAULT_NPE
    """Budget per seed: programs executed (PQT's NPE; replays do not count)."""
    seconds: float | None = None
    """Wall-clock budget of the whole job in seconds (checked at each sync point); None: NPE only."""
    seeds: tuple[int, ...] = (0,)
    """Seeds; several seeds run as one batched job (each an independent run)."""
    algo_config: object = None
    """The algorithm's config (``agents.default_config(algo)``'s type); None: its defaults."""
    backend: str = DEFAULT_BACKEND
    """Compiler backend of the env."""
    engine: str = "auto"
    """Engine of the env (``auto``: the fastest available)."""
    device: str = "cpu"
    """Torch device of the env, the policy and all training state."""
    max_len: int = DEFAULT_MAX_LEN
    """L, the most tokens a program may have (PQT: 100)."""
    stop_on_success: bool = True
    """Stop a seed when one of its programs solves the task (PQT's protocol)."""
    log_dir: str | None = "runs"
    """TensorBoard root: logs go to ``{log_dir}/{task}__{algo}__{seed}__{unix_time}``; None: no logs."""
    log_every: int = 10
    """Steps between host syncs (logging, stop and budget checks, checkpoints)."""
    checkpoint: str | None = None
    """Checkpoint file, written every ``checkpoint_every`` steps and at the end; None: no checkpoints."""
    checkpoint_every: int = 100
    """Steps between checkpoints (rounded up to a multiple of ``log_every``)."""
    resume: str | None = None
    """Checkpoint to resume from (same task, algorithm, seeds and settings)."""
    max_train_steps: int | None = None
    """Stop after this many steps in total (None: only the budgets and success stop the job)."""
    share_every: int = 0
    """Steps between exchanges of best programs among the members, across ranks under torchrun (rounded up
    to a multiple of ``log_every``); 0: none, each seed is an independent run. Algorithms without a
    program queue (``ga``, ``random``, ``mutation``) share nothing."""
    progress: bool = True
    """Show a tqdm progress bar."""

    def __post_init__(self) -> None:
        from . import _registry

        tasks.from_spec(self.task)  # unknown name or malformed task file: a clear error now
        _registry.get(self.algo)
        if not isinstance(self.npe, int) or isinstance(self.npe, bool) or self.npe < 1:
            raise ValueError(f"npe must be a positive int (programs per seed), got {self.npe!r}")
        if self.seconds is not None:
            require_finite("seconds", self.seconds, low=0.0, low_open=True)
        seeds = tuple(self.seeds)
        if not seeds or len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be distinct non-negative ints, got {self.seeds!r}")
        for seed in seeds:
            require_seed("seed", seed, allow_none=False)
        object.__setattr__(self, "seeds", seeds)
        require_positive_int_fields(self, "max_len", "log_every", "checkpoint_every")
        if self.max_len > MAX_LEN:
            raise ValueError(f"max_len must be at most {MAX_LEN} tokens, got {self.max_len}")
        if self.max_train_steps is not None:
            require_positive_int_fields(self, "max_train_steps")
        if not isinstance(self.share_every, int) or isinstance(self.share_every, bool) or self.share_every < 0:
            raise ValueError(f"share_every must be an int >= 0 (steps; 0: no sharing), got {self.share_every!r}")


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


class Trainer:
    """Owns the env, the algorithm and the run's counters; ``run()`` trains to the end.

    ``team``: this rank's ``synthenv.distributed.Team`` under torchrun (None: one process).
    """

    def __init__(self, config: TrainConfig, team: Team | None = None):
        self.config, self.team = config, team
        self.device = resolve_device(config.device)  # before anything is allocated there
        self.task = tasks.from_spec(config.task)
        if config.log_dir is not None:
            require_writable(config.log_dir, "log dir (--log-dir)", directory=True)
        if config.checkpoint:
            require_writable(config.checkpoint, "checkpoint (--checkpoint)")
        self.algorithm = make(config.algo, config.algo_config, config.seeds, config.max_len, self.device)
        self.num_members, self.batch = len(config.seeds), self.algorithm.programs_per_step
        self.env = SynthVecEnv(self.task, self.num_members * self.batch, mode="program", backend=config.backend,
                               engine=config.engine, device=str(self.device), max_len=config.max_len,
                               validate_actions=False, seed=config.seeds[0])
        self.env.reset()
        cases = self.task.tensors(self.device)
        self._expected = (cases.expected, cases.expected_lengths)
        s, dev = self.num_members, self.device
        self.step_count = 0
        self.member_programs = [0] * s  # host: programs each member has written while running
        self.finished = [False] * s  # host: members known to have solved (seen at a sync point), when that stops them
        self._pausing = hasattr(self.algorithm, "set_running")  # the algorithm can pause members
        self._running: list[bool] | None = None  # what the algorithm was last told
        self._mask = MemberMasks(self.device)  # host patterns of members as [S] device masks
        self.npe = torch.zeros(s, dtype=torch.int64, device=dev)  # [S]
        self.solved_npe = torch.full((s,), -1, dtype=torch.int64, device=dev)  # [S], -1 = not solved
        self.solved_step = torch.full((s,), -1, dtype=torch.int64, device=dev)  # [S] step that first solved
        self.best_rewards = torch.full((s,), float("-inf"), dtype=torch.float32, device=dev)  # [S]
        self.best_tokens = torch.zeros((s, config.max_len), dtype=torch.int64, device=dev)  # [S, L]
        self.run_dirs = [None] * s
        if config.log_dir is not None:
            stamp = int(time.time())
            self.run_dirs = [str(Path(config.log_dir) / run_dir_name(self.task.name, config.algo, seed, stamp))
                             for seed in config.seeds]
        self.elapsed = 0.0  # wall-clock seconds of training so far (all sessions of a resumed run)
        self.step_seconds: list[float] = []  # elapsed at the end of each step (host clock, no sync)
        self.programs_executed = 0
        self._shared_at = -1  # the step of the last exchange of programs (at most one per step)
        if config.resume:
            self.load(config.resume)

    @property
    def active(self) -> torch.Tensor:
        """``[S]`` bool: members still running (not solved, budget left)."""
        running = self.npe < self.config.npe
        return running & (self.solved_npe < 0) if self.config.stop_on_success else running

    @property
    def npe_done(self) -> int:
        """Programs counted so far by the least advanced member still running (all members, once none runs)."""
        counts = [count for count, done in zip(self.member_programs, self.finished) if not done]
        return min(counts or self.member_programs)

    def running_members(self) -> list[bool]:
        """Host ``[S]``: members not known to be done whose budget has room for this step's programs (all of
        them at the first step, whatever the budget)."""
        new = self.algorithm.new_programs(self.step_count)
        return [not done and (count + new <= self.config.npe or self.step_count == 0)
                for count, done in zip(self.member_programs, self.finished)]

    def budget_allows_step(self) -> bool:
        return any(self.running_members())

    def out_of_time(self) -> bool:
        return self.config.seconds is not None and self.elapsed >= self.config.seconds

    def step(self) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """One step: propose, execute and score, track, learn.

        Returns ``[S]`` statistics and ``[S]`` bool, the members that were running during the step.
        """
        s, b = self.num_members, self.batch
        running = self.running_members()
        if self._pausing and running != self._running:
            self.algorithm.set_running(running)
            self._running = running
        tokens = self.algorithm.propose()  # [S, B, L]
        counted = [r and stepped for r, stepped in zip(running, self.algorithm.stepped)] if self._pausing else running
        _, rewards, _, _, info = self.env.step(tokens.reshape(s * b, -1))
        feedback = self._feedback(info["final_obs"], rewards, info)  # every episode ends after one round
        stats = batch_statistics(feedback.tokens, feedback.rewards, feedback.solved, feedback.program_status)
        tracked = self.active if all(counted) else self.active & self._mask(counted)
        self._track(feedback, tracked)
        stats.update(self.algorithm.learn(feedback))
        new = self.algorithm.new_programs(self.step_count)
        self.member_programs = [count + new * c for count, c in zip(self.member_programs, counted)]
        self.programs_executed += b * (sum(self.algorithm.stepped) if self._pausing else s)  # not the empty rows
        self.step_count += 1
        return stats, tracked

    def _feedback(self, obs: dict[str, torch.Tensor], rewards: torch.Tensor, info: dict) -> Feedback:
        s, b = self.num_members, self.batch
        if getattr(self.algorithm, "uses_features", False):
            features = feedback_features(obs, *self._expected, self.config.max_len)  # [S * B, F]
        else:  # most algorithms read rewards only: skip the per-case summary
            features = rewards.new_zeros((s * b, 0))
        return Feedback(obs["program"].view(s, b, -1), rewards.view(s, b), info["solved"].view(s, b),
                        info["program_status"].view(s, b), obs["case_passed"].view(s, b, -1).bool(),
                        obs["case_status"].view(s, b, -1), features.view(s, b, -1))

    def _track(self, feedback: Feedback, active: torch.Tensor) -> None:
        """Count NPE, note first solves and the best program per member, for the members ``active [S]`` that
        were running and wrote programs this step (device only)."""
        tokens, rewards, solved = feedback.tokens, feedback.rewards, feedback.solved
        self.npe = self.npe + active.long() * self.algorithm.new_programs(self.step_count)
        newly = active & solved.any(1)  # [S]
        self.solved_npe = torch.where(newly, self.npe, self.solved_npe)
        self.solved_step = torch.where(newly, self.step_count, self.solved_step)
        key = rewards.float() + 10.0 * solved.float()  # a solving program outranks any other
        index = key.argmax(1)  # [S]
        reward = rewards.float().gather(1, index[:, None])[:, 0]
        better = (active & (reward > self.best_rewards)) | newly
        program = tokens.gather(1, index[:, None, None].expand(-1, 1, tokens.shape[2]))[:, 0]
        self.best_rewards = torch.where(better, reward, self.best_rewards)
        self.best_tokens = torch.where(better[:, None], program, self.best_tokens)

    def run(self) -> list[RunResult]:
        """Train until every seed solved the task or a budget is spent; returns one result per seed."""
        config = self.config
        logger = RunLogger(config, self.task.name, self.run_dirs, self)
        start = time.perf_counter() - self.elapsed
        try:
            # under torchrun the ranks stop together, at a sync point: a rank whose members paused at
            # different steps than another's may run out of budget first, and steps on with none running
            lockstep_ranks = self.team is not None and self._pausing
            while (lockstep_ranks or self.budget_allows_step()) and not (self.team is None and self.out_of_time()):
                if config.max_train_steps is not None and self.step_count >= config.max_train_steps:
                    break
                stats, running = self.step()
                logger.accumulate(stats, running)
                self.elapsed = time.perf_counter() - start
                self.step_seconds.append(self.elapsed)
                if self.step_count % config.log_every == 0 and self._sync(logger):
                    break
            self._sync(logger, final=True)
        finally:
            logger.close()
        return self.results()

    def _sync(self, logger: RunLogger, final: bool = False) -> bool:
        """Log, checkpoint, and say whether the job is done. # sync point (once per log_every steps)."""
        active = self.active.tolist()  # sync point
        if self.config.stop_on_success:  # budgets are the host's to check (a resumed run may have a larger one)
            self.finished = [npe >= 0 for npe in self.solved_npe.tolist()]
        done = not self.budget_allows_step() or self.out_of_time()
        if self.team is not None:  # every rank takes the same decision, so all make the same collectives
            done = self.team.all_done(done)
        share_every = _multiple(self.config.share_every, self.config.log_every)  # 0: no sharing
        if share_every and self.step_count % share_every == 0 and self._shared_at != self.step_count:
            self.share_programs()
            self._shared_at = self.step_count
        logger.log(self, active, final)
        every = _multiple(self.config.checkpoint_every, self.config.log_every)
        if self.config.checkpoint and (final or self.step_count % every == 0):
            self.save(self.config.checkpoint)
        return done

    def share_programs(self) -> None:
        """Push every member's best queued programs (all ranks' under a team) into every member's queue.

        Fixed shapes on every rank: each sends its ``[S, K, L]`` queue padded to the largest S of any rank
        with empty slots (reward -inf, never queued). # sync point (a collective under a team).
        """
        queue = getattr(self.algorithm, "queue", None)
        if not isinstance(queue, ProgramQueue):
            return  # the algorithm keeps no queue of programs: nothing to share
        tokens, rewards = queue.tokens, queue.rewards  # [S, K, L], [S, K]
        if self.team is not None:
            tokens = self.team.all_gather(tokens)  # [W, S_max, K, L]
            rewards = self.team.all_gather(rewards, rows=tokens.shape[1], fill=float("-inf"))  # [W, S_max, K]
        s, length = self.num_members, tokens.shape[-1]
        queue.push(tokens.reshape(1, -1, length).expand(s, -1, -1), rewards.reshape(1, -1).expand(s, -1))

    def solve_seconds(self) -> list[float | None]:
        """Per member: elapsed seconds at the end of its solving step, None if unsolved. # sync point."""
        return [self.step_seconds[step] if 0 <= step < len(self.step_seconds) else None
                for step in self.solved_step.tolist()]

    def results(self) -> list[RunResult]:
        """One ``RunResult`` per seed. # sync point: reads the counters back."""
        solved_npe, npe = self.solved_npe.tolist(), self.npe.tolist()
        programs, rewards = decode_batch(self.best_tokens), self.best_rewards.tolist()
        speed = self.programs_executed / self.elapsed if self.elapsed else 0.0
        seconds = self.solve_seconds()
        return [RunResult(self.task.name, self.config.algo, seed, solved_npe[i] >= 0,
                          solved_npe[i] if solved_npe[i] >= 0 else npe[i],
                          seconds[i] if seconds[i] is not None else self.elapsed, programs[i], rewards[i],
                          self.run_dirs[i], speed) for i, seed in enumerate(self.config.seeds)]

    def state_dict(self) -> dict:
        """Everything needed to continue exactly: algorithm, counters (plain data and tensors only)."""
        return {"config": _comparable(self.config, self.algorithm.config), "algorithm": self.algorithm.state_dict(),
                "step_count": self.step_count, "member_programs": list(self.member_programs),
                "finished": list(self.finished), "npe": self.npe.clone(),
                "solved_npe": self.solved_npe.clone(), "solved_step": self.solved_step.clone(),
                "best_rewards": self.best_rewards.clone(), "best_tokens": self.best_tokens.clone(),
                "run_dirs": self.run_dirs, "elapsed": self.elapsed, "step_seconds": list(self.step_seconds),
                "programs_executed": self.programs_executed}

    def save(self, path: str) -> None:
        """Write a checkpoint (atomically: a crash never leaves half a file). # sync point."""
        save_checkpoint(path, self.state_dict())

    def load(self, path: str) -> None:
        """Continue from a checkpoint written by ``save`` with the same settings.

        The file is untrusted data: it is loaded with ``weights_only=True`` (no code runs), and a
        damaged file or one written by something else is a ``CheckpointError`` naming the fix.
        """
        state = load_checkpoint(path, map_location="cpu", required_keys=_STATE_KEYS)
        if not isinstance(state["config"], dict) or not isinstance(state["algorithm"], dict):
            raise CheckpointError(f"cannot load checkpoint {path!r}: it was not written by synthenv train; {RESUME_FIX}")
        saved, current = state["config"], _comparable(self.config, self.algorithm.config)
        different = sorted(k for k in current if saved.get(k) != current[k])
        if different:
            details = ", ".join(f"{k}: checkpoint {saved.get(k)!r} vs now {current[k]!r}" for k in different)
            raise ValueError(f"checkpoint {path} was written with other settings ({details}); resume with the "
                             "same task, algorithm, seeds and options")
        require_keys(state["algorithm"], self.algorithm.state_dict(), path)  # a file from an older synthenv
        self.algorithm.load_state_dict(state["algorithm"])
        for name in ("step_count", "member_programs", "finished", "run_dirs", "elapsed", "step_seconds",
                     "programs_executed"):
            setattr(self, name, state[name])
        for name in ("npe", "solved_npe", "solved_step", "best_rewards", "best_tokens"):
            setattr(self, name, state[name].to(self.device))


_STATE_KEYS = ("config", "algorithm", "step_count", "member_programs", "finished", "npe", "solved_npe", "solved_step",
               "best_rewards", "best_tokens", "run_dirs", "elapsed", "step_seconds", "programs_executed")
_RESUMABLE = ("npe", "seconds", "log_dir", "log_every", "checkpoint", "checkpoint_every", "resume",
              "max_train_steps", "progress")


def _multiple(steps: int, log_every: int) -> int:
    """``steps`` rounded up to a multiple of ``log_every`` (things done at sync points)."""
    return -(-steps // log_every) * log_every


def _comparable(config: TrainConfig, algo_config: object) -> dict:
    """The settings a resumed run must share with its checkpoint."""
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in _RESUMABLE}
    fields["algo_config"] = repr(algo_config)
    fields["seeds"] = list(fields["seeds"])
    return fields


def train(config: TrainConfig, team: Team | None = None) -> list[RunResult] | None:
    """Train ``config.algo`` on ``config.task`` for every seed; one ``RunResult`` per seed.

    Under torchrun (``team``, a ``synthenv.distributed.Team``) the seeds are split over the team's
    ranks: each rank trains its share as one batched job; with ``config.share_every`` the members of
    every rank exchange their best programs. Progress is shown by rank 0; TensorBoard logs are written
    by each rank for its own seeds; each rank writes its own checkpoint file
    (``distributed.rank_checkpoint``), and a set resumes only on as many ranks. Rank 0 returns every
    seed's result in seed order (``programs_per_s`` is the whole job's), the other ranks None.

    >>> [r.solved for r in train(TrainConfig(task="print-hello", algo="ga", npe=200, seeds=(0, 1), log_dir=None,
    ...                                      progress=False, max_len=8))]
    [False, False]
    """
    if team is None:
        return Trainer(config).run()
    config = dataclasses.replace(
        config, seeds=team.split(config.seeds), device=team.device, progress=config.progress and team.is_main,
        checkpoint=rank_checkpoint(config.checkpoint, team.rank, team.world_size) if config.checkpoint else None,
        resume=resume_checkpoint(config.resume, team.rank, team.world_size) if config.resume else None)
    trainer = Trainer(config, team=team)
    team.require_equal("steps in their checkpoints", trainer.step_count,
                       "the set is incomplete (a job stopped while saving): resume from a complete set or start anew")
    results = trainer.run()
    parts = team.gather_objects(results)
    if parts is None:
        return None
    speed = sum(part[0].programs_per_s for part in parts if part)
    return [dataclasses.replace(result, programs_per_s=speed) for part in parts for result in part]
