"""Program IR: the fixed-shape artifact between compilers and engines.

A batch of N programs compiles to one int32 tensor ``code [N, P, 5]``: P op slots per
program, each ``(op, arg, arg2, cost, target)``. Every engine interprets it with the
semantics below, which reproduce PQT's raw-step semantics exactly (docs/semantics.md §1): each op
charges the raw BF steps it stands for, and the run fails as soon as the running total
reaches ``max_steps``. Only ok runs expose their final outputs (see ``Execution``).

A lane's registers: ``pc``, ``ptr`` (cell pointer), ``steps``, ``next_input`` and, for
counted loops, ``mult`` (0 = normal execution, t > 0 = "walking" a loop body t times).

=====  ========================================================================================
op     semantics (``v`` = cell[ptr]; cells stay in [0, base))
=====  ========================================================================================
HALT   the program ends (ok). Every slot after the last op holds HALT.
ADD    cell[ptr] = (v + arg) mod base; cost = run length. In walk mode instead
       cell[ptr + arg2] += mult * arg (mod base) at no cost (arg2 = offset from the loop entry).
MOVE   ptr = max(ptr + arg, arg2): a folded run of ``<``/``>`` with ``<`` clamping at 0
       (arg = net move, arg2 = floor); cost = run length. No effect in walk mode.
OUT    append v to the output ``arg`` times; cost = run length.
IN     read ``arg`` inputs, keep the last one (0 once input is exhausted); cost = run length.
JZ     a matched ``[``: cost 1; if v == 0 jump to ``target`` (past the matching ``]``).
JNZ    a matched ``]``: cost 1; if v != 0 jump to ``target`` (just after the matching ``[``).
       In walk mode: leave walk mode, continue at the next op, no cost.
       For both, ``arg`` = 1 marks an innermost loop (no bracket in its body): an engine may
       prove such a loop hangs when one iteration leaves pointer, tape and remaining input
       exactly as they were (the next iteration then repeats forever).
NOP    a run of unmatched brackets (PQT: one-step no-ops); cost = run length.
LOOP   the ``[`` of a *counted loop*: a body of ADD/MOVE ops only, net pointer move 0, so each
       iteration adds ``arg`` to the entry cell (and fixed amounts to fixed neighbours).
       ``cost`` = raw steps per iteration (body + ``]``), ``arg2`` = the lowest ``ptr`` at
       which the body never clamps, ``target`` = past the ``]``.
       If v == 0: cost 1, jump to target. If ptr < arg2: cost 1, run the body normally.
       Otherwise let t = the least t >= 1 with (v + t * arg) mod base == 0: if there is none
       the loop never ends (step limit, a proven hang); else charge ``1 + t * cost`` and walk
       the body once with mult = t (the JNZ at its end exits walk mode).
=====  ========================================================================================

Dimensions: N programs, P op slots (``P = L + 1`` for L tokens), 5 fields.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch

from synthenv.language import COMMANDS


class Op(enum.IntEnum):
    HALT = 0
    ADD = 1
    MOVE = 2
    OUT = 3
    IN = 4
    JZ = 5
    JNZ = 6
    NOP = 7
    LOOP = 8


FIELDS = ("op", "arg", "arg2", "cost", "target")
OP, ARG, ARG2, COST, TARGET = range(len(FIELDS))


@dataclass(frozen=True)
class Program:
    """A batch of compiled programs (see the module docstring for the op semantics).

    Attributes:
        code: ``[N, P, 5]`` int32, fields ``(op, arg, arg2, cost, target)``.
        num_ops: ``[N]`` int32, ops before the first HALT.
        balanced: ``[N]`` bool, False when the program has an unmatched bracket (strict
            syntax fails such programs).
        lengths: ``[N]`` int32, raw tokens before the first EOS.
    """

    code: torch.Tensor
    num_ops: torch.Tensor
    balanced: torch.Tensor
    lengths: torch.Tensor

    @property
    def num_programs(self) -> int:
        return int(self.code.shape[0])

    @property
    def num_slots(self) -> int:
        return int(self.code.shape[1])

    @property
    def device(self) -> torch.device:
        return self.code.device

    @property
    def ops(self) -> torch.Tensor:
        return self.code[..., OP]

    def __getitem__(self, index: torch.Tensor | slice) -> Program:
        """The sub-batch of programs at ``index`` (a slice, index tensor or bool mask)."""
        return Program(self.code[index], self.num_ops[index], self.balanced[index], self.lengths[index])

    def to(self, device: torch.device | str) -> Program:
        return Program(self.code.to(device), self.num_ops.to(device), self.balanced.to(device), self.lengths.to(device))


def equal(a: Program, b: Program) -> torch.Tensor:
    """``[N]`` bool: whether each program compiled to the same IR in ``a`` and ``b``."""
    width = max(a.num_slots, b.num_slots)
    pad_a = torch.nn.functional.pad(a.code, (0, 0, 0, width - a.num_slots))
    pad_b = torch.nn.functional.pad(b.code, (0, 0, 0, width - b.num_slots))
    same_code = (pad_a == pad_b).flatten(1).all(1)
    return same_code & (a.balanced == b.balanced) & (a.lengths == b.lengths)


def _move_text(net: int, floor: int, cost: int) -> str:
    low = net - floor  # lowest prefix position, <= 0
    text = "<" * -low + ">" * (net - low)
    return text + "><" * ((cost - len(text)) // 2)


def _add_text(delta: int, cost: int) -> str:
    text = ("+" if delta > 0 else "-") * abs(delta)
    return text + "+-" * ((cost - len(text)) // 2)


def decompile(program: Program, index: int) -> str:
    """Canonical BF source with the same behaviour and raw step cost as program ``index``.

    Used to test passes for idempotence: ``compile(decompile(p)) == p``. Unmatched brackets
    come back as ``]`` (still unmatched, see tests/test_compiler.py).

    # sync point: reads one program back to the host; for tests and display only.
    """
    rows = program.code[index].tolist()
    parts = []
    for op, arg, arg2, cost, _target in rows[: int(program.num_ops[index])]:
        kind = Op(op)
        if kind == Op.ADD:
            parts.append(_add_text(arg, cost))
        elif kind == Op.MOVE:
            parts.append(_move_text(arg, arg2, cost))
        elif kind in (Op.OUT, Op.IN):
            parts.append(("." if kind == Op.OUT else ",") * arg)
        elif kind in (Op.JZ, Op.LOOP):
            parts.append("[")
        elif kind == Op.JNZ:
            parts.append("]")
        elif kind == Op.NOP:
            parts.append("]" * cost)
    text = "".join(parts)
    assert all(c in COMMANDS for c in text)
    return text
