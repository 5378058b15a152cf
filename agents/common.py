"""What every algorithm shares: the ``Algorithm`` protocol, per-member random generators,
per-member gradient clipping and the batch statistics the training loop logs.

S members (seeds) of one configuration train as one batched job; everything random about
member s comes from its own ``torch.Generator``, so a member's run does not depend on which
other seeds share the job.
"""

from __future__ import annotations

from typing import Protocol

import torch

from synthenv.language import Status

from .feedback import Feedback
from .rows import program_lengths


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


class MemberMasks:
    """Host patterns of members as device tensors, each copied to the device once (a run sees only a few
    patterns): ``masks(members)`` for ``[S]`` bools, ``masks.index(ids)`` for member positions."""

    def __init__(self, device: torch.device):
        self.device, self._masks, self._indices = device, {}, {}

    def __call__(self, members: list[bool]) -> torch.Tensor:
        """``members`` (host ``[S]`` bools) as an ``[S]`` bool device tensor."""
        key = tuple(bool(flag) for flag in members)
        if key not in self._masks:
            mask = torch.zeros(len(key), dtype=torch.bool, device=self.device)
            for member in (m for m, flag in enumerate(key) if flag):
                mask[member].fill_(True)  # a scalar fill: no blocking copy of Python data to a GPU
            self._masks[key] = mask
        return self._masks[key]

    def index(self, ids: tuple[int, ...]) -> torch.Tensor:
        """``ids`` (host member positions) as an int64 device index (``member_index``), cached."""
        if ids not in self._indices:
            self._indices[ids] = member_index(list(ids), self.device)
        return self._indices[ids]


def member_index(members: list[int], device: torch.device) -> torch.Tensor:
    """``members`` as an int64 index tensor on ``device``, built by scalar fills (no blocking copy of Python
    data to a GPU)."""
    index = torch.empty(len(members), dtype=torch.int64, device=device)
    for i, member in enumerate(members):
        index[i].fill_(member)
    return index


def member_generators(seeds: tuple[int, ...], device: torch.device) -> list[torch.Generator]:
    """One generator per member on ``device``, seeded with the member's seed."""
    return [torch.Generator(device=device).manual_seed(int(seed)) for seed in seeds]


def generator_states(generators: list[torch.Generator]) -> list[torch.Tensor]:
    return [g.get_state().clone() for g in generators]


def load_generator_states(generators: list[torch.Generator], states: list[torch.Tensor]) -> None:
    if len(states) != len(generators):
        raise ValueError(f"checkpoint has {len(states)} members, this run has {len(generators)}; resume with the "
                         "same seeds")
    for generator, state in zip(generators, states):
        generator.set_state(state.to("cpu", torch.uint8))  # a generator's state is a CPU byte tensor, any device


def clip_grad_norm_per_member(parameters: list[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """Scale each member's gradient to global norm <= ``max_norm``; returns the norms ``[S]``.

    Every parameter has the member dimension first, so member s's gradient norm is taken over
    its own slices only (TF's ``clip_by_global_norm`` per member, no host sync).
    """
    grads = [p.grad for p in parameters if p.grad is not None]
    squares = torch.stack([g.pow(2).flatten(1).sum(1) for g in grads]).sum(0)  # [S]
    norms = squares.sqrt()
    scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)  # [S]
    for g in grads:
        g.mul_(scale.view(-1, *([1] * (g.dim() - 1))))
    return norms


def batch_statistics(tokens: torch.Tensor, rewards: torch.Tensor, solved: torch.Tensor,
                     status: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-member means over one batch: ``[S, B, ...]`` inputs -> ``[S]`` statistics."""
    lengths = program_lengths(tokens).float()  # [S, B]
    return {
        "charts/episodic_return": rewards.float().mean(1),
        "charts/success_rate": solved.float().mean(1),
        "programs/step_limit_rate": (status == Status.STEP_LIMIT).float().mean(1),
        "programs/mean_length": lengths.mean(1),
    }


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-member mean of ``values [S, ...]`` over ``mask``: ``[S]`` (0 where the mask is empty)."""
    mask = mask.to(values.dtype)
    return (values * mask).flatten(1).sum(1) / mask.flatten(1).sum(1).clamp(min=1.0)
