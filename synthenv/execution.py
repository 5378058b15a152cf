"""``Execution``: what an engine returns for N programs run on K test cases."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from synthenv.language import Status


@dataclass(frozen=True)
class Execution:
    """Per (program, case) results of running an IR batch.

    The execution contract, the same for every engine (torch, native, cuda), the ``cpu``
    pipeline and the benchmark's naive interpreter, so that their results are identical case
    by case (tests/test_differential.py compares them with each other and with the oracle):

    - Cases run, in effect, in case order. ``status`` is ``OK``, ``STEP_LIMIT``, ``SYNTAX_ERROR``
      or ``LEFT_EDGE`` as the oracle says, except that with ``early_abort`` every case after
      a program's first failing case (in case order) is ``ABORTED``. That mask is a function
      of the statuses alone, computed after the cases ran (``canonical``), so an engine that
      runs cases in parallel (cuda) gives exactly what one that stops at the first failure
      (native) gives, however the threads were timed. PQT scores such a program as failed
      whatever its other cases do.
    - ``OK`` cases: ``outputs`` (the first O values printed, zero-padded), ``output_lengths``
      (how many were printed, may exceed O) and ``steps`` (raw BF steps) equal the oracle's. Under
      a dialect that ignores trailing whitespace (``Dialect.output == "rstrip"``) the output is cut
      after its last non-whitespace value (``Dialect.judged``).
    - A failed case exposes only its status and step count: ``steps`` is ``max_steps``
      (``STEP_LIMIT``), 0 (``SYNTAX_ERROR``) or the steps up to and including the failing ``<``
      (``LEFT_EDGE``); its outputs are zeros and its output length 0 (what it printed before it
      failed depends on how soon an engine proved a hang).
    - An ``ABORTED`` case has zero outputs, output length 0 and steps 0.

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
        """``[N]`` int8: OK if every case is OK, else the status of the program's first failing case.

        That is the failure PQT's scorer sees (it stops at the first failing case), the same with early
        abort or without; ABORTED cases only follow a failure, so a program's status never reads ABORTED.
        """
        failed = (self.status != Status.OK) & (self.status != Status.ABORTED)  # [N, K]
        first = failed.to(torch.uint8).argmax(1, keepdim=True)  # [N, 1] the first failing case (0 if none)
        return torch.where(failed.any(1), self.status.gather(1, first)[:, 0], int(Status.OK)).to(torch.int8)

    def canonical(self, early_abort: bool) -> Execution:
        """This execution brought to the contract above, with tensor ops only (no host sync).

        Marks every case after a program's first failing case ``ABORTED`` (with
        ``early_abort``) and clears the outputs of failed and aborted cases. Idempotent; an
        execution that already follows the contract comes back unchanged.
        """
        status = self.status  # [N, K]
        failed = (status != Status.OK) & (status != Status.ABORTED)  # [N, K]
        if early_abort:
            aborted = (failed.cumsum(1) - failed.long()) > 0  # [N, K] a failure strictly before
            aborted |= status == Status.ABORTED
        else:
            aborted = status == Status.ABORTED
        hidden = failed | aborted
        return Execution(
            torch.where(hidden[..., None], 0, self.outputs),
            torch.where(hidden, 0, self.output_lengths),
            torch.where(aborted, int(Status.ABORTED), status),
            torch.where(aborted, 0, self.steps),
        )

    def replace_rows(self, rows: torch.Tensor, other: Execution) -> Execution:
        """This execution with programs ``rows [C]`` (int64) taken from ``other`` (C programs, same K and O)."""
        fields = []
        for name in ("outputs", "output_lengths", "status", "steps"):
            values = getattr(self, name).clone()
            values[rows] = getattr(other, name).to(values.dtype)
            fields.append(values)
        return Execution(*fields)

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
