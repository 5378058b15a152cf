"""The PQT paper's uniform random search (docs/semantics.md §4): fixed-length programs of ``max_len`` tokens over
the eight commands (no EOS), batched over S members, each with its own generator."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from synthenv.checks import require_positive_int_fields
from synthenv.language import VOCAB_SIZE

from ..run.feedback import Feedback
from ..search.members import generator_states, load_generator_states, member_generators


def uniform_commands(generators: list[torch.Generator], shape: tuple[int, ...], device: torch.device):
    """``[S, *shape]`` int64 tokens uniform over the 8 commands (1..8)."""
    return torch.stack([torch.randint(1, VOCAB_SIZE, shape, generator=g, device=device) for g in generators])


@dataclass(frozen=True)
class RandomConfig:
    """Uniform random search (docs/semantics.md §4)."""

    batch_size: int = 4096
    """Programs drawn per member per step (only the NPE granularity; large batches keep the env busy)."""

    def __post_init__(self) -> None:
        require_positive_int_fields(self, "batch_size")


class RandomSearch:
    """Uniform random ``max_len``-token programs over the eight commands."""

    def __init__(self, config: RandomConfig, seeds: tuple[int, ...], max_len: int, device: torch.device):
        self.config, self.max_len, self.device = config, max_len, device
        self.programs_per_step = config.batch_size
        self.generators = member_generators(seeds, device)

    def propose(self) -> torch.Tensor:
        return uniform_commands(self.generators, (self.config.batch_size, self.max_len), self.device)

    def new_programs(self, step: int) -> int:
        return self.config.batch_size

    def learn(self, feedback: Feedback) -> dict[str, torch.Tensor]:
        return {}

    def state_dict(self) -> dict:
        return {"generators": generator_states(self.generators), "config": dataclasses.asdict(self.config)}

    def load_state_dict(self, state: dict) -> None:
        load_generator_states(self.generators, state["generators"])
