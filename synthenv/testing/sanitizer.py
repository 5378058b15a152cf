"""synthenv's C sources under AddressSanitizer and UndefinedBehaviorSanitizer.

The sources of the engine's, the compiler's and the naive interpreter's libraries
(``driver_sources()``) and ``driver.c`` are built into one standalone executable (an ASan shared
library cannot be loaded into an uninstrumented Python without LD_PRELOAD) and run in a subprocess;
tests/test_sanitizers.py checks that it runs clean and gives exactly the normal build's results.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from synthenv import native_build
from synthenv.engines.common import check_num_outputs, finalize
from synthenv.execution import Execution
from synthenv.ir import Program
from synthenv.tasks import Task

DRIVER = Path(__file__).with_name("driver.c")
SANITIZE_FLAGS = ("-O1", "-g", "-fopenmp", "-std=gnu11", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                  "-fno-sanitize-recover=all")
"""Flags of the standalone sanitizer driver."""


def driver_sources() -> tuple[Path, ...]:
    """The C files the driver runs: the VM's entry point (first), the C compiler, the naive interpreter."""
    from synthenv import naive
    from synthenv.compilers import traditional
    from synthenv.engines import native

    return (*native.LIBRARY.sources, *traditional.LIBRARY.sources, *naive.LIBRARY.sources)


def build_driver(sources: Sequence[Path] | None = None) -> Path:
    """Build (or take from the verified cache) the driver: ``sources`` (default: ``driver_sources()``) +
    ``driver.c``."""
    sources = tuple(sources if sources is not None else driver_sources())
    return native_build.build((*sources, DRIVER), SANITIZE_FLAGS, suffix=".asan", name="synthenv-driver")


def run_driver(driver: Path, program: Program | torch.Tensor, task: Task, num_outputs: int | None = None,
               early_abort: bool = False, num_threads: int = 0, compile: bool = False) -> Execution:
    """Run ``driver`` (see ``build_driver``) on ``program`` in a subprocess.

    ``program`` is a compiled ``Program`` (the IR engine) or ``[N, L]`` tokens: run by the
    naive interpreter, or with ``compile`` compiled by the C compiler and run by the IR engine
    (strict syntax is not applied then). A sanitizer report makes the driver fail: this raises
    ``RuntimeError`` with its output.
    """
    num_outputs = check_num_outputs(num_outputs, task)
    naive = isinstance(program, torch.Tensor)
    mode = (2 if compile else 1) if naive else 0
    data = program.to(torch.int64) if naive else program.code.to(torch.int32)
    data = data.cpu().contiguous()
    cases = task.tensors("cpu")
    num, width, num_cases = data.shape[0], data.shape[1], cases.num_cases
    header = np.array([mode, num, width, num_cases, cases.inputs.shape[1], task.base, task.max_steps,
                       int(early_abort), num_outputs, num_threads, int(task.strict_syntax), *task.dialect.codes,
                       task.dialect.ring(task.max_steps)], dtype=np.int64)
    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "in.bin", Path(tmp) / "out.bin"
        source.write_bytes(header.tobytes() + data.numpy().tobytes() + cases.inputs.numpy().tobytes()
                           + cases.input_lengths.numpy().tobytes())
        done = subprocess.run([str(driver), str(source), str(target)], capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"kernel driver failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        raw = target.read_bytes()
    sizes = [num * num_cases * num_outputs * 4, num * num_cases * 4, num * num_cases, num * num_cases * 4]
    parts, offset = [], 0
    for size in sizes:
        parts.append(raw[offset: offset + size])
        offset += size
    shape = (num, num_cases)
    as_tensor = lambda b, dtype: torch.from_numpy(np.frombuffer(b, dtype=dtype).copy())  # noqa: E731
    execution = Execution(as_tensor(parts[0], np.int32).view(*shape, num_outputs),
                          as_tensor(parts[1], np.int32).view(shape), as_tensor(parts[2], np.int8).view(shape),
                          as_tensor(parts[3], np.int32).view(shape))
    return execution if naive else finalize(execution, program, task, early_abort)
