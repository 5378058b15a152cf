"""The torch engine: every (program, case) instance runs in lockstep with masks.

The readable reference engine: one IR op per instance per iteration, any torch device,
bounded memory (at most ``max_lanes`` instances at once; each tape starts short and grows
when a pointer could reach its end). Every ``check_every`` iterations, finished instances are
dropped from the active set and tapes grow if needed; that check (and the tape margin, once per
chunk) is the engine's documented host synchronisation, ``torch_engine_check`` in
``synthenv.syncpoints`` (lockstep's loop length depends on the data). The fused
``native``/``cuda`` engines run the same IR one instance per thread and are much faster.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from synthenv import deadline
from synthenv.dialect import WHITESPACE, Dialect
from synthenv.engines.common import check_num_outputs, finalize, loop_iterations, loop_solver
from synthenv.execution import Execution, empty_execution
from synthenv.ir import Op, Program
from synthenv.language import Status
from synthenv.syncpoints import sync_point
from synthenv.tasks.task import Task

RUNNING = -1


@dataclass
class _Lanes:
    """State of the active instances (B lanes); ``lane`` indexes the chunk's instances."""

    lane: torch.Tensor  # [B] int64
    pc: torch.Tensor  # [B] int64
    ptr: torch.Tensor  # [B] int64
    steps: torch.Tensor  # [B] int64
    next_input: torch.Tensor  # [B] int64
    num_out: torch.Tensor  # [B] int64
    kept: torch.Tensor  # [B] int64, values printed up to the last non-whitespace one (Dialect.judged)
    mult: torch.Tensor  # [B] int64, 0 = normal, t > 0 = walking a counted loop's body
    status: torch.Tensor  # [B] int64, RUNNING or a Status
    tape: torch.Tensor  # [B, T] int32
    out: torch.Tensor  # [B, O] int64

    def select(self, keep: torch.Tensor) -> _Lanes:
        return _Lanes(*(getattr(self, f)[keep] for f in self.__dataclass_fields__))


@dataclass(frozen=True)
class TorchEngine:
    """Lockstep IR interpreter in plain torch (registered as ``"torch"``).

    Attributes:
        max_lanes: instances run at once; bounds memory.
        check_every: iterations between checks for finished instances (a host sync).
        initial_tape: tape cells each instance starts with (tapes grow on demand up to
            ``max_steps``, which no pointer can pass; under a wrapping dialect each holds its ring).
        ring_bytes: most bytes of ring tapes at once under a wrapping dialect (fewer lanes then).
    """

    max_lanes: int = 2**15
    ring_bytes: int = 2**28
    check_every: int = 16
    initial_tape: int = 256
    name: str = "torch"

    def available(self, device: torch.device | str) -> bool:
        """The torch engine runs on any torch device."""
        return True

    def run(self, program: Program, task: Task, num_outputs: int | None = None, early_abort: bool = False) -> Execution:
        """Run ``program`` on all of ``task``'s cases; see ``Execution`` for the contract.

        Lockstep gains nothing from stopping a program's cases early, so every case runs to
        its end and ``early_abort`` is applied afterwards (``finalize``): the same result as
        the engines that do stop.
        """
        device = program.device
        cases = task.tensors(device)
        num_programs, num_cases = program.num_programs, cases.num_cases
        num_outputs = check_num_outputs(num_outputs, task)
        result = empty_execution(num_programs, num_cases, num_outputs, device)
        ring = task.dialect.ring(task.max_steps)
        lanes = min(self.max_lanes, self.ring_bytes // (4 * ring)) if ring else self.max_lanes
        chunk = max(1, lanes // num_cases)
        for first in range(0, num_programs, chunk):
            sub = program[slice(first, first + chunk)]
            execution = self._run_chunk(sub, task, cases, num_outputs)
            for name in ("outputs", "output_lengths", "status", "steps"):
                getattr(result, name)[first : first + chunk] = getattr(execution, name)
        return finalize(result, program, task, early_abort)

    def _run_chunk(self, program, task, cases, num_outputs) -> Execution:
        device = program.device
        # Each slot's fields, then its counted-loop solver (g, m, inv): [N, P, 8].
        code = torch.cat([program.code.long(), loop_solver(program.code[..., 1], task.base)], dim=-1)
        # A pointer grows by at most `reach` cells per iteration (a MOVE, or a counted loop's
        # farthest write), so a tape with `margin` spare cells cannot overflow between checks.
        ops, args, args2 = code[..., 0], code[..., 1], code[..., 2]
        moves = torch.where(ops == Op.MOVE, torch.maximum(args, args2), 0).amax()  # ptr' <= ptr + max(arg, floor)
        reach = moves.clamp(min=0) + torch.where(ops == Op.ADD, args2, 0).amax().clamp(min=0)
        with sync_point("torch_engine_check"):  # once per chunk
            margin = int(reach) * (self.check_every + 1) + 1
        ring = task.dialect.ring(task.max_steps)
        tape_length = ring or min(task.max_steps, max(self.initial_tape, margin))
        num_programs, num_cases = program.num_programs, cases.num_cases
        total = num_programs * num_cases
        zeros = lambda: torch.zeros(total, dtype=torch.int64, device=device)  # noqa: E731
        lanes = _Lanes(
            torch.arange(total, device=device), zeros(), zeros(), zeros(), zeros(), zeros(), zeros(), zeros(),
            torch.full((total,), RUNNING, dtype=torch.int64, device=device),
            torch.zeros((total, tape_length), dtype=torch.int32, device=device),
            torch.zeros((total, num_outputs), dtype=torch.int64, device=device),
        )
        result = empty_execution(num_programs, num_cases, num_outputs, device)
        fields = (result.outputs, result.output_lengths, result.status, result.steps)
        flat = [t.view(total, *t.shape[2:]) for t in fields]
        iteration = 0
        at = deadline.current()
        while lanes.lane.numel() > 0:
            _step(lanes, code, num_cases, cases, task.base, task.max_steps, task.dialect)
            iteration += 1
            if at is not None and time.monotonic() > at:  # the host's clock: no device sync
                raise deadline.DeadlineExceeded()
            if iteration % self.check_every == 0:
                with sync_point("torch_engine_check"):  # once per check_every lockstep iterations
                    done = lanes.status != RUNNING
                    if bool(done.any()):
                        _store(flat, lanes, done, task.dialect)
                        lanes = lanes.select(~done)
                    if not ring:
                        lanes.tape = _grow(lanes.tape, lanes.ptr, margin, task.max_steps)
        return result


def _grow(tape: torch.Tensor, ptr: torch.Tensor, margin: int, max_steps: int) -> torch.Tensor:
    """Pad the tapes with zero cells if a pointer could reach their end before the next check."""
    length = tape.shape[1]
    if ptr.numel() == 0 or length >= max_steps:
        return tape
    needed = int(ptr.max()) + margin  # part of the periodic check (torch_engine_check)
    if needed < length:
        return tape
    return torch.nn.functional.pad(tape, (0, min(max_steps, max(2 * length, needed)) - length))


def _store(flat: list[torch.Tensor], lanes: _Lanes, done: torch.Tensor, dialect: Dialect) -> None:
    outputs, output_lengths, status, steps = flat
    index = lanes.lane[done]
    lengths = lanes.kept[done] if dialect.output == "rstrip" else lanes.num_out[done]  # [D]
    out = lanes.out[done]
    out = torch.where(torch.arange(out.shape[1], device=out.device) < lengths[:, None], out, 0)  # [D, O]
    outputs[index] = out.to(outputs.dtype)
    output_lengths[index] = lengths.to(output_lengths.dtype)
    status[index] = lanes.status[done].to(status.dtype)
    steps[index] = lanes.steps[done].to(steps.dtype)


def _step(s: _Lanes, code: torch.Tensor, num_cases: int, cases, base: int, max_steps: int, dialect: Dialect) -> None:
    """Advance every running lane by one IR op (in place); ``code [N, P, 8]`` (see ``_run_chunk``)."""
    running = s.status == RUNNING
    prog, case = s.lane // num_cases, s.lane % num_cases
    fields = code[prog, s.pc]  # [B, 8]
    op, arg, arg2, cost, target = fields[:, :5].unbind(-1)  # [B] each
    walk = s.mult > 0
    value = s.tape.gather(1, s.ptr[:, None])[:, 0].long()  # [B] current cell
    is_add, is_in, is_out = op == Op.ADD, op == Op.IN, op == Op.OUT
    is_loop, halted = op == Op.LOOP, op == Op.HALT

    # Counted loops: closed-form iteration count, or a proven hang (synthenv.ir).
    iterations = loop_iterations(fields[:, 5:], value, base)  # [B], 0 = never reaches 0
    fast_loop = is_loop & (value != 0) & (s.ptr >= arg2)
    hang = fast_loop & (iterations == 0)
    step_cost = torch.where(fast_loop, 1 + iterations * cost, torch.where(is_loop, 1, cost))
    step_cost = torch.where(walk, 0, step_cost)
    # An error left edge: a run of `<` (runs of moves are monotone) that passes cell 0 fails at its
    # (ptr + 1)-th `<`, counted as a step; the ptr before it may trip the step limit first.
    is_move = (op == Op.MOVE) & ~walk
    crossing = is_move & (s.ptr + arg < arg2) if dialect.left_edge == "error" else torch.zeros_like(walk)
    step_cost = torch.where(crossing, s.ptr + 1, step_cost)
    new_steps = s.steps + step_cost
    limit = torch.where(crossing, new_steps > max_steps, new_steps >= max_steps)
    over = running & (limit | hang)
    left_edge = running & crossing & ~limit

    jump = ((op == Op.JZ) | is_loop) & (value == 0) | (op == Op.JNZ) & (value != 0) & ~walk
    new_pc = torch.where(halted, s.pc, torch.where(jump, target, s.pc + 1))
    new_mult = torch.where(fast_loop & ~hang, iterations, torch.where((op == Op.JNZ) & walk, 0, s.mult))
    ring = dialect.ring(max_steps)
    if ring:  # a ring of cells: pointers and a counted loop's writes wrap around it
        moved = (s.ptr + arg).remainder(ring)
        new_ptr = torch.where(is_move, moved, s.ptr)
        where_ = torch.where(walk & is_add, (s.ptr + arg2).remainder(ring), s.ptr)[:, None]
    else:
        moved = torch.maximum(s.ptr + arg, arg2)
        # Only a run that trips the step limit (or fails at the left edge) can move past the tape.
        new_ptr = torch.where(is_move & ~crossing, moved, s.ptr).clamp(max=s.tape.shape[1] - 1)
        where_ = torch.where(walk & is_add, s.ptr + arg2, s.ptr)[:, None]

    # One tape write per lane: ADD (normal or walk) or IN; everything else writes back.
    old = s.tape.gather(1, where_)[:, 0].long()
    delta = torch.where(walk, s.mult * arg, arg)
    read_at = s.next_input + arg - 1
    lengths = cases.input_lengths.long()[case]
    in_value = cases.inputs.long()[case, read_at.clamp(0, cases.inputs.shape[1] - 1)]
    past = {"zero": torch.zeros_like(old), "max": torch.full_like(old, base - 1),
            "unchanged": torch.where(s.next_input < lengths, cases.inputs.long()[case, (lengths - 1).clamp(min=0)],
                                     old)}[dialect.end_of_input]  # [B] what `,` writes past the input
    in_value = torch.where(read_at < lengths, in_value, past)
    written = torch.where(is_add, (old + delta).remainder(base), torch.where(is_in, in_value, old))
    s.tape.scatter_(1, where_, torch.where(running, written, old).to(s.tape.dtype)[:, None])

    slots = torch.arange(s.out.shape[1], device=s.out.device)[None, :]
    emit = (running & is_out)[:, None] & (slots >= s.num_out[:, None]) & (slots < (s.num_out + arg)[:, None])
    s.out.copy_(torch.where(emit, value[:, None], s.out))
    visible = is_out
    for space in WHITESPACE:  # comparisons, not a tensor of them: nothing copied to the device per step
        visible = visible & (value != space)

    for name, new in (("pc", new_pc), ("ptr", new_ptr), ("mult", new_mult),
                      ("next_input", torch.where(is_in, s.next_input + arg, s.next_input)),
                      ("num_out", torch.where(is_out, s.num_out + arg, s.num_out)),
                      ("kept", torch.where(visible, s.num_out + arg, s.kept))):
        getattr(s, name).copy_(torch.where(running, new, getattr(s, name)))
    s.steps.copy_(torch.where(over, max_steps, torch.where(running, new_steps, s.steps)))
    status = torch.where(left_edge, int(Status.LEFT_EDGE), torch.where(running & halted, int(Status.OK), s.status))
    s.status.copy_(torch.where(over, int(Status.STEP_LIMIT), status))
