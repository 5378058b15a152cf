"""PPO over the token decisions of program mode, with self-improvement, batched over S members.

The policy writes whole programs autoregressively; each token is a decision and the env's
program reward arrives after the last one. Per step (one batch of B programs per member):
sample (Gumbel-max, on the device), execute in the env, compute GAE over token positions, then
``update_epochs`` epochs of clipped-objective minibatch updates with a value head and an
entropy bonus (CleanRL's recipe, per-token means).

Self-improvement (PQT's idea, kept inside PPO): a unique top-K queue of each member's best
programs, refreshed with every batch; every minibatch the policy also maximises the
log-likelihood of all queued programs (weight ``queue_coef``). In program mode with several
iterations, programs of round >= 2 are seeded from the queue (``seed_prob``): a queued program is
copied except in one or two short windows where the policy writes new tokens (an edit: insertion,
substitution or deletion). Copied tokens are not decisions; the window tokens are, and PPO learns
from them like from any other token. No host synchronisation anywhere in a step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

import torch

from synthenv.checks import require_positive_int_fields
from synthenv.language import VOCAB_SIZE

from .buffers import Rollout, compute_gae, program_mask, sample_programs, terminal_rewards, token_log_probs
from .common import (clip_grad_norm_per_member, generator_states, load_generator_states, masked_mean,
                     member_generators)
from .policies import PolicyConfig, make_policy
from .priority_queue import ProgramQueue


@dataclass(frozen=True)
class PPOConfig:
    """Hyperparameters of synthenv's PPO agent."""

    batch_size: int = 64
    """Programs sampled per member per update (the env slice of each member)."""
    learning_rate: float = 5e-4
    """Adam step size."""
    update_epochs: int = 2
    """Passes over each batch."""
    num_minibatches: int = 1
    """Minibatches per epoch (must divide batch_size)."""
    gamma: float = 1.0
    """Discount over token positions (1: the program reward is what counts)."""
    gae_lambda: float = 0.95
    """GAE lambda over token positions."""
    clip_coef: float = 0.2
    """PPO ratio clip (also clips the value update)."""
    ent_coef: float = 0.01
    """Entropy bonus weight (per-token mean entropy)."""
    vf_coef: float = 0.5
    """Value loss weight."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip, per member."""
    norm_adv: bool = True
    """Normalise advantages per member and minibatch."""
    risk_quantile: float = 0.0
    """Risk-seeking policy gradient (Petersen et al., 2021): train only on each batch's top
    ``risk_quantile`` fraction of programs, with advantage ``R - R_q`` (the quantile as baseline),
    which targets the best program rather than the average one. 0: off (GAE with the value head)."""
    queue_size: int = 16
    """K, best unique programs kept for self-imitation (0 disables the queue)."""
    queue_coef: float = 0.5
    """Weight of the queue imitation term (per-token mean negative log-likelihood)."""
    seed_prob: float = 0.5
    """Program mode with several iterations: probability that a program of round >= 2 is written as
    an edit of a queued program (0: never; with ``iterations=1`` there is no round 2)."""
    seed_writer: Literal["policy", "random"] = "policy"
    """Who writes the seeding windows: the policy (decisions PPO learns from) or uniform random
    commands (a mutation: the whole seeded program is forced, only the queue learns from it)."""
    seed_edits: int = 2
    """Seeding: at most this many windows per seeded program (1 or more, drawn uniformly)."""
    seed_window: int = 3
    """Seeding: each window lets the policy write 1 .. seed_window tokens in place of 0 .. seed_window + 1
    tokens of the queued program (substitution, insertion or deletion)."""
    allow_eos: bool = True
    """Let the policy end programs with EOS (False: exactly max_len tokens, PQT's setting)."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """The policy network (default: PQT's LSTM 2x35, embedding 10)."""

    def __post_init__(self) -> None:
        require_positive_int_fields(self, "batch_size", "update_epochs", "num_minibatches")
        if self.batch_size % self.num_minibatches:
            raise ValueError(f"num_minibatches={self.num_minibatches} must divide batch_size={self.batch_size}")
        if not isinstance(self.queue_size, int) or self.queue_size < 0:
            raise ValueError(f"queue_size must be an int >= 0, got {self.queue_size!r}")
        if not 0.0 <= self.risk_quantile < 1.0:
            raise ValueError(f"risk_quantile must be in [0, 1), got {self.risk_quantile!r}")
        if not 0.0 <= self.seed_prob <= 1.0:
            raise ValueError(f"seed_prob must be in [0, 1], got {self.seed_prob!r}")
        require_positive_int_fields(self, "seed_edits", "seed_window")
        if self.seed_prob and not self.queue_size:
            raise ValueError("seed_prob > 0 seeds programs from the queue: set queue_size > 0")


def edit_plan(sources: torch.Tensor, draws: torch.Tensor, max_edits: int, max_window: int,
              allow_eos: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn programs into edit templates: forced tokens copied from ``sources [S, B, L]`` around up
    to two windows where the policy writes (the only decisions of a seeded program).

    A window at cut c of width w that consumes k source tokens (k in w-1, w, w+1: insertion,
    substitution, deletion) maps output position t to source position t (t < c), to a decision
    (c <= t < c + w) or to t - w + k. With two windows the maps compose. A source position past
    the program's end copies its EOS (the edit ends where the source ended); past ``L`` it is a
    decision if EOS is not allowed. ``draws [S, B, 7]`` are uniform numbers in [0, 1).

    Returns:
        ``(forced [S, B, L] int64, forced_mask [S, B, L] bool)``.

    >>> forced, mask = edit_plan(torch.tensor([[[1, 2, 3, 4, 0, 0]]]), torch.tensor([[[0.0, 0.3, 0.0, 0.5,
    ...                          0.0, 0.0, 0.0]]]), max_edits=1, max_window=1, allow_eos=True)
    >>> torch.where(mask, forced, -1).tolist()  # the policy writes one token in place of token 1
    [[[1, -1, 3, 4, 0, 0]]]
    """
    length = sources.shape[-1]
    n = torch.cumprod(sources != 0, dim=-1).sum(-1, keepdim=True)  # [S, B, 1] tokens before EOS
    t = torch.arange(length, device=sources.device)  # [L]

    def window(cut_draw, width_draw, consume_draw, active):
        cut = (cut_draw[..., None] * (n + 1)).long().clamp(max=length)  # [S, B, 1] in [0, n]
        width = 1 + (width_draw[..., None] * max_window).long()  # [S, B, 1] in [1, max_window]
        consume = (width - 1 + (consume_draw[..., None] * 3).long()).clamp(min=0)  # w-1, w or w+1
        width, consume = width * active[..., None], consume * active[..., None]  # inactive: identity
        return torch.where(t < cut, t, torch.where(t < cut + width, -1, t - width + consume))  # [S, B, L]

    edits = 1 + (draws[..., 0] * max_edits).long().clamp(max=max_edits - 1)  # [S, B] in [1, max_edits]
    first = window(draws[..., 1], draws[..., 2], draws[..., 3], torch.ones_like(edits))
    second = window(draws[..., 4], draws[..., 5], draws[..., 6], (edits >= 2).long())
    source = torch.where(second < 0, -1, first.gather(-1, second.clamp(0, length - 1)))
    source = torch.where((second >= length) & (second >= 0), length, source)  # [S, B, L]
    inside = source < length
    forced = torch.where(inside, sources.gather(-1, source.clamp(0, length - 1)), 0)
    forced_mask = (source >= 0) & (inside | allow_eos)
    return forced, forced_mask


def normalize_advantages(advantages: torch.Tensor, mask: torch.Tensor, center: bool = True) -> torch.Tensor:
    """Unit variance (and zero mean if ``center``) per member over the masked entries of ``advantages [S, ...]``."""
    shape = (-1,) + (1,) * (advantages.dim() - 1)
    mean = masked_mean(advantages, mask).view(shape)
    std = masked_mean((advantages - mean) ** 2, mask).sqrt().view(shape)
    return ((advantages - mean) if center else advantages) / (std + 1e-8)


def risk_seeking_advantages(rewards: torch.Tensor, mask: torch.Tensor,
                            quantile: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages ``R - R_q`` on the programs at or above the batch's ``1 - quantile`` reward
    quantile, per member; the mask drops every other program. ``rewards [S, B]``, ``mask [S, B, L]``.

    >>> adv, mask = risk_seeking_advantages(torch.tensor([[0.0, 1.0, 2.0, 3.0]]),
    ...                                     torch.ones((1, 4, 1), dtype=torch.bool), 0.5)
    >>> adv[..., 0].tolist(), mask[..., 0].tolist()
    ([[0.0, 0.0, 0.5, 1.5]], [[False, False, True, True]])
    """
    threshold = torch.quantile(rewards, 1.0 - quantile, dim=1, keepdim=True)  # [S, 1]
    elite = rewards >= threshold  # [S, B]
    mask = mask & elite[..., None]
    return torch.where(mask, (rewards - threshold)[..., None], 0.0), mask


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


def clipped_value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
                       clip_coef: float) -> torch.Tensor:
    """CleanRL's clipped value loss, ``0.5 mean(max((v - R)^2, (v_old + clip(v - v_old) - R)^2))``: ``[S]``."""
    value_clipped = old_values + (values - old_values).clamp(-clip_coef, clip_coef)
    return 0.5 * masked_mean(torch.max((values - returns) ** 2, (value_clipped - returns) ** 2), mask)


class PPO:
    """PPO with a self-imitation queue for S members at once.

    >>> agent = PPO(PPOConfig(batch_size=8, num_minibatches=2), seeds=(0,), max_len=6, device=torch.device("cpu"))
    >>> tokens = agent.propose(torch.zeros((1, 8), dtype=torch.int64))
    >>> stats = agent.learn(tokens, torch.rand(1, 8), torch.zeros((1, 8), dtype=torch.bool))
    >>> sorted(k for k in stats if k.startswith("losses/"))[:3]
    ['losses/approx_kl', 'losses/clipfrac', 'losses/entropy']
    """

    def __init__(self, config: PPOConfig, seeds: tuple[int, ...], max_len: int, device: torch.device):
        self.config, self.max_len, self.device = config, max_len, device
        self.programs_per_step = config.batch_size
        self.generators = member_generators(seeds, device)
        s = len(seeds)
        self.policy = make_policy(config.policy, s, max_len, self.generators, device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.learning_rate, eps=1e-5)
        self.queue = ProgramQueue(s, max(config.queue_size, 1), max_len, device)
        self.rollout = Rollout.allocate(s, config.batch_size, max_len, device)

    def new_programs(self, step: int) -> int:
        return self.config.batch_size

    def propose(self, rounds: torch.Tensor) -> torch.Tensor:
        """Sample B programs per member; in rounds >= 2, seeded programs are policy edits of queued ones."""
        forced = forced_mask = None
        if self.config.seed_prob > 0 and self.config.queue_size:
            forced, forced_mask = self._seed_plan(rounds)
        sample_programs(self.policy, self.config.batch_size, self.max_len, self.generators, self.config.allow_eos,
                        forced, forced_mask, out=self.rollout)
        return self.rollout.tokens

    def _seed_plan(self, rounds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Which tokens to force: a queued program with 1 .. seed_edits windows for the policy to write."""
        config, b = self.config, self.config.batch_size
        sources, valid = self.queue.sample(b, self.generators)  # [S, B, L], [S, B]
        draws = torch.stack([torch.rand((b, 8), generator=g, device=self.device) for g in self.generators])
        use = valid & (rounds > 0) & (draws[..., 0] < config.seed_prob)  # [S, B]
        forced, forced_mask = edit_plan(sources, draws[..., 1:], config.seed_edits, config.seed_window,
                                        config.allow_eos)
        if config.seed_writer == "random":  # windows filled with uniform commands: a mutation, no decisions
            noise = torch.stack([torch.randint(1, VOCAB_SIZE, forced.shape[1:], generator=g, device=self.device)
                                 for g in self.generators])
            forced = torch.where(forced_mask, forced, noise)
            forced_mask = torch.ones_like(forced_mask)
        return forced, forced_mask & use[..., None]

    def learn(self, tokens: torch.Tensor, rewards: torch.Tensor, solved: torch.Tensor) -> dict[str, torch.Tensor]:
        config, rollout = self.config, self.rollout
        if config.queue_size:
            self.queue.push(tokens, rewards)
        mask = rollout.decisions  # [S, B, L]
        advantages, returns = compute_gae(terminal_rewards(rewards.float(), mask), rollout.values, mask,
                                          config.gamma, config.gae_lambda)
        if config.risk_quantile:
            advantages, mask = risk_seeking_advantages(rewards.float(), mask, config.risk_quantile)
        s, b, length = tokens.shape
        size = b // config.num_minibatches
        totals: dict[str, torch.Tensor] = {}
        for _ in range(config.update_epochs):
            order = torch.stack([torch.randperm(b, generator=g, device=self.device) for g in self.generators])
            for start in range(0, b, size):
                index = order[:, start : start + size, None].expand(-1, -1, length)  # [S, mb, L]
                batch = [x.gather(1, index) for x in (tokens, rollout.log_probs, rollout.values, advantages,
                                                      returns, mask)]
                stats = self._minibatch_step(*batch)
                for key, value in stats.items():
                    totals[key] = totals.get(key, 0.0) + value
        count = config.update_epochs * config.num_minibatches
        stats = {key: value / count for key, value in totals.items()}
        stats["_learned"] = mask.flatten(1).any(1)  # [S]: the batch held policy decisions
        return stats

    def _minibatch_step(self, tokens, old_log_p, old_values, advantages, returns, mask) -> dict[str, torch.Tensor]:
        """One clipped-objective update on ``[S, mb, L]`` tensors; returns ``[S]`` statistics."""
        config = self.config
        imitate = bool(config.queue_size and config.queue_coef)
        inputs = torch.cat([tokens, self.queue.tokens], dim=1) if imitate else tokens  # one pass for both
        all_log_p, all_entropies, all_values = token_log_probs(self.policy, inputs, config.allow_eos)
        size = tokens.shape[1]
        log_p, entropies, values = all_log_p[:, :size], all_entropies[:, :size], all_values[:, :size]
        log_ratio = log_p - old_log_p
        ratio = log_ratio.exp()
        if config.norm_adv:
            advantages = normalize_advantages(advantages, mask, center=not config.risk_quantile)
        policy_loss = clipped_policy_loss(advantages, ratio, mask, config.clip_coef)  # [S]
        value_loss = clipped_value_loss(values, old_values, returns, mask, config.clip_coef)  # [S]
        entropy = masked_mean(entropies, mask)
        loss = policy_loss - config.ent_coef * entropy + config.vf_coef * value_loss
        queue_loss = torch.zeros_like(loss)
        if imitate:
            queued = program_mask(self.queue.tokens) & self.queue.valid[..., None]  # [S, K, L]
            queue_loss = masked_mean(-all_log_p[:, size:], queued)
            loss = loss + config.queue_coef * queue_loss
        self.optimizer.zero_grad(set_to_none=True)
        loss.sum().backward()  # members share no parameters: the sum keeps their gradients apart
        clip_grad_norm_per_member(list(self.policy.parameters()), config.max_grad_norm)
        self.optimizer.step()
        with torch.no_grad():
            approx_kl = masked_mean((ratio - 1) - log_ratio, mask)
            clipfrac = masked_mean(((ratio - 1).abs() > config.clip_coef).float(), mask)
        return {"losses/policy_loss": policy_loss.detach(), "losses/value_loss": value_loss.detach(),
                "losses/entropy": entropy.detach(), "losses/approx_kl": approx_kl, "losses/clipfrac": clipfrac,
                "losses/queue_loss": queue_loss.detach()}

    def state_dict(self) -> dict:
        return {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "queue": self.queue.state_dict(), "generators": generator_states(self.generators),
                "config": dataclasses.asdict(self.config)}

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.queue.load_state_dict(state["queue"])
        load_generator_states(self.generators, state["generators"])
