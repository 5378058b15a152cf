"""Elitist mutation search: the plain baseline every learning agent must clear.

A few dozen lines of search at the env's speed, batched over S members on the device: keep the
best unique programs found so far (the elite, a ``ProgramQueue``); each generation, draw B
parents uniformly from the elite and give each 1 .. ``max_edits`` random point edits
(substitution, insertion or deletion of a uniform command at a uniform position), so programs
change length freely up to ``max_len``. The first generation is short uniform random programs.
Every program executed counts towards NPE (there are no replays: the elite's rewards are
remembered, not re-run). A member that does not step (it has finished, or the trainer's schedule
gives its time to others: ``set_stepping``) writes empty programs and keeps its state.

The search notes how many generations each member's elite has gone unchanged (``stale``): once
it stops changing, the search draws its children from the same distribution forever. The default
agent (``agents.search.agent``) runs this very search as its elitist phase and hands a member over to its
islands when that count passes its patience.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from synthenv.checks import require_positive_int_fields
from synthenv.language import EOS

from .members import MemberMasks, generator_states, load_generator_states, member_generators
from ..run.feedback import NUM_FEATURES, Feedback
from .queue import EMPTY, ProgramQueue
from .variation import apply_edits, random_edits, random_programs


@dataclass(frozen=True)
class MutationConfig:
    """Hyperparameters of the elitist mutation search."""

    batch_size: int = 4096
    """Children per member per generation (programs executed per step)."""
    elite: int = 64
    """Best unique programs kept as parents."""
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

    ``keep_features``: the elite also keeps each program's feedback features (``agents.run.feedback``),
    for an agent that reads them (the default agent's seeded islands); ``uses_features`` then asks
    the trainer for them every step. ``fresh`` draws the first generation (``random_programs``' arguments).

    >>> search = MutationSearch(MutationConfig(batch_size=8, elite=2), seeds=(0,), max_len=6,
    ...                         device=torch.device("cpu"))
    >>> tuple(search.propose().shape)
    (1, 8, 6)
    """

    balance_for_strict = True
    """Its edits open and close brackets one at a time: a strict task runs each program without its unmatched
    brackets (``agents.run.trainer``)."""

    def __init__(self, config: MutationConfig, seeds: tuple[int, ...], max_len: int, device: torch.device,
                 keep_features: bool = False, fresh: Callable = random_programs):
        self.config, self.max_len, self.device = config, max_len, device
        self.programs_per_step = config.batch_size
        self.uses_features = keep_features
        self.generators = member_generators(seeds, device)
        s = len(seeds)
        self.elite = ProgramQueue(s, config.elite, max_len, device,
                                  extras={"features": ((NUM_FEATURES,), torch.float32)} if keep_features else None)
        self.children = fresh(self.generators, (config.batch_size,), max_len, config.initial_length, device)
        self.elite_score = torch.full((s,), EMPTY, dtype=torch.float64, device=device)  # [S] the elite's reward sum
        self.stale = torch.zeros(s, dtype=torch.int64, device=device)  # [S] generations the elite has not changed
        self.stepping = [True] * s  # on the host: the members that write programs at the next propose
        self._mask = MemberMasks(device)

    @property
    def generation_costs(self) -> list[int]:
        """Every member's generation costs the same (the trainer's schedule shares nothing)."""
        return [1] * len(self.stepping)

    def set_stepping(self, stepping: list[bool]) -> None:
        """The members that write programs from the next ``propose`` on (host ``[S]``); the others write empty
        programs and keep their state."""
        if len(stepping) != len(self.stepping):
            raise ValueError(f"stepping has {len(stepping)} members, this search has {len(self.stepping)}")
        self.stepping = [bool(flag) for flag in stepping]

    def new_programs(self, step: int) -> int:
        return self.config.batch_size

    def propose(self) -> torch.Tensor:
        for member, stepping in enumerate(self.stepping):
            if not stepping:  # its programs end at once (its children are bred anew each generation)
                self.children[member, :, 0].fill_(EOS)
        return self.children

    def learn(self, feedback: Feedback) -> dict[str, torch.Tensor]:
        """Offer the programs to the elite (``remember``), breed the next children from it (``breed``)."""
        self.remember(feedback)
        self.breed()
        return {"programs/elite_best": self.elite.rewards[:, 0], "programs/elite_worst": self.elite.rewards[:, -1]}

    def remember(self, feedback: Feedback) -> None:
        """Offer the stepping members' programs to their elite; note whether it changed."""
        rewards = feedback.rewards
        if not all(self.stepping):  # a member that did not step wrote empty programs, not its own
            rewards = torch.where(self._mask(self.stepping)[:, None], rewards, EMPTY)
        features = {"features": feedback.features} if self.uses_features else {}
        self.elite.push(feedback.tokens, rewards, feedback.hashes, **features)
        score = torch.where(self.elite.valid, self.elite.rewards.double(), 0.0).sum(1)  # [S], never decreases
        changed = score > self.elite_score
        self.elite_score = torch.where(changed, score, self.elite_score)
        self.stale = torch.where(changed, 0, self.stale + 1)

    def breed(self) -> None:
        """The next generation's children: random variants of the elite."""
        self.children = mutate(self.elite, self.config.batch_size, self.config.max_edits, self.generators)

    def state_dict(self) -> dict:
        return {"elite": self.elite.state_dict(), "children": self.children.clone(),
                "elite_score": self.elite_score.clone(), "stale": self.stale.clone(), "stepping": list(self.stepping),
                "generators": generator_states(self.generators), "config": dataclasses.asdict(self.config)}

    def load_state_dict(self, state: dict) -> None:
        self.elite.load_state_dict(state["elite"])
        self.children = state["children"].to(self.device).clone()
        self.elite_score = state["elite_score"].to(self.device).clone()
        self.stale = state["stale"].to(self.device).clone()
        self.stepping = [bool(flag) for flag in state["stepping"]]
        load_generator_states(self.generators, state["generators"])
