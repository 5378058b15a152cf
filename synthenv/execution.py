"""``Execution``: what an engine returns for N programs run on K test cases."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from synthenv.language import Status


@dataclass(frozen=True)
class Execution:
    """Per (program, case) results of running an IR batch.

    Contract shared by all engines and the ``cpu`` pipeline (tested against the oracle):

    - ``status``: ``Status`` codes. ``OK`` and ``STEP_LIMIT`` agree with the oracle case by
      case; with ``early_abort`` an engine may mark a case ``ABORTED`` instead, but only in a
      program that has a failing case (PQT scores such a program as failed anyway).
    - For ``OK`` cases, ``outputs``, ``output_lengths`` and ``steps`` equal the oracle's.
    - For failed cases, ``steps`` is ``max_steps`` (``STEP_LIMIT``) or 0 (``SYNTAX_ERROR``);
      outputs of failed or aborted cases are not part of the contract.

    Attributes:
        outputs: ``[N, K, O]`` int32, the first O values each case printed (zero-padded).
        output_lengths: ``[N, K]`` int32, how many values each case printed (may exceed O).
        status: ``[N, K]`` int8 ``Status`` codes.
        steps: ``[N, K]`` int32 raw BF steps.
    """

    outputs: torch.Tensor
    output_lengths: torch.Tensor
    status: torch.Tensor
    steps: torch.Tensor

    @property
    def program_status(self) -> torch.Tensor:
        """``[N]`` int8: OK if every case is OK, else the most severe failure in the program.

        SYNTAX_ERROR outranks STEP_LIMIT; ABORTED cases count only through the failing case
        that caused them, so a program's status never reads ABORTED.
        """
        failure = torch.where(self.status == Status.ABORTED, 0, self.status.to(torch.int8))
        return failure.amax(dim=1).to(torch.int8)

    def to(self, device: torch.device | str) -> Execution:
        return Execution(*(t.to(device) for t in (self.outputs, self.output_lengths, self.status, self.steps)))


def empty_execution(num_programs: int, num_cases: int, num_outputs: int, device: torch.device) -> Execution:
    """An all-zero ``Execution`` to fill in (status OK, no outputs)."""
    return Execution(
        torch.zeros((num_programs, num_cases, num_outputs), dtype=torch.int32, device=device),
        torch.zeros((num_programs, num_cases), dtype=torch.int32, device=device),
        torch.zeros((num_programs, num_cases), dtype=torch.int8, device=device),
        torch.zeros((num_programs, num_cases), dtype=torch.int32, device=device),
    )
