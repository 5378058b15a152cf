"""The hybrid backend: neural compilation for every program, checked by a deterministic audit.

Each batch (one ``evaluate`` call):

1. The neural compiler compiles every program; the engine runs and the batch is scored.
2. Audit: the traditional compiler recompiles
   - a random fraction ``rho`` of the batch (the *sample*, drawn before anything is known
     about the programs, so that it estimates the miscompile rate without bias),
   - every program whose reward matters: solved, or reward ``>= reward_threshold``,
   - every program the neural model flags as inconsistent (``neural.predict``).
3. An audited program whose IR differs is re-run on the traditional IR, and its result
   replaces the neural one. So every *reported* solution and every *reported* reward at or
   above the threshold comes from an IR the traditional compiler agrees with: exact, not
   probably exact. (A miscompile that lowers a program's reward below the threshold is only
   caught if the program is sampled; the bound below covers it.)
4. The sample's outcome updates a one-sided Clopper–Pearson upper bound on the neural
   compiler's miscompile rate at confidence ``1 - delta`` over a sliding window of steps
   (``synthenv.verify.ErrorRateMonitor``), and ``rho`` adapts to keep that bound under
   ``epsilon`` (defaults 0.1 % and 5 %). The bound, the rate and the counts are in ``stats``
   (TensorBoard tags under ``verify/``), for the env's ``info``.

Host synchronisation: the audited subset has a data-dependent size, so each step syncs
twice (marked ``# sync point``): once for the subset, once for the audit's counts.
Targeted audits are not part of the sample (they are not random), so they never enter the
bound; their miscompiles are counted separately.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from synthenv import ir
from synthenv.checks import require_finite_fields
from synthenv.execution import Execution
from synthenv.scoring import Scores, score_outputs
from synthenv.tasks import Task
from synthenv.verify import AuditConfig, ErrorRateMonitor

from .traditional import TraditionalCompiler


@dataclass(frozen=True)
class HybridConfig:
    """Options of the hybrid backend."""

    audit: AuditConfig = field(default_factory=AuditConfig)
    """Target bound (epsilon, delta), its window and the limits of the random audit rate."""
    reward_threshold: float = 0.5
    """Programs scoring at least this (besides solved ones) are always audited (1.0 = solved)."""
    audit_flagged: bool = True
    """Also audit programs the neural model itself flags as inconsistent."""
    seed: int = 0
    """Seed of the random sample."""

    def __post_init__(self) -> None:
        require_finite_fields(self, "reward_threshold")  # any finite reward; 1.0 audits the solved ones only


def _replace_rows(execution: Execution, rows: torch.Tensor, fixed: Execution) -> Execution:
    """``execution`` with rows ``rows`` taken from ``fixed`` (same K and O)."""
    fields = ("outputs", "output_lengths", "status", "steps")
    merged = {}
    for name in fields:
        values = getattr(execution, name).clone()
        values[rows] = getattr(fixed, name)
        merged[name] = values
    return Execution(**merged)


class HybridCompiler:
    """Neural compiler + deterministic audit + online error bound (registered as ``"hybrid"``).

    ``compile`` alone returns the unaudited neural IR; the audit needs rewards, so it runs
    in ``evaluate``, which ``synthenv.pipeline.Evaluator`` (and so ``synthenv.score`` and the
    envs) calls for backends that have one.

    Args:
        config: see ``HybridConfig``.
        neural: the compiler to audit (default: the shipped neural compiler).
        reference: the exact compiler (default: ``TraditionalCompiler()``).

    >>> from synthenv import api
    >>> result = api.score([",[>,]+[,<.]", "+."], "reverse", backend="hybrid", engine="torch")
    >>> result.solved.tolist()
    [True, False]
    """

    name = "hybrid"

    def __init__(self, config: HybridConfig = HybridConfig(), neural=None, reference=None):
        if neural is None:
            from .neural import NeuralCompiler

            neural = NeuralCompiler()
        self.config = config
        self.neural = neural
        self.reference = reference if reference is not None else TraditionalCompiler()
        self.monitor = ErrorRateMonitor(config.audit)
        self._generators: dict[str, torch.Generator] = {}
        self.rate = 0.0  # the random audit rate of the last step (0 before the first)
        self.steps = 0
        self.audited = 0  # programs recompiled, all reasons
        self.targeted = 0  # of which audited for their reward or a flag
        self.corrected = 0  # programs whose neural IR was wrong and was replaced

    @property
    def warmup_calls(self) -> int:
        """Calls after which the audit rate has settled (``synthenv bench`` warms up this long):
        the first ``horizon_steps`` calls audit at a high rate to build up the bound."""
        return self.config.audit.horizon_steps + 2

    def compile(self, tokens: torch.Tensor) -> ir.Program:
        """The neural IR of ``tokens [N, L]``, unaudited (use ``evaluate`` for the audit)."""
        return self.neural.compile(tokens)

    def _generator(self, device: torch.device) -> torch.Generator:
        key = str(device)
        if key not in self._generators:
            self._generators[key] = torch.Generator(device=device).manual_seed(self.config.seed)
        return self._generators[key]

    def _audit_mask(self, scores: Scores, consistent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(sampled [N], audited [N])`` bool masks."""
        num = consistent.shape[0]
        self.rate = self.monitor.rate(num)
        draws = torch.rand(num, generator=self._generator(consistent.device), device=consistent.device)
        sampled = draws < self.rate
        targeted = scores.solved | (scores.rewards >= self.config.reward_threshold)
        if self.config.audit_flagged:
            targeted = targeted | ~consistent
        return sampled, sampled | targeted

    def evaluate(self, tokens: torch.Tensor, task: Task, engine, num_outputs: int | None = None,
                 early_abort: bool = True) -> tuple[Execution, Scores]:
        """Compile (neural), run, score, audit and correct ``tokens [N, L]`` on ``task``."""
        num_outputs = num_outputs or max(1, task.max_output_length)
        program, consistent = self.neural.compile_checked(tokens)
        execution = engine.run(program, task, num_outputs=num_outputs, early_abort=early_abort)
        scores = score_outputs(execution, task)
        if tokens.shape[0] == 0:
            return execution, scores
        sampled, audited = self._audit_mask(scores, consistent)
        rows = audited.nonzero().squeeze(1)  # sync point: the audited subset's size, once per step
        self.steps += 1
        if rows.numel() == 0:
            self.monitor.update(0, 0)
            return execution, scores
        truth = self.reference.compile(tokens[rows])
        wrong = ~ir.equal(program[rows], truth)  # [A]
        in_sample = sampled[rows]
        counts = torch.stack([in_sample.sum(), (in_sample & wrong).sum(), wrong.sum()])
        trials, failures, num_wrong = counts.tolist()  # sync point: the audit's bookkeeping, once per step
        self.monitor.update(trials, failures)
        self.audited += rows.numel()
        self.targeted += rows.numel() - trials
        if num_wrong == 0:
            return execution, scores
        self.corrected += num_wrong
        fixed = engine.run(truth[wrong], task, num_outputs=num_outputs, early_abort=early_abort)
        execution = _replace_rows(execution, rows[wrong], fixed)
        return execution, score_outputs(execution, task)

    @property
    def stats(self) -> dict[str, float]:
        """The audit's state, keyed by TensorBoard tag (``verify/...``), as plain floats.

        ``miscompile_bound`` is the Clopper–Pearson upper bound on the neural compiler's
        miscompile rate over the window's random sample, at confidence ``1 - delta``.
        """
        audit = self.config.audit
        window_trials, window_failures = self.monitor.trials, self.monitor.failures
        return {
            "verify/miscompile_bound": self.monitor.upper_bound,
            "verify/miscompile_rate": window_failures / window_trials if window_trials else 0.0,
            "verify/bound_met": float(self.monitor.upper_bound <= audit.epsilon),
            "verify/epsilon": audit.epsilon,
            "verify/delta": audit.delta,
            "verify/audit_rate": self.rate,
            "verify/sampled": float(window_trials),
            "verify/sampled_miscompiles": float(window_failures),
            "verify/audited_total": float(self.audited),
            "verify/targeted_total": float(self.targeted),
            "verify/corrected_total": float(self.corrected),
        }

    def write_stats(self, writer, step: int) -> None:
        """Log ``stats`` to a TensorBoard ``SummaryWriter``."""
        for tag, value in self.stats.items():
            writer.add_scalar(tag, value, step)
