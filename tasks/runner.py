"""Running many programs on a task's cases on the host, one thread: what the task generator's screening and
minimisation need (small batches, where a team of OpenMP threads costs more than it saves).

The native engine on one thread, or the reference interpreter where no C compiler works: the same results
(tests/test_differential.py). Results are numpy arrays, judged as the task's dialect judges outputs.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from synthenv import reference
from synthenv.language import Status, encode_batch

from .task import Task


@dataclass(frozen=True)
class Runs:
    status: np.ndarray  # [N, K] int8 Status
    lengths: np.ndarray  # [N, K] values printed (may exceed O)
    outputs: np.ndarray  # [N, K, O] the first O values, zero-padded


def case_correct(runs: Runs, task: Task) -> np.ndarray:
    """``[N, K]`` bool: the case ended and printed exactly its expected output."""
    cases = task.tensors("cpu")
    expected, lengths = cases.expected.numpy(), cases.expected_lengths.numpy()  # [K, O'], [K]
    width = min(expected.shape[1], runs.outputs.shape[2])
    same = (runs.outputs[:, :, :width] == expected[None, :, :width]).all(2)  # [N, K]
    return (runs.status == Status.OK) & (runs.lengths == lengths[None]) & same


def solved(runs: Runs, task: Task) -> np.ndarray:
    return case_correct(runs, task).all(1)  # [N]


class Runner:
    """Runs programs on every case of a task: the native engine on one thread (small batches: a team of
    OpenMP threads costs more than it saves), else the reference interpreter, with the same results."""

    def __init__(self) -> None:
        from synthenv.engines import native

        self.engine = native.NativeEngine(num_threads=1) if native.is_available() else None

    def compile(self, programs: Sequence[str]):
        if self.engine is None:
            return list(programs)
        from synthenv.compilers.traditional import compile_native

        return compile_native(encode_batch(programs), num_threads=1)

    def run(self, compiled, task: Task, num_outputs: int | None, early_abort: bool) -> Runs:
        num_outputs = num_outputs or max(1, task.max_output_length)
        if self.engine is not None:
            execution = self.engine.run(compiled, task, num_outputs, early_abort)
            return Runs(execution.status.numpy(), execution.output_lengths.numpy(), execution.outputs.numpy())
        return run_reference(compiled, task, num_outputs, early_abort)


def run_reference(programs: Sequence[str], task: Task, num_outputs: int, early_abort: bool) -> Runs:
    shape = (len(programs), task.num_cases)
    status, lengths = np.zeros(shape, np.int8), np.zeros(shape, np.int32)
    outputs = np.zeros((*shape, num_outputs), np.int32)
    for i, code in enumerate(programs):
        for k, (inputs, _) in enumerate(task.cases):
            if early_abort and (status[i, :k] != Status.OK).any():
                status[i, k] = Status.ABORTED
                continue
            run = reference.run(code, inputs, task.base, task.max_steps, task.dialect)
            status[i, k] = run.status
            if run.status == Status.OK:
                output = task.dialect.judged(run.output)
                lengths[i, k] = len(output)
                outputs[i, k, : min(len(output), num_outputs)] = output[:num_outputs]
    return Runs(status, lengths, outputs)


@functools.cache
def runner() -> Runner:
    return Runner()
