"""The PQT paper's policy-gradient family (docs/semantics.md §4): REINFORCE, PQT and PG+PQT.

One learner with two terms, batched over S members:

- policy gradient (REINFORCE, gamma = 1: every token of a program gets its terminal reward),
  with a per-position exponential-moving-average baseline (decay 0.99) and an entropy bonus;
- priority-queue training: a unique top-K queue of the best programs found so far (after each
  batch only the batch's best is pushed); each step one program drawn uniformly from the
  queue has its log-likelihood maximised.

``reinforce``: PG weight 1, queue weight 0, entropy 0.05. ``pqt``: PG weight 0, queue weight
200, entropy 0.01. ``pg-pqt``: PG weight 1, queue weight 50, entropy 0.01. All: 2x35 LSTM,
RMSProp (decay 0.99) lr 1e-4, global-norm clip 50, batch 64, programs of exactly 100 tokens.
Losses sum over a program's tokens and average over programs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from synthenv.checks import require_finite_fields, require_positive_int_fields

from .sampling import Rollout, program_mask, sample_programs, token_log_probs
from ..policy.optim import clip_grad_norm_per_member
from ..search.members import generator_states, load_generator_states, masked_mean, member_generators
from ..run.feedback import Feedback
from ..policy.losses import explained_variance
from .policies import PolicyConfig, make_policy
from ..search.queue import ProgramQueue


@dataclass(frozen=True)
class PGConfig:
    """Hyperparameters of REINFORCE / PQT / PG+PQT (defaults: docs/semantics.md §4 REINFORCE)."""

    batch_size: int = 64
    """Programs sampled per member per step (PQT: 64)."""
    learning_rate: float = 1e-4
    """RMSProp step size (PQT: 1e-4)."""
    rmsprop_decay: float = 0.99
    """RMSProp decay of the squared-gradient average (PQT: 0.99)."""
    max_grad_norm: float = 50.0
    """Global gradient-norm clip, per member (PQT: 50)."""
    entropy_coef: float = 0.05
    """Weight of the entropy bonus (PQT: 0.05 REINFORCE, 0.01 PQT and PG+PQT)."""
    pg_weight: float = 1.0
    """Weight of the policy-gradient term (PQT: 1; 0 for pure PQT)."""
    queue_weight: float = 0.0
    """Weight of the queue log-likelihood term (PQT: 200 pure PQT, 50 PG+PQT, 0 REINFORCE)."""
    queue_size: int = 10
    """K, programs kept in the queue (PQT: 10)."""
    queue_samples: int = 1
    """Queue programs drawn (uniformly) per step (PQT: 1)."""
    baseline_decay: float = 0.99
    """Decay of the per-position EMA reward baseline (PQT: 0.99)."""
    allow_eos: bool = False
    """Let the policy end programs early with EOS (PQT: False, every program has max_len tokens)."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """The policy network (PQT: LSTM 2x35, embedding 10)."""

    def __post_init__(self) -> None:
        require_positive_int_fields(self, "batch_size", "queue_size", "queue_samples")
        require_finite_fields(self, "learning_rate", "max_grad_norm", low=0.0, low_open=True)
        require_finite_fields(self, "entropy_coef", "pg_weight", "queue_weight", low=0.0)
        require_finite_fields(self, "baseline_decay", "rmsprop_decay", low=0.0, high=1.0, high_open=True)


PRESETS = {
    "reinforce": PGConfig(),
    "pqt": PGConfig(entropy_coef=0.01, pg_weight=0.0, queue_weight=200.0),
    "pg-pqt": PGConfig(entropy_coef=0.01, pg_weight=1.0, queue_weight=50.0),
}


class PolicyGradient:
    """REINFORCE with an EMA baseline plus PQT's queue term, for S members at once.

    >>> learner = PolicyGradient(PRESETS["pqt"], seeds=(0, 1), max_len=8, device=torch.device("cpu"))
    >>> tokens = learner.propose()
    >>> stats = learner.update(tokens, torch.rand(2, 64))
    >>> tuple(tokens.shape), tuple(stats["losses/policy_loss"].shape)
    ((2, 64, 8), (2,))
    """

    def __init__(self, config: PGConfig, seeds: tuple[int, ...], max_len: int, device: torch.device):
        self.config, self.max_len, self.device = config, max_len, device
        self.programs_per_step = config.batch_size
        self.generators = member_generators(seeds, device)
        s = len(seeds)
        self.policy = make_policy(config.policy, s, max_len, self.generators, device)
        self.optimizer = torch.optim.RMSprop(self.policy.parameters(), lr=config.learning_rate,
                                             alpha=config.rmsprop_decay)
        self.baseline = torch.zeros((s, max_len), dtype=torch.float32, device=device)  # [S, L]
        self.queue = ProgramQueue(s, config.queue_size, max_len, device)
        self.rollout = Rollout.allocate(s, config.batch_size, max_len, device)

    def propose(self) -> torch.Tensor:
        sample_programs(self.policy, self.config.batch_size, self.max_len, self.generators, self.config.allow_eos,
                        out=self.rollout)
        return self.rollout.tokens

    def new_programs(self, step: int) -> int:
        return self.config.batch_size

    def learn(self, feedback: Feedback) -> dict[str, torch.Tensor]:
        return self.update(feedback.tokens, feedback.rewards)

    def update(self, tokens: torch.Tensor, rewards: torch.Tensor) -> dict[str, torch.Tensor]:
        """One PQT-paper update from programs ``tokens [S, B, L]`` and their ``rewards [S, B]``."""
        config = self.config
        best = rewards.argmax(1)  # [S]: PQT pushes only the batch's best program
        self.queue.push(tokens.gather(1, best[:, None, None].expand(-1, 1, tokens.shape[2])),
                        rewards.gather(1, best[:, None]))
        b = tokens.shape[1]
        queued = valid = None
        if config.queue_weight:
            queued, valid = self.queue.sample(config.queue_samples, self.generators)  # [S, Q, L], [S, Q]
            tokens = torch.cat([tokens, queued], dim=1)  # one policy pass for the batch and the queue
        all_log_p, all_entropies = token_log_probs(self.policy, tokens, config.allow_eos)
        log_p, entropies, tokens = all_log_p[:, :b], all_entropies[:, :b], tokens[:, :b]
        mask = program_mask(tokens).float()  # [S, B, L]
        returns = rewards.float()[..., None].expand_as(log_p)  # gamma = 1: terminal reward at every step
        advantages = (returns - self.baseline[:, None, :]) * mask
        policy_loss = -(advantages * log_p * mask).sum(-1).mean(-1)  # [S]
        entropy = (entropies * mask).sum(-1).mean(-1)  # [S]
        loss = config.pg_weight * policy_loss - config.entropy_coef * entropy
        queue_loss = torch.zeros_like(policy_loss)
        if queued is not None:
            nll = -(all_log_p[:, b:] * program_mask(queued)).sum(-1)  # [S, Q]
            queue_loss = (nll * valid).sum(-1) / config.queue_samples
            loss = loss + config.queue_weight * queue_loss
        self.optimizer.zero_grad(set_to_none=True)
        loss.sum().backward()  # members share no parameters: the sum keeps their gradients apart
        grad_norm = clip_grad_norm_per_member(list(self.policy.parameters()), config.max_grad_norm)
        self.optimizer.step()
        baseline = self.baseline[:, None, :].expand_as(returns)
        self._update_baseline(returns, mask)
        return {"losses/policy_loss": policy_loss.detach(), "losses/entropy": masked_mean(entropies.detach(), mask),
                "losses/queue_loss": queue_loss.detach(), "losses/grad_norm": grad_norm,
                "losses/explained_variance": explained_variance(baseline, returns, mask.bool()),
                "charts/learning_rate": torch.full_like(grad_norm, config.learning_rate),
                "programs/queue_best": self.queue.rewards[:, 0], "programs/queue_worst": self.queue.rewards[:, -1]}

    def _update_baseline(self, returns: torch.Tensor, mask: torch.Tensor) -> None:
        """EMA per position over the programs that reach that position."""
        count = mask.sum(1)  # [S, L]
        mean = (returns * mask).sum(1) / count.clamp(min=1.0)
        decay = self.config.baseline_decay
        self.baseline = torch.where(count > 0, decay * self.baseline + (1 - decay) * mean, self.baseline)

    def state_dict(self) -> dict:
        return {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "baseline": self.baseline.clone(), "queue": self.queue.state_dict(),
                "generators": generator_states(self.generators), "config": dataclasses.asdict(self.config)}

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.baseline = state["baseline"].to(self.device).clone()
        self.queue.load_state_dict(state["queue"])
        load_generator_states(self.generators, state["generators"])
