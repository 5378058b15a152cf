"""The ``native`` engine: synthenv's VM (``vm.h`` through ``native.c``) on the CPU.

The C sources are compiled at first use by the system C compiler, cached and verified by
``synthenv.native_build``, and loaded with ctypes. The engine reads and writes torch CPU
tensors in place through their data pointers (no copies). OpenMP runs programs in parallel;
each thread runs one program's K cases in order, so early abort is a ``break``.

>>> from synthenv.language import encode_batch
>>> from synthenv import compilers, tasks
>>> program = compilers.get("traditional").compile(encode_batch([",[>,]+[,<.]"]))
>>> NativeEngine().run(program, tasks.get("reverse")).status.sum().item()
0
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

import torch

from synthenv import deadline, native_build
from synthenv.engines.common import check_num_outputs, finalize
from synthenv.execution import Execution
from synthenv.ir import Program
from synthenv.naive import run_naive  # noqa: F401  (the benchmark's reference; synthenv/bench.py imports it here)
from synthenv.native_build import NativeBuildError, find_compiler  # noqa: F401  (re-exported for synthenv/bench.py)
from synthenv.tasks.task import Task


LIBRARY = native_build.register(__name__, ["native.c"], beside=__file__,
                                exports=("synthenv_run", "synthenv_loop_iterations"))
"""The VM's OpenMP entry point (``native.c`` + ``vm.h``)."""


def is_available() -> bool:
    """Whether the native engine's library builds and loads here (a working C compiler with OpenMP)."""
    return LIBRARY.is_available()


@functools.lru_cache(maxsize=1)
def _kernel():
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    return LIBRARY.bind("synthenv_run", [p, i64, i64, p, p, i64, i64, i32, i32, i32, i32, i32, i32, i32, p, p, p, p,
                                         i64, i32, i32, ctypes.c_double])


def loop_iterations(delta: int, value: int, base: int) -> int:
    """The VM's counted-loop iteration count: least t >= 1 with (value + t delta) mod base == 0, or 0.

    >>> loop_iterations(-1, 3, 256), loop_iterations(2, 1, 256)
    (3, 0)
    """
    function = LIBRARY.bind("synthenv_loop_iterations", [ctypes.c_int64] * 3, ctypes.c_int64)
    return int(function(delta, value, base))


def _check_cpu(device: torch.device, what: str) -> None:
    if torch.device(device).type != "cpu":
        raise ValueError(f"the native engine runs on CPU tensors, got {what} on {torch.device(device)}; "
                         "move them with .to('cpu'), or use engine='cuda' (or 'auto') for CUDA tensors")


@dataclass(frozen=True)
class NativeEngine:
    """The fused C kernel on the CPU (registered as ``"native"``).

    Attributes:
        num_threads: OpenMP threads; 0 = OpenMP's default (all cores, or ``$OMP_NUM_THREADS``).
    """

    num_threads: int = 0
    name: str = "native"

    def available(self, device: torch.device | str) -> bool:
        """Whether this engine can run on ``device``: a CPU device and a working C compiler."""
        return torch.device(device).type == "cpu" and is_available()

    def check_device(self, device: torch.device | str) -> None:
        """Raise a clear error if this engine cannot run on ``device``."""
        _check_cpu(device, "a request")
        LIBRARY.load()

    def run(self, program: Program, task: Task, num_outputs: int | None = None, early_abort: bool = False) -> Execution:
        """Run ``program`` on all of ``task``'s cases; see ``Execution`` for the contract."""
        execution = self.run_raw(program, task, num_outputs, early_abort)
        if not task.strict_syntax:  # the kernel's own result already follows the contract (tested)
            return execution
        return finalize(execution, program, task, early_abort)

    def run_raw(self, program: Program, task: Task, num_outputs: int | None = None, early_abort: bool = False,
                keep_failed: bool = False) -> Execution:
        """The kernel's own result, before strict syntax is applied (``finalize``).

        ``keep_failed``: failed cases keep what they printed before they stopped instead of
        zeros. That depends on how early the VM proved a hang, so it is a diagnostic for tests,
        not part of the contract.
        """
        _check_cpu(program.device, "the program")
        num_outputs = check_num_outputs(num_outputs, task)
        code = program.code.to(torch.int32).contiguous()  # [N, P, 5], no copy when already so
        cases = task.tensors("cpu")
        num_programs, num_slots, num_cases = code.shape[0], code.shape[1], cases.num_cases
        result = Execution(  # uninitialised: the kernel writes every element
            torch.empty((num_programs, num_cases, num_outputs), dtype=torch.int32),
            torch.empty((num_programs, num_cases), dtype=torch.int32),
            torch.empty((num_programs, num_cases), dtype=torch.int8),
            torch.empty((num_programs, num_cases), dtype=torch.int32),
        )
        rc = _kernel()(
            code.data_ptr(), num_programs, num_slots, cases.inputs.data_ptr(), cases.input_lengths.data_ptr(),
            num_cases, cases.inputs.shape[1], task.base, task.max_steps, *task.dialect.codes,
            task.dialect.ring(task.max_steps), int(bool(early_abort)),
            *(t.data_ptr() for t in (result.outputs, result.output_lengths, result.status, result.steps)),
            num_outputs, self.num_threads, int(bool(keep_failed)), deadline.current() or 0.0)
        if rc == 1:
            raise deadline.DeadlineExceeded()
        if rc != 0:
            cells = max(task.max_steps, task.dialect.ring(task.max_steps))
            raise MemoryError(f"the native kernel could not allocate its tapes ({cells} cells per thread)")
        return result
