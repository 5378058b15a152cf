"""The ``cuda`` engine: the native engine's kernel source (``kernel.c``) on an NVIDIA GPU.

The same C source is compiled by NVRTC through CuPy (``cupy.RawModule``), once per process
and cell width. One thread runs one (program, case); torch tensors are handed to CuPy
zero-copy through DLPack and the kernel is launched on torch's current stream, so nothing
waits for the GPU (no host synchronisation). With ``early_abort`` a failing case sets its
program's flag in global memory and the program's other cases stop at their next poll.

Tapes: each resident thread owns one tape column of ``max_steps`` cells (bytes when the
task's base is at most 256), interleaved so that lanes at the same pointer coalesce. The
tape is allocated zeroed once per (device, stream, cell width, max_steps) and the kernel
leaves it zeroed. CuPy is the optional extra ``pip install "synthenv[cuda]"``.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch

from synthenv.engines.common import finalize
from synthenv.engines.native import SOURCE
from synthenv.execution import Execution
from synthenv.ir import Program
from synthenv.tasks import Task

INSTALL_HINT = 'the cuda engine needs CUDA tensors and CuPy: pip install "synthenv[cuda]"'
BLOCK = 256
TAPE_BYTES = int(os.environ.get("SYNTHENV_CUDA_TAPE_BYTES", 2 << 30))
"""Most bytes of tape memory per (device, stream); fewer threads run at once beyond it."""


def _cupy():
    try:
        import cupy
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error
    return cupy


def cupy_available() -> bool:
    """Whether CuPy imports and sees a GPU."""
    try:
        cupy = _cupy()
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # ImportError, or CuPy's CUDARuntimeError without a driver
        return False


@functools.lru_cache(maxsize=8)
def _kernel(device_index: int, byte_cells: bool):
    cupy = _cupy()
    options = ("-std=c++14",) + (("-DSYN_CELL_U8",) if byte_cells else ())
    with cupy.cuda.Device(device_index):
        module = cupy.RawModule(code=SOURCE.read_text(), options=options)
        return module.get_function("synthenv_run_cuda")


@functools.lru_cache(maxsize=16)
def _tape(device_index: int, stream: int, byte_cells: bool, max_steps: int) -> tuple[torch.Tensor, int]:
    """A zeroed tape for ``slots`` threads: ``[max_steps * slots]`` cells; returns (tape, slots)."""
    props = torch.cuda.get_device_properties(device_index)
    cell = 1 if byte_cells else 4
    resident = props.multi_processor_count * props.max_threads_per_multi_processor
    slots = max(BLOCK, min(resident, TAPE_BYTES // (cell * max_steps)) // BLOCK * BLOCK)
    dtype = torch.uint8 if byte_cells else torch.int32
    return torch.zeros(max_steps * slots, dtype=dtype, device=torch.device("cuda", device_index)), slots


def _check_cuda(device: torch.device, what: str) -> None:
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"{INSTALL_HINT}; got {what} on {device}. Use engine='native' or 'auto' for CPU tensors")
    if not torch.cuda.is_available():
        raise ValueError(f"{INSTALL_HINT}; torch sees no CUDA device")
    _cupy()


@dataclass(frozen=True)
class CudaEngine:
    """The fused kernel on an NVIDIA GPU through CuPy/NVRTC (registered as ``"cuda"``)."""

    name: str = "cuda"

    def available(self, device: torch.device | str) -> bool:
        """Whether this engine can run on ``device``: a CUDA device, and CuPy installed."""
        return torch.device(device).type == "cuda" and torch.cuda.is_available() and cupy_available()

    def check_device(self, device: torch.device | str) -> None:
        """Raise a clear error if this engine cannot run on ``device``."""
        _check_cuda(device, "a request")

    def run(self, program: Program, task: Task, num_outputs: int | None = None, early_abort: bool = False) -> Execution:
        """Run ``program`` on all of ``task``'s cases; see ``Execution`` for the contract."""
        _check_cuda(program.device, "the program")
        if num_outputs is not None and (not isinstance(num_outputs, int) or num_outputs < 1):
            raise ValueError(f"num_outputs must be a positive int or None, got {num_outputs!r}")
        num_outputs = num_outputs or max(1, task.max_output_length)
        cupy = _cupy()
        import numpy as np

        device = program.device
        index = device.index if device.index is not None else torch.cuda.current_device()
        code = program.code.to(torch.int32).contiguous()  # [N, P, 5]
        cases = task.tensors(device)
        num_programs, num_slots, num_cases = code.shape[0], code.shape[1], cases.num_cases
        result = Execution(
            torch.empty((num_programs, num_cases, num_outputs), dtype=torch.int32, device=device),
            torch.empty((num_programs, num_cases), dtype=torch.int32, device=device),
            torch.empty((num_programs, num_cases), dtype=torch.int8, device=device),
            torch.empty((num_programs, num_cases), dtype=torch.int32, device=device),
        )
        total = num_programs * num_cases
        if total == 0:
            return finalize(result, program, task)
        stream = torch.cuda.current_stream(device)
        byte_cells = task.base <= 256
        tape, slots = _tape(index, stream.cuda_stream, byte_cells, task.max_steps)
        flags = torch.zeros(num_programs if early_abort else 1, dtype=torch.int32, device=device)
        blocks = min(slots, -(-total // BLOCK) * BLOCK) // BLOCK
        with cupy.cuda.Device(index), cupy.cuda.ExternalStream(stream.cuda_stream, index):
            tensors = (code, cases.inputs, cases.input_lengths, result.outputs, result.output_lengths, result.status,
                       result.steps, tape, flags)
            arrays = [cupy.from_dlpack(t) for t in tensors]  # zero-copy views
            c_code, c_inputs, c_lengths, c_out, c_out_len, c_status, c_steps, c_tape, c_flags = arrays
            _kernel(index, byte_cells)(
                (blocks,), (BLOCK,),
                (c_code, np.int64(num_programs), np.int64(num_slots), c_inputs, c_lengths, np.int64(num_cases),
                 np.int64(cases.inputs.shape[1]), np.int32(task.base), np.int32(task.max_steps),
                 np.int32(bool(early_abort)), c_out, c_out_len, c_status, c_steps, np.int64(num_outputs), c_tape,
                 np.int64(blocks * BLOCK), c_flags),
            )
        return finalize(result, program, task)
