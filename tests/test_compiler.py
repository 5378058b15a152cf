"""The traditional compiler: bracket matching, and every pass tested for soundness,
idempotence and never-larger output, plus the no-host-sync contract."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from strategies import idiom_programs, loop_heavy_programs, uniform_programs
from native import require_native
from synthenv import reference, workloads
from synthenv.compilers.traditional import TraditionalCompiler, compile_native, lex, match_brackets
from synthenv.ir import Op, decompile, equal
from synthenv.language import Status, decode_batch, encode_batch
from synthenv.testing.syncguard import forbid_host_sync

CONFIGS = [TraditionalCompiler(fold=f, counted_loops=c, impl="torch") for f, c in itertools.product([False, True], repeat=2)]
CONFIGS.append(TraditionalCompiler(impl="native"))  # the same passes in C (traditional.c; same IR, tested below)
CONFIG_IDS = [f"{c.impl},fold={c.fold},counted={c.counted_loops}" for c in CONFIGS]
TORCH = TraditionalCompiler(impl="torch")


def _random_batch(seed: int, num: int = 300) -> list[str]:
    tokens = torch.cat([workloads.make(w, num, seed=seed) for w in ("uniform", "loop_heavy", "near")])
    return decode_batch(tokens)


def _partners(programs: list[str]) -> list[dict[int, int]]:
    classes, partner = match_brackets(lex(encode_batch(programs, max(1, max(map(len, programs))))).classes)
    return [{i: int(p) for i, p in enumerate(row) if p >= 0} for row in partner.tolist()]


@given(st.lists(st.one_of(uniform_programs, loop_heavy_programs), min_size=1, max_size=20))
def test_bracket_matching_equals_the_stack_rule(programs):
    for program, partner in zip(programs, _partners(programs)):
        assert partner == reference.match_brackets(program)[0]


def test_bracket_matching_on_random_batches():
    programs = _random_batch(seed=1)
    for program, partner in zip(programs, _partners(programs)):
        assert partner == reference.match_brackets(program)[0]


def test_tokens_after_eos_are_ignored_and_dtypes_accepted():
    tokens = torch.tensor([[3, 7, 0, 3, 3], [0, 5, 6, 7, 7]])
    for dtype in (torch.int8, torch.uint8, torch.int32, torch.int64):
        program = TORCH.compile(tokens.to(dtype))
        assert program.lengths.tolist() == [2, 0] and program.num_ops.tolist() == [2, 0]
        assert program.code.dtype == torch.int32 and program.code.shape == (2, 6, 5)
        assert (program.ops[1] == Op.HALT).all()


@pytest.mark.parametrize(
    "text, op, arg, arg2, cost",
    [
        ("[->+<]", Op.LOOP, -1, 0, 5),  # cost: 4 body tokens + the `]`
        ("[<+>-]", Op.LOOP, -1, 1, 5),  # body goes one left of the entry: guard ptr >= 1
        ("[--]", Op.LOOP, -2, 0, 3),
        ("[]", Op.LOOP, 0, 0, 1),  # never ends once entered: d = 0
        ("[+-]", Op.LOOP, 0, 0, 3),
        ("[>]", Op.JZ, 1, 0, 1),  # net move != 0: a scan, not counted (innermost flag 1)
        ("[.]", Op.JZ, 1, 0, 1),
    ],
)
def test_counted_loop_detection(text, op, arg, arg2, cost):
    program = TraditionalCompiler().compile(encode_batch([text]))
    assert tuple(program.code[0, 0].tolist()[:4]) == (int(op), arg, arg2, cost)


def test_nested_loops_only_innermost_is_counted_and_flagged():
    program = TraditionalCompiler().compile(encode_batch(["[-[-]]"]))
    ops = program.ops[0].tolist()
    assert ops[:5] == [Op.JZ, Op.ADD, Op.LOOP, Op.ADD, Op.JNZ]
    assert program.code[0, 0, 1] == 0  # the outer loop is not innermost
    assert program.code[0, 4, 1] == 1 and program.code[0, 5, 1] == 0  # inner JNZ flagged, outer not


def test_folded_moves_keep_clamping_exact_and_their_direction():
    # `<<` from 0: 0, 0 -> net -2, floor 0: ptr' = max(ptr - 2, 0); then `>` is an op of its own (a run of moves
    # keeps its direction, so that an engine knows at which `<` a run passes cell 0 under an error left edge)
    for compiler in (TraditionalCompiler(impl="torch"), TraditionalCompiler()):
        program = compiler.compile(encode_batch(["<<>"]))
        assert [row[:4] for row in program.code[0, :2].tolist()] == [[Op.MOVE, -2, 0, 2], [Op.MOVE, 1, 1, 1]]


@pytest.mark.parametrize("compiler", CONFIGS, ids=CONFIG_IDS)
def test_pass_is_sound_through_decompilation(compiler):
    """decompile(compile(p)) behaves exactly like p under the oracle (outputs, status, steps)."""
    programs = _random_batch(seed=2, num=120)
    compiled = compiler.compile(encode_batch(programs, 100))
    inputs = [(), (3, 1, 2), (200, 0, 7)]
    for i, program in enumerate(programs):
        canonical = decompile(compiled, i)
        assert len(canonical) == len(program)  # the raw step cost of every op is preserved
        for case in inputs:
            want, got = reference.run(program, case), reference.run(canonical, case)
            assert got.status == want.status
            if want.status == Status.OK:
                assert (got.output, got.steps) == (want.output, want.steps)


@pytest.mark.parametrize("compiler", CONFIGS, ids=CONFIG_IDS)
@given(programs=st.lists(st.one_of(uniform_programs, loop_heavy_programs, idiom_programs), min_size=1, max_size=8))
def test_pass_is_idempotent(compiler, programs):
    first = compiler.compile(encode_batch(programs, 100))
    again = compiler.compile(encode_batch([decompile(first, i) for i in range(len(programs))], 100))
    assert equal(first, again).all()


@pytest.mark.parametrize("compiler", CONFIGS, ids=CONFIG_IDS)
def test_pass_never_makes_programs_larger(compiler):
    programs = _random_batch(seed=3)
    tokens = encode_batch(programs, 100)
    plain = TraditionalCompiler(fold=False, counted_loops=False, impl="torch").compile(tokens)
    program = compiler.compile(tokens)
    assert (program.num_ops <= plain.num_ops).all()
    assert (plain.num_ops == plain.lengths).all()  # unfolded: one op per token
    if compiler.fold:  # a program with a foldable pair of neighbours gets strictly shorter
        pairs = ["++", "--", "+-", "-+", ">>", "<<", "..", ",,"]  # `<>` and `><` are two ops
        foldable = torch.tensor([any(p in text for p in pairs) for text in programs])
        assert (program.num_ops < plain.num_ops)[foldable].all()


def test_compile_makes_no_host_sync():
    """The data-parallel passes (what a GPU runs) under synthenv.testing.syncguard (tests/test_sync.py)."""
    tokens = workloads.make("uniform", 64, seed=4)
    TORCH.compile(tokens)  # lookup tables are built once per device
    with forbid_host_sync():
        program = TORCH.compile(tokens)
    assert program.num_programs == 64


def test_compile_rejects_wrong_rank_and_bad_options():
    for compiler in (TORCH, TraditionalCompiler(impl="native")):
        with pytest.raises(ValueError, match=r"\[N, L\]"):
            compiler.compile(torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="impl must be one of"):
        TraditionalCompiler(impl="gpu")
    with pytest.raises(ValueError, match="runs every pass"):
        TraditionalCompiler(fold=False, impl="native")


def test_auto_picks_the_c_passes_on_cpu_and_they_agree():
    tokens = workloads.make("uniform", 200, seed=5)
    assert equal(TraditionalCompiler().compile(tokens), TORCH.compile(tokens)).all()


@pytest.mark.parametrize("workload", ["uniform", "loop_heavy", "near"])
def test_c_compiler_emits_exactly_the_traditional_ir(workload):
    tokens = workloads.make(workload, 3000, seed=21)
    got, want = compile_native(tokens), TORCH.compile(tokens)
    assert bool(equal(got, want).all())
    assert torch.equal(got.num_ops, want.num_ops)


@given(st.lists(st.one_of(uniform_programs, loop_heavy_programs, idiom_programs), min_size=1, max_size=16),
       st.integers(0, 3))
def test_c_compiler_on_generated_programs(programs, threads):
    tokens = encode_batch(programs, 100)
    got, want = compile_native(tokens, num_threads=threads), TORCH.compile(tokens)
    assert bool(equal(got, want).all()) and torch.equal(got.num_ops, want.num_ops)


def test_c_compiler_edge_cases():
    for tokens in (encode_batch(["", "[", "]", "[]", "]][[", "[[]]", "<<>>[<<>>-]", "+[-]>[+[-]]", "_+"], 12),
                   torch.zeros((3, 0), dtype=torch.int64), torch.zeros((0, 7), dtype=torch.int64)):
        got, want = compile_native(tokens), TORCH.compile(tokens)
        assert bool(equal(got, want).all()) and torch.equal(got.num_ops, want.num_ops)
    with pytest.raises(ValueError, match=r"\[N, L\]"):
        compile_native(torch.zeros(5, dtype=torch.int64))


def test_dropping_unmatched_brackets_in_c_equals_the_torch_passes():
    """drop_unmatched_brackets: the C pass (CPU int64 rows) and the data-parallel torch passes agree, on random
    programs with ids out of range too (they end a program, as EOS does)."""
    from synthenv.compilers.traditional import LIBRARY, drop_unmatched_brackets

    require_native(LIBRARY)
    for workload in ("uniform", "loop_heavy", "near"):
        tokens = workloads.make(workload, 500, seed=9)
        tokens[::7, 5] = 11  # an id out of range ends the program
        assert torch.equal(drop_unmatched_brackets(tokens), drop_unmatched_brackets(tokens, impl="torch"))
