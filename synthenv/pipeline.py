"""One batched step of data: tokens -> (compile) -> IR -> (engine) -> Execution -> Scores.

Pure functions of typed artifacts; no Python loop over programs and no host sync on the way
for the IR backends with the torch-free engines (the ``cpu`` pipeline syncs by design).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from synthenv import compilers, engines
from synthenv.execution import Execution
from synthenv.registry import unknown_name_message
from synthenv.scoring import Scores, score_outputs
from synthenv.tasks import Task


@dataclass(frozen=True)
class Evaluator:
    """A backend and an engine bound together, ready to score token batches on a device.

    Build it once (``Evaluator.create``) and call it every step: name lookups, engine
    selection and availability checks happen here, not on the step path.
    """

    backend: object
    engine: object | None  # None for pipelines that run programs themselves
    early_abort: bool = True

    @classmethod
    def create(cls, backend: str = "traditional", engine: str = "auto", device: torch.device | str | None = None,
               early_abort: bool = True) -> Evaluator:
        compiler = compilers.get(backend)
        if isinstance(compiler, compilers.Pipeline):
            if engine not in compiler.engines:
                valid = list(compiler.engines)
                raise ValueError(
                    f"backend {backend!r} runs programs with its own interpreter; "
                    + unknown_name_message("engine", engine, valid)
                )
            return cls(compiler, None, early_abort)
        return cls(compiler, engines.select(engine, torch.device(device or "cpu")), early_abort)

    def execute(self, tokens: torch.Tensor, task: Task, num_outputs: int | None = None) -> Execution:
        """Compile and run ``tokens [N, L]`` on every case of ``task``."""
        if self.engine is None:
            return self.backend.execute(tokens, task, num_outputs=num_outputs, early_abort=self.early_abort)
        if hasattr(self.backend, "evaluate"):  # a backend that needs the scores (the hybrid's audit)
            return self(tokens, task, num_outputs)[0]
        program = self.backend.compile(tokens)
        return self.engine.run(program, task, num_outputs=num_outputs, early_abort=self.early_abort)

    def __call__(self, tokens: torch.Tensor, task: Task, num_outputs: int | None = None) -> tuple[Execution, Scores]:
        """Compile, run and score ``tokens [N, L]``.

        A compiler backend may implement ``evaluate(tokens, task, engine, num_outputs,
        early_abort) -> (Execution, Scores)`` to take over this whole step (the ``hybrid``
        backend does, to audit the programs whose reward matters).
        """
        if self.engine is not None and hasattr(self.backend, "evaluate"):
            return self.backend.evaluate(tokens, task, self.engine, num_outputs=num_outputs,
                                         early_abort=self.early_abort)
        execution = self.execute(tokens, task, num_outputs)
        return execution, score_outputs(execution, task)
