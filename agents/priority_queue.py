"""A max-priority queue of each member's best unique programs, on the device (PQT's top-K buffer).

PQT (PQT_SPEC §4) keeps the K best distinct programs found so far and trains the policy to
write them again. Here the queue holds ``[S, K, L]`` tokens and ``[S, K]`` rewards for S
members; pushing a batch and drawing from the queue are tensor operations with no host sync.
"""

from __future__ import annotations

import copy
import math

import torch

from .variation import member_uniform, row_hashes, top_unique

EMPTY = float("-inf")
"""Reward of an empty slot."""


class ProgramQueue:
    """Top-K unique programs per member, kept sorted by reward (best first).

    Programs are compared as token rows, so push canonical programs (EOS-padded after the
    end, as the samplers write them). Among equal rewards the program already queued, then
    the earlier one in the batch, wins.

    >>> queue = ProgramQueue(num_members=1, capacity=2, max_len=3, device=torch.device("cpu"))
    >>> queue.push(torch.tensor([[[1, 2, 0], [1, 2, 0], [3, 0, 0]]]), torch.tensor([[0.5, 0.5, 0.1]]))
    >>> queue.tokens.tolist(), queue.rewards.tolist()
    ([[[1, 2, 0], [3, 0, 0]]], [[0.5, 0.10000000149011612]])
    """

    def __init__(self, num_members: int, capacity: int, max_len: int, device: torch.device,
                 extras: dict[str, tuple[tuple[int, ...], torch.dtype]] | None = None):
        """``extras``: optional data kept with each program, name -> (shape per program, dtype);
        ``push`` then takes them as keyword arguments of shape ``[S, B, *shape]`` (zeros for one not given)."""
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"queue capacity must be a positive int, got {capacity!r}")
        self.capacity = capacity
        self.tokens = torch.zeros((num_members, capacity, max_len), dtype=torch.int64, device=device)  # [S, K, L]
        self.rewards = torch.full((num_members, capacity), EMPTY, dtype=torch.float32, device=device)  # [S, K]
        self.hashes = row_hashes(self.tokens)  # [S, K], kept with the programs so a push hashes only the batch
        self.extras = {name: torch.zeros((num_members, capacity, *shape), dtype=dtype, device=device)
                       for name, (shape, dtype) in (extras or {}).items()}  # each [S, K, ...]

    @property
    def valid(self) -> torch.Tensor:
        """``[S, K]`` bool: slots that hold a program."""
        return self.rewards > EMPTY

    def push(self, tokens: torch.Tensor, rewards: torch.Tensor, hashes: torch.Tensor | None = None,
             **extras: torch.Tensor) -> None:
        """Offer ``tokens [S, B, L]`` with ``rewards [S, B]`` (and their ``extras``); keep the K best
        unique per member.

        De-duplication compares 64-bit row hashes (``variation.top_unique``; pass the
        batch's ``hashes [S, B]`` if already computed): O((K + B) log(K + B)) per member, memory
        linear in the batch, and only the K kept rows are copied, so batches of thousands are cheap.
        """
        hashes = row_hashes(tokens) if hashes is None else hashes
        scores = torch.cat([self.rewards, rewards.float()], dim=1)  # [S, M], M = K + B
        all_hashes = torch.cat([self.hashes, hashes], dim=1)
        # the earliest valid copy of each program, best first, the queued one first among equals
        order, self.rewards, self.hashes = top_unique(scores, all_hashes, self.capacity)  # [S, K]
        self.tokens = take_rows(self.tokens, tokens, order)
        for name, kept in self.extras.items():  # an extra not offered is zeros (programs shared by other members)
            offered = extras[name] if name in extras else kept.new_zeros((*tokens.shape[:2], *kept.shape[2:]))
            self.extras[name] = take_rows(kept, offered, order)

    def sample(self, count: int, generators: list[torch.Generator]) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``count`` programs per member uniformly from its filled slots (with replacement).

        Returns:
            ``(tokens [S, count, L], valid [S, count])``; ``valid`` is False where the queue
            was empty (those rows hold zeros and must be masked out of any loss).
        """
        index = self.sample_slots(count, generators)
        return self.gather(self.tokens, index), self.valid.gather(1, index)

    def sample_slots(self, count: int, generators: list[torch.Generator]) -> torch.Tensor:
        """``[S, count]`` int64 slots drawn uniformly from each member's filled ones (with
        replacement; slot 0, an empty one, where the queue is empty)."""
        filled = self.valid.sum(1, keepdim=True)  # [S, 1]: the filled slots are a prefix (best first)
        return self._slots(member_uniform(generators, (count,), self.rewards.device), filled)

    def member_slots(self, member: int, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
        """``shape`` int64 slots of member ``member`` alone, drawn as ``sample_slots`` draws them, from ``generator``."""
        uniform = torch.rand(shape, generator=generator, device=self.rewards.device)
        return self._slots(uniform, self.valid[member].sum())

    def _slots(self, uniform: torch.Tensor, filled: torch.Tensor) -> torch.Tensor:
        """Uniform numbers in [0, 1) as slots among the ``filled`` first ones (slot 0 where none is)."""
        return (uniform * filled).long().clamp(max=self.capacity - 1)

    @staticmethod
    def gather(values: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """Rows ``slots [S, count]`` of ``values [S, K, ...]`` (the tokens, rewards or an extra)."""
        return gather_rows(values, slots)

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
                             f"{tuple(self.tokens.shape)} (members, capacity, max_len); use the same settings")
        self.tokens = state["tokens"].to(self.tokens.device).clone()
        self.rewards = state["rewards"].to(self.rewards.device).clone()
        self.hashes = row_hashes(self.tokens)
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
