"""Measuring the neural compiler: exact-IR accuracy and reward-level mismatches against the
oracle on held-out programs (``synthenv compiler-report`` prints what ``measure`` returns).

Method, per workload (``uniform``, ``loop_heavy``, ``near``, drawn with seeds the training
data never uses):

1. Compile every program with the neural and the traditional compiler; a program is
   *IR-exact* when both IRs are equal (``synthenv.ir.equal``).
2. Reward level, per task: every program whose IR differs is scored twice, by the oracle
   (``synthenv.reference.score_program``) and by the engine on the neural IR; a mismatch is a
   different reward or solved flag. An IR-exact program runs exactly as the traditional
   compiler's IR does (the engines are deterministic), so it can only disagree with the
   oracle if the traditional pipeline does; ``oracle_sample`` random IR-exact programs per
   task are checked against the oracle end to end all the same, and any disagreement there
   is counted too.
3. Rates come with one-sided Clopper–Pearson upper bounds (``synthenv.verify``), over
   programs: a program counts once if it mismatches on any task.

Caveat: ``near`` programs are small edits of a few known solutions, so some held-out near
programs also occur in training; ``uniform`` and ``loop_heavy`` 100-token programs do not
repeat in practice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from synthenv import engines, ir, reference, workloads
from synthenv import tasks as task_registry
from synthenv.language import decode_batch
from synthenv.scoring import score_outputs
from synthenv.verify import clopper_pearson_upper

from .traditional import TraditionalCompiler

EVAL_SEED = 1_000_003
"""Base seed of held-out programs (training draws from ``TrainConfig.seed + 1``)."""


@dataclass(frozen=True)
class WorkloadReport:
    """Accuracy of the neural compiler on one workload.

    Attributes:
        workload, length, programs: what was measured.
        ir_mismatches: programs whose neural IR differs from the traditional IR.
        flagged: programs the model itself flags as inconsistent (see ``neural.predict``).
        reward_mismatches: per task, programs whose reward or solved flag differs from the oracle.
        any_task_mismatches: programs with a reward mismatch on at least one task.
        oracle_checked: per task, how many programs were run by the oracle.
        delta: 1 - confidence of the bounds.
    """

    workload: str
    length: int
    programs: int
    ir_mismatches: int
    flagged: int
    reward_mismatches: dict[str, int] = field(default_factory=dict)
    any_task_mismatches: int = 0
    oracle_checked: dict[str, int] = field(default_factory=dict)
    delta: float = 0.05

    @property
    def ir_accuracy(self) -> float:
        return 1.0 - self.ir_mismatches / self.programs

    @property
    def ir_mismatch_bound(self) -> float:
        """Upper bound on the IR mismatch rate at confidence ``1 - delta``."""
        return clopper_pearson_upper(self.ir_mismatches, self.programs, self.delta)

    @property
    def reward_mismatch_rate(self) -> float:
        """Fraction of programs with a reward mismatch on some task."""
        return self.any_task_mismatches / self.programs

    @property
    def reward_mismatch_bound(self) -> float:
        """Upper bound on that fraction at confidence ``1 - delta``."""
        return clopper_pearson_upper(self.any_task_mismatches, self.programs, self.delta)


def _scores_differ(code: str, task, reward: float, solved: bool) -> bool:
    oracle = reference.score_program(code, task.cases, task.base, task.max_steps, task.dialect)
    return abs(oracle.reward - reward) > 1e-6 or oracle.solved != solved


def _task_mismatches(tokens, program, differ, task, engine, oracle_sample, generator) -> tuple[torch.Tensor, int]:
    """``[N]`` bool: programs whose reward on ``task`` disagrees with the oracle; and how many were checked."""
    num = tokens.shape[0]
    equal_rows = (~differ).nonzero().squeeze(1)  # sync point: evaluation, not a step path
    pick = equal_rows[torch.randperm(equal_rows.numel(), generator=generator)[:oracle_sample]]
    rows = torch.cat([differ.nonzero().squeeze(1), pick])
    mismatch = torch.zeros(num, dtype=torch.bool)
    if rows.numel() == 0:
        return mismatch, 0
    scores = score_outputs(engine.run(program[rows], task), task)
    codes = decode_batch(tokens[rows])
    for row, code, reward, solved in zip(rows.tolist(), codes, scores.rewards.tolist(), scores.solved.tolist()):
        mismatch[row] = _scores_differ(code, task, reward, bool(solved))
    return mismatch, int(rows.numel())


def measure(compiler, workload: str, num: int, length: int = 100, task_names: list[str] | None = None,
            engine: str = "auto", oracle_sample: int = 20, seed: int = EVAL_SEED, delta: float = 0.05,
            chunk: int = 4096) -> WorkloadReport:
    """Measure ``compiler`` (a ``NeuralCompiler``) on ``num`` held-out programs of ``workload``.

    >>> from synthenv.compilers.neural import NeuralCompiler
    >>> report = measure(NeuralCompiler(), "uniform", 50, task_names=["reverse"], engine="torch")
    >>> report.programs, report.oracle_checked["reverse"] >= 20
    (50, True)
    """
    task_names = task_registry.names("paper") if task_names is None else list(task_names)
    tokens = workloads.make(workload, num, length, seed=seed + workloads.WORKLOADS.index(workload))
    reference_compiler = TraditionalCompiler()
    programs, differs, flagged = [], [], 0
    for first in range(0, num, chunk):
        part = tokens[first : first + chunk]
        neural, consistent = compiler.compile_checked(part)
        programs.append(neural)
        differs.append(~ir.equal(neural, reference_compiler.compile(part)))
        flagged += int((~consistent).sum())  # sync point: evaluation
    program = ir.Program(*(torch.cat([getattr(p, f) for p in programs]) for f in ("code", "num_ops", "balanced",
                                                                                   "lengths")))
    differ = torch.cat(differs)
    runner = engines.select(engine, torch.device("cpu"))
    generator = torch.Generator().manual_seed(seed)
    any_task = torch.zeros(num, dtype=torch.bool)
    mismatches, checked = {}, {}
    for name in task_names:
        task = task_registry.get(name)
        wrong, checked[name] = _task_mismatches(tokens, program, differ, task, runner, oracle_sample, generator)
        mismatches[name] = int(wrong.sum())
        any_task |= wrong
    return WorkloadReport(workload, length, num, int(differ.sum()), flagged, mismatches, int(any_task.sum()),
                          checked, delta)
