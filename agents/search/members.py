"""Members: the S seeds a job trains at once, each with its own generator; host patterns of them as device
masks, and per-member means.

Everything random about member s comes from its own ``torch.Generator``, so a member's run does not depend on
which other seeds share the job.
"""

from __future__ import annotations

import torch


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


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-member mean of ``values [S, ...]`` over ``mask``: ``[S]`` (0 where the mask is empty)."""
    mask = mask.to(values.dtype)
    return (values * mask).flatten(1).sum(1) / mask.flatten(1).sum(1).clamp(min=1.0)
