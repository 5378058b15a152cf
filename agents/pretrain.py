"""Pretraining the edit policy across generated tasks by supervised repair (``synthenv pretrain``).

Each generated training task (``tasks.generated``, the ``train`` split) comes with a program P that
solves it. Corrupt P with 1 .. E random point edits (the agent's own random variation) into P', run
P' on the task's cases for its per-case feedback, and keep the edits that undo the corruption
(``variation.inverse_edits``: the policy's format, positions in P'). The policy learns to write those
edits given P' and its feedback: the edits that take a nearly right program back to a solution, on
tasks of every family of the grammar. Examples are dropped where the corruption changed nothing,
still solves the task, or cannot be undone (an insertion into a full program).

``synthenv pretrain --from-runs DIR`` adds what runs of the default agent found (``agents.run_data``):
the improving edits of their imitation queues, and repair examples built from the programs that
solved their tasks, so that an agent that has solved tasks is better at the next one.

The policy is judged on tasks it never saw: ``validation_tasks`` further tasks of the train split
(the ``test`` split is kept for reporting the agent). Its repair loss there, and its *repair rate*:
the share of corrupted programs of which one of ``V`` variants it writes solves the task again,
beside the rate of ``V`` random variants.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass, field

import torch

from synthenv.bench import hardware, hardware_caption
from synthenv.checks import require_finite_fields, require_positive_int_fields, require_seed
from synthenv.language import DEFAULT_MAX_LEN
from synthenv.pipeline import Evaluator
from synthenv.tasks import generated

from .editor import EditorConfig, EditPolicy
from .feedback import NUM_FEATURES
from .policy_file import save_policy
from .repair import RepairSet, repair_loss, repair_rate, repair_set
from .run_data import load_runs
from .variation import random_edits


@dataclass(frozen=True)
class TrainingLog:
    """What a pretraining run did: steps, the validation losses and repair rates along the way, seconds."""

    steps: list[int]
    train_loss: list[float]
    validation_loss: list[float]
    seconds: float


def fit(policy: EditPolicy, train: RepairSet, validation: RepairSet, steps: int, batch_size: int,
        learning_rate: float, generator: torch.Generator, log_every: int = 100, on_log=None) -> TrainingLog:
    """Adam on the repair loss over random minibatches of ``train``; the validation loss every ``log_every``
    steps (``on_log(step, train_loss, validation_loss)`` is told each)."""
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    log = TrainingLog([], [], [], 0.0)
    start, running = time.perf_counter(), 0.0
    for step in range(1, steps + 1):
        batch = train.take(torch.randint(len(train), (batch_size,), generator=generator))
        loss = repair_loss(policy, batch)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        running += float(loss.detach())  # sync point: logging
        if step % log_every == 0 or step == steps:
            with torch.no_grad():
                validation_loss = float(repair_loss(policy, validation))
            log.steps.append(step)
            log.train_loss.append(running / (step - (log.steps[-2] if len(log.steps) > 1 else 0)))
            log.validation_loss.append(validation_loss)
            running = 0.0
            if on_log is not None:
                on_log(step, log.train_loss[-1], validation_loss)
    return TrainingLog(log.steps, log.train_loss, log.validation_loss, time.perf_counter() - start)


@dataclass(frozen=True)
class PretrainConfig:
    """One pretraining run of the edit policy (``synthenv pretrain``)."""

    tasks: int = 4000
    """Generated training tasks to learn from (train split, indices first_task .. first_task + tasks - 1)."""
    first_task: int = 0
    """The first of them."""
    validation_tasks: int = 200
    """Further tasks of the train split, after the training ones, on which the policy is judged (never trained on)."""
    corruptions: int = 32
    """Corrupted copies of each task's program (each 1 .. max_edits random edits away from it)."""
    steps: int = 5000
    """Adam steps (cosine-decayed learning rate)."""
    batch_size: int = 512
    """Repair examples per step."""
    learning_rate: float = 3e-3
    """Adam's initial step size."""
    seed: int = 0
    """Seed of the corruptions, the minibatches and the policy's initial weights."""
    max_len: int = DEFAULT_MAX_LEN
    """L, the program width the policy reads (the agent's; its length feature is scaled by it)."""
    from_runs: str | None = None
    """A folder of runs of the default agent (synthenv train with logs): their improving edits and solutions join
    the data."""
    out: str = "runs/edit_policy.pt"
    """The policy file to write (synthenv train --policy PATH starts from it)."""
    editor: EditorConfig = field(default_factory=EditorConfig)
    """The policy's architecture (an agent starting from the file must have the same)."""

    def __post_init__(self) -> None:
        require_positive_int_fields(self, "tasks", "validation_tasks", "corruptions", "steps", "batch_size", "max_len")
        require_finite_fields(self, "learning_rate", low=0.0, low_open=True)
        require_seed("seed", self.seed, allow_none=False)
        if not isinstance(self.first_task, int) or self.first_task < 0:
            raise ValueError(f"first_task must be an int >= 0 (a train-split index), got {self.first_task!r}")

    def command(self) -> str:
        """The command line that reproduces this run."""
        default, flags = PretrainConfig(), []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "editor":
                flags += [f"--editor.{k.replace('_', '-')} {v}" for k, v in dataclasses.asdict(value).items()
                          if v != getattr(default.editor, k)]
            elif value != getattr(default, f.name):
                flags.append(f"--{f.name.replace('_', '-')} {value}")
        return " ".join(["synthenv pretrain", *flags])


REPAIR_VARIANTS = (4, 16)
"""Variants per corrupted program at which the repair rate is reported (the agent reads a parent for V of them)."""


def pretrain(config: PretrainConfig, log=print) -> dict:
    """Build the data, fit the policy, judge it, write ``config.out``; returns the file's card. ``log`` is told
    what happens (a line at a time)."""
    start = time.perf_counter()
    generator = torch.Generator().manual_seed(config.seed)
    evaluator = Evaluator.create()
    pairs = lambda first, count: [(g.task, g.program) for g in itertools.islice(  # noqa: E731
        generated.stream("train", first), count)]
    train_tasks = pairs(config.first_task, config.tasks)
    validation_tasks = pairs(config.first_task + config.tasks, config.validation_tasks)
    from_runs = None
    if config.from_runs is not None:
        from_runs, solved = load_runs(config.from_runs, config.max_len)
        train_tasks += solved
        log(f"from {config.from_runs}: {len(from_runs) if from_runs else 0} improving edits, {len(solved)} solutions")
    e = config.editor.max_edits
    train = repair_set(train_tasks, config.corruptions, config.max_len, e, generator, evaluator)
    if from_runs is not None:
        train = RepairSet.join([train, from_runs])
    validation = repair_set(validation_tasks, 8, config.max_len, e, generator, evaluator)
    log(f"{len(train)} repair examples from {len(train_tasks)} tasks, {len(validation)} for validation "
        f"({time.perf_counter() - start:.0f} s)")
    policy = EditPolicy(config.editor, 1, NUM_FEATURES, [torch.Generator().manual_seed(config.seed)],
                        torch.device("cpu"))
    with torch.no_grad():
        initial = float(repair_loss(policy, validation))
    history = fit(policy, train, validation, config.steps, config.batch_size, config.learning_rate, generator,
                  log_every=max(1, config.steps // 20),
                  on_log=lambda step, a, b: log(f"step {step}: repair loss {a:.3f} (train), {b:.3f} (validation)"))
    sample = lambda parents, features, v: policy.sample(parents, features, [generator], None, v)[0]  # noqa: E731
    guess = lambda parents, features, v: random_edits(  # noqa: E731
        [generator], parents.repeat_interleave(v, dim=1), e)
    rates = {v: {"policy": repair_rate(sample, validation_tasks, validation, v, evaluator, config.max_len),
                 "random": repair_rate(guess, validation_tasks, validation, v, evaluator, config.max_len)}
             for v in REPAIR_VARIANTS}
    for v, rate in rates.items():
        log(f"repair rate with {v} variants: policy {rate['policy']:.1%}, random edits {rate['random']:.1%}")
    card = {"data": {"split": "train", "tasks": [config.first_task, config.first_task + config.tasks],
                     "corruptions": config.corruptions, "examples": len(train),
                     "from_runs": len(from_runs) if from_runs is not None else 0},
            "validation": {"tasks": [config.first_task + config.tasks,
                                     config.first_task + config.tasks + config.validation_tasks],
                           "examples": len(validation), "initial_loss": initial,
                           "loss": history.validation_loss[-1], "repair_rate": {str(v): r for v, r in rates.items()}},
            "steps": config.steps, "batch_size": config.batch_size, "learning_rate": config.learning_rate,
            "seed": config.seed, "seconds": time.perf_counter() - start, "command": config.command(),
            "hardware": hardware_caption(hardware())}
    save_policy(config.out, policy, 0, card)
    log(f"wrote {config.out} ({card['seconds']:.0f} s)")
    return card
