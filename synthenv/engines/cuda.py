"""The ``cuda`` engine: synthenv's VM (``vm.h`` through ``cuda.cu``) on an NVIDIA GPU.

The VM is the one the native engine runs; ``cuda.cu`` is its CUDA entry point, compiled by
NVRTC through CuPy (``cupy.RawModule``) once per process and ``KernelVariant`` (cell width,
early abort). One thread runs one (program, case); torch tensors are handed to CuPy zero-copy
through DLPack and the kernel is launched on torch's current stream, so nothing waits for the
GPU (no host synchronisation). With early abort a failing case lowers its program's
``first_failure`` index in global memory and the program's later cases stop at their next
poll; the engine then applies the execution contract (``Execution.canonical``) with tensor
ops, so the result does not depend on thread timing.

CI has no GPU, but NVRTC runs without a driver: ``compile_ptx`` compiles every variant
(``variants()``) to PTX with the ``nvidia-cuda-nvrtc-cu12`` wheel through ``cuda-bindings``
(tests/test_cuda_compile.py, ``synthenv doctor``).

Tapes: each resident thread owns one tape column of ``max_steps`` cells (under a wrapping dialect,
``max(max_steps, Dialect.ring)``; bytes when the
task's base is at most 256), interleaved so that lanes at the same pointer coalesce. Tapes are
allocated zeroed, kept in a cache bounded by bytes (``TapeCache``, ``$SYNTHENV_CUDA_TAPE_BYTES``,
default 2 GiB in all) per (device, stream, cell width, max_steps), and the kernel leaves them
zeroed. CuPy is the optional extra ``pip install "synthenv[cuda]"``.
"""

from __future__ import annotations

import functools
import os
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path

import torch

from synthenv import deadline
from synthenv.engines.common import check_num_outputs, finalize
from synthenv.execution import Execution
from synthenv.ir import Program
from synthenv.native_build import expand_source
from synthenv.tasks.task import Task

INSTALL_HINT = 'the cuda engine needs CUDA tensors and CuPy: pip install "synthenv[cuda]"'
NVRTC_HINT = 'NVRTC through cuda-bindings: pip install "synthenv[dev]" (nvidia-cuda-nvrtc-cu12, cuda-bindings)'
SOURCE = Path(__file__).with_name("cuda.cu")
ENTRY_POINTS = ("synthenv_run_cuda",)
"""Kernels that ``cuda.cu`` defines and the engine launches."""
BLOCK = 256
TAPE_BYTES = int(os.environ.get("SYNTHENV_CUDA_TAPE_BYTES", 2 << 30))
"""Most bytes of tape memory the engine keeps, all tapes together (least recently used go first)."""


@dataclass(frozen=True)
class KernelVariant:
    """One compiled form of ``cuda.cu``: bytes or int32 as cells, early abort on or off."""

    byte_cells: bool
    early_abort: bool

    @property
    def options(self) -> tuple[str, ...]:
        """NVRTC options (CuPy adds the architecture itself)."""
        return ("-std=c++14", f"-DSYN_EARLY_ABORT={int(self.early_abort)}") + (("-DSYN_CELL_U8",) if self.byte_cells
                                                                                else ())


def variants() -> list[KernelVariant]:
    """Every variant the engine can launch (tests/test_cuda_compile.py compiles them all)."""
    return [KernelVariant(cells, abort) for cells in (True, False) for abort in (True, False)]


@functools.lru_cache(maxsize=1)
def kernel_source() -> str:
    """``cuda.cu`` with its includes inlined: one self-contained NVRTC source (so that CuPy's
    compile cache, keyed by the source text, sees every change to the VM)."""
    return expand_source(SOURCE)


class NvrtcError(RuntimeError):
    """NVRTC rejected the kernel, or warned about it (the log is in the message)."""


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        try:
            from cuda import nvrtc  # cuda-python < 12.6
        except ImportError as error:
            raise ImportError(f"compiling the CUDA kernel without a GPU needs {NVRTC_HINT}") from error
    return nvrtc


def nvrtc_version() -> tuple[int, int]:
    """NVRTC's (major, minor); raises ``ImportError`` (with the fix) or ``NvrtcError`` without it."""
    nvrtc = _nvrtc()
    try:
        result, major, minor = nvrtc.nvrtcVersion()
    except RuntimeError as error:  # cuda-bindings could not find libnvrtc
        raise NvrtcError(f"libnvrtc not found ({error}); {NVRTC_HINT}") from None
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise NvrtcError(f"nvrtcVersion failed: {result}")
    return int(major), int(minor)


def compile_ptx(variant: KernelVariant, arch: str = "sm_80") -> str:
    """Compile ``variant`` of the kernel to PTX for ``arch`` with NVRTC (no GPU or driver needed).

    Raises:
        NvrtcError: a compile error, or any warning in NVRTC's log (warnings are errors here).
        ImportError: NVRTC is not installed (the message names the extra).
    """
    nvrtc = _nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    result, program = nvrtc.nvrtcCreateProgram(kernel_source().encode(), b"cuda.cu", 0, [], [])
    if result != ok:
        raise NvrtcError(f"nvrtcCreateProgram failed: {result}")
    try:
        options = [f"--gpu-architecture=compute_{arch.removeprefix('sm_')}".encode(),
                   *(o.encode() for o in variant.options)]
        (result,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
        # NVRTC writes into the buffer: a bytearray, never bytes (b" " * 1 is CPython's shared
        # one-byte object, and overwriting it corrupts every later b" " in the process).
        _, size = nvrtc.nvrtcGetProgramLogSize(program)
        log = bytearray(size)
        nvrtc.nvrtcGetProgramLog(program, log)
        log_text = bytes(log).rstrip(b"\0 ").decode(errors="replace")
        if result != ok or "warning" in log_text.lower() or "error" in log_text.lower():
            raise NvrtcError(f"NVRTC on {variant} for {arch} ({result}):\n{log_text}")
        _, size = nvrtc.nvrtcGetPTXSize(program)
        ptx = bytearray(size)
        nvrtc.nvrtcGetPTX(program, ptx)
        return bytes(ptx).rstrip(b"\0").decode()
    finally:
        nvrtc.nvrtcDestroyProgram(program)


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


@functools.lru_cache(maxsize=16)
def _kernel(device_index: int, variant: KernelVariant):
    cupy = _cupy()
    with cupy.cuda.Device(device_index):
        module = cupy.RawModule(code=kernel_source(), options=variant.options)
        return module.get_function(ENTRY_POINTS[0])


class TapeCache:
    """Zeroed tapes kept for reuse, at most ``max_bytes`` in all; the least recently used go first.

    A tape in use by a kernel on its stream is safe to drop: torch's caching allocator reuses
    its memory only for later work on the stream it was allocated on.

    >>> cache = TapeCache(max_bytes=1000)
    >>> a = cache.get("a", 600, lambda: torch.zeros(600, dtype=torch.uint8))
    >>> b = cache.get("b", 600, lambda: torch.zeros(600, dtype=torch.uint8))  # evicts "a"
    >>> list(cache.keys()), cache.bytes
    (['b'], 600)
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self.bytes = 0

    def keys(self) -> list[Hashable]:
        return list(self._entries)

    def get(self, key: Hashable, nbytes: int, make: Callable[[], object]):
        """The entry for ``key``, made with ``make()`` (``nbytes`` big) if missing."""
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key][0]
        if nbytes > self.max_bytes:
            raise ValueError(f"a tape of {nbytes} bytes exceeds the CUDA tape budget of {self.max_bytes} bytes; "
                             "raise $SYNTHENV_CUDA_TAPE_BYTES, lower the task's max_steps, or use engine='torch'")
        while self._entries and self.bytes + nbytes > self.max_bytes:
            _, (_, size) = self._entries.popitem(last=False)
            self.bytes -= size
        value = make()
        self._entries[key] = (value, nbytes)
        self.bytes += nbytes
        return value

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0


_TAPES = TapeCache(TAPE_BYTES)


def tape_for(device_index: int, stream: int, byte_cells: bool, max_steps: int) -> tuple[torch.Tensor, int]:
    """A zeroed tape for ``slots`` threads: ``[max_steps * slots]`` cells (``max_steps``: the cells one thread
    needs, ``max(max_steps, Dialect.ring)``); returns (tape, slots)."""
    props = torch.cuda.get_device_properties(device_index)
    cell = 1 if byte_cells else 4
    resident = props.multi_processor_count * props.max_threads_per_multi_processor
    slots = max(BLOCK, min(resident, _TAPES.max_bytes // (cell * max_steps)) // BLOCK * BLOCK)
    dtype = torch.uint8 if byte_cells else torch.int32
    device = torch.device("cuda", device_index)
    tape = _TAPES.get((device_index, stream, byte_cells, max_steps, slots), cell * max_steps * slots,
                      lambda: torch.zeros(max_steps * slots, dtype=dtype, device=device))
    return tape, slots


def _check_cuda(device: torch.device, what: str) -> None:
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"{INSTALL_HINT}; got {what} on {device}. Use engine='native' or 'auto' for CPU tensors")
    if not torch.cuda.is_available():
        raise ValueError(f"{INSTALL_HINT}; torch sees no CUDA device")
    _cupy()


@dataclass(frozen=True)
class CudaEngine:
    """The VM on an NVIDIA GPU through CuPy/NVRTC (registered as ``"cuda"``)."""

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
        num_outputs = check_num_outputs(num_outputs, task)
        deadline.check()  # before the launch; a kernel's programs are bounded by max_steps
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
            return finalize(result, program, task, early_abort)
        stream = torch.cuda.current_stream(device)
        variant = KernelVariant(byte_cells=task.base <= 256, early_abort=bool(early_abort))
        edge, eof, cmp = task.dialect.codes
        ring = task.dialect.ring(task.max_steps)
        tape, slots = tape_for(index, stream.cuda_stream, variant.byte_cells, max(task.max_steps, ring))
        # [N] smallest failed case index so far; K = none yet
        first_failure = torch.full((num_programs if early_abort else 1,), num_cases, dtype=torch.int32, device=device)
        blocks = min(slots, -(-total // BLOCK) * BLOCK) // BLOCK
        with cupy.cuda.Device(index), cupy.cuda.ExternalStream(stream.cuda_stream, index):
            tensors = (code, cases.inputs, cases.input_lengths, result.outputs, result.output_lengths, result.status,
                       result.steps, tape, first_failure)
            arrays = [cupy.from_dlpack(t) for t in tensors]  # zero-copy views
            c_code, c_inputs, c_lengths, c_out, c_out_len, c_status, c_steps, c_tape, c_first = arrays
            _kernel(index, variant)(
                (blocks,), (BLOCK,),
                (c_code, np.int64(num_programs), np.int64(num_slots), c_inputs, c_lengths, np.int64(num_cases),
                 np.int64(cases.inputs.shape[1]), np.int32(task.base), np.int32(task.max_steps), np.int32(edge),
                 np.int32(eof), np.int32(cmp), np.int32(ring), c_out, c_out_len,
                 c_status, c_steps, np.int64(num_outputs), c_tape, np.int64(blocks * BLOCK), c_first),
            )
        return finalize(result, program, task, early_abort)
