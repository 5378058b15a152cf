"""A max-priority queue of each member's best unique programs, on the device (PQT's top-K buffer).

PQT (PQT_SPEC §4) keeps the K best distinct programs found so far and trains the policy to
write them again. Here the queue holds ``[S, K, L]`` tokens and ``[S, K]`` rewards for S
members; pushing a batch and drawing from the queue are tensor operations with no host sync.
"""

from __future__ import annotations

import torch

from .variation import first_occurrences

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
        ``push`` then takes them as keyword arguments of shape ``[S, B, *shape]``."""
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"queue capacity must be a positive int, got {capacity!r}")
        self.capacity = capacity
        self.tokens = torch.zeros((num_members, capacity, max_len), dtype=torch.int64, device=device)  # [S, K, L]
        self.rewards = torch.full((num_members, capacity), EMPTY, dtype=torch.float32, device=device)  # [S, K]
        self.extras = {name: torch.zeros((num_members, capacity, *shape), dtype=dtype, device=device)
                       for name, (shape, dtype) in (extras or {}).items()}  # each [S, K, ...]

    @property
    def valid(self) -> torch.Tensor:
        """``[S, K]`` bool: slots that hold a program."""
        return self.rewards > EMPTY

    def push(self, tokens: torch.Tensor, rewards: torch.Tensor, **extras: torch.Tensor) -> None:
        """Offer ``tokens [S, B, L]`` with ``rewards [S, B]`` (and their ``extras``); keep the K best
        unique per member.

        De-duplication hashes rows and sorts (``variation.first_occurrences``): O((K + B) log(K + B))
        per member and memory linear in the batch, so batches of thousands are cheap.
        """
        candidates = torch.cat([self.tokens, tokens], dim=1)  # [S, M, L], M = K + B
        scores = torch.cat([self.rewards, rewards.float()], dim=1)  # [S, M]
        first = first_occurrences(candidates, scores > EMPTY)  # [S, M] the earliest valid copy of each program
        scores = torch.where(first, scores, EMPTY)
        order = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, : self.capacity]  # [S, K]
        self.rewards = scores.gather(1, order)
        self.tokens = candidates.gather(1, order[..., None].expand(-1, -1, candidates.shape[2]))
        for name, kept in self.extras.items():
            merged = torch.cat([kept, extras[name]], dim=1)  # [S, M, ...]
            index = order.view(*order.shape, *([1] * (merged.dim() - 2))).expand(-1, -1, *merged.shape[2:])
            self.extras[name] = merged.gather(1, index)

    def sample(self, count: int, generators: list[torch.Generator]) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``count`` programs per member uniformly from its filled slots (with replacement).

        Returns:
            ``(tokens [S, count, L], valid [S, count])``; ``valid`` is False where the queue
            was empty (those rows hold zeros and must be masked out of any loss).
        """
        s, k = self.rewards.shape
        device = self.rewards.device
        uniform = torch.stack([torch.rand((count, k), generator=g, device=device) for g in generators])
        keys = torch.where(self.valid[:, None, :], uniform, -1.0)  # [S, count, K]
        index = keys.argmax(-1)  # [S, count]: uniform among valid slots
        tokens = self.tokens.gather(1, index[..., None].expand(-1, -1, self.tokens.shape[2]))
        return tokens, self.valid.gather(1, index)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"tokens": self.tokens.clone(), "rewards": self.rewards.clone(),
                **{f"extra.{name}": value.clone() for name, value in self.extras.items()}}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        if state["tokens"].shape != self.tokens.shape:
            raise ValueError(f"checkpoint queue has shape {tuple(state['tokens'].shape)}, this run needs "
                             f"{tuple(self.tokens.shape)} (members, capacity, max_len); use the same settings")
        self.tokens = state["tokens"].to(self.tokens.device).clone()
        self.rewards = state["rewards"].to(self.rewards.device).clone()
        for name in self.extras:
            self.extras[name] = state[f"extra.{name}"].to(self.tokens.device).clone()
