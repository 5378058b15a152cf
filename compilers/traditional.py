"""The traditional compiler, made data-parallel: a whole ``[N, L]`` token batch in a few
dozen batched torch ops, on the tokens' device, with no Python loop over programs and no
host synchronisation.

Passes (each a function below, each tested for soundness, idempotence and never-larger
output in tests/test_compiler.py):

1. ``lex``: token classes by table lookup; tokens after the first EOS are dead.
2. ``match_brackets``: bracket depth by scans; PQT's unmatched-``]`` rule is a running
   minimum of the depth; partners by one sort on (level, position).
3. ``find_counted_loops``: innermost loops whose body is only ``+-<>`` with net move 0; per
   loop the entry-cell delta and the no-clamping guard, by segmented scans.
4. ``fold_runs`` + ``emit``: runs of the same op fold into one op (``<`` clamping kept exact
   by a floor, see ``synthenv.ir``); ops are laid out by prefix-sum compaction. A run of moves
   folds only while it keeps its direction (``<<<`` is one op, ``<>`` two), so that an engine
   knows at which ``<`` a run passes cell 0 (``synthenv.dialect``: an error left edge).
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

import torch

from synthenv import language as lang
from synthenv import native_build
from synthenv.ir import Op, Program
from synthenv.tables import lookup_table

# Token classes (what a token becomes once brackets are matched).
NONE, ADD, MOVE, OUT, IN, OPEN, CLOSE, UNMATCHED = range(8)
CLASS_NAMES = ("NONE", "ADD", "MOVE", "OUT", "IN", "OPEN", "CLOSE", "UNMATCHED")

# Lexing tables, indexed by token id (0 = EOS, then `><+-[].,`); shared with traditional.c
# through the generated synthenv/tables.h.
TOKEN_CLASS = (NONE, MOVE, MOVE, ADD, ADD, OPEN, CLOSE, OUT, IN)  # OPEN/CLOSE before matching
ADD_DELTA = (0, 0, 0, 1, -1, 0, 0, 0, 0)
MOVE_DELTA = (0, 1, -1, 0, 0, 0, 0, 0, 0)
CLASS_TO_OP = {NONE: Op.HALT, ADD: Op.ADD, MOVE: Op.MOVE, OUT: Op.OUT, IN: Op.IN,
               OPEN: Op.JZ, CLOSE: Op.JNZ, UNMATCHED: Op.NOP}
_FOLDABLE = (ADD, MOVE, OUT, IN, UNMATCHED)
_OP_OF_CLASS = tuple(int(CLASS_TO_OP[c]) for c in range(len(CLASS_NAMES)))


@dataclass(frozen=True)
class Lexed:
    classes: torch.Tensor  # [N, L] int64 token classes (OPEN/CLOSE not yet matched)
    alive: torch.Tensor  # [N, L] bool, before the first EOS
    add_deltas: torch.Tensor  # [N, L] int64, +1 / -1 for `+` / `-`
    move_deltas: torch.Tensor  # [N, L] int64, +1 / -1 for `>` / `<`


def lex(tokens: torch.Tensor) -> Lexed:
    """Classify tokens by table lookup; everything from the first EOS on is dead."""
    device = tokens.device
    tok = tokens.long()
    alive = torch.cumprod(tok != lang.EOS, dim=1).bool()  # [N, L]
    tok = torch.where(alive, tok, 0)
    table = lambda values: lookup_table(values, device)[tok]  # noqa: E731  [N, L]
    return Lexed(table(TOKEN_CLASS), alive, table(ADD_DELTA), table(MOVE_DELTA))


def match_brackets(classes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Match brackets with PQT's rule (docs/semantics.md §1); returns (classes, partner).

    Unmatched brackets become ``UNMATCHED``; ``partner [N, L]`` holds the matching
    bracket's position for matched ones and -1 elsewhere.
    """
    num, length = classes.shape
    device = classes.device
    is_open, is_close = classes == OPEN, classes == CLOSE
    raw_depth = (is_open.long() - is_close.long()).cumsum(1)  # [N, L]
    floor = raw_depth.clamp(max=0).cummin(1).values  # running min of depth, <= 0
    prev_floor = torch.nn.functional.pad(floor[:, :-1], (1, 0))
    close_matched = is_close & (floor == prev_floor)  # a `]` that found an open `[`
    depth = raw_depth - floor  # [N, L] depth counting matched `]` only
    level = torch.where(is_open, depth, depth + 1)  # the nesting level a bracket opens/closes
    positions = torch.arange(length, device=device).expand(num, length)
    bracket = is_open | close_matched
    # Sort brackets by (level, position): within a level, opens and closes alternate and an
    # unmatched open can only come last, so each close's partner is its sorted predecessor.
    key = torch.where(bracket, level * (length + 1) + positions, (length + 1) ** 2 + positions)
    order = key.argsort(dim=1)  # [N, L]
    s_open, s_close = is_open.gather(1, order), close_matched.gather(1, order)
    s_level = level.gather(1, order)
    next_close = torch.nn.functional.pad(s_close[:, 1:], (0, 1))
    next_level = torch.nn.functional.pad(s_level[:, 1:], (0, 1), value=-1)
    open_matched_s = s_open & next_close & (next_level == s_level)  # [N, L] in sorted order
    next_pos = torch.nn.functional.pad(order[:, 1:], (0, 1), value=-1)
    prev_pos = torch.nn.functional.pad(order[:, :-1], (1, 0), value=-1)
    partner_s = torch.where(open_matched_s, next_pos, torch.where(s_close, prev_pos, -1))
    partner = torch.full_like(order, -1).scatter(1, order, partner_s)  # back to source order
    matched = partner >= 0
    classes = torch.where((is_open | is_close) & ~matched, UNMATCHED, classes)
    return classes, partner


def find_innermost(classes: torch.Tensor, partner: torch.Tensor) -> torch.Tensor:
    """``[N, L]`` bool at both brackets of every loop with no bracket inside its body.

    Engines may watch such loops for iterations that change nothing (a proven hang).
    """
    bracket = (classes == OPEN) | (classes == CLOSE) | (classes == UNMATCHED)
    seen = bracket.long().cumsum(1)  # [N, L] brackets up to each token
    other_end = seen.gather(1, partner.clamp(min=0))
    return (partner >= 0) & ((other_end - seen).abs() == 1)


def _segment_reduce(values: torch.Tensor, segments: torch.Tensor, size: int, reduce: str, init: int) -> torch.Tensor:
    """Row-wise reduce of ``values [N, L]`` into ``size`` slots by ``segments [N, L]``."""
    out = torch.full((values.shape[0], size), init, dtype=values.dtype, device=values.device)
    if reduce == "sum":
        return out.scatter_add(1, segments, values)
    return out.scatter_reduce(1, segments, values, reduce=reduce, include_self=True)


@dataclass(frozen=True)
class CountedLoops:
    is_loop: torch.Tensor  # [N, L] bool, at the `[` of each counted loop
    entry_delta: torch.Tensor  # [N, L] int64, at the `[`: change of the entry cell per iteration
    guard: torch.Tensor  # [N, L] int64, at the `[`: lowest pointer with no clamping in the body
    in_body: torch.Tensor  # [N, L] bool, tokens inside a counted loop's body
    offsets: torch.Tensor  # [N, L] int64, pointer offset from the loop entry (body tokens)


def find_counted_loops(classes: torch.Tensor, partner: torch.Tensor, lexed: Lexed) -> CountedLoops:
    """Find innermost loops made only of ``+-<>`` whose body moves the pointer by 0 net.

    Such a loop adds a fixed amount to fixed cells around its entry on every iteration, so
    an engine can compute its iteration count in closed form, or prove that it never ends.
    """
    num, length = classes.shape
    positions = torch.arange(length, device=classes.device).expand(num, length)
    other = ~((classes == ADD) | (classes == MOVE))  # tokens a counted-loop body may not hold
    other_before = other.long().cumsum(1)  # [N, L] inclusive prefix count
    moved = lexed.move_deltas.cumsum(1)  # [N, L] pointer offset after each token
    end = partner.clamp(min=0)
    is_open = classes == OPEN
    body_clean = (other_before.gather(1, end) - 1 - other_before) == 0  # only the `]` is "other"
    net_move = moved.gather(1, end) - moved
    is_loop = is_open & body_clean & (net_move == 0)
    # Each body token's loop: the last bracket at or before it (there are none inside).
    bracket = (classes == OPEN) | (classes == CLOSE) | (classes == UNMATCHED)
    last_bracket = torch.where(bracket, positions, -1).cummax(1).values
    start = last_bracket.clamp(min=0)
    in_body = (last_bracket >= 0) & ~bracket & is_loop.gather(1, start) & lexed.alive
    offsets = moved - moved.gather(1, start)  # [N, L] position after the token, from the entry
    seg = torch.where(in_body, start, length)  # body tokens -> their `[`; others -> a spare slot
    lowest = _segment_reduce(torch.where(in_body, offsets, 0), seg, length + 1, "amin", 0)[:, :length]
    entry_adds = torch.where(in_body & (offsets == 0), lexed.add_deltas, 0)
    entry_delta = _segment_reduce(entry_adds, seg, length + 1, "sum", 0)[:, :length]
    return CountedLoops(is_loop, entry_delta, -lowest, in_body, offsets)


def emit(
    classes: torch.Tensor,
    partner: torch.Tensor,
    lexed: Lexed,
    loops: CountedLoops | None,
    fold: bool,
) -> Program:
    """Fold runs into ops and lay them out by prefix-sum compaction."""
    num, length = classes.shape
    slots = length + 1  # P: at most one op per token, plus a closing HALT
    alive = lexed.alive
    prev_class = torch.nn.functional.pad(classes[:, :-1], (1, 0), value=-1)
    prev_move = torch.nn.functional.pad(lexed.move_deltas[:, :-1], (1, 0))
    foldable = torch.zeros_like(alive)
    for cls in _FOLDABLE:
        foldable |= classes == cls
    same_run = (classes == prev_class) & ((classes != MOVE) | (lexed.move_deltas == prev_move))  # moves keep a side
    starts = alive & ~(fold & foldable & same_run)  # [N, L] first token of an op
    op_index = starts.long().cumsum(1) - 1  # [N, L] op slot of each token
    seg = torch.where(alive, op_index, slots)  # dead tokens go to a spare slot
    num_ops = starts.sum(1)

    count = _segment_reduce(alive.long(), seg, slots + 1, "sum", 0)
    add_sum = _segment_reduce(lexed.add_deltas, seg, slots + 1, "sum", 0)
    moved = lexed.move_deltas.cumsum(1)
    low = _segment_reduce(torch.where(alive, moved, 0), seg, slots + 1, "amin", 2**40)
    first_token = _segment_reduce(torch.where(starts, torch.arange(length, device=classes.device), length),
                                  seg, slots + 1, "amin", length)
    before = torch.nn.functional.pad(moved, (1, 0)).gather(1, first_token.clamp(max=length))  # offset before op

    op_class = torch.nn.functional.pad(classes, (0, 1)).gather(1, first_token)  # [N, P+1]
    ops = lookup_table(_OP_OF_CLASS, classes.device)[op_class]  # [N, P+1]
    net_move = _segment_reduce(lexed.move_deltas, seg, slots + 1, "sum", 0)
    floor = net_move - (low - before).clamp(max=0)  # ptr' = max(ptr + net, floor)
    tok_partner = torch.nn.functional.pad(partner, (0, 1), value=-1).gather(1, first_token)
    jump = torch.nn.functional.pad(op_index, (0, 1)).gather(1, tok_partner.clamp(min=0)) + 1

    arg = torch.zeros_like(ops)
    arg2 = torch.zeros_like(ops)
    arg = torch.where(ops == Op.ADD, add_sum, arg)
    arg = torch.where(ops == Op.MOVE, net_move, arg)
    arg = torch.where((ops == Op.OUT) | (ops == Op.IN), count, arg)
    arg2 = torch.where(ops == Op.MOVE, floor, arg2)
    cost = count
    target = torch.where((ops == Op.JZ) | (ops == Op.JNZ), jump, 0)
    innermost = torch.nn.functional.pad(find_innermost(classes, partner), (0, 1)).gather(1, first_token)
    arg = torch.where(((ops == Op.JZ) | (ops == Op.JNZ)) & innermost, 1, arg)
    if loops is not None:
        at = lambda values: torch.nn.functional.pad(values, (0, 1)).gather(1, first_token)  # noqa: E731
        is_loop = at(loops.is_loop.long()).bool() & (ops == Op.JZ)
        body_add = at(loops.in_body.long()).bool() & (ops == Op.ADD)
        ops = torch.where(is_loop, int(Op.LOOP), ops)
        arg = torch.where(is_loop, at(loops.entry_delta), arg)
        arg2 = torch.where(is_loop, at(loops.guard), arg2)
        arg2 = torch.where(body_add, at(loops.offsets), arg2)
        cost = torch.where(is_loop, tok_partner - first_token, cost)  # body tokens + the `]`
    code = torch.stack([ops, arg, arg2, cost, target], dim=-1)[:, :slots]  # [N, P, 5]
    code = torch.where((ops[:, :slots] == Op.HALT).unsqueeze(-1), 0, code)
    balanced = ~((classes == UNMATCHED) & alive).any(1)
    return Program(code.to(torch.int32).contiguous(), num_ops.to(torch.int32), balanced,
                   alive.sum(1).to(torch.int32))


LIBRARY = native_build.register(__name__, ["traditional.c"], beside=__file__,
                                exports=("synthenv_compile", "synthenv_canonical_programs", "synthenv_drop_unmatched"))
"""The passes in C (``traditional.c``), ``canonical_programs`` and ``drop_unmatched_brackets`` for int64 CPU rows."""


def compile_native(tokens: torch.Tensor, num_threads: int = 0) -> Program:
    """The passes above in C (``traditional.c``), one program per thread: the same IR, bit for bit.

    The data-parallel torch passes are the right shape for a GPU; on a CPU their few dozen
    passes over ``[N, L]`` tensors cost more than running the programs. This is the same
    algorithm run sequentially per program (tests/test_compiler.py checks ``ir.equal``).
    ``num_threads``: OpenMP threads (0 = all cores).

    >>> from synthenv.language import encode_batch
    >>> int(compile_native(encode_batch(["+++[->++<]"])).num_ops[0])  # ADD 3, LOOP, ADD, MOVE, ADD, MOVE, JNZ
    7
    """
    if tokens.device.type != "cpu":
        raise ValueError(f"compile_native runs on CPU tensors, got tokens on {tokens.device}; use impl='torch'")
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape [N, L], got {tuple(tokens.shape)}")
    tokens = tokens.to(torch.int64).contiguous()  # [N, L]
    num, length = tokens.shape
    program = Program(torch.empty((num, length + 1, 5), dtype=torch.int32), torch.empty(num, dtype=torch.int32),
                      torch.empty(num, dtype=torch.bool), torch.empty(num, dtype=torch.int32))
    rc = _native_compile()(tokens.data_ptr(), num, length, program.code.data_ptr(), program.num_ops.data_ptr(),
                           program.balanced.data_ptr(), program.lengths.data_ptr(), num_threads)
    if rc != 0:
        raise MemoryError(f"the native compiler could not allocate its scratch space ({length} tokens)")
    return program


@functools.lru_cache(maxsize=1)
def _native_compile():
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    return LIBRARY.bind("synthenv_compile", [p, i64, i64, p, p, p, p, i32])


IMPLEMENTATIONS = ("auto", "torch", "native")


@dataclass(frozen=True)
class TraditionalCompiler:
    """Data-parallel BF -> IR compiler (registered as ``"traditional"``).

    Attributes:
        fold: fold runs of ``+-``, ``<``, ``>``, ``.``, ``,`` and unmatched brackets into one op.
        counted_loops: turn innermost ``+-<>`` loops with net move 0 into ``LOOP`` ops
            (closed-form iteration count, proven hangs).
        impl: ``"torch"``: the data-parallel passes of this module, on any device.
            ``"native"``: the same passes in C, one program per thread (CPU tensors, all passes
            on; ``compile_native``), emitting the identical IR (tested
            bit for bit): on a CPU, a few dozen memory-bound passes over ``[N, L]`` tensors cost
            more than running the programs. ``"auto"``: native for CPU tensors when a C
            compiler works and all passes are on, else torch.

    >>> from synthenv.language import encode_batch
    >>> program = TraditionalCompiler().compile(encode_batch(["+++[->++<]"]))
    >>> int(program.num_ops[0])  # ADD 3, LOOP, ADD, MOVE, ADD, MOVE, JNZ
    7
    """

    fold: bool = True
    counted_loops: bool = True
    impl: str = "auto"
    name: str = "traditional"

    def __post_init__(self) -> None:
        if self.impl not in IMPLEMENTATIONS:
            raise ValueError(f"impl must be one of {IMPLEMENTATIONS}, got {self.impl!r}")
        if self.impl == "native" and not (self.fold and self.counted_loops):
            raise ValueError("impl='native' runs every pass; use impl='torch' to turn fold or counted_loops off")

    def compile(self, tokens: torch.Tensor) -> Program:
        """Compile ``tokens [N, L]`` (ids in [0, 9), EOS-terminated) to IR on their device."""
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape [N, L], got {tuple(tokens.shape)}")
        if self.impl == "native" or (self.impl == "auto" and self.fold and self.counted_loops
                                     and tokens.device.type == "cpu" and LIBRARY.is_available()):
            return compile_native(tokens)
        lexed = lex(tokens)
        classes, partner = match_brackets(lexed.classes)
        loops = find_counted_loops(classes, partner, lexed) if self.counted_loops else None
        return emit(classes, partner, lexed, loops, self.fold)


def drop_unmatched_brackets(tokens: torch.Tensor, impl: str = "auto") -> torch.Tensor:
    """``[N, L]`` programs without their unmatched brackets (PQT's rule, docs/semantics.md §1), EOS after.

    Under PQT's lenient brackets an unmatched bracket is a one-step no-op, so the program without it prints
    the same in every dialect of lenient brackets, in fewer steps; and it is balanced, so that it runs under
    strict brackets too. Search agents write programs in the lenient space and hand a strict task this form
    of each (``agents.run.trainer``). Tensor ops on the tokens' device, no host sync; on the CPU the same in C
    (``traditional.c``, one pass a row; tests/test_compiler.py checks that they agree).

    >>> from synthenv.language import encode_batch
    >>> drop_unmatched_brackets(encode_batch(["]+[.]]", "[[-]", "+"])).tolist()
    [[3, 5, 7, 6, 0, 0], [5, 4, 6, 0, 0, 0], [3, 0, 0, 0, 0, 0]]
    """
    if impl != "torch" and tokens.device.type == "cpu" and tokens.dtype == torch.int64 and LIBRARY.is_available():
        tokens = tokens.contiguous()
        out = torch.empty_like(tokens)
        _native_drop()(tokens.data_ptr(), tokens.shape[0], tokens.shape[1], out.data_ptr(), 0)
        return out
    tokens = lang.canonical_programs(tokens)  # [N, L]
    alive = tokens != lang.EOS
    is_open, is_close = tokens == lang.OPEN, tokens == lang.CLOSE
    raw = (is_open.long() - is_close.long()).cumsum(1)  # [N, L]
    floor = raw.clamp(max=0).cummin(1).values  # a `]` that takes the depth to a new low has no `[`
    prev_floor = torch.nn.functional.pad(floor[:, :-1], (1, 0))
    close_ok = is_close & (floor == prev_floor)
    depth = (is_open.long() - close_ok.long()).cumsum(1)  # [N, L] with the matched `]` only
    # an `[` is matched when the depth later falls below its own level (what it opened)
    later_low = torch.nn.functional.pad(depth.flip(1).cummin(1).values.flip(1)[:, 1:], (0, 1), value=2**40)
    open_ok = is_open & (later_low < depth)
    keep = alive & ~(is_open & ~open_ok) & ~(is_close & ~close_ok)  # [N, L]
    slot = torch.where(keep, keep.long().cumsum(1) - 1, tokens.shape[1])  # where each kept token goes
    out = torch.zeros((tokens.shape[0], tokens.shape[1] + 1), dtype=tokens.dtype, device=tokens.device)
    return out.scatter_(1, slot, torch.where(keep, tokens, lang.EOS))[:, :-1]


@functools.lru_cache(maxsize=1)
def _native_drop():
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    return LIBRARY.bind("synthenv_drop_unmatched", [p, i64, i64, p, i32], None)
