"""Island populations, batched over members: the default agent's search after its elitist phase.

Each of S members keeps G islands of M programs (with their rewards and feedback features), a
``ProgramQueue`` with the island as its group dimension. Islands evolve independently: every
generation each island breeds C children from its own programs and keeps the M best unique
programs among its old ones and its children (``merge``). An island whose best reward has not
improved for ``patience`` generations is restarted: its programs are replaced by fresh ones and
forgotten (reward ``EMPTY``), so its next children are variants of fresh programs and they refill
it. Restarts turn one long search that gets stuck into many short independent ones, which is what
heavy-tailed solve times call for (BENCHMARKS.md, the ablation).

Everything is fixed-shape tensor code: no Python loop over islands or programs, no host sync.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from .queue import EMPTY, ProgramQueue
from .variation import random_programs

_COUNTERS = ("best", "stale", "restarts")
"""The per-island bookkeeping beside the programs, each tensor with the member first."""


class Islands:
    """G islands of M programs for each of S members.

    Attributes:
        programs: the ``ProgramQueue`` of ``[S, G, M, L]`` programs, best first within each island, with
            their ``rewards [S, G, M]`` and ``features [S, G, M, F]`` (``agents.run.feedback``).
        best: ``[S, G]`` best reward each island reached since its last restart.
        stale: ``[S, G]`` int64 generations since the island's best last improved.
        restarts: ``[S]`` int64 restarts so far.

    >>> gens = [torch.Generator().manual_seed(0)]
    >>> islands = Islands(gens, num_islands=2, island_size=3, max_len=5, initial_length=3, num_features=4)
    >>> tokens, features, rewards = islands.sample_parents(gens, 6)
    >>> tuple(tokens.shape), tuple(features.shape)
    ((1, 2, 6, 5), (1, 2, 6, 4))
    """

    def __init__(self, generators: list[torch.Generator], num_islands: int, island_size: int, max_len: int,
                 initial_length: int, num_features: int, fresh: Callable = random_programs):
        """The islands start with fresh programs drawn from ``generators`` (one per member) by ``fresh`` (with
        ``random_programs``' arguments: uniform random programs, or a prior's, ``program_prior.PriorPrograms``)."""
        self.num_islands, self.island_size, self.fresh_programs = num_islands, island_size, fresh
        self.max_len, self.initial_length = max_len, initial_length
        device = generators[0].device
        s = len(generators)
        self.programs = ProgramQueue(s, island_size, max_len, device, groups=(num_islands,),
                                     extras={"features": ((num_features,), torch.float32)})
        self.programs.tokens = self.fresh(generators)
        self.programs.hashes.zero_()  # no program has run yet: no hash is read
        self.best = torch.full((s, num_islands), EMPTY, dtype=torch.float32, device=device)
        self.stale = torch.zeros((s, num_islands), dtype=torch.int64, device=device)
        self.restarts = torch.zeros(s, dtype=torch.int64, device=device)

    def fresh(self, generators: list[torch.Generator]) -> torch.Tensor:
        """``[S, G, M, L]`` fresh programs of 1 .. ``initial_length`` commands, one member per generator."""
        return self.fresh_programs(generators, (self.num_islands, self.island_size), self.max_len,
                                   self.initial_length, generators[0].device)

    def sample_parents(self, generators: list[torch.Generator], count: int):
        """``count`` parents per island, uniform over its M programs (with replacement).

        Returns:
            ``(tokens [S, G, C, L], features [S, G, C, F], rewards [S, G, C])``.
        """
        programs = self.programs
        slots = programs.sample_slots(count, generators, filled_only=False)  # [S, G, C]
        return (programs.gather(programs.tokens, slots), programs.gather(programs.extras["features"], slots),
                programs.gather(programs.rewards, slots))

    def merge(self, children: torch.Tensor, rewards: torch.Tensor, features: torch.Tensor, hashes: torch.Tensor,
              fresh: torch.Tensor, patience: int, tie_keys: torch.Tensor | None = None) -> torch.Tensor:
        """Keep each island's M best unique programs among its own and its ``children [S, G, C, L]``
        (``rewards [S, G, C]``, ``features [S, G, C, F]``, ``hashes [S, G, C]`` from
        ``rows.row_hashes``); restart islands stale for ``patience`` generations with
        ``fresh [S, G, M, L]`` programs.

        Equal rewards keep the island's own programs first, unless ``tie_keys [S, G, M + C]``
        (uniform numbers) break ties at random: then a child as good as its parents can take a
        place (neutral drift, which lets an island cross a plateau of equal rewards).

        Returns ``[S, G]`` bool, the islands that were restarted.
        """
        self.programs.push(children, rewards, hashes, tie_keys, features=features)
        top = self.programs.rewards[..., 0]  # [S, G]
        improved = top > self.best
        self.best = torch.where(improved, top, self.best)
        self.stale = torch.where(improved, 0, self.stale + 1)
        restart = self.stale >= patience  # [S, G]
        self.programs.reset(restart, fresh)
        self.best = torch.where(restart, EMPTY, self.best)
        self.stale = torch.where(restart, 0, self.stale)
        self.restarts = self.restarts + restart.sum(1)
        return restart

    def start_member(self, member: int, tokens: torch.Tensor, rewards: torch.Tensor, features: torch.Tensor,
                     hashes: torch.Tensor) -> None:
        """Start member ``member``'s islands anew from ``tokens [G, M, L]`` with their ``rewards [G, M]``
        (``EMPTY`` for programs not run), ``features [G, M, F]`` and ``hashes [G, M]``: no best yet, no
        stall, no restarts. In place, with no tensor made from Python data (no host-to-device copy)."""
        self.programs.set_member(member, tokens, rewards, hashes, features=features)
        self.best[member].fill_(EMPTY)
        self.stale[member].fill_(0)
        self.restarts[member].fill_(0)

    def members(self, index: torch.Tensor) -> Islands:
        """A copy of the islands of members ``index [S']`` (write it back with ``put_members``)."""
        part = copy.copy(self)
        part.programs = self.programs.members(index)
        for name in _COUNTERS:
            setattr(part, name, getattr(self, name).index_select(0, index))
        return part

    def put_members(self, index: torch.Tensor, part: Islands) -> None:
        """Make ``part`` (``members(index)``, evolved since) members ``index``'s islands."""
        self.programs.put_members(index, part.programs)
        for name in _COUNTERS:
            setattr(self, name, getattr(self, name).index_copy(0, index, getattr(part, name)))

    def state_dict(self) -> dict:
        return {"programs": self.programs.state_dict(), **{name: getattr(self, name).clone() for name in _COUNTERS}}

    def load_state_dict(self, state: dict) -> None:
        self.programs.load_state_dict(state["programs"])
        device = self.best.device
        for name in _COUNTERS:
            setattr(self, name, state[name].to(device).clone())
