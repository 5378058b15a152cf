"""Rollout pieces: GAE (hand-computed and against a naive loop), masks, sampling."""

from __future__ import annotations

import pytest
import torch

from synthenv.agents.buffers import (compute_gae, program_mask, sample_programs, shift_right, terminal_rewards,
                                     token_log_probs)
from synthenv.agents.policies import PolicyConfig, make_policy
from synthenv.language import EOS


def naive_gae(rewards, values, mask, gamma, lam):
    """Textbook GAE, one episode at a time, in plain Python floats."""
    advantages = [[0.0] * len(row) for row in rewards]
    for i, (r, v, m) in enumerate(zip(rewards, values, mask)):
        steps = [t for t, alive in enumerate(m) if alive]
        running = 0.0
        for k in reversed(range(len(steps))):
            t = steps[k]
            next_value = v[steps[k + 1]] if k + 1 < len(steps) else 0.0
            delta = r[t] + gamma * next_value - v[t]
            running = delta + gamma * lam * running
            advantages[i][t] = running
    return advantages


def test_gae_matches_a_hand_computed_case():
    # three steps, reward 1 at the end, gamma 0.9, lambda 0.5, values 0.1 0.2 0.3:
    # deltas: d2 = 1 - 0.3 = 0.7; d1 = 0.9*0.3 - 0.2 = 0.07; d0 = 0.9*0.2 - 0.1 = 0.08
    # A2 = 0.7; A1 = 0.07 + 0.45*0.7 = 0.385; A0 = 0.08 + 0.45*0.385 = 0.25325
    rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0]])
    values = torch.tensor([[0.1, 0.2, 0.3, 9.0]])
    mask = torch.tensor([[True, True, True, False]])
    advantages, returns = compute_gae(rewards, values, mask, gamma=0.9, gae_lambda=0.5)
    assert advantages.tolist()[0] == pytest.approx([0.25325, 0.385, 0.7, 0.0], abs=1e-6)
    assert returns.tolist()[0] == pytest.approx([0.35325, 0.585, 1.0, 0.0], abs=1e-6)


@pytest.mark.parametrize("gamma,lam", [(1.0, 0.95), (0.99, 1.0), (0.9, 0.0)])
def test_gae_matches_a_naive_loop(gamma, lam):
    g = torch.Generator().manual_seed(3)
    rewards = torch.randn((2, 6, 9), generator=g)
    values = torch.randn((2, 6, 9), generator=g)
    starts = torch.randint(0, 4, (2, 6, 1), generator=g)
    ends = torch.randint(4, 10, (2, 6, 1), generator=g)
    t = torch.arange(9)
    mask = (t >= starts) & (t < ends)  # episodes, some starting late (forced prefixes)
    mask &= torch.rand((2, 6, 9), generator=g) > 0.3  # and forced tokens between decisions
    advantages, returns = compute_gae(rewards, values, mask, gamma, lam)
    expected = naive_gae(rewards.view(12, 9).tolist(), values.view(12, 9).tolist(), mask.view(12, 9).tolist(),
                         gamma, lam)
    assert advantages.view(12, 9).tolist() == [pytest.approx(row, abs=1e-5) for row in expected]
    assert torch.allclose(returns, (advantages + values) * mask)


def test_terminal_rewards_sit_on_the_last_decision():
    decisions = torch.tensor([[[True, True, False], [False, True, True]]])
    placed = terminal_rewards(torch.tensor([[2.0, 3.0]]), decisions)
    assert placed.tolist() == [[[0.0, 2.0, 0.0], [0.0, 0.0, 3.0]]]


def test_program_mask_keeps_the_ending_eos_and_shift_right_starts_with_eos():
    tokens = torch.tensor([[3, 7, 0, 0], [1, 2, 3, 4]])
    assert program_mask(tokens).tolist() == [[True, True, True, False], [True, True, True, True]]
    assert shift_right(tokens).tolist() == [[EOS, 3, 7, 0], [EOS, 1, 2, 3]]


def _policy(kind: str, members: int, max_len: int = 12):
    generators = [torch.Generator().manual_seed(10 + s) for s in range(members)]
    hidden = 16 if kind == "transformer" else 35
    return make_policy(PolicyConfig(kind=kind, hidden=hidden), members, max_len, generators, torch.device("cpu"))


@pytest.mark.parametrize("kind", ["lstm", "transformer"])
def test_sampling_and_teacher_forcing_agree(kind):
    policy = _policy(kind, 2)
    generators = [torch.Generator().manual_seed(s) for s in range(2)]
    rollout = sample_programs(policy, 16, 12, generators, allow_eos=True)
    log_p, _, values = token_log_probs(policy, rollout.tokens, allow_eos=True)
    mask = rollout.decisions
    assert torch.allclose(log_p[mask], rollout.log_probs[mask], atol=1e-5)
    assert torch.allclose(values[mask], rollout.values[mask], atol=1e-5)
    assert torch.equal(mask, program_mask(rollout.tokens))
    # after the first EOS everything is EOS
    ended = torch.cumprod(rollout.tokens != EOS, dim=-1) == 0
    assert (rollout.tokens[ended] == EOS).all()


def test_suppressed_eos_gives_full_length_programs_and_members_are_independent():
    policy = _policy("lstm", 2)
    rollout = sample_programs(policy, 32, 12, [torch.Generator().manual_seed(s) for s in (0, 1)], allow_eos=False)
    assert (rollout.tokens != EOS).all() and rollout.decisions.all()
    alone = _policy("lstm", 1)
    alone.load_state_dict({k: v[:1] for k, v in policy.state_dict().items()})
    single = sample_programs(alone, 32, 12, [torch.Generator().manual_seed(0)], allow_eos=False)
    assert torch.equal(single.tokens[0], rollout.tokens[0])  # member 0 does not depend on member 1


def test_forced_tokens_are_written_and_are_not_decisions():
    policy = _policy("lstm", 1)
    forced = torch.full((1, 4, 12), 3)
    mask = torch.zeros((1, 4, 12), dtype=torch.bool)
    mask[0, 1, :2] = True  # a forced prefix
    mask[0, 2, :5] = mask[0, 2, 7:] = True  # a window of decisions at 5, 6 inside a forced program
    mask[0, 3] = True  # fully forced
    rollout = sample_programs(policy, 4, 12, [torch.Generator().manual_seed(0)], allow_eos=False,
                              forced=forced, forced_mask=mask)
    assert (rollout.tokens[mask] == 3).all()
    assert torch.equal(rollout.decisions, ~mask)
    forced[0, 2, 9] = EOS  # a forced EOS ends the program
    rollout = sample_programs(policy, 4, 12, [torch.Generator().manual_seed(0)], allow_eos=False,
                              forced=forced, forced_mask=mask)
    assert (rollout.tokens[0, 2, 9:] == EOS).all() and not rollout.decisions[0, 2, 9:].any()


def _plan(sources, cut, width, consume, allow_eos=True, second=None, max_window=3):
    """edit_plan with chosen draws: cut/width/consume are the uniform draws of each window."""
    from synthenv.agents.ppo import edit_plan

    edits = 0.0 if second is None else 0.99
    second = second or (0.0, 0.0, 0.0)
    draws = torch.tensor([[[edits, cut, width, consume, *second]]])
    forced, mask = edit_plan(torch.tensor([[sources]]), draws, max_edits=2, max_window=max_window,
                             allow_eos=allow_eos)
    return torch.where(mask, forced, -1)[0, 0].tolist()


def test_edit_plan_substitutes_inserts_and_deletes():
    program = [1, 2, 3, 4, 0, 0]  # n = 4; cut draw 0.3 -> cut 1; width draw 0 -> 1 token
    assert _plan(program, 0.3, 0.0, 0.5) == [1, -1, 3, 4, 0, 0]  # substitution (consumes 1)
    assert _plan(program, 0.3, 0.0, 0.0) == [1, -1, 2, 3, 4, 0]  # insertion (consumes 0)
    assert _plan(program, 0.3, 0.0, 0.9) == [1, -1, 4, 0, 0, 0]  # deletion (consumes 2)
    assert _plan(program, 0.3, 0.5, 0.5) == [1, -1, -1, 4, 0, 0]  # a 2-token window
    # two windows compose: the second (cut 3, insertion) applies to the first's result
    assert _plan(program, 0.3, 0.0, 0.5, second=(0.7, 0.0, 0.0)) == [1, -1, 3, -1, 4, 0]


def test_edit_plan_without_eos_lets_the_policy_fill_past_the_source():
    program = [5, 6, 7, 8]  # fixed length, no EOS
    assert _plan(program, 0.3, 0.0, 0.9, allow_eos=False) == [5, -1, 8, -1]  # deletion: the tail is new
