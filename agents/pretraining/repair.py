"""Repair examples: programs a few random edits away from a solution, their feedback, and the edits back.

A generated task comes with a program that solves it. ``corrupt`` gives it 1 .. E random point edits
(the agent's own random variation) and ``variation.inverse_edits`` the edits that undo them, in the edit
policy's format; ``repair_set`` keeps the corruptions that changed something, no longer solve the task
and can be undone, with their per-case feedback on the task (the features the agent's policy reads).
``repair_loss`` and ``repair_rate`` judge a policy on such examples.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from synthenv.language import Status, encode_batch
from synthenv.pipeline import Evaluator
from synthenv.tasks import Task

from ..policy.editor import EditPolicy
from ..policy.distribution import edit_log_probs
from ..run.feedback import feedback_features
from ..search.operators import EDIT_FIELDS
from ..search.variation import Edits, apply_edits, inverse_edits, random_edits


@dataclass(frozen=True)
class RepairSet:
    """N repair examples: ``parents [N, L]`` (corrupted programs), their ``features [N, F]``, the ``edits``
    ``[N, E]`` that repair them, and ``groups [N]``, which task of the set each came from."""

    parents: torch.Tensor
    features: torch.Tensor
    edits: Edits
    groups: torch.Tensor

    def __len__(self) -> int:
        return self.parents.shape[0]

    def take(self, index: torch.Tensor) -> RepairSet:
        return RepairSet(self.parents[index], self.features[index],
                         Edits(*(getattr(self.edits, name)[index] for name in EDIT_FIELDS)), self.groups[index])

    @staticmethod
    def join(parts: list[RepairSet]) -> RepairSet:
        cat = lambda name: torch.cat([getattr(p, name) for p in parts])  # noqa: E731
        return RepairSet(cat("parents"), cat("features"),
                         Edits(*(torch.cat([getattr(p.edits, name) for p in parts]) for name in EDIT_FIELDS)),
                         cat("groups"))


def evaluate(evaluator: Evaluator, programs: torch.Tensor, task: Task,
             max_len: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rewards ``[N]`` float32 of ``programs [N, L]`` on ``task``, their feedback features ``[N, F]`` (as the
    trainer computes them) and whether each solves it ``[N]``."""
    evaluation = evaluator.evaluate(programs, task, max(1, task.max_output_length))
    execution, scores = evaluation.execution, evaluation.scores
    rewards = scores.rewards.float()
    obs = {"program": programs, "reward": rewards, "case_passed": scores.case_correct.to(torch.int8),
           "case_status": execution.status.to(torch.int8), "case_rewards": scores.case_rewards.float(),
           "output_lengths": execution.output_lengths.to(torch.int32), "outputs": execution.outputs.to(torch.int32)}
    cases = task.tensors(programs.device)
    return rewards, feedback_features(obs, cases.expected, cases.expected_lengths, max_len), scores.solved


def run_outcomes(evaluator: Evaluator, programs: torch.Tensor, task: Task) -> tuple[torch.Tensor, torch.Tensor]:
    """The rewards ``[N]`` float32 of ``programs [N, L]`` on ``task`` and whether each ran out of steps (never
    halted) ``[N]``."""
    scores = evaluator.evaluate(programs, task, max(1, task.max_output_length)).scores
    return scores.rewards.float(), scores.program_status == Status.STEP_LIMIT


def score(evaluator: Evaluator, programs: torch.Tensor, task: Task, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The feedback features ``[N, F]`` of ``programs [N, L]`` on ``task`` and whether each solves it ``[N]``."""
    _, features, solved = evaluate(evaluator, programs, task, max_len)
    return features, solved


def corrupt(solutions: torch.Tensor, copies: int, max_edits: int,
            generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, Edits]:
    """``copies`` corruptions of each of ``solutions [M, L]``: the solutions repeated ``[M copies, L]``, the
    corrupted programs and the edits that repair them."""
    parents = solutions.repeat_interleave(copies, dim=0)[None]  # [1, N, L]
    edits = random_edits([generator], parents, max_edits)
    children = apply_edits(parents, edits)
    return parents[0], children[0], Edits(*(getattr(inverse_edits(parents, edits), n)[0] for n in EDIT_FIELDS))


def repair_set(tasks: Iterable[tuple[Task, str]], copies: int, max_len: int, max_edits: int,
               generator: torch.Generator, evaluator: Evaluator) -> RepairSet:
    """Repair examples from ``(task, program that solves it)`` pairs, ``copies`` corruptions of each."""
    parts = []
    for group, (task, program) in enumerate(tasks):
        solution = encode_batch([program], max_len)
        originals, corrupted, repair = corrupt(solution, copies, max_edits, generator)
        features, solved = score(evaluator, corrupted, task, max_len)
        back = apply_edits(corrupted, repair)
        keep = (back == originals).all(-1) & (corrupted != originals).any(-1) & ~solved  # sync point: data
        part = RepairSet(corrupted, features, repair, torch.full((corrupted.shape[0],), group))
        parts.append(part.take(keep.nonzero()[:, 0]))
    return RepairSet.join(parts)


def repair_loss(policy: EditPolicy, examples: RepairSet) -> torch.Tensor:
    """Mean negative log-likelihood of the repairing edits under ``policy`` (one member)."""
    logits = policy(examples.parents[None], examples.features[None])
    return -edit_log_probs(logits, Edits(*(getattr(examples.edits, n)[None] for n in EDIT_FIELDS))).mean()


def repair_rate(sample, tasks: list[tuple[Task, str]], examples: RepairSet, variants: int, evaluator: Evaluator,
                max_len: int) -> float:
    """The share of ``examples`` of which one of ``variants`` children written by ``sample(parents [1, N, L],
    features [1, N, F], variants) -> edits [1, N variants, E]`` solves its task again."""
    hits, total = 0, 0
    for group, (task, _) in enumerate(tasks):
        rows = (examples.groups == group).nonzero()[:, 0]
        if not len(rows):
            continue
        part = examples.take(rows)
        edits = sample(part.parents[None], part.features[None], variants)
        children = apply_edits(part.parents[None].repeat_interleave(variants, dim=1), edits)[0]
        _, solved = score(evaluator, children, task, max_len)
        hits += int(solved.view(-1, variants).any(1).sum())
        total += len(rows)
    return hits / max(total, 1)
