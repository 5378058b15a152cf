"""What the trainer asks of an algorithm: the ``Algorithm`` protocol.

S members (seeds) of one configuration train as one batched job; everything random about member s comes from
its own ``torch.Generator`` (``agents.search.members``), so a member's run does not depend on which other seeds
share the job.
"""

from __future__ import annotations

from typing import Protocol

import torch

from .feedback import Feedback


class Algorithm(Protocol):
    """One synthesis algorithm, batched over S members.

    Each training step the loop asks for programs (``propose``), executes them in the env and
    hands back what the env reported (``learn``). All tensors stay on the env's device.
    """

    programs_per_step: int
    """B: programs each member proposes per step (its env slice is B wide)."""
    uses_features: bool
    """Optional (default False): the trainer fills ``Feedback.features`` for this algorithm (read each step,
    so it may be a property)."""

    def propose(self) -> torch.Tensor:
        """The next programs: ``[S, B, L]`` int64, EOS-padded."""

    def learn(self, feedback: Feedback) -> dict[str, torch.Tensor]:
        """Update from the env's report on the proposed programs; returns statistics, each ``[S]``."""

    def new_programs(self, step: int) -> int:
        """How many of step ``step``'s B programs count towards NPE (replays do not)."""

    def state_dict(self) -> dict:
        """Everything needed to resume exactly (parameters, optimiser, generators, queues)."""

    def load_state_dict(self, state: dict) -> None:
        ...

    # Optional, together: an algorithm whose members can sit a step out (the trainer's schedule decides).
    generation_costs: list[int]
    """Host ``[S]``: what each member's next generation costs, relative to the cheapest kind (1); the trainer
    steps a member of cost c once every c / (the cheapest running member's cost) steps (its time sharing)."""

    def set_stepping(self, stepping: list[bool]) -> None:
        """Host ``[S]``: the members that write programs from the next ``propose`` on (called whenever it
        changes); the others must write empty programs (no NPE) and keep their state."""
