"""The oracle against hand-derived traces of PQT's semantics (docs/semantics.md §1, §2)."""

from __future__ import annotations

import pytest

from synthenv.dialect import ESOLANG, PQT, STANDARD, Dialect
from synthenv.language import Status, decode_batch, encode_batch, text_to_tokens, tokens_to_text
from synthenv.reference import case_reward, match_brackets, run, score_program

STRICT_PQT = Dialect(brackets="strict", left_edge="clamp")


def test_cells_wrap_at_base():
    assert run("-.", base=256).output == (255,)
    assert run("-.", base=27).output == (26,)
    assert run("+" * 27 + ".", base=27).output == (0,)
    assert run("+.+.", base=2).output == (1, 0)


def test_left_clamps_at_cell_zero():
    # `<` on cell 0 stays there: the `+` lands on cell 0, not on a cell to the left.
    assert run("<<+.>.<.").output == (1, 0, 1)


def test_tape_grows_right_with_zeros():
    assert run(">>>>.+.").output == (0, 1)


def test_input_is_read_in_order_then_zero():
    assert run(",.,.,.", [7, 9]).output == (7, 9, 0)
    assert run(",.", []).output == (0,)


def test_unmatched_brackets_are_one_step_no_ops():
    outcome = run("]+.[")
    assert outcome.output == (1,)
    assert outcome.steps == 4
    assert outcome.status == Status.OK


def test_strict_syntax_fails_unmatched_programs_without_running():
    outcome = run("]+.", dialect=STRICT_PQT)
    assert outcome.status == Status.SYNTAX_ERROR
    assert outcome.output == () and outcome.steps == 0
    assert run("[]+.", dialect=STRICT_PQT).status == Status.OK


def test_loops_skip_and_repeat():
    # `[` on 0 jumps past `]`; the loop body runs while the cell is non-zero.
    assert run("[.]+.").output == (1,)
    assert run("+++[.-]").output == (3, 2, 1)


def test_step_count_charges_every_command_including_jumps():
    # `+++[-]`: 3 adds, `[` once, then (`-`, `]`) three times = 3 + 1 + 6.
    assert run("+++[-]").steps == 10
    # `[` on zero: one step, then nothing.
    assert run("[+++]").steps == 1


def test_step_limit_trips_when_the_count_reaches_max_steps():
    # 4 commands need 4 steps: fine under max_steps=5, a failure at max_steps=4.
    assert run("++++", max_steps=5).status == Status.OK
    failed = run("++++", max_steps=4)
    assert failed.status == Status.STEP_LIMIT and failed.steps == 4
    assert run("+[]").status == Status.STEP_LIMIT


def test_match_brackets_follows_the_stack_rule():
    partner, balanced = match_brackets("][[]]][")
    assert partner == {2: 3, 3: 2, 1: 4, 4: 1}
    assert not balanced
    assert match_brackets("[[]]")[1]


def test_worked_checks_of_the_spec():
    cases = [((3, 1, 2), (2, 1, 3, 0)), ((5,), (5, 0))]
    solved = score_program(",[>,]+[,<.]", cases, 256)
    assert solved.reward == 1.0 and solved.solved
    failed = score_program(",[>,]<[.<]", cases, 256)
    assert failed.reward == -2.0 / (4 * 2) and not failed.solved


def test_case_reward_by_hand():
    # expected [10, 20] base 256: output [12] -> d = 2 + 256 (missing); U = 512.
    assert case_reward([12], [10, 20], 256) == pytest.approx((512 - 258) / 512)
    # one extra output costs a full base: d = 256, U = 512.
    assert case_reward([10, 20, 5], [10, 20], 256) == pytest.approx(0.5)
    # exact match: 1 + correct bonus 2 + length bonus 1.
    assert case_reward([10, 20], [10, 20], 256) == 4.0
    # empty expected output: U = base; two extra outputs -> (256 - 512) / 256.
    assert case_reward([1, 2], [], 256) == -1.0
    # the distance is plain absolute difference, not modular.
    assert case_reward([255], [0], 256) == pytest.approx(1 / 256)


def test_text_token_round_trip():
    assert tokens_to_text(text_to_tokens("a>b<c+-[].,")) == "><+-[].,"
    assert decode_batch(encode_batch([",[.,]", "+_+"])) == [",[.,]", "+"]
    with pytest.raises(ValueError, match="token ids must be in"):
        tokens_to_text([3, 12])
    with pytest.raises(ValueError, match="raise length"):
        encode_batch(["+++"], length=2)
    with pytest.raises(TypeError, match="single str"):
        encode_batch("+++")


def test_an_error_left_edge_fails_at_the_first_move_left_of_cell_0_counting_it_as_a_step():
    outcome = run(">+<<+.", dialect=STANDARD)
    assert (outcome.status, outcome.steps, outcome.output) == (Status.LEFT_EDGE, 4, ())
    assert run(">+<.", dialect=STANDARD).output == (0,)  # back on cell 0 is fine
    # The step limit trips first when it comes before the failing `<` (4 steps run, the limit is 4).
    assert run("+++<", max_steps=3, dialect=STANDARD).status == Status.STEP_LIMIT
    assert run("+++<", max_steps=4, dialect=STANDARD).status == Status.LEFT_EDGE


def test_a_wrapping_left_edge_makes_the_tape_a_ring():
    ring = Dialect(left_edge="wrap", tape_cells=3)
    assert run("<+.>.>.>.", dialect=ring).output == (1, 0, 0, 1)  # cell 2, then 0, 1, 2 again
    assert run(">>>+<<<.", dialect=ring).output == (1,)  # three steps right is cell 0 again
    # A ring larger than 2 * max_steps behaves as an endless tape: the engines keep min(tape_cells, 2 * max_steps).
    assert Dialect(left_edge="wrap").ring(100) == 200 and Dialect(left_edge="wrap", tape_cells=7).ring(100) == 7


def test_end_of_input_zero_max_or_unchanged():
    program = "+++,.,.,."
    assert run(program, [5], dialect=STANDARD).output == (5, 0, 0)
    assert run(program, [5], 256, dialect=Dialect(end_of_input="max")).output == (5, 255, 255)
    assert run(program, [5], 10, dialect=Dialect(end_of_input="max")).output == (5, 9, 9)
    assert run(program, [5], dialect=Dialect(end_of_input="unchanged")).output == (5, 5, 5)
    assert run("+++,.", [], dialect=Dialect(end_of_input="unchanged")).output == (3,)


def test_rstrip_output_ignores_trailing_whitespace_on_both_sides():
    hello = "+" * 72 + ".>" + "+" * 10 + "..>" + "+" * 32 + "."  # 'H', '\n', '\n', ' '
    assert run(hello, max_steps=10_000).output == (72, 10, 10, 32)
    assert score_program(hello, [((), (72,))], 256, 10_000, ESOLANG).solved
    assert score_program(hello, [((), (72, 9))], 256, 10_000, ESOLANG).solved  # expected 'H\t' is 'H' too
    assert not score_program(hello, [((), (72,))], 256, 10_000, STANDARD).solved
    assert not score_program(hello, [((), (32, 72))], 256, 10_000, ESOLANG).solved  # leading space counts


def test_strict_brackets_fail_before_any_step_in_every_left_edge():
    for edge in ("clamp", "error", "wrap"):
        outcome = run("+[.", dialect=Dialect(left_edge=edge))
        assert (outcome.status, outcome.steps) == (Status.SYNTAX_ERROR, 0)
    assert run("+[.", dialect=PQT).status == Status.OK
