"""Autoregressive programs on the device: sampling from a token policy, teacher forcing, masks.

The PQT paper's policy-gradient family (``agents.pqt.pg``) writes programs token by token: the
policy reads token t - 1 (the first input is EOS, PQT's start token) and writes token t; a
program ends at its first EOS or at ``max_len`` tokens. Nothing here syncs with the host: the
loop runs over the L token positions, never over programs.
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
    """

    tokens: torch.Tensor
    log_probs: torch.Tensor

    @classmethod
    def allocate(cls, num_members: int, batch: int, max_len: int, device: torch.device) -> Rollout:
        """Zeroed storage for ``[S, B, L]`` rollouts, filled in place by ``sample_programs``."""
        shape = (num_members, batch, max_len)
        return cls(torch.zeros(shape, dtype=torch.int64, device=device),
                   torch.zeros(shape, dtype=torch.float32, device=device))


def shift_right(tokens: torch.Tensor) -> torch.Tensor:
    """Policy inputs for teacher forcing: EOS then ``tokens[..., :-1]``."""
    return torch.nn.functional.pad(tokens[..., :-1], (1, 0), value=EOS)


def program_mask(tokens: torch.Tensor) -> torch.Tensor:
    """``[..., L]`` bool: the tokens of each program, including its ending EOS if any."""
    before = torch.cumprod(tokens != EOS, dim=-1)  # 1 before the first EOS
    return torch.nn.functional.pad(before[..., :-1], (1, 0), value=1).bool()


def eos_bias(allow_eos: bool, device: torch.device) -> torch.Tensor:
    """``[V]`` additive logit mask: 0, or ``MASKED_LOGIT`` on EOS when EOS is suppressed."""
    return torch.where(torch.arange(VOCAB_SIZE, device=device) == EOS, 0.0 if allow_eos else MASKED_LOGIT, 0.0)


def gumbel_noise(generators: list[torch.Generator], shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """``[S, *shape]`` Gumbel(0, 1) noise, member s drawn from ``generators[s]`` only."""
    uniform = torch.stack([torch.rand(shape, generator=g, device=device) for g in generators])
    return -torch.log(-torch.log(uniform.clamp(min=1e-20, max=1 - 1e-7)))


@torch.no_grad()
def sample_programs(policy, batch: int, max_len: int, generators: list[torch.Generator], allow_eos: bool,
                    out: Rollout | None = None) -> Rollout:
    """Write ``batch`` programs per member with the policy (Gumbel-max sampling, no host sync).

    Args:
        policy: a policy of ``agents.pqt.policies`` with S members.
        batch: B, programs per member.
        max_len: L, tokens per program.
        generators: S torch generators (one per member, on the policy's device).
        allow_eos: False suppresses EOS: every program has exactly L tokens (PQT's setting).
        out: preallocated storage (``Rollout.allocate``) to fill in place; allocated if None.
    """
    device = policy.w_logits.device
    s = len(generators)
    noise = gumbel_noise(generators, (batch, max_len, VOCAB_SIZE), device)  # [S, B, L, V]
    bias = eos_bias(allow_eos, device)
    out = out if out is not None else Rollout.allocate(s, batch, max_len, device)
    prev = torch.zeros((s, batch), dtype=torch.int64, device=device)
    alive = torch.ones((s, batch), dtype=torch.bool, device=device)
    state = policy.initial_state(batch)
    for t in range(max_len):
        logits, state = policy.step(prev, state, t)
        log_p = torch.log_softmax(logits + bias, dim=-1)  # [S, B, V]
        token = torch.where(alive, (log_p + noise[:, :, t]).argmax(-1), EOS)  # [S, B]
        out.tokens[:, :, t] = token
        out.log_probs[:, :, t] = log_p.gather(-1, token[..., None])[..., 0]
        alive = alive & (token != EOS)
        prev = token
    return out


def token_log_probs(policy, tokens: torch.Tensor, allow_eos: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher-forced log-probabilities of ``tokens [S, B, L]`` under the policy (with grad).

    Returns:
        ``(log_probs [S, B, L], entropies [S, B, L])``.
    """
    logits = policy.evaluate(shift_right(tokens))
    log_p = torch.log_softmax(logits + eos_bias(allow_eos, tokens.device), dim=-1)  # [S, B, L, V]
    entropies = -(log_p.exp() * log_p).sum(-1)
    return log_p.gather(-1, tokens[..., None])[..., 0], entropies
