"""The policies' loss pieces, per member: advantage normalisation, risk-seeking advantages, PPO's clipped
surrogate, a value head's explained variance. Each reduces over everything but the leading member dimension S
and returns ``[S]``.
"""

from __future__ import annotations

import torch

from ..search.members import masked_mean


def normalize_advantages(advantages: torch.Tensor, mask: torch.Tensor, center: bool = True) -> torch.Tensor:
    """Unit variance (and zero mean if ``center``) per member over the masked entries of ``advantages [S, ...]``.

    >>> normalize_advantages(torch.tensor([[1.0, 3.0, 100.0]]), torch.tensor([[True, True, False]])).tolist()
    [[-1.0, 1.0, 98.0]]
    """
    shape = (-1,) + (1,) * (advantages.dim() - 1)
    mean = masked_mean(advantages, mask).view(shape)
    std = masked_mean((advantages - mean) ** 2, mask).sqrt().view(shape)
    return ((advantages - mean) if center else advantages) / (std + 1e-8)


def risk_seeking_advantages(rewards: torch.Tensor, mask: torch.Tensor,
                            quantile: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages ``R - R_q`` on the samples at or above the batch's ``1 - quantile`` reward
    quantile, per member (Petersen et al., 2021, "deep symbolic regression"); the mask drops
    every other sample. ``rewards [S, B]``, ``mask [S, B, ...]``.

    >>> adv, mask = risk_seeking_advantages(torch.tensor([[0.0, 1.0, 2.0, 3.0]]),
    ...                                     torch.ones((1, 4, 1), dtype=torch.bool), 0.5)
    >>> adv[..., 0].tolist(), mask[..., 0].tolist()
    ([[0.0, 0.0, 0.5, 1.5]], [[False, False, True, True]])
    """
    valid = mask.view(*rewards.shape, -1).any(-1)  # [S, B]
    ranked = torch.where(valid, rewards, float("nan"))
    threshold = torch.nanquantile(ranked, 1.0 - quantile, dim=1, keepdim=True)  # [S, 1]
    elite = (rewards >= threshold) & valid  # [S, B]
    extra = (1,) * (mask.dim() - rewards.dim())
    mask = mask & elite.view(*elite.shape, *extra)
    advantages = (rewards - threshold).view(*rewards.shape, *extra)
    return torch.where(mask, advantages, 0.0), mask


def clipped_policy_loss(advantages: torch.Tensor, ratio: torch.Tensor, mask: torch.Tensor,
                        clip_coef: float) -> torch.Tensor:
    """PPO's clipped surrogate, ``mean(max(-A r, -A clip(r, 1 - c, 1 + c)))`` per member: ``[S]``.

    >>> loss = clipped_policy_loss(torch.tensor([[1.0, -1.0]]), torch.tensor([[1.5, 1.5]]),
    ...                            torch.tensor([[True, True]]), 0.2)
    >>> round(loss.item(), 6)  # (-1.2 + 1.5) / 2: the gain is clipped, the loss is not
    0.15
    """
    clipped = ratio.clamp(1 - clip_coef, 1 + clip_coef)
    return masked_mean(torch.max(-advantages * ratio, -advantages * clipped), mask)


def explained_variance(predicted: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``1 - Var(target - predicted) / Var(target)`` per member over the mask (CleanRL's and SB3's
    diagnostic of a value head): 1 is perfect, 0 no better than a constant, NaN for a constant target.

    >>> explained_variance(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[1.0, 2.0, 3.0]]),
    ...                    torch.tensor([[True, True, True]])).tolist()
    [1.0]
    """
    def variance(x: torch.Tensor) -> torch.Tensor:
        mean = masked_mean(x, mask).view(-1, *([1] * (x.dim() - 1)))
        return masked_mean((x - mean) ** 2, mask)

    total = variance(target)
    return torch.where(total > 0, 1 - variance(target - predicted) / total.clamp(min=1e-12), float("nan"))
