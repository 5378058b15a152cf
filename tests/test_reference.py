"""The oracle against hand-derived traces of PQT's semantics (docs/semantics.md §1, §2)."""

from __future__ import annotations

import pytest

from synthenv.language import Status, decode_batch, encode_batch, text_to_tokens, tokens_to_text
from synthenv.reference import case_reward, match_brackets, run, score_program


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
    outcome = run("]+.", strict_syntax=True)
    assert outcome.status == Status.SYNTAX_ERROR
    assert outcome.output == () and outcome.steps == 0
    assert run("[]+.", strict_syntax=True).status == Status.OK


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
