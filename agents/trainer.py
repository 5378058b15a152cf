"""The training loop: an algorithm writes programs, the program-mode env runs and scores them.

S seeds of one configuration train as one job: the env holds S x B programs per step, each
member's slice of B. NPE (number of programs executed) is counted as PQT counts it: programs
sampled from the policy or population, not replays. A member stops counting when one of its
programs solves the task (stop on success) or its budget is spent; the job ends when all have.

The step path has no host synchronisation; the loop syncs every ``log_every`` steps (logging,
stop check, checkpoints), at the points marked ``# sync point``.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from synthenv.checks import require_positive_int_fields
from synthenv.env import SynthVecEnv
from synthenv.language import decode_batch

from . import make
from .common import batch_statistics
from .logger import RunLogger, run_dir_name


@dataclass(frozen=True)
class TrainConfig:
    """One training job: an algorithm on a task, for one or more seeds.

    >>> config = TrainConfig(task="print-hello", algo="random", npe=128, seeds=(0,), log_dir=None,
    ...                      progress=False, max_len=10)
    >>> train(config)[0].npe
    128
    """

    task: str = "echo"
    """Task name (``synthenv tasks``)."""
    algo: str = "ppo"
    """Algorithm (``synthenv.agents.names()``)."""
    npe: int = 20_000
    """Budget per seed: programs executed (PQT's NPE; replays do not count)."""
    seeds: tuple[int, ...] = (0,)
    """Seeds; several seeds run as one batched job (each an independent run)."""
    algo_config: object = None
    """The algorithm's config (``PPOConfig``, ``PGConfig``, ``GAConfig``, ``RandomConfig``); None: defaults."""
    backend: str = "traditional"
    """Compiler backend of the env."""
    engine: str = "auto"
    """Engine of the env (``auto``: the fastest available)."""
    device: str = "cpu"
    """Torch device of the env, the policy and all training state."""
    max_len: int = 100
    """L, tokens per program (PQT: 100)."""
    iterations: int | None = None
    """Program-mode rounds per episode; round >= 2 lets PPO rewrite its best programs (``seed_prob``).
    None: 2 for ppo, 1 for the others (which ignore rounds)."""
    stop_on_success: bool = True
    """Stop a seed when one of its programs solves the task (PQT's protocol)."""
    log_dir: str | None = "runs"
    """TensorBoard root: logs go to ``{log_dir}/{task}__{algo}__{seed}__{unix_time}``; None: no logs."""
    log_every: int = 10
    """Steps between host syncs (logging, stop check, checkpoints)."""
    checkpoint: str | None = None
    """Checkpoint file, written every ``checkpoint_every`` steps and at the end; None: no checkpoints."""
    checkpoint_every: int = 100
    """Steps between checkpoints (rounded up to a multiple of ``log_every``)."""
    resume: str | None = None
    """Checkpoint to resume from (same task, algorithm, seeds and settings)."""
    max_train_steps: int | None = None
    """Stop after this many steps in total (None: only the NPE budget and success stop the job)."""
    progress: bool = True
    """Show a tqdm progress bar."""

    def __post_init__(self) -> None:
        from synthenv import tasks

        from . import _registry

        tasks.resolve(self.task)
        _registry.get(self.algo)
        if not isinstance(self.npe, int) or self.npe < 1:
            raise ValueError(f"npe must be a positive int (programs per seed), got {self.npe!r}")
        seeds = tuple(self.seeds)
        if not seeds or any(not isinstance(s, int) or s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be distinct non-negative ints, got {self.seeds!r}")
        object.__setattr__(self, "seeds", seeds)
        if self.iterations is None:
            object.__setattr__(self, "iterations", 2 if self.algo == "ppo" else 1)
        require_positive_int_fields(self, "max_len", "iterations", "log_every", "checkpoint_every")


@dataclass(frozen=True)
class RunResult:
    """The outcome of one seed."""

    task: str
    algo: str
    seed: int
    solved: bool
    """A sampled program solved the task."""
    npe: int
    """Programs executed: until the solving batch if solved, else the whole budget used."""
    best_program: str
    best_reward: float
    run_dir: str | None
    programs_per_s: float
    """Programs executed per second by the whole job (all seeds, policy included)."""


class Trainer:
    """Owns the env, the algorithm and the run's counters; ``run()`` trains to the end."""

    def __init__(self, config: TrainConfig):
        self.config = config
        self.device = torch.device(config.device)
        self.algorithm = make(config.algo, config.algo_config, config.seeds, config.max_len, self.device)
        self.num_members, self.batch = len(config.seeds), self.algorithm.programs_per_step
        self.allow_eos = getattr(self.algorithm.config, "allow_eos", False)
        self.env = SynthVecEnv(config.task, self.num_members * self.batch, mode="program", backend=config.backend,
                               engine=config.engine, device=str(self.device), max_len=config.max_len,
                               iterations=config.iterations, allow_eos=self.allow_eos, validate_actions=False,
                               seed=config.seeds[0])
        obs, _ = self.env.reset()
        self.rounds = obs["round"].view(self.num_members, self.batch)
        s, dev = self.num_members, self.device
        self.step_count = 0
        self.npe_done = 0  # programs counted so far by a member still running (same for all members)
        self.npe = torch.zeros(s, dtype=torch.int64, device=dev)  # [S]
        self.solved_npe = torch.full((s,), -1, dtype=torch.int64, device=dev)  # [S], -1 = not solved
        self.best_rewards = torch.full((s,), float("-inf"), dtype=torch.float32, device=dev)  # [S]
        self.best_tokens = torch.zeros((s, config.max_len), dtype=torch.int64, device=dev)  # [S, L]
        self.run_dirs = [None] * s
        if config.log_dir is not None:
            stamp = int(time.time())
            self.run_dirs = [str(Path(config.log_dir) / run_dir_name(config.task, config.algo, seed, stamp))
                             for seed in config.seeds]
        self.elapsed = 0.0
        self.programs_executed = 0
        if config.resume:
            self.load(config.resume)

    @property
    def active(self) -> torch.Tensor:
        """``[S]`` bool: members still running (not solved, budget left)."""
        running = self.npe < self.config.npe
        return running & (self.solved_npe < 0) if self.config.stop_on_success else running

    def budget_allows_step(self) -> bool:
        return self.npe_done + self.algorithm.new_programs(self.step_count) <= self.config.npe or self.step_count == 0

    def step(self) -> dict[str, torch.Tensor]:
        """One step: propose, execute and score, track, learn. Returns ``[S]`` statistics."""
        s, b = self.num_members, self.batch
        tokens = self.algorithm.propose(self.rounds)  # [S, B, L]
        obs, rewards, _, _, info = self.env.step(tokens.reshape(s * b, -1))
        self.rounds = obs["round"].view(s, b)
        rewards, solved = rewards.view(s, b), info["solved"].view(s, b)
        stats = batch_statistics(tokens, rewards, solved, info["program_status"].view(s, b))
        self._track(tokens, rewards, solved)
        stats.update(self.algorithm.learn(tokens, rewards, solved))
        self.npe_done += self.algorithm.new_programs(self.step_count)
        self.programs_executed += s * b
        self.step_count += 1
        return stats

    def _track(self, tokens: torch.Tensor, rewards: torch.Tensor, solved: torch.Tensor) -> None:
        """Count NPE, note first solves and the best program per member (device only)."""
        active = self.active
        self.npe = self.npe + active.long() * self.algorithm.new_programs(self.step_count)
        newly = active & solved.any(1)  # [S]
        self.solved_npe = torch.where(newly, self.npe, self.solved_npe)
        key = rewards.float() + 10.0 * solved.float()  # a solving program outranks any other
        index = key.argmax(1)  # [S]
        reward = rewards.float().gather(1, index[:, None])[:, 0]
        better = active & (reward > self.best_rewards)
        better = better | newly
        program = tokens.gather(1, index[:, None, None].expand(-1, 1, tokens.shape[2]))[:, 0]
        self.best_rewards = torch.where(better, reward, self.best_rewards)
        self.best_tokens = torch.where(better[:, None], program, self.best_tokens)

    def run(self) -> list[RunResult]:
        """Train until every seed solved the task or spent its budget; returns one result per seed."""
        config = self.config
        logger = RunLogger(config, self.run_dirs, self.npe_done)
        try:
            while self.budget_allows_step():
                if config.max_train_steps is not None and self.step_count >= config.max_train_steps:
                    break
                start = time.perf_counter()
                stats = self.step()
                logger.accumulate(stats, self.active)
                self.elapsed += time.perf_counter() - start
                if self.step_count % config.log_every == 0 and self._sync(logger):
                    break
            self._sync(logger, final=True)
        finally:
            logger.close()
        return self.results()

    def _sync(self, logger: RunLogger, final: bool = False) -> bool:
        """Log, checkpoint, and say whether every member is done. # sync point (once per log_every steps)."""
        active = self.active.tolist()  # sync point
        logger.log(self, active, final)
        every = -(-self.config.checkpoint_every // self.config.log_every) * self.config.log_every
        if self.config.checkpoint and (final or self.step_count % every == 0):
            self.save(self.config.checkpoint)
        return not any(active)

    def results(self) -> list[RunResult]:
        """One ``RunResult`` per seed. # sync point: reads the counters back."""
        solved_npe, npe = self.solved_npe.tolist(), self.npe.tolist()
        programs, rewards = decode_batch(self.best_tokens), self.best_rewards.tolist()
        speed = self.programs_executed / self.elapsed if self.elapsed else 0.0
        return [RunResult(self.config.task, self.config.algo, seed, solved_npe[i] >= 0,
                          solved_npe[i] if solved_npe[i] >= 0 else npe[i], programs[i], rewards[i], self.run_dirs[i],
                          speed) for i, seed in enumerate(self.config.seeds)]

    def state_dict(self) -> dict:
        """Everything needed to continue exactly: algorithm, env state, counters."""
        env_state = {name: value.clone() for name, value in self.env._state.items()}  # program-mode env state
        return {"config": _comparable(self.config, self.algorithm.config), "algorithm": self.algorithm.state_dict(),
                "env_state": env_state, "rounds": self.rounds.clone(), "step_count": self.step_count,
                "npe_done": self.npe_done, "npe": self.npe.clone(), "solved_npe": self.solved_npe.clone(),
                "best_rewards": self.best_rewards.clone(), "best_tokens": self.best_tokens.clone(),
                "run_dirs": self.run_dirs, "elapsed": self.elapsed, "programs_executed": self.programs_executed}

    def save(self, path: str) -> None:
        """Write a checkpoint (atomically: a crash never leaves half a file). # sync point."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        torch.save(self.state_dict(), partial)
        partial.replace(path)

    def load(self, path: str) -> None:
        """Continue from a checkpoint written by ``save`` with the same settings."""
        state = torch.load(path, map_location=self.device, weights_only=False)
        saved, current = state["config"], _comparable(self.config, self.algorithm.config)
        different = sorted(k for k in current if saved.get(k) != current[k])
        if different:
            details = ", ".join(f"{k}: checkpoint {saved.get(k)!r} vs now {current[k]!r}" for k in different)
            raise ValueError(f"checkpoint {path} was written with other settings ({details}); resume with the "
                             "same task, algorithm, seeds and options")
        self.algorithm.load_state_dict(state["algorithm"])
        self.env._state = {name: value.to(self.device) for name, value in state["env_state"].items()}
        self.rounds = state["rounds"].to(self.device)
        for name in ("step_count", "npe_done", "run_dirs", "elapsed", "programs_executed"):
            setattr(self, name, state[name])
        for name in ("npe", "solved_npe", "best_rewards", "best_tokens"):
            setattr(self, name, state[name].to(self.device))


_RESUMABLE = ("npe", "log_dir", "log_every", "checkpoint", "checkpoint_every", "resume", "max_train_steps",
              "progress")


def _comparable(config: TrainConfig, algo_config: object) -> dict:
    """The settings a resumed run must share with its checkpoint."""
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in _RESUMABLE}
    fields["algo_config"] = repr(algo_config)
    fields["seeds"] = list(fields["seeds"])
    return fields


def train(config: TrainConfig) -> list[RunResult]:
    """Train ``config.algo`` on ``config.task`` for every seed; one ``RunResult`` per seed.

    >>> [r.solved for r in train(TrainConfig(task="print-hello", algo="ga", npe=200, seeds=(0, 1), log_dir=None,
    ...                                      progress=False, max_len=8))]
    [False, False]
    """
    return Trainer(config).run()
