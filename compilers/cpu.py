"""The CPU-centric pipeline (the paper's starting point), as a backend.

Programs are copied to the host, each is prepared and run one at a time by the plain-Python
reference interpreter, case by case in order, stopping at the first failing case as PQT's
scorer does, and the results are copied back to the programs' device. Every speed ratio in
``synthenv bench`` is taken against this pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from synthenv import deadline, reference
from synthenv.execution import Execution
from synthenv.language import Status, decode_batch
from synthenv.tasks import Task


@dataclass(frozen=True)
class CPUPipeline:
    """Host, one-program-at-a-time pipeline (registered as ``"cpu"``).

    It has its own engine, the reference interpreter: ``engine`` must be ``"auto"`` or
    ``"reference"``.
    """

    name: str = "cpu"
    engines: tuple[str, ...] = ("auto", "reference")

    def execute(self, tokens: torch.Tensor, task: Task, num_outputs: int | None = None,
                early_abort: bool = True) -> Execution:
        """Run ``tokens [N, L]`` on every case of ``task``; see ``Execution`` for the contract.

        With ``early_abort`` (PQT's scorer), a program's cases after its first failing case
        are not run (``ABORTED``).
        """
        num_outputs = num_outputs or max(1, task.max_output_length)
        programs = decode_batch(tokens)  # sync point: cpu_pipeline (the baseline copies programs to the host)
        num_cases = task.num_cases
        outputs = [[[0] * num_outputs for _ in range(num_cases)] for _ in programs]
        lengths = [[0] * num_cases for _ in programs]
        status = [[int(Status.ABORTED)] * num_cases for _ in programs]
        steps = [[0] * num_cases for _ in programs]
        for i, code in enumerate(programs):
            for k, (inputs, _) in enumerate(task.cases):
                deadline.check()
                outcome = reference.run(code, inputs, task.base, task.max_steps, task.dialect)
                printed = task.dialect.judged(outcome.output)  # without trailing whitespace under rstrip
                kept = list(printed[:num_outputs])
                outputs[i][k][: len(kept)] = kept
                lengths[i][k], status[i][k], steps[i][k] = len(printed), int(outcome.status), outcome.steps
                if early_abort and outcome.status != Status.OK:
                    break  # PQT stops scoring a program at its first failing case
        device = tokens.device
        execution = Execution(
            torch.tensor(outputs, dtype=torch.int32).view(len(programs), num_cases, num_outputs).to(device),
            torch.tensor(lengths, dtype=torch.int32).view(len(programs), num_cases).to(device),
            torch.tensor(status, dtype=torch.int8).view(len(programs), num_cases).to(device),
            torch.tensor(steps, dtype=torch.int32).view(len(programs), num_cases).to(device),
        )
        return execution.canonical(early_abort)  # failed cases keep no outputs
