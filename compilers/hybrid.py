"""The hybrid backend: neural compilation for every program, checked by a deterministic audit.

Each batch (one step of ``synthenv.pipeline.Evaluator``: compile -> run -> score -> audit):

1. The neural compiler compiles every program; the engine runs and the batch is scored.
2. Audit (``HybridAudit``, the pipeline's audit stage): the traditional compiler recompiles
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
   ``epsilon`` (defaults 0.1 % and 5 %). The bound, the rate and the counts are typed
   ``synthenv.audit.AuditStats`` (``HybridAudit.stats``; in the env's ``info["audit"]``;
   TensorBoard tags ``verify/*`` through ``AuditStats.write``).

Host synchronisation: the audited subset has a data-dependent size, so the audit stage is the
documented sync point ``hybrid_audit`` (synthenv.syncpoints): once for the subset, once for the
audit's counts, per step.
Targeted audits are not part of the sample (they are not random), so they never enter the
bound; their miscompiles are counted separately.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from synthenv import ir
from synthenv.audit import AuditResult, AuditStats
from synthenv.checks import require_finite_fields
from synthenv.scoring import Scores
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


class HybridAudit:
    """The hybrid's audit stage (``synthenv.audit.Audit``): recompile a sample and every program
    whose reward matters with the exact compiler, bound the miscompile rate, adapt the rate.

    Args:
        config: see ``HybridConfig``.
        reference: the exact compiler.
    """

    def __init__(self, config: HybridConfig, reference):
        self.config = config
        self.reference = reference
        self.monitor = ErrorRateMonitor(config.audit)
        self._generators: dict[str, torch.Generator] = {}
        self.rate = 0.0  # the random audit rate of the last step (0 before the first)
        self.steps = 0
        self.audited = 0  # programs recompiled, all reasons
        self.targeted = 0  # of which audited for their reward or a flag
        self.corrected = 0  # programs whose neural IR was wrong and was replaced
        self._last = (0, 0)  # (audited, corrected) in the last step

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

    def check(self, tokens: torch.Tensor, program: ir.Program, flags: torch.Tensor, scores: Scores) -> AuditResult:
        """Audit one batch (see the module docstring); returns the miscompiled rows and their exact IR.

        # sync point: hybrid_audit (the subset's size and the counts), once per step.
        """
        empty = torch.zeros(0, dtype=torch.int64, device=tokens.device)
        if tokens.shape[0] == 0:
            return AuditResult(empty, None, self.stats)
        sampled, audited = self._audit_mask(scores, flags)
        rows = audited.nonzero().squeeze(1)  # the audited subset: its size is data-dependent
        self.steps += 1
        if rows.numel() == 0:
            self.monitor.update(0, 0)
            self._last = (0, 0)
            return AuditResult(empty, None, self.stats)
        truth = self.reference.compile(tokens[rows])
        wrong = ~ir.equal(program[rows], truth)  # [A]
        in_sample = sampled[rows]
        counts = torch.stack([in_sample.sum(), (in_sample & wrong).sum(), wrong.sum()])
        trials, failures, num_wrong = counts.tolist()  # the audit's bookkeeping
        self.monitor.update(trials, failures)
        self.audited += rows.numel()
        self.targeted += rows.numel() - trials
        self.corrected += num_wrong
        self._last = (rows.numel(), num_wrong)
        if num_wrong == 0:
            return AuditResult(empty, None, self.stats)
        return AuditResult(rows[wrong], truth[wrong], self.stats)

    @property
    def stats(self) -> AuditStats:
        """The audit's state after the last step (see ``AuditStats``)."""
        audit = self.config.audit
        trials, failures = self.monitor.trials, self.monitor.failures
        bound = self.monitor.upper_bound
        return AuditStats(
            miscompile_bound=bound, miscompile_rate=failures / trials if trials else 0.0,
            bound_met=bound <= audit.epsilon, epsilon=audit.epsilon, delta=audit.delta, audit_rate=self.rate,
            sampled=trials, sampled_miscompiles=failures, audited=self._last[0], corrected=self._last[1],
            steps=self.steps, audited_total=self.audited, targeted_total=self.targeted,
            corrected_total=self.corrected)


class HybridCompiler:
    """Neural compiler + deterministic audit + online error bound (registered as ``"hybrid"``).

    ``compile`` alone returns the unaudited neural IR; ``compile_checked`` adds the model's own
    consistency flags, and ``audit`` (a ``HybridAudit``) is the stage that
    ``synthenv.pipeline.Evaluator`` (and so ``synthenv.score`` and the envs) runs after scoring.

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
        self.audit = HybridAudit(config, reference if reference is not None else TraditionalCompiler())

    @property
    def warmup_calls(self) -> int:
        """Calls after which the audit rate has settled (``synthenv bench`` warms up this long):
        the first ``horizon_steps`` calls audit at a high rate to build up the bound."""
        return self.config.audit.horizon_steps + 2

    def compile(self, tokens: torch.Tensor) -> ir.Program:
        """The neural IR of ``tokens [N, L]``, unaudited (the pipeline's audit stage checks it)."""
        return self.neural.compile(tokens)

    def compile_checked(self, tokens: torch.Tensor) -> tuple[ir.Program, torch.Tensor]:
        """The neural IR and the model's consistency flags ``[N]`` (``NeuralCompiler.compile_checked``)."""
        return self.neural.compile_checked(tokens)

    @property
    def stats(self) -> AuditStats:
        """The audit's statistics (``HybridAudit.stats``)."""
        return self.audit.stats
