"""Elitist mutation search: the plain baseline every learning agent must clear.

A few dozen lines of search at the env's speed, batched over S members on the device: keep the
E best unique programs found so far (the elite); each generation, draw B parents uniformly
from the elite and give each 1 .. ``max_edits`` random point edits (substitution, insertion
or deletion of a uniform command at a uniform position), so programs change length freely up
to ``max_len``. The first generation is short uniform random programs. Every program executed
counts towards NPE (there are no replays: the elite's rewards are remembered, not re-run). A
member that has finished (solved, or out of budget: ``set_running``) writes empty programs, so
that it no longer costs the job's env.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from synthenv.checks import require_positive_int_fields
from synthenv.language import EOS

from .common import MemberMasks, generator_states, load_generator_states, member_generators
from .feedback import Feedback
from .priority_queue import ProgramQueue
from .variation import apply_edits, random_edits, random_programs


@dataclass(frozen=True)
class MutationConfig:
    """Hyperparameters of the elitist mutation search."""

    batch_size: int = 4096
    """Children per member per generation (programs executed per step)."""
    elite: int = 64
    """E, best unique programs kept as parents."""
    max_edits: int = 3
    """Each child gets 1 .. max_edits random point edits of its parent."""
    initial_length: int = 20
    """First generation: uniform random programs of 1 .. initial_length commands."""

    def __post_init__(self) -> None:
        require_positive_int_fields(self, "batch_size", "elite", "max_edits", "initial_length")


def mutate(elite: ProgramQueue, count: int, max_edits: int, generators: list[torch.Generator]) -> torch.Tensor:
    """``count`` children per member: parents drawn uniformly from the ``elite`` queue, each given
    1 .. ``max_edits`` random point edits. Returns ``[S, count, L]``."""
    parents, _ = elite.sample(count, generators)  # [S, count, L]
    return apply_edits(parents, random_edits(generators, parents, max_edits))


class MutationSearch:
    """The elitist mutation baseline for S members at once (registered as ``mutation``).

    >>> search = MutationSearch(MutationConfig(batch_size=8, elite=2), seeds=(0,), max_len=6,
    ...                         device=torch.device("cpu"))
    >>> tuple(search.propose().shape)
    (1, 8, 6)
    """

    def __init__(self, config: MutationConfig, seeds: tuple[int, ...], max_len: int, device: torch.device):
        self.config, self.max_len, self.device = config, max_len, device
        self.programs_per_step = config.batch_size
        self.generators = member_generators(seeds, device)
        self.elite = ProgramQueue(len(seeds), config.elite, max_len, device)
        self.children = random_programs(self.generators, (config.batch_size,), max_len, config.initial_length, device)
        self.running = [True] * len(seeds)  # on the host: members not finished (set_running)
        self._mask = MemberMasks(device)

    @property
    def stepped(self) -> list[bool]:
        """The members that wrote programs in the last ``propose``: the running ones."""
        return self.running

    def set_running(self, running: list[bool]) -> None:
        if len(running) != len(self.running):
            raise ValueError(f"running has {len(running)} members, this search has {len(self.running)}")
        self.running = [bool(flag) for flag in running]

    def new_programs(self, step: int) -> int:
        return self.config.batch_size

    def propose(self) -> torch.Tensor:
        for member, running in enumerate(self.running):
            if not running:  # its programs end at once (its children are bred anew each generation)
                self.children[member, :, 0].fill_(EOS)
        return self.children

    def learn(self, feedback: Feedback) -> dict[str, torch.Tensor]:
        rewards = feedback.rewards
        if not all(self.running):  # a finished member's empty programs are not offered to its elite
            rewards = torch.where(self._mask(self.running)[:, None], rewards, float("-inf"))
        self.elite.push(feedback.tokens, rewards)
        self.children = mutate(self.elite, self.config.batch_size, self.config.max_edits, self.generators)
        return {"programs/elite_best": self.elite.rewards[:, 0], "programs/elite_worst": self.elite.rewards[:, -1]}

    def state_dict(self) -> dict:
        return {"elite": self.elite.state_dict(), "children": self.children.clone(), "running": list(self.running),
                "generators": generator_states(self.generators), "config": dataclasses.asdict(self.config)}

    def load_state_dict(self, state: dict) -> None:
        self.elite.load_state_dict(state["elite"])
        self.children = state["children"].to(self.device).clone()
        self.running = [bool(flag) for flag in state["running"]]
        load_generator_states(self.generators, state["generators"])
