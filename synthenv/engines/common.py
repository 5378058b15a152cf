"""Pieces every engine shares: counted-loop iteration tables and result finalisation."""

from __future__ import annotations

import functools

import numpy as np
import torch

from synthenv.execution import Execution
from synthenv.ir import Program
from synthenv.language import Status
from synthenv.tasks import Task


@functools.lru_cache(maxsize=64)
def _iterations_table(base: int) -> np.ndarray:
    delta = np.arange(base, dtype=np.int64)[:, None]
    value = np.arange(base, dtype=np.int64)[None, :]
    table = np.zeros((base, base), dtype=np.int64)
    for t in range(base, 0, -1):  # descending, so the least t wins
        table[(value + t * delta) % base == 0] = t
    table[:, 0] = 0  # a loop entered on 0 does not run; the entry is never read
    return table


def loop_iterations(base: int, device: torch.device) -> torch.Tensor:
    """``[base, base]`` int64: ``[d, v]`` = least t >= 1 with (v + t d) mod base == 0, or 0.

    0 means a counted loop adding ``d`` per iteration to an entry cell holding ``v`` never
    ends (synthenv.ir, LOOP). Built once per base on the host.
    """
    return torch.from_numpy(_iterations_table(base)).to(device)


def finalize(execution: Execution, program: Program, task: Task) -> Execution:
    """Apply strict syntax: unbalanced programs fail every case with ``SYNTAX_ERROR``.

    Engines run such programs anyway (it keeps them branch-free) and the result is replaced.
    """
    if not task.strict_syntax:
        return execution
    bad = ~program.balanced[:, None]  # [N, 1]
    return Execution(
        torch.where(bad[..., None], 0, execution.outputs),
        torch.where(bad, 0, execution.output_lengths),
        torch.where(bad, torch.tensor(int(Status.SYNTAX_ERROR), dtype=torch.int8, device=bad.device),
                    execution.status),
        torch.where(bad, 0, execution.steps),
    )
