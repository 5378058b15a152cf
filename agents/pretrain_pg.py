"""The policy-gradient phase of pretraining: the default agent's update, on its own variants, across tasks.

Imitation (``agents.repair``, ``agents.experience``) teaches the edit policy which edits undo damage or moved a
search on. It never tells the policy which of *its own* edits fail: a child that never halts (the costliest
program to run, and worth nothing), or one that breaks what its parent got right. In a run the fine-tuning
learns that within a minute (``charts/step_limit_rate_policy``) and forgets it when the run ends. This phase
learns it once, across tasks, as PPO does in the search:

- the parents are the probes of ``experience.search_experience`` on the first ``tasks`` training tasks: programs
  drawn from the islands of a search, with their feedback and reward (the agent's own parents, not corrupted
  solutions);
- every step the policy writes ``VARIANTS`` variants of ``PARENTS`` parents of each of ``TASKS_PER_STEP`` random
  tasks, and the env runs them;
- the update is the default agent's (``agents.learner``): PPO's clipped surrogate on each variant's gain over its
  parent (the child's reward minus the parent's, normalised over the batch), plus the likelihood of a minibatch of
  the imitation examples (the agent's queue term: what imitation taught is kept), minus the entropy bonus.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from synthenv.pipeline import Evaluator
from synthenv.tasks import Task

from .common import masked_mean
from .editor import EditPolicy, edit_entropy, edit_log_probs
from .experience import Probes
from .island_config import PPOConfig
from .learner import ADAM_EPS
from .losses import clipped_policy_loss, normalize_advantages
from .repair import RepairSet, repair_loss, run_outcomes
from .variation import apply_edits

AGENT = PPOConfig()
"""The default agent, whose update this is: its variants per parent read, epochs, clipping, entropy bonus, queue
weight and gradient norm."""
TASKS_PER_STEP, PARENTS, VARIANTS = 8, 32, AGENT.variants_per_parent
"""Each step: 8 tasks, 32 parents of each, the agent's variants of each parent."""
IMITATION_BATCH = 256
"""Imitation examples per step (the agent's queue term)."""


@dataclass(frozen=True)
class GradientLog:
    """What the phase did, every ``log_every`` steps: the mean gain of the policy's variants over their parents,
    the share that beat their island's best and the share that never halted, over the steps since the last log."""

    steps: list[int]
    gain: list[float]
    new_best_rate: list[float]
    step_limit_rate: list[float]
    seconds: float


def policy_gradient(policy: EditPolicy, tasks: list[tuple[Task, str]], probes: Probes, imitation: RepairSet,
                    steps: int, learning_rate: float, generator: torch.Generator, evaluator: Evaluator,
                    log_every: int = 100, on_log=None) -> GradientLog:
    """``steps`` updates of ``policy`` (one member) on its variants of ``probes`` (drawn from searches of ``tasks``,
    ``probes.groups`` indexing them), with ``imitation`` examples beside (see the module docstring);
    ``on_log(step, gain, new_best_rate, step_limit_rate)`` is told each log."""
    groups = [(probes.groups == g).nonzero()[:, 0] for g in range(len(tasks))]
    usable = [g for g, rows in enumerate(groups) if len(rows)]
    if not usable:
        raise ValueError("the policy-gradient phase found no parents: its searches kept no probes")
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate, eps=ADAM_EPS)  # the agent's
    log = GradientLog([], [], [], [], 0.0)
    start, totals, count = time.perf_counter(), torch.zeros(3), 0
    for step in range(1, steps + 1):
        picked = torch.tensor(usable)[torch.randint(len(usable), (TASKS_PER_STEP,), generator=generator)]
        rows = torch.cat([groups[g][torch.randint(len(groups[g]), (PARENTS,), generator=generator)]
                          for g in picked.tolist()])
        parents, features = probes.parents[rows][None], probes.features[rows][None]  # [1, T P, ...]
        edits, old_log_probs = policy.sample(parents, features, [generator], None, VARIANTS)
        children = apply_edits(parents.repeat_interleave(VARIANTS, dim=1), edits)[0]  # [T P V, L]
        rewards, hung = torch.empty(len(children)), torch.empty(len(children), dtype=torch.bool)
        width = PARENTS * VARIANTS
        for i, g in enumerate(picked.tolist()):  # sync point (data collection: one task's children at a time)
            part = slice(i * width, (i + 1) * width)
            rewards[part], hung[part] = run_outcomes(evaluator, children[part], tasks[g][0])
        gains = (rewards - probes.rewards[rows].repeat_interleave(VARIANTS))[None]  # [1, T P V]
        valid = torch.ones_like(gains, dtype=torch.bool)
        advantages = normalize_advantages(gains, valid)
        examples = imitation.take(torch.randint(len(imitation), (IMITATION_BATCH,), generator=generator))
        for _ in range(AGENT.update_epochs):
            logits = policy(parents, features)
            ratio = (edit_log_probs(logits, edits) - old_log_probs).exp()
            loss = AGENT.pg_weight * clipped_policy_loss(advantages, ratio, valid, AGENT.clip_coef)[0] \
                + AGENT.queue_weight * repair_loss(policy, examples) \
                - AGENT.entropy_coef * masked_mean(edit_entropy(logits, edits), valid)[0]
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), AGENT.max_grad_norm)
            optimizer.step()
        beat = rewards > probes.island_best[rows].repeat_interleave(VARIANTS)
        totals += torch.stack([gains.mean(), beat.float().mean(), hung.float().mean()])
        count += 1
        if step % log_every == 0 or step == steps:
            gain, new_best, step_limit = (totals / count).tolist()
            log.steps.append(step)
            log.gain.append(gain)
            log.new_best_rate.append(new_best)
            log.step_limit_rate.append(step_limit)
            totals, count = torch.zeros(3), 0
            if on_log is not None:
                on_log(step, gain, new_best, step_limit)
    return GradientLog(log.steps, log.gain, log.new_best_rate, log.step_limit_rate, time.perf_counter() - start)
