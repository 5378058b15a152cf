"""The training loop: an algorithm writes programs, the program-mode env runs and scores them.

S seeds of one configuration train as one job (``agents.run.job``): the env holds S x B programs per
step, each member's slice of B. NPE (number of programs executed) is counted as PQT counts it: programs
sampled from the policy or population, not replays. A member stops counting when one of its
programs solves the task (stop on success) or its budget is spent; the job ends when all have,
or when the wall-clock budget (``seconds``) is spent, whichever binds first.

The step path has no host synchronisation; the loop syncs every ``log_every`` steps (logging,
stop and budget checks, checkpoints), at the points marked ``# sync point``.

The schedule (``agents.run.schedule``) says which members write programs at each step: the running ones,
their time shared when the algorithm's members can sit a step out (the default agent's elitist phase
beside its islands); a member that does not step writes empty programs, which count no NPE and are
not tracked.

With ``share_every`` the members stop being independent runs: every ``share_every`` steps each
member's queue of best programs (an algorithm's ``queue``, a ``ProgramQueue``) receives the best
programs of every member, an island model. Under torchrun a ``Team`` (``synthenv.distributed``)
joins the job's ranks: each trains its share of the seeds, the stop decision at each sync point is
taken by all ranks together, and the sharing spans all ranks' members.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch

from synthenv import deadline, tasks
from synthenv.checkpoint import save_checkpoint
from synthenv.checks import require_writable, resolve_device
from synthenv.compilers.traditional import drop_unmatched_brackets
from synthenv.distributed import Team, rank_checkpoint, resume_checkpoint
from synthenv.env import SynthVecEnv

from ..registry import make
from ..search.members import MemberMasks
from ..search.queue import ProgramQueue
from .data import save_for_later
from .feedback import Feedback, feedback_features
from .job import RunResult, TrainConfig
from .logger import RunLogger, batch_statistics, run_dir_name
from .resume import load_state
from .schedule import Schedule
from .tracker import Tracker


class Trainer:
    """Owns the env, the algorithm and the run's counters; ``run()`` trains to the end.

    ``team``: this rank's ``synthenv.distributed.Team`` under torchrun (None: one process).
    """

    def __init__(self, config: TrainConfig, team: Team | None = None):
        self.device = resolve_device(config.device)  # before anything is allocated there
        self.task = tasks.from_spec(config.task)
        self.config = config = config.for_task(self.task)  # max_len for the task's kind where it is not given
        self.team = team
        if config.log_dir is not None:
            require_writable(config.log_dir, "log dir (--log-dir)", directory=True)
        if config.checkpoint:
            require_writable(config.checkpoint, "checkpoint (--checkpoint)")
        self.algorithm = make(config.algo, config.algo_config, config.seeds, config.max_len, self.device, self.task)
        if config.policy_out:
            if not hasattr(self.algorithm, "save_policy"):
                raise ValueError(f"--policy-out saves an edit policy, and algorithm {config.algo!r} has none; use it "
                                 "with --algo ppo")
            if not self.algorithm.fine_tunes_policy:
                raise ValueError(f"--policy-out saves the fine-tuned edit policy, and this run ({config.algo}) never "
                                 "updates it (islands, fine_tune=False or policy_fraction=0): the file would be the "
                                 "policy it starts from; drop --policy-out, or let a policy learn (--algo ppo)")
            require_writable(config.policy_out, "policy file (--policy-out)")
        self.num_members, self.batch = len(config.seeds), self.algorithm.programs_per_step
        # Search agents write programs for lenient brackets (their edits open and close brackets one at a time):
        # under strict brackets the env runs each without its unmatched ones, which prints the same (what the
        # agent learns from and reports, feedback.tokens, is that balanced program).
        self._balance = self.task.strict_syntax and getattr(self.algorithm, "balance_for_strict", False)
        self.env = SynthVecEnv(self.task, self.num_members * self.batch, mode="program", backend=config.backend,
                               engine=config.engine, device=str(self.device), max_len=config.max_len,
                               validate_actions=False, seed=config.seeds[0])
        self.env.reset()
        cases = self.task.tensors(self.device)
        self._expected = (cases.expected, cases.expected_lengths)
        s = self.num_members
        self.step_count = 0
        self.schedule = Schedule(s, config.npe)  # host: who steps, programs counted for budgets
        self._pausing = hasattr(self.algorithm, "set_stepping")  # its members can sit a step out
        self._stepping: list[bool] | None = None  # what the algorithm was last told
        self._mask = MemberMasks(self.device)  # host patterns of members as [S] device masks
        self.record = Tracker(s, config.max_len, self.device)  # device: NPE, first solves, best programs
        self.run_dirs = [None] * s
        if config.log_dir is not None:
            stamp = int(time.time())
            self.run_dirs = [str(Path(config.log_dir) / run_dir_name(self.task.name, config.algo, seed, stamp))
                             for seed in config.seeds]
        self.elapsed = 0.0  # wall-clock seconds of training so far (all sessions of a resumed run)
        self.env_programs = 0  # programs the env ran for the whole job (not the empty rows), for programs/s
        self._shared_at = -1  # the step of the last exchange of programs (at most one per step)
        if config.resume:
            self.load(config.resume)

    @property
    def active(self) -> torch.Tensor:
        """``[S]`` bool: members still running (not solved, budget left), as the device knows it."""
        record = self.record
        running = torch.ones_like(record.npe, dtype=torch.bool) if self.config.npe is None else \
            record.npe < self.config.npe
        return running & (record.solved_npe < 0) if self.config.stop_on_success else running

    def running_members(self) -> list[bool]:
        """Host ``[S]``: members not known to be done whose budget has room for this step's programs."""
        return self.schedule.running(self.step_count, self.algorithm.new_programs(self.step_count))

    def budget_allows_step(self) -> bool:
        return any(self.running_members())

    def out_of_time(self) -> bool:
        return self.config.seconds is not None and self.elapsed >= self.config.seconds

    def step(self) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """One step: propose, execute and score, track, learn.

        Returns ``[S]`` statistics and ``[S]`` bool, the members that were running during the step.
        """
        s, b = self.num_members, self.batch
        stepping = self.running_members()
        if self._pausing:
            stepping = self.schedule.stepping(self.step_count, stepping, self.algorithm.generation_costs)
            if stepping != self._stepping:
                self.algorithm.set_stepping(stepping)
                self._stepping = stepping
        tokens = self.algorithm.propose().reshape(s * b, -1)  # [S * B, L]
        if self._balance:  # a strict task gets each program without its unmatched brackets
            tokens = drop_unmatched_brackets(tokens)
        _, rewards, _, _, info = self.env.step(tokens)
        feedback = self._feedback(info["final_obs"], rewards, info)  # every episode ends after one round
        stats = batch_statistics(feedback.tokens, feedback.rewards, feedback.solved, feedback.program_status)
        tracked = self.active if all(stepping) else self.active & self._mask(stepping)
        new = self.algorithm.new_programs(self.step_count)
        self.record.track(feedback, tracked, new, self.step_count)
        stats.update(self.algorithm.learn(feedback))
        self.schedule.count(stepping, new)
        self.env_programs += b * (sum(stepping) if self._pausing else s)  # a paused member's rows are empty
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

    def run(self) -> list[RunResult]:
        """Train until every seed solved the task or a budget is spent; returns one result per seed."""
        config = self.config
        logger = RunLogger(config, self.task.name, self.run_dirs, self)
        start = time.perf_counter() - self.elapsed
        # one process holds its time budget inside a generation too (the engines look at the clock); under
        # torchrun the ranks stop together at a sync point instead
        at = None if config.seconds is None or self.team is not None else \
            time.monotonic() + config.seconds - self.elapsed
        stopped = False
        try:
            # under torchrun the ranks stop together, at a sync point: a rank whose members paused at
            # different steps than another's may run out of budget first, and steps on with none running
            lockstep_ranks = self.team is not None and self._pausing
            while (lockstep_ranks or self.budget_allows_step()) and not (self.team is None and self.out_of_time()):
                if config.max_train_steps is not None and self.step_count >= config.max_train_steps:
                    break
                try:
                    with deadline.within(at):
                        stats, running = self.step()
                except deadline.DeadlineExceeded:  # the generation is dropped: the budget ended inside it
                    self.elapsed, stopped = max(time.perf_counter() - start, config.seconds), True
                    break
                logger.accumulate(stats, running)
                self.elapsed = time.perf_counter() - start
                self.record.step_seconds.append(self.elapsed)
                if self.step_count % config.log_every == 0 and self._sync(logger):
                    break
            self._sync(logger, final=True, checkpoint=not stopped)
        finally:
            logger.close()
        results = self.results()
        save_for_later(self, results)
        return results

    def _sync(self, logger: RunLogger, final: bool = False, checkpoint: bool = True) -> bool:
        """Log, checkpoint (unless ``checkpoint`` is False: a generation was cut short, and the last checkpoint
        stays the one to resume from), and say whether the job is done. # sync point (once per log_every steps)."""
        active = self.active.tolist()  # sync point
        if self.config.stop_on_success:  # budgets are the host's to check (a resumed run may have a larger one)
            self.schedule.finished = [npe >= 0 for npe in self.record.solved_npe.tolist()]
        done = not self.budget_allows_step() or self.out_of_time()
        if self.team is not None:  # every rank takes the same decision, so all make the same collectives
            done = self.team.all_done(done)
        share_every = _multiple(self.config.share_every, self.config.log_every)  # 0: no sharing
        if share_every and self.step_count % share_every == 0 and self._shared_at != self.step_count:
            self.share_programs()
            self._shared_at = self.step_count
        logger.log(self, active, final)
        every = _multiple(self.config.checkpoint_every, self.config.log_every)
        if self.config.checkpoint and checkpoint and (final or self.step_count % every == 0):
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

    def results(self) -> list[RunResult]:
        """One ``RunResult`` per seed. # sync point: reads the record back."""
        solved, npe, programs, rewards = self.record.read()
        seconds, speed = self.record.solve_seconds(), self.env_programs / self.elapsed if self.elapsed else 0.0
        minimal = self.record.minimal_programs(self.task)
        return [RunResult(self.task.name, self.config.algo, seed, solved[i], npe[i],
                          seconds[i] if seconds[i] is not None else self.elapsed, programs[i], rewards[i],
                          self.run_dirs[i], speed, minimal[i]) for i, seed in enumerate(self.config.seeds)]

    def state_dict(self) -> dict:
        """Everything needed to continue exactly: algorithm, counters (plain data and tensors only)."""
        return {"config": self.config.comparable(self.algorithm.config), "algorithm": self.algorithm.state_dict(),
                "step_count": self.step_count, "schedule": self.schedule.state_dict(),
                "record": self.record.state_dict(), "run_dirs": self.run_dirs, "elapsed": self.elapsed,
                "env_programs": self.env_programs}

    def save(self, path: str) -> None:
        """Write a checkpoint (atomically: a crash never leaves half a file). # sync point."""
        save_checkpoint(path, self.state_dict())

    def load(self, path: str) -> None:
        """Continue from a checkpoint written by ``save`` with the same settings (``resume.load_state``: the file
        is untrusted data, checked against this trainer's own state before anything is set)."""
        load_state(self, path)


def _multiple(steps: int, log_every: int) -> int:
    """``steps`` rounded up to a multiple of ``log_every`` (things done at sync points)."""
    return -(-steps // log_every) * log_every


def train(config: TrainConfig, team: Team | None = None) -> list[RunResult] | None:
    """Train ``config.algo`` on ``config.task`` for every seed; one ``RunResult`` per seed.

    Under torchrun (``team``, a ``synthenv.distributed.Team``) the seeds are split over the team's
    ranks: each rank trains its share as one batched job; with ``config.share_every`` the members of
    every rank exchange their best programs. Progress is shown by rank 0; TensorBoard logs are written
    by each rank for its own seeds; each rank writes its own checkpoint file
    (``distributed.rank_checkpoint``), and a set resumes only on as many ranks. The fine-tuned policy
    (``policy_out``) is chosen over every rank's seeds and written once, by the rank that trained it. Rank 0
    returns every seed's result in seed order (``programs_per_s`` is the whole job's), the other ranks None.

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
