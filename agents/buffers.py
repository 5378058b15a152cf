"""Rollouts of autoregressive programs, on the device: sampling, storage and GAE.

A program is an episode of token decisions: the policy writes token t after reading token
t - 1 (the first input is EOS, PQT's start token); the program ends at its first EOS or at
``max_len`` tokens, and the env's reward arrives after the last decision. Nothing here syncs
with the host: loops run over the L token positions, never over programs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from synthenv.language import EOS, VOCAB_SIZE

MASKED_LOGIT = -1e9
"""Logit of a forbidden token (finite, so that 0 * log p stays 0 in entropies)."""


@dataclass(frozen=True)
class Rollout:
    """Programs written by a policy (S members x B programs x L tokens), all on one device.

    Attributes:
        tokens: ``[S, B, L]`` int64, EOS-padded after each program's end.
        log_probs: ``[S, B, L]`` float32, log-probability of each token under the sampling policy.
        values: ``[S, B, L]`` float32, the value head's estimate before each token.
        decisions: ``[S, B, L]`` bool, the tokens the policy chose: up to and including the
            ending EOS, excluding a forced prefix (seeding).
    """

    tokens: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    decisions: torch.Tensor

    @classmethod
    def allocate(cls, num_members: int, batch: int, max_len: int, device: torch.device) -> Rollout:
        """Zeroed storage for ``[S, B, L]`` rollouts, filled in place by ``sample_programs``."""
        shape = (num_members, batch, max_len)
        return cls(torch.zeros(shape, dtype=torch.int64, device=device),
                   torch.zeros(shape, dtype=torch.float32, device=device),
                   torch.zeros(shape, dtype=torch.float32, device=device),
                   torch.zeros(shape, dtype=torch.bool, device=device))

    @property
    def lengths(self) -> torch.Tensor:
        """``[S, B]`` int64 program lengths (tokens before the first EOS)."""
        return torch.cumprod(self.tokens != EOS, dim=-1).sum(-1)


def shift_right(tokens: torch.Tensor) -> torch.Tensor:
    """Policy inputs for teacher forcing: EOS then ``tokens[..., :-1]``."""
    return torch.nn.functional.pad(tokens[..., :-1], (1, 0), value=EOS)


def program_mask(tokens: torch.Tensor) -> torch.Tensor:
    """``[..., L]`` bool: the tokens of each program, including its ending EOS if any."""
    before = torch.cumprod(tokens != EOS, dim=-1)  # 1 before the first EOS
    return torch.nn.functional.pad(before[..., :-1], (1, 0), value=1).bool()


def eos_bias(allow_eos: bool, device: torch.device) -> torch.Tensor:
    """``[V]`` additive logit mask: 0, or ``MASKED_LOGIT`` on EOS when EOS is suppressed."""
    bias = torch.zeros(VOCAB_SIZE, dtype=torch.float32, device=device)
    if not allow_eos:
        bias[EOS] = MASKED_LOGIT
    return bias


def gumbel_noise(generators: list[torch.Generator], shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """``[S, *shape]`` Gumbel(0, 1) noise, member s drawn from ``generators[s]`` only."""
    uniform = torch.stack([torch.rand(shape, generator=g, device=device) for g in generators])
    return -torch.log(-torch.log(uniform.clamp(min=1e-20, max=1 - 1e-7)))


@torch.no_grad()
def sample_programs(policy, batch: int, max_len: int, generators: list[torch.Generator], allow_eos: bool,
                    forced: torch.Tensor | None = None, forced_mask: torch.Tensor | None = None,
                    out: Rollout | None = None) -> Rollout:
    """Write ``batch`` programs per member with the policy (Gumbel-max sampling, no host sync).

    Args:
        policy: a policy of ``agents.policies`` with S members.
        batch: B, programs per member.
        max_len: L, tokens per program.
        generators: S torch generators (one per member, on the policy's device).
        allow_eos: False suppresses EOS: every program has exactly L tokens (PQT's setting).
        forced: optional ``[S, B, L]`` tokens written instead of the policy's where
            ``forced_mask [S, B, L]`` is True (seeding from known programs); forced tokens are
            not decisions. A forced EOS ends the program.
        out: preallocated storage (``Rollout.allocate``) to fill in place; allocated if None.
    """
    device = policy.w_logits.device
    s = len(generators)
    noise = gumbel_noise(generators, (batch, max_len, VOCAB_SIZE), device)  # [S, B, L, V]
    bias = eos_bias(allow_eos, device)
    out = out if out is not None else Rollout.allocate(s, batch, max_len, device)
    tokens, log_probs, values, decisions = out.tokens, out.log_probs, out.values, out.decisions
    prev = torch.zeros((s, batch), dtype=torch.int64, device=device)
    alive = torch.ones((s, batch), dtype=torch.bool, device=device)
    state = policy.initial_state(batch)
    for t in range(max_len):
        logits, value, state = policy.step(prev, state, t)
        log_p = torch.log_softmax(logits + bias, dim=-1)  # [S, B, V]
        token = (log_p + noise[:, :, t]).argmax(-1)  # [S, B]
        chosen = alive
        if forced is not None:
            token = torch.where(forced_mask[:, :, t], forced[:, :, t], token)
            chosen = alive & ~forced_mask[:, :, t]
        token = torch.where(alive, token, EOS)
        tokens[:, :, t] = token
        log_probs[:, :, t] = log_p.gather(-1, token[..., None])[..., 0]
        values[:, :, t] = value
        decisions[:, :, t] = chosen
        alive = alive & (token != EOS)
        prev = token
    return out


def token_log_probs(policy, tokens: torch.Tensor, allow_eos: bool):
    """Teacher-forced log-probabilities of ``tokens [S, B, L]`` under the policy (with grad).

    Returns:
        ``(log_probs [S, B, L], entropies [S, B, L], values [S, B, L])``.
    """
    logits, values = policy.evaluate(shift_right(tokens))
    log_p = torch.log_softmax(logits + eos_bias(allow_eos, tokens.device), dim=-1)  # [S, B, L, V]
    entropies = -(log_p.exp() * log_p).sum(-1)
    return log_p.gather(-1, tokens[..., None])[..., 0], entropies, values


def terminal_rewards(rewards: torch.Tensor, decisions: torch.Tensor) -> torch.Tensor:
    """Place each program's reward ``[S, B]`` on its last decision: ``[S, B, L]``."""
    positions = torch.arange(decisions.shape[-1], device=decisions.device)
    last = torch.where(decisions, positions, -1).amax(-1, keepdim=True)  # [S, B, 1]
    return torch.where(positions == last, rewards[..., None], 0.0)


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float,
                gae_lambda: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over the last dimension (T steps).

    Each row is one episode made of the steps where ``mask`` is True, in order; steps outside the
    mask (forced tokens, the padding after the end) are not decisions: they get advantage 0 and
    the recursion passes over them to the next decision. The state after the last decision is
    terminal (value 0).

    Args:
        rewards, values: ``[..., T]`` float.
        mask: ``[..., T]`` bool.

    Returns:
        ``(advantages, returns)``, both ``[..., T]``; returns = advantages + values.

    >>> adv, ret = compute_gae(torch.tensor([[0.0, 1.0]]), torch.tensor([[0.5, 0.5]]),
    ...                        torch.tensor([[True, True]]), gamma=1.0, gae_lambda=0.5)
    >>> adv.tolist()
    [[0.25, 0.5]]
    """
    mask_f = mask.to(values.dtype)
    advantages = torch.zeros_like(values)
    next_adv = torch.zeros_like(values[..., 0])
    next_value = torch.zeros_like(values[..., 0])
    has_next = torch.zeros_like(values[..., 0])  # 1 once a later decision exists in the row
    for t in range(values.shape[-1] - 1, -1, -1):
        delta = rewards[..., t] + gamma * next_value * has_next - values[..., t]
        adv = (delta + gamma * gae_lambda * has_next * next_adv) * mask_f[..., t]
        advantages[..., t] = adv
        decision = mask[..., t]
        next_adv = torch.where(decision, adv, next_adv)
        next_value = torch.where(decision, values[..., t], next_value)
        has_next = torch.maximum(has_next, mask_f[..., t])
    return advantages, advantages + values * mask_f
