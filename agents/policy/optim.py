"""Optimising parameters batched over S members: Adam with each member's own step count, and per-member
gradient clipping.

``torch.optim.Adam`` keeps one step count per parameter tensor, shared by every member whose
slice the tensor holds. A member that starts learning late (``ppo``'s members hand
over from their elitist phase at different generations) would then get the bias correction
of the others' step count: its first steps about 3x too large, and its run dependent on which
seeds share the job. Here member s's moments and step count advance only on the steps it is
``active``; the update is Adam's (Kingma & Ba 2015, Algorithm 1, as ``torch.optim.Adam``
computes it). Fixed-shape tensor code: no host sync on any device.
"""

from __future__ import annotations

import torch


class MemberAdam:
    """Adam over ``params`` whose first dimension is the member (S).

    >>> w = torch.nn.Parameter(torch.zeros(2, 3))
    >>> adam = MemberAdam([w], lr=0.1)
    >>> w.grad = torch.ones(2, 3)
    >>> adam.step(torch.tensor([True, False]))  # member 1 sits this step out
    >>> [round(x, 6) for x in w.detach()[:, 0].tolist()], adam.steps.tolist()
    ([-0.1, 0.0], [1, 0])
    """

    def __init__(self, params: list[torch.nn.Parameter], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        self.params, self.lr, self.betas, self.eps = list(params), lr, betas, eps
        first = self.params[0]
        self.steps = torch.zeros(first.shape[0], dtype=torch.int64, device=first.device)  # [S]
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, active: torch.Tensor) -> None:
        """One Adam step for the members where ``active [S]`` (bool) is True; the others keep
        their parameters, moments and step count."""
        beta1, beta2 = self.betas
        self.steps += active.long()
        steps = self.steps.clamp(min=1).double()  # an inactive member that never stepped: any finite value
        correction1 = (1 - beta1 ** steps).float()  # [S]
        correction2_sqrt = (1 - beta2 ** steps).sqrt().float()
        for p, avg, avg_sq in zip(self.params, self.exp_avg, self.exp_avg_sq):
            if p.grad is None:
                continue
            shape = (-1, *([1] * (p.dim() - 1)))
            on = active.view(shape)
            grad = p.grad
            avg.copy_(torch.where(on, avg * beta1 + grad * (1 - beta1), avg))
            avg_sq.copy_(torch.where(on, avg_sq * beta2 + grad * grad * (1 - beta2), avg_sq))
            denom = avg_sq.sqrt() / correction2_sqrt.view(shape) + self.eps
            update = avg / denom * (self.lr / correction1).view(shape)
            p.sub_(torch.where(on, update, 0.0))

    def state_dict(self) -> dict:
        return {"steps": self.steps.clone(), "exp_avg": [m.clone() for m in self.exp_avg],
                "exp_avg_sq": [v.clone() for v in self.exp_avg_sq]}

    def load_state_dict(self, state: dict) -> None:
        if len(state["exp_avg"]) != len(self.params) or state["steps"].shape != self.steps.shape:
            raise ValueError(f"checkpoint optimizer holds {len(state['exp_avg'])} parameters for "
                             f"{state['steps'].shape[0]} members, this run has {len(self.params)} for "
                             f"{self.steps.shape[0]}; resume with the same algorithm and seeds")
        device = self.steps.device
        self.steps = state["steps"].to(device).clone()
        self.exp_avg = [m.to(device).clone() for m in state["exp_avg"]]
        self.exp_avg_sq = [v.to(device).clone() for v in state["exp_avg_sq"]]


def clip_grad_norm_per_member(parameters: list[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """Scale each member's gradient to global norm <= ``max_norm``; returns the norms ``[S]``.

    Every parameter has the member dimension first, so member s's gradient norm is taken over
    its own slices only (TF's ``clip_by_global_norm`` per member, no host sync).
    """
    grads = [p.grad for p in parameters if p.grad is not None]
    squares = torch.stack([g.pow(2).flatten(1).sum(1) for g in grads]).sum(0)  # [S]
    norms = squares.sqrt()
    scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)  # [S]
    for g in grads:
        g.mul_(scale.view(-1, *([1] * (g.dim() - 1))))
    return norms
