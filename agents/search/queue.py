"""The best unique programs by reward, de-duplicated by hash: the one container of every agent.

PQT keeps the K best distinct programs found so far and trains its policy to write them again
(its top-K queue: docs/semantics.md cites the paper). The same container serves every agent here:
the PQT agents' queue, the mutation search's elite, the default agent's crossover mates and its
queue of improving edits, and, with one more leading dimension, its islands. A ``ProgramQueue``
holds ``[S, *G, K, L]`` tokens and ``[S, *G, K]`` rewards for S members (and optional groups G,
such as islands); pushing a batch and drawing from it are tensor operations with no host sync.
"""

from __future__ import annotations

import copy
import math

import torch

from .rows import row_hashes, top_unique
from .variation import member_uniform

EMPTY = float("-inf")
"""Reward of an empty slot (a program not run yet, or none at all)."""


class ProgramQueue:
    """Top-K unique programs per member (and group), kept sorted by reward, best first.

    Programs are compared by their 64-bit row hashes (``rows.row_hashes``), so push canonical
    programs (EOS-padded after the end, as every sampler writes them). Among equal rewards the
    program already queued, then the earlier one in the batch, wins, unless the push breaks ties
    at random (``tie_keys``).

    Attributes:
        tokens: ``[S, *G, K, L]`` int64 programs, best first.
        rewards: ``[S, *G, K]`` float32 (``EMPTY`` for a slot without a program).
        hashes: ``[S, *G, K]`` int64 row hashes of the tokens.
        extras: name -> ``[S, *G, K, ...]`` data kept with each program.

    >>> queue = ProgramQueue(num_members=1, capacity=2, max_len=3, device=torch.device("cpu"))
    >>> queue.push(torch.tensor([[[1, 2, 0], [1, 2, 0], [3, 0, 0]]]), torch.tensor([[0.5, 0.5, 0.1]]))
    >>> queue.tokens.tolist(), queue.rewards.tolist()
    ([[[1, 2, 0], [3, 0, 0]]], [[0.5, 0.10000000149011612]])
    """

    def __init__(self, num_members: int, capacity: int, max_len: int, device: torch.device,
                 extras: dict[str, tuple[tuple[int, ...], torch.dtype]] | None = None, groups: tuple[int, ...] = ()):
        """``extras``: optional data kept with each program, name -> (shape per program, dtype); ``push``
        then takes them as keyword arguments (zeros for one not given). ``groups``: G, more leading
        dimensions after the member's (``(islands,)``), each group a queue of its own."""
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"queue capacity must be a positive int, got {capacity!r}")
        self.capacity = capacity
        shape = (num_members, *groups, capacity)
        self.tokens = torch.zeros((*shape, max_len), dtype=torch.int64, device=device)
        self.rewards = torch.full(shape, EMPTY, dtype=torch.float32, device=device)
        self.hashes = row_hashes(self.tokens)  # kept with the programs, so a push hashes only the batch
        self.extras = {name: torch.zeros((*shape, *size), dtype=dtype, device=device)
                       for name, (size, dtype) in (extras or {}).items()}

    @property
    def valid(self) -> torch.Tensor:
        """``[S, *G, K]`` bool: slots that hold a program."""
        return self.rewards > EMPTY

    def push(self, tokens: torch.Tensor, rewards: torch.Tensor, hashes: torch.Tensor | None = None,
             tie_keys: torch.Tensor | None = None, **extras: torch.Tensor) -> None:
        """Offer ``tokens [S, *G, B, L]`` with ``rewards [S, *G, B]`` (and their ``extras``); keep the K best
        unique of each queue. A reward of ``EMPTY`` offers nothing (a row of them leaves its queue as it is).

        ``hashes [S, *G, B]``: the batch's ``row_hashes`` if already computed. ``tie_keys [S, *G, K + B]``
        (uniform numbers) break ties between equal rewards at random instead of in favour of the queued
        program: then a newcomer as good as a queued program can take its place (neutral drift).
        De-duplication sorts hashes (``rows.top_unique``): O((K + B) log(K + B)) per queue, memory
        linear in the batch, and only the K kept rows are copied.
        """
        hashes = row_hashes(tokens) if hashes is None else hashes
        k, lead = self.capacity, self.rewards.shape[:-1]
        groups = math.prod(lead)
        flat = lambda x: x.reshape(groups, x.shape[len(lead)], *x.shape[len(lead) + 1:])  # noqa: E731 one row a queue
        scores = torch.cat([flat(self.rewards), flat(rewards.float())], dim=1)  # [S*G, K + B]
        all_hashes = torch.cat([flat(self.hashes), flat(hashes)], dim=1)
        # the earliest valid copy of each program, best first; with tie keys, equal rewards in random order
        shuffle = tie_keys.reshape(groups, -1).argsort(dim=1) if tie_keys is not None else None
        order, kept_rewards, kept_hashes = top_unique(scores, all_hashes, k, shuffle)  # [S*G, K]
        self.rewards, self.hashes = kept_rewards.view(*lead, k), kept_hashes.view(*lead, k)
        self.tokens = take_rows(flat(self.tokens), flat(tokens), order).view(self.tokens.shape)
        for name, kept in self.extras.items():  # an extra not offered is zeros (programs shared by other members)
            offered = extras[name] if name in extras else kept.new_zeros((*tokens.shape[:-1], *kept.shape[len(lead) + 1:]))
            self.extras[name] = take_rows(flat(kept), flat(offered), order).view(kept.shape)

    def sample(self, count: int, generators: list[torch.Generator]) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``count`` programs per queue uniformly from its filled slots (with replacement).

        Returns:
            ``(tokens [S, *G, count, L], valid [S, *G, count])``; ``valid`` is False where the queue
            was empty (those rows hold zeros and must be masked out of any loss).
        """
        slots = self.sample_slots(count, generators)
        return self.gather(self.tokens, slots), self.gather(self.valid, slots)

    def sample_slots(self, count: int, generators: list[torch.Generator], filled_only: bool = True) -> torch.Tensor:
        """``[S, *G, count]`` int64 slots drawn uniformly (with replacement) from each queue's filled ones
        (slot 0, an empty one, where a queue is empty), or from all K with ``filled_only=False``."""
        uniform = member_uniform(generators, (*self.rewards.shape[1:-1], count), self.rewards.device)
        filled = self.valid.sum(-1, keepdim=True) if filled_only else self.capacity  # the filled slots lead
        return self._slots(uniform, filled)

    def member_slots(self, member: int, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
        """``shape`` int64 slots of member ``member``'s (ungrouped) queue, drawn as ``sample_slots`` draws
        them, from ``generator``."""
        uniform = torch.rand(shape, generator=generator, device=self.rewards.device)
        return self._slots(uniform, self.valid[member].sum())

    def _slots(self, uniform: torch.Tensor, filled: torch.Tensor | int) -> torch.Tensor:
        """Uniform numbers in [0, 1) as slots among the ``filled`` first ones (slot 0 where none is)."""
        return (uniform * filled).long().clamp(max=self.capacity - 1)

    @staticmethod
    def gather(values: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """Rows ``slots [S, *G, count]`` of ``values [S, *G, K, ...]`` (the tokens, rewards or an extra)."""
        lead = slots.shape[:-1]
        groups = math.prod(lead)
        rows = gather_rows(values.reshape(groups, values.shape[len(lead)], *values.shape[len(lead) + 1:]),
                           slots.reshape(groups, -1))
        return rows.view(*slots.shape, *values.shape[len(lead) + 1:])

    def reset(self, where: torch.Tensor, tokens: torch.Tensor) -> None:
        """Empty the queues ``where [S, *G]`` and fill them with ``tokens [S, *G, K, L]``, not run yet
        (reward ``EMPTY``, extras zero): the fresh programs of a restart."""
        self.tokens = torch.where(where[..., None, None], tokens, self.tokens)
        self.rewards = torch.where(where[..., None], EMPTY, self.rewards)
        self.extras = {name: torch.where(where.view(*where.shape, *([1] * (value.dim() - where.dim()))), 0, value)
                       for name, value in self.extras.items()}

    def set_member(self, member: int, tokens: torch.Tensor, rewards: torch.Tensor, hashes: torch.Tensor,
                   **extras: torch.Tensor) -> None:
        """Make member ``member``'s queues ``tokens [*G, K, L]`` with their ``rewards``, ``hashes`` and
        ``extras``; in place, with no tensor made from Python data (no host-to-device copy)."""
        for name, value in (("tokens", tokens), ("rewards", rewards), ("hashes", hashes)):
            getattr(self, name)[member] = value
        for name, value in self.extras.items():
            value[member] = extras[name]

    def empty_member(self, member: int) -> None:
        """Empty every slot of member ``member`` (in place)."""
        self.rewards[member].fill_(EMPTY)

    def members(self, index: torch.Tensor) -> ProgramQueue:
        """A copy of the queues of members ``index [S']`` (write it back with ``put_members``)."""
        part = copy.copy(self)
        part.tokens, part.rewards, part.hashes = (x.index_select(0, index) for x in (self.tokens, self.rewards,
                                                                                    self.hashes))
        part.extras = {name: value.index_select(0, index) for name, value in self.extras.items()}
        return part

    def put_members(self, index: torch.Tensor, part: ProgramQueue) -> None:
        """Make ``part`` (``members(index)``, pushed to since) members ``index``'s queues."""
        self.tokens, self.rewards, self.hashes = (mine.index_copy(0, index, theirs) for mine, theirs in (
            (self.tokens, part.tokens), (self.rewards, part.rewards), (self.hashes, part.hashes)))
        self.extras = {name: value.index_copy(0, index, part.extras[name]) for name, value in self.extras.items()}

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"tokens": self.tokens.clone(), "rewards": self.rewards.clone(),
                **{f"extra.{name}": value.clone() for name, value in self.extras.items()}}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        if state["tokens"].shape != self.tokens.shape:
            raise ValueError(f"checkpoint queue has shape {tuple(state['tokens'].shape)}, this run needs "
                             f"{tuple(self.tokens.shape)} (members, [groups,] capacity, max_len); use the same "
                             "settings")
        self.tokens = state["tokens"].to(self.tokens.device).clone()
        self.rewards = state["rewards"].to(self.rewards.device).clone()
        self.hashes = row_hashes(self.tokens)  # an empty slot's hash is never read
        for name in self.extras:
            self.extras[name] = state[f"extra.{name}"].to(self.tokens.device).clone()


def gather_rows(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows ``index [G, n]`` of each group of ``values [G, K, ...]``: ``[G, n, ...]``.

    Whole rows are copied by one ``index_select`` (no index per element, as ``gather`` needs)."""
    g, k = values.shape[:2]
    rows = (index + k * torch.arange(g, device=index.device)[:, None]).reshape(-1)
    flat = values.reshape(g * k, math.prod(values.shape[2:]))
    return flat.index_select(0, rows).view(*index.shape, *values.shape[2:])


def take_rows(kept: torch.Tensor, offered: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """Rows ``order [S, K]`` of ``cat([kept [S, K, ...], offered [S, B, ...]], 1)``, without the concatenation."""
    k = kept.shape[1]
    from_kept = gather_rows(kept, order.clamp(max=k - 1))
    from_offered = gather_rows(offered, (order - k).clamp(min=0))
    return torch.where((order < k).view(*order.shape, *([1] * (kept.dim() - 2))), from_kept, from_offered)
