"""PPO and policy-gradient loss pieces on hand-made tensors; per-member gradient clipping."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from synthenv.agents.pqt.sampling import token_log_probs
from synthenv.agents.policy.optim import clip_grad_norm_per_member
from synthenv.agents.search.members import masked_mean
from synthenv.agents.pqt.pg import PRESETS, PolicyGradient
from synthenv.agents.pqt.policies import PolicyConfig, make_policy
from synthenv.agents.policy.losses import (clipped_policy_loss, explained_variance, normalize_advantages,
                                           risk_seeking_advantages)


def test_clipped_policy_loss_clips_only_in_the_favourable_direction():
    advantages = torch.tensor([[2.0, 2.0, -1.0, -1.0, 5.0]])
    ratio = torch.tensor([[1.5, 0.5, 1.5, 0.5, 9.0]])
    mask = torch.tensor([[True, True, True, True, False]])  # the last entry is not a decision
    # A>0, r=1.5: min(3, 2.4) -> 2.4 (clipped); A>0, r=0.5: min(1, 1.6) -> 1.0 (unclipped);
    # A<0, r=1.5: min(-1.5, -1.2) -> -1.5 (unclipped); A<0, r=0.5: min(-0.5, -0.8) -> -0.8 (clipped)
    expected = -(2.4 + 1.0 - 1.5 - 0.8) / 4
    assert clipped_policy_loss(advantages, ratio, mask, 0.2).tolist() == pytest.approx([expected])


def test_advantage_normalisation_ignores_masked_entries_and_members_apart():
    advantages = torch.tensor([[1.0, 3.0, 100.0], [5.0, 5.0, 7.0]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    normal = normalize_advantages(advantages, mask)
    assert normal[0, :2].tolist() == pytest.approx([-1.0, 1.0], abs=1e-6)
    assert masked_mean(normal, mask).tolist() == pytest.approx([0.0, 0.0], abs=1e-6)


def test_entropy_of_a_uniform_policy_is_log_v():
    policy = make_policy(PolicyConfig(), 1, 5, [torch.Generator().manual_seed(0)], torch.device("cpu"))
    with torch.no_grad():
        policy.w_logits.zero_()  # all logits 0: uniform over the allowed tokens
    tokens = torch.tensor([[[1, 2, 3, 4, 5]]])
    log_p, entropies = token_log_probs(policy, tokens, allow_eos=True)
    assert entropies.flatten().tolist() == pytest.approx([math.log(9)] * 5, abs=1e-6)
    assert log_p.flatten().tolist() == pytest.approx([-math.log(9)] * 5, abs=1e-6)
    _, entropies = token_log_probs(policy, tokens, allow_eos=False)
    assert entropies.flatten().tolist() == pytest.approx([math.log(8)] * 5, abs=1e-6)


def test_gradient_clipping_is_per_member():
    a = torch.nn.Parameter(torch.zeros(2, 2))
    b = torch.nn.Parameter(torch.zeros(2, 1))
    a.grad = torch.tensor([[3.0, 0.0], [0.3, 0.0]])
    b.grad = torch.tensor([[4.0], [0.4]])
    norms = clip_grad_norm_per_member([a, b], max_norm=1.0)
    assert norms.tolist() == pytest.approx([5.0, 0.5])
    assert a.grad.flatten().tolist() == pytest.approx([0.6, 0.0, 0.3, 0.0], abs=1e-5)  # member 1 untouched
    assert b.grad.flatten().tolist() == pytest.approx([0.8, 0.4], abs=1e-5)


def test_reinforce_baseline_is_a_per_position_ema_over_live_programs():
    learner = PolicyGradient(PRESETS["reinforce"], seeds=(0,), max_len=3, device=torch.device("cpu"))
    returns = torch.tensor([[[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]])
    mask = torch.tensor([[[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]]])  # program 2 ended after its first token
    learner._update_baseline(returns, mask)
    # position 0: mean(1, 0) = 0.5; positions 1, 2: only program 1 -> 1.0; EMA from 0 with decay 0.99
    assert learner.baseline.tolist() == [pytest.approx([0.005, 0.01, 0.01])]


def test_pqt_learns_to_write_its_queued_program():
    config = dataclasses.replace(PRESETS["pqt"], learning_rate=1e-2)  # PQT's 1e-4 moves too slowly for a test
    learner = PolicyGradient(config, seeds=(0,), max_len=4, device=torch.device("cpu"))
    target = torch.tensor([[[3, 3, 7, 1]]])
    learner.queue.push(target, torch.tensor([[0.9]]))
    before, _ = token_log_probs(learner.policy, target, allow_eos=False)
    tokens = learner.propose()
    rewards = torch.full((1, 64), -0.5)  # nothing in the batch beats the queued program
    for _ in range(20):
        learner.update(tokens, rewards)
    after, _ = token_log_probs(learner.policy, target, allow_eos=False)
    assert learner.queue.valid.sum() == 2  # the target and the batch's best (only the best is pushed)
    assert after.sum() > before.sum() + 1.0  # it shares the queue with the batch best, half the draws


def test_risk_seeking_advantages_keep_the_top_quantile_only():
    gains = torch.tensor([[0.0, 1.0, 2.0, 3.0], [5.0, 5.0, 5.0, 9.0]])
    advantages, mask = risk_seeking_advantages(gains, torch.ones(2, 4, dtype=torch.bool), 0.25)
    assert mask.tolist() == [[False, False, False, True], [False, False, False, True]]
    assert advantages[0, 3].item() == pytest.approx(0.75) and advantages[1, 3].item() == pytest.approx(3.0)


def test_explained_variance_is_one_for_a_perfect_fit_and_zero_for_the_mean():
    target = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    mask = torch.ones_like(target, dtype=torch.bool)
    assert explained_variance(target, target, mask).tolist() == [1.0]
    assert explained_variance(torch.full_like(target, 2.5), target, mask).tolist() == pytest.approx([0.0])
