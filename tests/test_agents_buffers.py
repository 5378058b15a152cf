"""Autoregressive sampling pieces: masks, sampling against teacher forcing, member independence."""

from __future__ import annotations

import pytest
import torch

from synthenv.agents.pqt.sampling import program_mask, sample_programs, shift_right, token_log_probs
from synthenv.agents.pqt.policies import PolicyConfig, make_policy
from synthenv.language import EOS


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
    """The sampler's step-by-step log-probabilities (the LSTM through its first-layer input table)
    equal teacher forcing's (the fused LSTM kernel)."""
    policy = _policy(kind, 2)
    generators = [torch.Generator().manual_seed(s) for s in range(2)]
    rollout = sample_programs(policy, 16, 12, generators, allow_eos=True)
    log_p, _ = token_log_probs(policy, rollout.tokens, allow_eos=True)
    mask = program_mask(rollout.tokens)
    assert torch.allclose(log_p[mask], rollout.log_probs[mask], atol=1e-5)
    ended = torch.cumprod(rollout.tokens != EOS, dim=-1) == 0  # after the first EOS everything is EOS
    assert (rollout.tokens[ended] == EOS).all() and ended.any()


def test_suppressed_eos_gives_full_length_programs_and_members_are_independent():
    policy = _policy("lstm", 2)
    rollout = sample_programs(policy, 32, 12, [torch.Generator().manual_seed(s) for s in (0, 1)], allow_eos=False)
    assert (rollout.tokens != EOS).all()
    alone = _policy("lstm", 1)
    alone.load_state_dict({k: v[:1] for k, v in policy.state_dict().items()})
    single = sample_programs(alone, 32, 12, [torch.Generator().manual_seed(0)], allow_eos=False)
    assert torch.equal(single.tokens[0], rollout.tokens[0])  # member 0 does not depend on member 1
