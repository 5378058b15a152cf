"""Training the neural compiler on programs drawn like the agent's, labelled by the
traditional compiler (``synthenv train-compiler`` runs ``train`` and saves the weights).

Training programs mix, in equal parts: uniform random tokens (an untrained policy), mutated
known solutions (a trained policy, ``workloads.near``) and programs whose bracket density is
drawn per program between 5 % and 80 % (loop-heavy and deeper; ``workloads.loop_heavy`` is
the 50 % case). Half of them end early at a random EOS, so every length up to ``length``
is seen; the tokens after the EOS stay (they are dead and must be ignored). Labels are the
traditional compiler's classes and partners (``lex`` + ``match_brackets``).

Deterministic on the CPU: one seeded generator draws every batch, the model is initialised
from the same seed, and training runs on a fixed number of threads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from synthenv import language as lang
from synthenv.checks import require_finite_fields, require_positive_int_fields
from synthenv import workloads

from . import traditional
from .neural_model import ModelConfig, PointerTagger, bracket_width


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of ``train`` (saved with the weights)."""

    steps: int = 1500
    """Optimiser steps."""
    batch_size: int = 64
    """Programs per step."""
    length: int = 64
    """Tokens per training program (shorter ones end with an EOS). Nothing in the model
    depends on the length, and 64 keeps training cheap; accuracy is measured at 100+."""
    lr: float = 1e-2
    """Peak learning rate (AdamW; linear warm-up, cosine decay to 0)."""
    warmup: int = 50
    """Warm-up steps."""
    scalar_lr_scale: float = 10.0
    """Learning-rate multiplier of the attention's depth and distance scalars."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    truncate_prob: float = 0.5
    """Fraction of programs cut short by an EOS at a uniformly random position."""
    seed: int = 0
    """Seeds the model's initialisation and the data."""
    threads: int = 1
    """CPU threads during training (fixed, so that the result is reproducible)."""

    def __post_init__(self):
        require_positive_int_fields(self, "steps", "batch_size", "length", "threads")
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be an int >= 0, got {self.warmup!r}")
        require_finite_fields(self, "lr", "scalar_lr_scale", low=0, low_open=True)
        require_finite_fields(self, "weight_decay", low=0)
        require_finite_fields(self, "truncate_prob", low=0, high=1)


def dense_brackets(num: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """``[num, length]`` programs whose bracket share is drawn per program in [5 %, 80 %]."""
    share = 0.05 + 0.75 * torch.rand(num, 1, generator=generator)  # [num, 1]
    bracket = torch.rand(num, length, generator=generator) < share
    which = torch.randint(0, 2, (num, length), generator=generator)  # [ or ]
    other = torch.tensor([lang.RIGHT, lang.LEFT, lang.INC, lang.DEC, lang.OUTPUT, lang.INPUT])
    plain = other[torch.randint(0, len(other), (num, length), generator=generator)]
    return torch.where(bracket, lang.OPEN + which, plain)


def _near(num: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """Mutated solutions, cut to ``length`` tokens when a solution is longer."""
    longest = max(len(lang.text_to_tokens(s)) for s in workloads.solutions())
    return workloads.near(num, max(length, longest), generator, max_edits=6)[:, :length]


def training_programs(num: int, length: int, generator: torch.Generator, truncate_prob: float = 0.5) -> torch.Tensor:
    """A training batch ``[num, length]``: uniform, near-solution and dense-bracket programs."""
    thirds = [num // 3, num // 3, num - 2 * (num // 3)]
    parts = [
        workloads.uniform(thirds[0], length, generator),
        _near(thirds[1], length, generator),
        dense_brackets(thirds[2], length, generator),
    ]
    tokens = torch.cat(parts)[torch.randperm(num, generator=generator)]
    cut = torch.randint(0, length, (num, 1), generator=generator)  # EOS position
    cut = torch.where(torch.rand(num, 1, generator=generator) < truncate_prob, cut, length)
    return torch.where(torch.arange(length)[None, :] == cut, lang.EOS, tokens)


def labels(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The traditional compiler's ``(classes, partner)`` for ``tokens [N, L]``."""
    lexed = traditional.lex(tokens)
    return traditional.match_brackets(lexed.classes)


def pointer_targets(partner: torch.Tensor) -> torch.Tensor:
    """``[N, 2, L]`` targets of the backward and forward heads (``L`` = the sink)."""
    num, length = partner.shape
    positions = torch.arange(length, device=partner.device)
    back = torch.where((partner >= 0) & (partner < positions), partner, length)
    fwd = torch.where(partner > positions, partner, length)
    return torch.stack([back, fwd], dim=1)


def loss_and_accuracy(model: PointerTagger, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy over live tokens (classes + both pointers), and ``[N]`` exactness."""
    classes, partner = labels(tokens)
    out = model(tokens, bracket_width(tokens))
    length = tokens.shape[1]
    ce = torch.nn.functional.cross_entropy
    class_loss = (ce(out.class_logits.transpose(1, 2), classes, reduction="none") * out.alive).sum()
    targets = pointer_targets(partner)  # [N, 2, L] token positions, L = sink
    slot_targets = targets.gather(2, out.slots[:, None, :].expand(-1, 2, -1))  # [N, 2, B]
    bracket = torch.zeros_like(out.alive).scatter(1, out.slots, out.filled)  # [N, L] live brackets
    rank = bracket.long().cumsum(1) - 1  # [N, L] slot of each bracket
    width = out.slots.shape[1]
    slot_targets = torch.where(slot_targets < length, rank.gather(1, slot_targets.clamp(max=length - 1).flatten(1))
                               .view_as(slot_targets), width)
    pointer_loss = ce(out.full_pointer_logits().permute(0, 3, 1, 2), slot_targets, reduction="none")  # [N, 2, B]
    pointer_loss = (pointer_loss * out.filled[:, None, :]).sum()
    loss = (class_loss + pointer_loss) / out.alive.sum().clamp(min=1)
    with torch.no_grad():
        right = (out.class_logits.argmax(-1) == classes) & (out.pointer == targets).all(1)
        exact = (right | ~out.alive).all(1)
    return loss, exact


_SCALARS = ("depth_center", "depth_weight", "distance_slope")


def _param_groups(model: PointerTagger, config: TrainConfig) -> list[dict]:
    """The attention's few structural scalars learn ``scalar_lr_scale`` times faster (Adam
    moves a parameter by about lr per step, and they must travel a distance of order 1)."""
    scalars = [p for n, p in model.named_parameters() if n in _SCALARS]
    others = [p for n, p in model.named_parameters() if n not in _SCALARS]
    return [{"params": others, "scale": 1.0}, {"params": scalars, "scale": config.scalar_lr_scale}]


def _lr_at(step: int, config: TrainConfig) -> float:
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    return config.lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def train(config: TrainConfig = TrainConfig(), model_config: ModelConfig = ModelConfig(),
          log: Callable[[int, float, float], None] | None = None, log_every: int = 100) -> PointerTagger:
    """Train a ``PointerTagger`` on the CPU from scratch; ``log(step, loss, exact_rate)``.

    >>> model = train(TrainConfig(steps=2, batch_size=6, length=16))
    >>> model.training
    False
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        torch.manual_seed(config.seed)
        model = PointerTagger(model_config)
        generator = torch.Generator().manual_seed(config.seed + 1)
        optimizer = torch.optim.AdamW(_param_groups(model, config), lr=config.lr, weight_decay=config.weight_decay)
        for step in range(config.steps):
            for group in optimizer.param_groups:
                group["lr"] = _lr_at(step, config) * group["scale"]
            tokens = training_programs(config.batch_size, config.length, generator, config.truncate_prob)
            loss, exact = loss_and_accuracy(model, tokens)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            if log is not None and (step % log_every == 0 or step == config.steps - 1):
                log(step, float(loss.detach()), float(exact.float().mean()))  # sync point: training log
    finally:
        torch.set_num_threads(threads)
    return model.eval()
