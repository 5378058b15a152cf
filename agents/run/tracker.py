"""What a training job has found so far, per member, on the device: NPE, the first solve, the best program.

The trainer tracks each step's programs for the members that wrote them while running (``track``, no host
sync), and reads the record back at the end (``results``, a sync point).
"""

from __future__ import annotations

import torch

from synthenv.language import decode_batch
from synthenv.tasks import Task
from synthenv.tasks.minimize import minimal_equivalent

from .feedback import Feedback

SOLVED_FIRST = 10.0
"""Added to a solving program's reward when a step's best program is picked: any solving program outranks
every other (PQT rewards lie within a few units of 0)."""


class Tracker:
    """Per-member counters of one job, ``[S]`` tensors on its device.

    Attributes:
        npe: ``[S]`` programs counted (PQT's NPE) while the member ran, up to its solving step.
        solved_npe: ``[S]`` the NPE at the member's first solving step, -1 while unsolved.
        solved_step: ``[S]`` that step, -1 while unsolved.
        best_rewards: ``[S]`` the best reward of any program the member wrote while running.
        best_tokens: ``[S, L]`` that program (a solving one, once the member has solved).
        step_seconds: the job's elapsed seconds at the end of each step (host clock).
    """

    def __init__(self, num_members: int, max_len: int, device: torch.device):
        s = num_members
        self.npe = torch.zeros(s, dtype=torch.int64, device=device)
        self.solved_npe = torch.full((s,), -1, dtype=torch.int64, device=device)
        self.solved_step = torch.full((s,), -1, dtype=torch.int64, device=device)
        self.best_rewards = torch.full((s,), float("-inf"), dtype=torch.float32, device=device)
        self.best_tokens = torch.zeros((s, max_len), dtype=torch.int64, device=device)
        self.step_seconds: list[float] = []
        self._minimal: dict[str, str] = {}  # solving program -> a minimal equivalent, found once

    def track(self, feedback: Feedback, active: torch.Tensor, new: int, step: int) -> None:
        """Count ``new`` programs of NPE, note first solves and the best program per member, for the members
        ``active [S]`` that were running and wrote programs at ``step`` (device only)."""
        tokens, rewards, solved = feedback.tokens, feedback.rewards, feedback.solved
        self.npe = self.npe + active.long() * new
        newly = active & solved.any(1)  # [S]
        self.solved_npe = torch.where(newly, self.npe, self.solved_npe)
        self.solved_step = torch.where(newly, step, self.solved_step)
        key = rewards.float() + SOLVED_FIRST * solved.float()
        index = key.argmax(1)  # [S]
        reward = rewards.float().gather(1, index[:, None])[:, 0]
        better = (active & (reward > self.best_rewards)) | newly
        program = tokens.gather(1, index[:, None, None].expand(-1, 1, tokens.shape[2]))[:, 0]
        self.best_rewards = torch.where(better, reward, self.best_rewards)
        self.best_tokens = torch.where(better[:, None], program, self.best_tokens)

    def solve_seconds(self) -> list[float | None]:
        """Per member: elapsed seconds at the end of its solving step, None if unsolved. # sync point."""
        return [self.step_seconds[step] if 0 <= step < len(self.step_seconds) else None
                for step in self.solved_step.tolist()]

    def read(self) -> tuple[list[bool], list[int], list[str], list[float]]:
        """Per member: solved, NPE (to the solve if solved), best program, best reward. # sync point."""
        solved_npe, npe = self.solved_npe.tolist(), self.npe.tolist()
        return ([n >= 0 for n in solved_npe], [s if s >= 0 else n for s, n in zip(solved_npe, npe)],
                decode_batch(self.best_tokens), self.best_rewards.tolist())

    def minimal_programs(self, task: Task) -> list[str | None]:
        """Per member: a minimal equivalent of its solving program on ``task`` (None while unsolved), by
        ``tasks.minimize.minimal_equivalent`` (checked by the reference interpreter). # sync point."""
        solved, _, programs, _ = self.read()
        for program in {p for p, ok in zip(programs, solved) if ok} - self._minimal.keys():
            self._minimal[program] = minimal_equivalent(program, task)
        return [self._minimal[p] if ok else None for p, ok in zip(programs, solved)]

    def state_dict(self) -> dict:
        return {"npe": self.npe.clone(), "solved_npe": self.solved_npe.clone(), "solved_step": self.solved_step.clone(),
                "best_rewards": self.best_rewards.clone(), "best_tokens": self.best_tokens.clone(),
                "step_seconds": list(self.step_seconds)}

    def load_state_dict(self, state: dict) -> None:
        device = self.npe.device
        for name in ("npe", "solved_npe", "solved_step", "best_rewards", "best_tokens"):
            setattr(self, name, state[name].to(device))
        self.step_seconds = list(state["step_seconds"])
