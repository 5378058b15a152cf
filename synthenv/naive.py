"""The benchmark's naive reference: a plain C interpreter of raw BF tokens (``naive.c``).

What a careful CPU programmer writes without a compiler: a precomputed bracket map, one
command per step, each program's cases in order. ``synthenv bench`` times it on one core and
on all cores next to synthenv's pipelines; tests check that it gives exactly the ``cpu``
pipeline's ``Execution``.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from synthenv import native_build
from synthenv.execution import Execution
from synthenv.tasks.task import Task

LIBRARY = native_build.register(__name__, ["naive.c"], beside=__file__, exports=("synthenv_naive",))
"""The naive interpreter (``naive.c``)."""


def run_naive(tokens: torch.Tensor, task: Task, num_outputs: int | None = None, num_threads: int = 0,
              early_abort: bool = True) -> Execution:
    """Run ``tokens [N, L]`` on every case of ``task`` with the naive interpreter (CPU tensors).

    With ``early_abort`` each program stops at its first failing case (the rest are
    ``ABORTED``, as in the ``cpu`` pipeline); ``num_threads``: OpenMP threads over programs
    (0 = all cores). The result follows ``Execution``'s contract.

    >>> from synthenv.language import encode_batch
    >>> from synthenv import tasks
    >>> run_naive(encode_batch([",[>,]+[,<.]"]), tasks.get("reverse")).status.sum().item()
    0
    """
    if tokens.device.type != "cpu":
        raise ValueError(f"run_naive runs on CPU tensors, got tokens on {tokens.device}; move them with .cpu()")
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape [N, L], got {tuple(tokens.shape)}")
    if num_outputs is not None and (not isinstance(num_outputs, int) or num_outputs < 1):
        raise ValueError(f"num_outputs must be a positive int or None, got {num_outputs!r}")
    num_outputs = num_outputs or max(1, task.max_output_length)
    tokens = tokens.to(torch.int64).contiguous()  # [N, L]
    cases = task.tensors("cpu")
    num, num_cases = tokens.shape[0], cases.num_cases
    result = Execution(torch.empty((num, num_cases, num_outputs), dtype=torch.int32),  # the C code writes all
                       torch.empty((num, num_cases), dtype=torch.int32),
                       torch.empty((num, num_cases), dtype=torch.int8),
                       torch.empty((num, num_cases), dtype=torch.int32))
    rc = _native_naive()(
        tokens.data_ptr(), num, tokens.shape[1], cases.inputs.data_ptr(), cases.input_lengths.data_ptr(), num_cases,
        cases.inputs.shape[1], task.base, task.max_steps, int(task.strict_syntax), *task.dialect.codes,
        task.dialect.ring(task.max_steps), int(bool(early_abort)),
        *(t.data_ptr() for t in (result.outputs, result.output_lengths, result.status, result.steps)), num_outputs,
        num_threads)
    if rc != 0:
        cells = max(task.max_steps, task.dialect.ring(task.max_steps))
        raise MemoryError(f"the naive interpreter could not allocate its tapes ({cells} cells per thread)")
    return result


@functools.lru_cache(maxsize=1)
def _native_naive():
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    return LIBRARY.bind("synthenv_naive", [p, i64, i64, p, p, i64, i64, i32, i32, i32, i32, i32, i32, i32, i32,
                                           p, p, p, p, i64, i32])
