"""Pretraining the edit policy across generated tasks (``synthenv pretrain``).

The examples are (parent, its per-case feedback, edits), learned by likelihood:

- *repair* (``agents.pretraining.repair``): each generated training task (``tasks.generated``, the ``train``
  split) comes with a program P that solves it. Corrupt P with 1 .. E random point edits (the agent's
  own random variation) into P', run P' on the task's cases for its feedback, and keep the edits that
  undo the corruption (``variation.inverse_edits``: the policy's format, positions in P'): the edits that
  take a nearly right program back to a solution. Examples are dropped where the corruption changed
  nothing, still solves the task, or cannot be undone (an insertion into a full program).
- *what runs found*: ``synthenv pretrain --from-runs DIR`` adds what runs of the search agents (``islands``, ``ppo``) left
  (``agents.run.data``): the improving edits of their imitation queues, and repair examples built from the
  programs that solved their tasks; ``--start pretrained`` (or a policy file) continues from that policy
  instead of random weights.

The policy is judged on tasks it never saw: ``validation_tasks`` further tasks of the train split
(the ``test`` split is kept for reporting the agent). Its loss there; its *repair rate*, the share of
corrupted programs of which one of ``V`` variants it writes solves the task again; and its *new-best
rate*, the share of its variants of parents drawn from searches of the first validation tasks
(``agents.pretraining.probes``) that beat their island's best (the agent's own yardstick), and the share of them
that never halt; each beside the rate of random variants.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import torch

from synthenv.bench import hardware, hardware_caption
from synthenv.checks import require_finite_fields, require_nonnegative_int, require_positive_int_fields, require_seed
from synthenv.language import DEFAULT_MAX_LEN, MAX_LEN
from synthenv.pipeline import Evaluator
from synthenv.tasks import generated

from ..policy.editor import EditorConfig, EditPolicy
from ..policy.files import load_policy, policy_path, require_start, save_policy, start_policy
from ..run.data import load_runs
from ..run.feedback import NUM_FEATURES
from ..search.variation import random_edits
from .probes import Probes, probe_rates, search_probes
from .repair import RepairSet, repair_loss, repair_rate, repair_set


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
    """Corrupted copies of each training task's program (each 1 .. max_edits random edits away from it) whose
    repairs are examples (0: none, for what runs found alone)."""
    steps: int = 5000
    """Adam steps on the examples (cosine-decayed learning rate)."""
    batch_size: int = 512
    """Repair examples per step."""
    learning_rate: float = 3e-3
    """Adam's initial step size."""
    seed: int = 0
    """Seed of the corruptions, the minibatches and the policy's initial weights."""
    max_len: int = DEFAULT_MAX_LEN
    """L, the program width the policy reads (the agent's; its length feature is scaled by it)."""
    from_runs: str | None = None
    """A folder of runs of islands or ppo (synthenv train with logs): their improving edits and solutions join
    the data."""
    start: str = "scratch"
    """Where the policy starts: 'scratch' (random weights drawn from seed), 'pretrained' (the shipped policy), or a
    policy file's path: this run continues its training, for example on what runs found (with from_runs, and
    corruptions 0 for their examples alone). Its architecture must be editor's."""
    out: str = "runs/edit_policy.pt"
    """The policy file to write (synthenv train --policy PATH starts from it)."""
    editor: EditorConfig = field(default_factory=EditorConfig)
    """The policy's architecture (an agent starting from the file must have the same)."""

    def __post_init__(self) -> None:
        require_positive_int_fields(self, "tasks", "validation_tasks", "batch_size", "max_len", "steps")
        generated.check_task_count("tasks", self.tasks, "generated training tasks")
        generated.check_task_count("validation_tasks", self.validation_tasks, "generated test tasks")
        if self.max_len > MAX_LEN:
            raise ValueError(f"max_len must be an int in [1, {MAX_LEN}] (synthenv.language.MAX_LEN, docs/limits.md), "
                             f"got {self.max_len}; the default agent writes {DEFAULT_MAX_LEN}-token programs")
        require_nonnegative_int("corruptions", self.corruptions)
        if not self.corruptions and self.from_runs is None:
            raise ValueError("pretraining needs examples: set corruptions above 0, or from_runs")
        require_finite_fields(self, "learning_rate", low=0.0, low_open=True)
        require_seed("seed", self.seed, allow_none=False)
        require_nonnegative_int("first_task", self.first_task, "a train-split index")
        require_start("start", self.start)

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


JUDGED_TEMPERATURES = (1.0, 0.33)
"""Temperatures at which the new-best rate is reported: 1 (the distribution learned, the agent's default) and one
that writes the likeliest edits far more often."""
NEW_BEST_VARIANTS = 4
"""Variants of each probe whose new-best rate is reported (the agent's variants per parent read)."""
REPAIR_VARIANTS = (4, 16)
"""Variants per corrupted program at which the repair rate is reported (the agent reads a parent for V of them)."""
PROBE_TASKS, PROBE_GENERATIONS = 50, 150
"""The probes of the new-best rate: parents drawn from 150-generation searches of the first 50 validation tasks."""
VALIDATION_CORRUPTIONS = 8
"""Corrupted copies of each validation task's program, on which the repair rate is measured."""
RUN_CORRUPTIONS = 32
"""Corrupted copies of each solution that runs found (``from_runs``), whose repairs are examples."""


@dataclass(frozen=True)
class PretrainData:
    """The examples of a pretraining run: ``train``, the validation tasks' ``repairs`` (the validation loss and the
    repair rate are measured on them) and search ``probes``, and how many examples of each kind."""

    train: RepairSet
    repairs: RepairSet
    probes: Probes
    counts: dict[str, int]


def pretrain_data(config: PretrainConfig, train_tasks: list, validation_tasks: list, generator: torch.Generator,
                  evaluator: Evaluator, log=print) -> PretrainData:
    """The examples of ``config`` from its tasks (``(task, solution)`` pairs), and the validation tasks' repairs
    and search probes: a search of the first ``PROBE_TASKS`` validation tasks for ``PROBE_GENERATIONS``."""
    start, e = time.perf_counter(), config.editor.max_edits
    parts, counts = [], {}
    if config.corruptions:
        parts.append(repair_set(train_tasks, config.corruptions, config.max_len, e, generator, evaluator))
        counts["repair"] = len(parts[-1])
    # the validation repairs are drawn after the training ones: the generator's order that made the shipped policy
    repairs = repair_set(validation_tasks, VALIDATION_CORRUPTIONS, config.max_len, e, generator, evaluator)
    if config.corruptions:
        log(f"{counts['repair']} repair examples from {len(train_tasks)} tasks, {len(repairs)} for validation "
            f"({time.perf_counter() - start:.0f} s)")
    if config.from_runs is not None:
        edits, solved = load_runs(config.from_runs, config.max_len)
        runs = ([edits] if edits is not None else []) + \
            ([repair_set(solved, RUN_CORRUPTIONS, config.max_len, e, generator, evaluator)] if solved else [])
        parts += runs
        counts["from_runs"] = sum(len(part) for part in runs)
        log(f"from {config.from_runs}: {len(edits) if edits is not None else 0} improving edits, {len(solved)} "
            f"solutions; {counts['from_runs']} examples")
    if not parts or not sum(counts.values()):
        raise ValueError("pretraining found no examples (no corruptions, and no runs with data under "
                         f"{config.from_runs!r}); set corruptions above 0")
    probes = search_probes(validation_tasks[:PROBE_TASKS], PROBE_GENERATIONS, config.seed + 1, evaluator,
                           config.max_len)
    log(f"{len(probes)} probes from searches of {min(PROBE_TASKS, len(validation_tasks))} validation tasks "
        f"({time.perf_counter() - start:.0f} s)")
    return PretrainData(RepairSet.join(parts), repairs, probes, counts)


def pretrain(config: PretrainConfig, log=print) -> dict:
    """Build the data, fit the policy, judge it, write ``config.out``; returns the file's card. ``log`` is told
    what happens (a line at a time)."""
    start = time.perf_counter()
    generator = torch.Generator().manual_seed(config.seed)
    evaluator = Evaluator.create()
    train_tasks = generated.pairs("train", config.first_task, config.tasks)
    validation_tasks = generated.pairs("train", config.first_task + config.tasks, config.validation_tasks)
    policy = EditPolicy(config.editor, 1, NUM_FEATURES, [torch.Generator().manual_seed(config.seed)],
                        torch.device("cpu"))
    path = policy_path(config.start)
    if path is not None:  # a file that is damaged or of another architecture is refused before the data are built
        start_policy(policy, load_policy(path, option="--start"), path, scratch="--start scratch")
    data = pretrain_data(config, train_tasks, validation_tasks, generator, evaluator, log)
    with torch.no_grad():
        initial = float(repair_loss(policy, data.repairs))
    fit(policy, data.train, data.repairs, config.steps, config.batch_size, config.learning_rate, generator,
        log_every=max(1, config.steps // 20),
        on_log=lambda step, a, b: log(f"step {step}: loss {a:.3f} (train), {b:.3f} (validation)"))
    with torch.no_grad():
        final = float(repair_loss(policy, data.repairs))
    rates = judge(policy, data, validation_tasks, generator, evaluator, config.max_len, log)
    card = {"data": {"split": "train", "tasks": [config.first_task, config.first_task + config.tasks],
                     "corruptions": config.corruptions,
                     "examples": len(data.train), **{f"{k}_examples": v for k, v in data.counts.items()}},
            "validation": {"tasks": [config.first_task + config.tasks,
                                     config.first_task + config.tasks + config.validation_tasks],
                           "examples": len(data.repairs), "initial_loss": initial,
                           "loss": final, **rates},
            "steps": config.steps, "batch_size": config.batch_size, "learning_rate": config.learning_rate,
            "start": config.start, "seed": config.seed, "seconds": time.perf_counter() - start,
            "command": config.command(),
            "hardware": hardware_caption(hardware())}
    save_policy(config.out, policy, 0, card)
    log(f"wrote {config.out} ({card['seconds']:.0f} s)")
    return card


def judge(policy: EditPolicy, data: PretrainData, tasks: list, generator: torch.Generator, evaluator: Evaluator,
          max_len: int, log=print) -> dict:
    """The policy's repair rates, and its new-best rates on the search probes at the temperatures
    ``JUDGED_TEMPERATURES``, each beside random edits'."""
    e = policy.config.max_edits
    sample = lambda parents, features, v: policy.sample(parents, features, [generator], None, v)[0]  # noqa: E731
    guess = lambda parents, features, v: random_edits(  # noqa: E731
        [generator], parents.repeat_interleave(v, dim=1), e)
    repair = {str(v): {"policy": repair_rate(sample, tasks, data.repairs, v, evaluator, max_len),
                       "random": repair_rate(guess, tasks, data.repairs, v, evaluator, max_len)}
              for v in REPAIR_VARIANTS}
    for v, rate in repair.items():
        log(f"repair rate with {v} variants: policy {rate['policy']:.1%}, random edits {rate['random']:.1%}")
    probed, own = tasks[:PROBE_TASKS], policy.temperature
    rates = {"random": probe_rates(guess, probed, data.probes, NEW_BEST_VARIANTS, evaluator, max_len)}
    try:
        for temperature in JUDGED_TEMPERATURES:
            policy.temperature = temperature
            rates[f"policy at temperature {temperature}"] = probe_rates(sample, probed, data.probes,
                                                                        NEW_BEST_VARIANTS, evaluator, max_len)
    finally:
        policy.temperature = own
    new_best = {k: v[0] for k, v in rates.items()}
    step_limit = {k: v[1] for k, v in rates.items()}
    log(f"new-best rate on {len(data.probes)} probes: " + ", ".join(f"{k} {v:.3%}" for k, v in new_best.items()))
    log("share that never halted: " + ", ".join(f"{k} {v:.2%}" for k, v in step_limit.items()))
    return {"repair_rate": repair, "new_best_rate": new_best, "step_limit_rate": step_limit}
