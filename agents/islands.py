"""Island populations for the evolutionary inner loop of the default agent, batched over members.

Each of S members keeps G islands of M programs (with their rewards and feedback features).
Islands evolve independently: every generation each island breeds C children from its own
programs, and keeps the M best unique programs among its old ones and its children
(``merge``). An island whose best reward has not improved for ``patience`` generations is
restarted: its programs are replaced by fresh ones and forgotten (reward -inf), so its next
children are variants of fresh programs and they refill it. Restarts turn one long search
that gets stuck into many short independent ones, which is what the measured runs need:
solve times are heavy-tailed (BENCHMARKS.md).

Everything is fixed-shape tensor code: no Python loop over islands or programs, no host sync.
"""

from __future__ import annotations

import copy

import torch

from .priority_queue import gather_rows, take_rows
from .variation import member_uniform, top_unique

EMPTY = float("-inf")
"""Reward of a program that has not been run (a fresh slot of a restarted island)."""

_FIELDS = ("tokens", "rewards", "features", "hashes", "best", "stale", "restarts")
"""The per-member state, each tensor with the member first."""


class Islands:
    """G islands of M programs for each of S members.

    Attributes:
        tokens: ``[S, G, M, L]`` int64 programs, best first within each island.
        rewards: ``[S, G, M]`` float32 (``EMPTY`` for programs not run yet).
        features: ``[S, G, M, F]`` float32 feedback features (``agents.feedback``).
        best: ``[S, G]`` best reward each island reached since its last restart.
        stale: ``[S, G]`` int64 generations since the island's best last improved.
        restarts: ``[S]`` int64 restarts so far.

    >>> gens = [torch.Generator().manual_seed(0)]
    >>> islands = Islands(torch.zeros((1, 2, 3, 5), dtype=torch.int64), num_features=4)
    >>> tokens, features, rewards = islands.sample_parents(gens, 6)
    >>> tuple(tokens.shape), tuple(features.shape)
    ((1, 2, 6, 5), (1, 2, 6, 4))
    """

    def __init__(self, tokens: torch.Tensor, num_features: int):
        s, g, m, _ = tokens.shape
        device = tokens.device
        self.tokens = tokens
        self.rewards = torch.full((s, g, m), EMPTY, dtype=torch.float32, device=device)
        self.features = torch.zeros((s, g, m, num_features), dtype=torch.float32, device=device)
        self.hashes = torch.zeros((s, g, m), dtype=torch.int64, device=device)  # of programs that have run
        self.best = torch.full((s, g), EMPTY, dtype=torch.float32, device=device)
        self.stale = torch.zeros((s, g), dtype=torch.int64, device=device)
        self.restarts = torch.zeros(s, dtype=torch.int64, device=device)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return tuple(self.tokens.shape)

    def sample_parents(self, generators: list[torch.Generator], count: int):
        """``count`` parents per island, uniform over its M programs (with replacement).

        Returns:
            ``(tokens [S, G, C, L], features [S, G, C, F], rewards [S, G, C])``.
        """
        s, g, m, length = self.shape
        index = (member_uniform(generators, (g, count), self.tokens.device) * m).long()  # [S, G, C]
        pick = lambda x: gather_rows(x.reshape(s * g, m, *x.shape[3:]), index.view(s * g, count)).view(  # noqa: E731
            s, g, count, *x.shape[3:])  # islands as groups
        return pick(self.tokens), pick(self.features), self.rewards.gather(2, index)

    def merge(self, children: torch.Tensor, rewards: torch.Tensor, features: torch.Tensor, hashes: torch.Tensor,
              fresh: torch.Tensor, patience: int, tie_keys: torch.Tensor | None = None) -> torch.Tensor:
        """Keep each island's M best unique programs among its own and its ``children [S, G, C, L]``
        (``rewards [S, G, C]``, ``features [S, G, C, F]``, ``hashes [S, G, C]`` from
        ``variation.row_hashes``); restart islands stale for ``patience`` generations with
        ``fresh [S, G, M, L]`` programs.

        Equal rewards keep the island's own programs first, unless ``tie_keys [S, G, M + C]``
        (uniform numbers) break ties at random: then a child as good as its parents can take a
        place (neutral drift, which lets an island cross a plateau of equal rewards).

        Returns ``[S, G]`` bool, the islands that were restarted.
        """
        s, g, m, length = self.shape
        c = children.shape[2]
        flat = lambda x, own: x.reshape(s * g, own, *x.shape[3:])  # noqa: E731  islands as groups
        scores = torch.cat([flat(self.rewards, m), flat(rewards.float(), c)], dim=1)  # [S*G, M+C]
        all_hashes = torch.cat([flat(self.hashes, m), flat(hashes, c)], dim=1)
        # without tie keys a stable sort: the island's own program first, then the earlier child;
        # with them, a shuffle sorted stably: equal rewards end up in random order
        shuffle = tie_keys.reshape(s * g, m + c).argsort(dim=1) if tie_keys is not None else None
        order, rewards_kept, hashes_kept = top_unique(scores, all_hashes, m, shuffle)  # [S*G, M]
        self.rewards = rewards_kept.view(s, g, m)
        self.hashes = hashes_kept.view(s, g, m)
        self.tokens = take_rows(flat(self.tokens, m), flat(children, c), order).view(s, g, m, length)
        self.features = take_rows(flat(self.features, m), flat(features, c), order).view(s, g, m, -1)
        top = self.rewards[..., 0]  # [S, G]
        improved = top > self.best
        self.best = torch.where(improved, top, self.best)
        self.stale = torch.where(improved, 0, self.stale + 1)
        restart = self.stale >= patience  # [S, G]
        self.tokens = torch.where(restart[..., None, None], fresh, self.tokens)
        self.rewards = torch.where(restart[..., None], EMPTY, self.rewards)
        self.features = torch.where(restart[..., None, None], 0.0, self.features)
        self.best = torch.where(restart, EMPTY, self.best)
        self.stale = torch.where(restart, 0, self.stale)
        self.restarts = self.restarts + restart.sum(1)
        return restart

    def start_member(self, member: int, tokens: torch.Tensor, rewards: torch.Tensor, features: torch.Tensor,
                     hashes: torch.Tensor) -> None:
        """Start member ``member``'s islands anew from ``tokens [G, M, L]`` with their ``rewards [G, M]``
        (``EMPTY`` for programs not run), ``features [G, M, F]`` and ``hashes [G, M]``: no best yet, no
        stall, no restarts. In place, with no tensor made from Python data (no host-to-device copy)."""
        for name, value in (("tokens", tokens), ("rewards", rewards), ("features", features), ("hashes", hashes)):
            getattr(self, name)[member] = value
        self.best[member].fill_(EMPTY)
        self.stale[member].fill_(0)
        self.restarts[member].fill_(0)

    def members(self, index: torch.Tensor) -> Islands:
        """A copy of the islands of members ``index [S']`` (write it back with ``put_members``)."""
        part = copy.copy(self)
        for name in _FIELDS:
            setattr(part, name, getattr(self, name).index_select(0, index))
        return part

    def put_members(self, index: torch.Tensor, part: Islands) -> None:
        """Make ``part`` (``members(index)``, evolved since) members ``index``'s islands."""
        for name in _FIELDS:
            setattr(self, name, getattr(self, name).index_copy(0, index, getattr(part, name)))

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, name).clone() for name in _FIELDS}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        if tuple(state["tokens"].shape) != self.shape:
            raise ValueError(f"checkpoint islands have shape {tuple(state['tokens'].shape)}, this run needs "
                             f"{self.shape} (members, islands, island size, max_len); use the same settings")
        device = self.tokens.device
        for name, value in state.items():
            setattr(self, name, value.to(device).clone())
