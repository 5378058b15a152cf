"""MemberAdam: Adam over member-batched parameters, each member with its own step count."""

from __future__ import annotations

import torch

from synthenv.agents.policy.optim import MemberAdam


def _grads(steps: int, shape: tuple[int, ...], seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator) for _ in range(steps)]


def test_with_every_member_active_it_is_torch_adam():
    start = torch.randn((3, 4, 5), generator=torch.Generator().manual_seed(1))
    ours, theirs = torch.nn.Parameter(start.clone()), torch.nn.Parameter(start.clone())
    adam, reference = MemberAdam([ours], lr=3e-3, eps=1e-5), torch.optim.Adam([theirs], lr=3e-3, eps=1e-5)
    for grad in _grads(25, (3, 4, 5)):
        ours.grad, theirs.grad = grad.clone(), grad.clone()
        adam.step(torch.ones(3, dtype=torch.bool))
        reference.step()
    assert torch.allclose(ours, theirs, atol=1e-6)
    assert adam.steps.tolist() == [25, 25, 25]


def test_an_inactive_member_keeps_its_parameters_and_a_late_starter_is_a_fresh_adam():
    """Member 1 sits out 10 steps, then learns: it moves exactly as a fresh Adam on its own gradients
    would (its bias correction counts its own steps, not the others')."""
    start = torch.randn((2, 6), generator=torch.Generator().manual_seed(2))
    weights = torch.nn.Parameter(start.clone())
    adam = MemberAdam([weights], lr=1e-2)
    grads = _grads(15, (2, 6))
    for step, grad in enumerate(grads):
        weights.grad = grad.clone()
        adam.step(torch.tensor([True, step >= 10]))
        if step < 10:
            assert torch.equal(weights.detach()[1], start[1]) and float(adam.exp_avg[0][1].abs().sum()) == 0.0
    assert adam.steps.tolist() == [15, 5]
    alone = torch.nn.Parameter(start[1:].clone())
    reference = torch.optim.Adam([alone], lr=1e-2)
    for grad in grads[10:]:
        alone.grad = grad[1:].clone()
        reference.step()
    assert torch.allclose(weights.detach()[1:], alone.detach(), atol=1e-6)


def test_state_round_trip_continues_exactly():
    def run(adam: MemberAdam, weights: torch.nn.Parameter, grads: list[torch.Tensor]) -> None:
        for grad in grads:
            weights.grad = grad.clone()
            adam.step(torch.tensor([True, False, True]))

    grads = _grads(8, (3, 2))
    straight_w = torch.nn.Parameter(torch.zeros(3, 2))
    straight = MemberAdam([straight_w], lr=0.1)
    run(straight, straight_w, grads)
    first_w = torch.nn.Parameter(torch.zeros(3, 2))
    first = MemberAdam([first_w], lr=0.1)
    run(first, first_w, grads[:4])
    resumed_w = torch.nn.Parameter(first_w.detach().clone())
    resumed = MemberAdam([resumed_w], lr=0.1)
    resumed.load_state_dict(first.state_dict())
    run(resumed, resumed_w, grads[4:])
    assert torch.equal(straight_w, resumed_w) and torch.equal(straight.steps, resumed.steps)
