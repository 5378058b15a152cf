"""Program batches for tests and benchmarks, drawn on a device from a seeded generator.

- ``uniform``: uniform random tokens, as an untrained policy writes them (no EOS).
- ``loop_heavy``: brackets three times as likely, so loops nest deeply and often.
- ``near``: random mutations of tasks' known solutions, as a trained policy writes them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from synthenv import tasks as task_registry
from synthenv.language import CLOSE, OPEN, VOCAB_SIZE, encode_batch

WORKLOADS = ("uniform", "loop_heavy", "near")


def uniform(num: int, length: int = 100, generator: torch.Generator | None = None,
            device: torch.device | str = "cpu") -> torch.Tensor:
    """``[num, length]`` int64 tokens drawn uniformly from the 8 commands.

    >>> uniform(2, 5, torch.Generator().manual_seed(0)).shape
    torch.Size([2, 5])
    """
    return torch.randint(1, VOCAB_SIZE, (num, length), generator=generator).to(device)


def loop_heavy(num: int, length: int = 100, generator: torch.Generator | None = None,
               device: torch.device | str = "cpu") -> torch.Tensor:
    """``[num, length]`` tokens where ``[`` and ``]`` are each 3x as likely as another command."""
    weights = torch.ones(VOCAB_SIZE)
    weights[0] = 0.0
    weights[OPEN] = weights[CLOSE] = 3.0
    draws = torch.multinomial(weights, num * length, replacement=True, generator=generator)
    return draws.view(num, length).to(device)


def solutions(names: Sequence[str] | None = None) -> list[str]:
    """Known BF solutions of the given tasks (default: every registered task that has one)."""
    names = task_registry.names() if names is None else names
    found = [task_registry.get(n).solution for n in names]
    return [s for s in found if s]


def near(num: int, length: int = 100, generator: torch.Generator | None = None,
         device: torch.device | str = "cpu", task_names: Sequence[str] | None = None,
         max_edits: int = 3) -> torch.Tensor:
    """Known solutions with 0..``max_edits`` random token substitutions, EOS-padded to ``length``.

    Substitutions keep each solution's length, so programs stay as long as real solutions.
    """
    bases = encode_batch(solutions(task_names), length)  # [S, L]
    lengths = (bases != 0).sum(1)  # [S]
    pick = torch.randint(0, bases.shape[0], (num,), generator=generator)
    programs = bases[pick].clone()  # [num, L]
    edits = torch.randint(0, max_edits + 1, (num,), generator=generator)
    for e in range(max_edits):
        where = (torch.rand(num, generator=generator) * lengths[pick]).long()  # [num]
        token = torch.randint(1, VOCAB_SIZE, (num,), generator=generator)
        apply = edits > e
        rows = torch.arange(num)
        programs[rows, where] = torch.where(apply, token, programs[rows, where])
    return programs.to(device)


def make(name: str, num: int, length: int = 100, seed: int = 0, device: torch.device | str = "cpu") -> torch.Tensor:
    """A workload by name (``uniform``, ``loop_heavy`` or ``near``)."""
    builders = {"uniform": uniform, "loop_heavy": loop_heavy, "near": near}
    if name not in builders:
        from synthenv.registry import unknown_name_message

        raise ValueError(unknown_name_message("workload", name, list(builders)))
    return builders[name](num, length, torch.Generator().manual_seed(seed), device)
