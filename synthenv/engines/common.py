"""Pieces every engine shares: counted-loop iterations in closed form and result finalisation."""

from __future__ import annotations

import math

import torch

from synthenv.execution import Execution
from synthenv.ir import Program
from synthenv.language import Status
from synthenv.tasks.task import Task

_PHI = (1 + 5 ** 0.5) / 2


def loop_solver(deltas: torch.Tensor, base: int) -> torch.Tensor:
    """Per counted-loop delta, what ``loop_iterations`` needs: ``[..., 3]`` int64 ``(g, m, inv)``.

    A loop adding ``d`` per iteration to an entry cell holding ``v`` ends after the least
    t >= 1 with t d == -v (mod base). With g = gcd(d, base) and m = base / g, a solution exists
    iff g divides base - v, and then t = ((base - v) / g) * inv mod m (0 read as m), inv being
    the inverse of d / g modulo m: the extended Euclidean algorithm, as the VM's
    ``syn_iterations`` does per loop, here for a whole tensor of deltas at once with a fixed
    number of masked steps (enough for any pair below ``base``; no host sync). O(1) memory
    per delta, so any base up to ``tasks.MAX_BASE`` works. ``g`` is 0 where d = 0 mod base
    (the loop never ends).
    """
    d = deltas.long().remainder(base)  # [...] in [0, base)
    r0, r1 = torch.full_like(d, base), d  # invariant: r_i == s_i * d (mod base)
    s0, s1 = torch.zeros_like(d), torch.ones_like(d)
    for _ in range(int(math.log(max(base, 2)) / math.log(_PHI)) + 3):  # Lamé: Euclid's step count bound
        active = r1 != 0
        q = torch.where(active, r0 // torch.where(active, r1, 1), 0)
        r0, r1 = torch.where(active, r1, r0), torch.where(active, r0 - q * r1, r1)
        s0, s1 = torch.where(active, s1, s0), torch.where(active, s0 - q * s1, s1)
    g = torch.where(d == 0, 0, r0)  # s0 * d == g (mod base)
    m = base // g.clamp(min=1)
    inv = s0.remainder(m)
    return torch.stack([g, m, inv], dim=-1)


def loop_iterations(solver: torch.Tensor, values: torch.Tensor, base: int) -> torch.Tensor:
    """Least t >= 1 with (v + t d) mod base == 0 per element, or 0 (never: a proven hang).

    ``solver [..., 3]`` from ``loop_solver`` for the deltas, ``values [...]`` the entry cells
    (in (0, base); a loop entered on 0 does not run and its result is never read).
    """
    g, m, inv = solver.unbind(-1)
    need = base - values.long()  # t d == need (mod base)
    solvable = (g > 0) & (need.remainder(g.clamp(min=1)) == 0)
    t = (need // g.clamp(min=1)).remainder(m) * inv % m  # < m**2 <= base**2: exact in int64
    return torch.where(solvable, torch.where(t == 0, m, t), 0)


def check_num_outputs(num_outputs: int | None, task: Task) -> int:
    """O: ``num_outputs`` if given (a positive int), else the task's longest expected output."""
    if num_outputs is None:
        return max(1, task.max_output_length)
    if not isinstance(num_outputs, int) or isinstance(num_outputs, bool) or num_outputs < 1:
        raise ValueError(f"num_outputs must be a positive int or None, got {num_outputs!r}")
    return num_outputs


def finalize(execution: Execution, program: Program, task: Task, early_abort: bool) -> Execution:
    """Apply strict syntax, then the execution contract (``Execution.canonical``).

    Under strict syntax an unbalanced program fails every case with ``SYNTAX_ERROR`` (steps 0):
    engines run such programs anyway (it keeps them branch-free) and the result is replaced.
    """
    if task.strict_syntax:
        bad = ~program.balanced[:, None]  # [N, 1]
        execution = Execution(
            execution.outputs,
            execution.output_lengths,
            torch.where(bad, int(Status.SYNTAX_ERROR), execution.status),
            torch.where(bad, 0, execution.steps),
        )
    return execution.canonical(early_abort)
