"""The audit stage: compile -> run -> score -> **audit** (-> re-run and re-score what it corrected).

A backend whose IR is only probably right (the ``hybrid``: a learned compiler) pairs its
compiler with an ``Audit``: given the batch's tokens, IR, the compiler's own flags and the
scores, it recompiles a subset with an exact compiler and returns which programs were
miscompiled, their exact IR, and typed statistics (``AuditStats``). The pipeline
(``synthenv.pipeline.Evaluator``) re-runs and re-scores the corrected programs; the env puts the
statistics in ``info["audit"]``. The audit needs the scores (it always checks the programs
whose reward matters), which is why it is a stage of its own, after scoring.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

import torch

from synthenv.ir import Program
from synthenv.scoring import Scores


@dataclass(frozen=True)
class AuditStats:
    """The audit's state after a step (host values; reading them costs nothing).

    Attributes:
        miscompile_bound: one-sided Clopper–Pearson upper bound on the compiler's miscompile
            rate over the window's random sample, at confidence ``1 - delta`` (1.0 before any).
        miscompile_rate: miscompiles / sampled programs in the window (0.0 before any).
        bound_met: ``miscompile_bound <= epsilon``.
        epsilon: the target bound.
        delta: 1 - confidence of the bound.
        audit_rate: the random audit rate used by the last step.
        sampled: random checks in the window.
        sampled_miscompiles: miscompiles among them.
        audited: programs recompiled in the last step (random sample and targeted).
        corrected: programs whose IR was wrong and was replaced in the last step.
        steps: steps audited so far.
        audited_total: programs recompiled so far, all reasons.
        targeted_total: of which audited for their reward or a flag (never part of the bound).
        corrected_total: programs corrected so far.
    """

    miscompile_bound: float = 1.0
    miscompile_rate: float = 0.0
    bound_met: bool = False
    epsilon: float = 0.0
    delta: float = 0.0
    audit_rate: float = 0.0
    sampled: int = 0
    sampled_miscompiles: int = 0
    audited: int = 0
    corrected: int = 0
    steps: int = 0
    audited_total: int = 0
    targeted_total: int = 0
    corrected_total: int = 0

    def as_scalars(self, prefix: str = "verify/") -> dict[str, float]:
        """Every field as a float keyed by TensorBoard tag (``verify/miscompile_bound``, ...).

        >>> AuditStats(sampled=3).as_scalars()["verify/sampled"]
        3.0
        """
        return {f"{prefix}{name}": float(value) for name, value in asdict(self).items()}

    def write(self, writer, step: int, prefix: str = "verify/") -> None:
        """Log every field to a TensorBoard ``SummaryWriter`` at ``step``."""
        for tag, value in self.as_scalars(prefix).items():
            writer.add_scalar(tag, value, step)


@dataclass(frozen=True)
class AuditResult:
    """What an audit found in one batch.

    Attributes:
        rows: ``[C]`` int64, programs whose IR was wrong (C may be 0).
        program: the exact IR of those programs (``C`` of them), to re-run.
        stats: the audit's statistics after this batch.
    """

    rows: torch.Tensor
    program: Program | None
    stats: AuditStats


@runtime_checkable
class Audit(Protocol):
    """The audit stage of a backend (see the module docstring)."""

    @property
    def stats(self) -> AuditStats:
        """The statistics after the last batch."""
        ...

    def check(self, tokens: torch.Tensor, program: Program, flags: torch.Tensor, scores: Scores) -> AuditResult:
        """Audit one batch: ``tokens [N, L]``, its ``program`` IR, the compiler's ``flags [N]``
        (True = self-consistent) and its ``scores``."""
        ...


@runtime_checkable
class AuditedCompiler(Protocol):
    """A compiler whose output the pipeline audits: ``compile_checked`` gives the IR and the
    compiler's own consistency flags; ``audit`` is the stage that checks them."""

    name: str
    audit: Audit

    def compile_checked(self, tokens: torch.Tensor) -> tuple[Program, torch.Tensor]:
        ...
