"""One batched step of data: tokens -> compile -> IR -> run -> Execution -> score -> Scores -> audit.

Pure functions of typed artifacts; no Python loop over programs and no host sync on the way
for the IR backends (the documented exceptions are in ``synthenv.syncpoints``: the ``cpu``
pipeline by design, the hybrid's audit, the torch engine's periodic check). A backend with an
audit (``synthenv.audit.AuditedCompiler``: the hybrid) gets the audit stage after scoring; its
corrections are re-run and re-scored, and its typed statistics come back in ``Evaluation.audit``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from synthenv import compilers, engines
from synthenv.audit import Audit, AuditedCompiler, AuditStats
from synthenv.execution import Execution
from synthenv.registry import unknown_name_message
from synthenv.scoring import SCORERS, Scores, score_outputs
from synthenv.syncpoints import sync_point
from synthenv.tasks import Task


@dataclass(frozen=True)
class Evaluation:
    """What one step of the pipeline produced.

    Attributes:
        execution: per (program, case) results (after the audit's corrections).
        scores: rewards and solved flags (after the audit's corrections).
        audit: the audit's statistics, for a backend with an audit (else None).
    """

    execution: Execution
    scores: Scores
    audit: AuditStats | None = None


@dataclass(frozen=True)
class Evaluator:
    """A backend, an engine and a scorer bound together, ready to score token batches on a device.

    Build it once (``Evaluator.create``) and call it every step: name lookups, engine
    selection and availability checks happen here, not on the step path.

    Attributes:
        backend: a compiler (``compile``), or a pipeline that runs programs itself (``cpu``).
        engine: the engine for compiled programs (None for pipelines).
        early_abort: stop a program's cases at its first failure (see ``Execution``).
        scorer: ``score_outputs``'s ``impl``: ``auto``, ``torch`` or ``native``.
        audit: the backend's audit stage (set from the backend: ``AuditedCompiler.audit``).
    """

    backend: object
    engine: object | None  # None for pipelines that run programs themselves
    early_abort: bool = True
    scorer: str = "auto"
    audit: Audit | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.scorer not in SCORERS:
            raise ValueError(unknown_name_message("scorer", self.scorer, list(SCORERS)))
        if self.engine is not None and isinstance(self.backend, AuditedCompiler):
            object.__setattr__(self, "audit", self.backend.audit)

    @classmethod
    def create(cls, backend: str = compilers.DEFAULT_BACKEND, engine: str = "auto", device: torch.device | str | None = None,
               early_abort: bool = True, scorer: str = "auto") -> Evaluator:
        compiler = compilers.get(backend)
        if isinstance(compiler, compilers.Pipeline):
            if engine not in compiler.engines:
                valid = list(compiler.engines)
                raise ValueError(
                    f"backend {backend!r} runs programs with its own interpreter; "
                    + unknown_name_message("engine", engine, valid)
                )
            return cls(compiler, None, early_abort, scorer)
        return cls(compiler, engines.select(engine, torch.device(device or "cpu")), early_abort, scorer)

    def evaluate(self, tokens: torch.Tensor, task: Task, num_outputs: int | None = None) -> Evaluation:
        """Compile, run, score and (with an audit) audit ``tokens [N, L]`` on ``task``."""
        if self.engine is None:
            with sync_point("cpu_pipeline"):
                execution = self.backend.execute(tokens, task, num_outputs=num_outputs, early_abort=self.early_abort)
            return Evaluation(execution, score_outputs(execution, task, self.scorer))
        if self.audit is None:
            execution = self._run(self.backend.compile(tokens), task, num_outputs)
            return Evaluation(execution, score_outputs(execution, task, self.scorer))
        program, flags = self.backend.compile_checked(tokens)
        execution = self._run(program, task, num_outputs)
        scores = score_outputs(execution, task, self.scorer)
        with sync_point("hybrid_audit"):
            found = self.audit.check(tokens, program, flags, scores)
            if found.program is not None and found.rows.numel() > 0:
                fixed = self._run(found.program, task, execution.outputs.shape[2])
                execution = execution.replace_rows(found.rows, fixed)
                scores = score_outputs(execution, task, self.scorer)
        return Evaluation(execution, scores, found.stats)

    def _run(self, program, task: Task, num_outputs: int | None) -> Execution:
        return self.engine.run(program, task, num_outputs=num_outputs, early_abort=self.early_abort)

    def execute(self, tokens: torch.Tensor, task: Task, num_outputs: int | None = None) -> Execution:
        """Compile and run ``tokens [N, L]`` on every case of ``task`` (audited where the backend is)."""
        if self.engine is not None and self.audit is None:
            return self._run(self.backend.compile(tokens), task, num_outputs)
        return self.evaluate(tokens, task, num_outputs).execution

    def audit_stats(self) -> AuditStats | None:
        """The audit's statistics after the last step (None without an audit)."""
        return self.audit.stats if self.audit is not None else None

    def __call__(self, tokens: torch.Tensor, task: Task, num_outputs: int | None = None) -> tuple[Execution, Scores]:
        """``evaluate``, as ``(execution, scores)``."""
        evaluation = self.evaluate(tokens, task, num_outputs)
        return evaluation.execution, evaluation.scores
