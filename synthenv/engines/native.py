"""The ``native`` engine: synthenv's fused VM kernel (``kernel.c``) on the CPU.

The kernel is compiled at first use by the system C compiler (``$CC``, else ``cc``, ``gcc``
or ``clang``) with ``-O3 -march=native -fopenmp``, cached on disk (``$SYNTHENV_CACHE_DIR``,
else ``~/.cache/synthenv``) under a key that hashes the source, the compiler and its version
and the flags, and loaded with ctypes. It reads and writes torch CPU tensors in place through
their data pointers (no copies). OpenMP runs programs in parallel; each thread runs one
program's K cases in order, so early abort is a ``break``.

The same source also builds the benchmark's naive reference interpreter (``run_naive``) and,
with ``-DSYNTHENV_DRIVER`` and sanitizers, a standalone executable (``build_driver``).

>>> from synthenv.language import encode_batch
>>> from synthenv import compilers, tasks
>>> program = compilers.get("traditional").compile(encode_batch([",[>,]+[,<.]"]))
>>> NativeEngine().run(program, tasks.get("reverse")).status.sum().item()
0
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from synthenv.engines.common import finalize
from synthenv.execution import Execution
from synthenv.ir import Program
from synthenv.tasks import Task

SOURCE = Path(__file__).with_name("kernel.c")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11")
"""Flags of the engine's shared library (``-march=native`` is fine: it is built on the machine that runs it)."""
SANITIZE_FLAGS = ("-O1", "-g", "-fopenmp", "-std=gnu11", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                  "-fno-sanitize-recover=all", "-DSYNTHENV_DRIVER")
"""Flags of the standalone sanitizer driver (``build_driver``)."""
INSTALL_HINT = "install a C compiler with OpenMP (e.g. `apt-get install gcc`) or point $CC at one"

_ptr, _i64, _i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
_SIGNATURES = {
    "synthenv_run": [_ptr, _i64, _i64, _ptr, _ptr, _i64, _i64, _i32, _i32, _i32, _ptr, _ptr, _ptr, _ptr, _i64, _i32],
    "synthenv_naive": [_ptr, _i64, _i64, _ptr, _ptr, _i64, _i64, _i32, _i32, _i32, _i32, _ptr, _ptr, _ptr, _ptr, _i64,
                       _i32],
    "synthenv_loop_iterations": [_i64, _i64, _i64],
    "synthenv_compile": [_ptr, _i64, _i64, _ptr, _ptr, _ptr, _ptr, _i32],
    "synthenv_score": [_ptr, _ptr, _ptr, _i64, _i64, _i64, _ptr, _ptr, _i64, _i32, _ptr, _ptr, _ptr, _ptr, _ptr, _i32],
}


class NativeBuildError(RuntimeError):
    """The C kernel could not be compiled or loaded."""


def cache_dir() -> Path:
    """Where built kernels live: ``$SYNTHENV_CACHE_DIR``, else ``$XDG_CACHE_HOME/synthenv`` or ``~/.cache/synthenv``."""
    if os.environ.get("SYNTHENV_CACHE_DIR"):
        return Path(os.environ["SYNTHENV_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "synthenv"


def find_compiler() -> str | None:
    """The C compiler to use: ``$CC`` if set, else the first of ``cc``, ``gcc``, ``clang`` on PATH."""
    if os.environ.get("CC"):
        return shutil.which(os.environ["CC"])
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return found
    return None


@functools.lru_cache(maxsize=8)
def _compiler_version(compiler: str) -> str:
    try:
        done = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        raise NativeBuildError(f"C compiler {compiler!r} does not run ({error}); {INSTALL_HINT}") from error
    return done.stdout


def build_key(source: bytes, compiler: str, flags: tuple[str, ...]) -> str:
    """Cache key of a build: a hash of the source, the compiler (path and version) and the flags."""
    digest = hashlib.sha256()
    for part in (source, os.path.realpath(compiler).encode(), _compiler_version(compiler).encode(),
                 "\0".join(flags).encode()):
        digest.update(part)
        digest.update(b"\0\0")
    return digest.hexdigest()[:20]


def build(flags: tuple[str, ...] = FLAGS, suffix: str = ".so", source: Path = SOURCE,
          compiler: str | None = None) -> Path:
    """Compile ``source`` with ``flags`` unless a build with the same key is cached; return its path.

    Raises:
        NativeBuildError: no compiler, or the compiler failed (its message is included).
    """
    compiler = compiler or find_compiler()
    if compiler is None:
        raise NativeBuildError(f"the native engine needs a C compiler and found none; {INSTALL_HINT}")
    text = source.read_bytes()
    target = cache_dir() / f"{source.stem}-{build_key(text, compiler, flags)}{suffix}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build under a unique name, then rename: concurrent processes never see a partial file.
    handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(handle)
    command = [compiler, *flags, str(source), "-o", partial]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise NativeBuildError(f"compiling the native kernel failed: {' '.join(command)}\n{done.stderr.strip()}\n"
                                   f"{INSTALL_HINT}")
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """The engine's shared library, built (or found in the cache) and loaded once per process."""
    path = build()
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as error:
        raise NativeBuildError(f"could not load the native kernel {path}: {error}; {INSTALL_HINT}") from error
    for name, argtypes in _SIGNATURES.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = {"synthenv_loop_iterations": ctypes.c_int64, "synthenv_score": None}.get(name, ctypes.c_int)
    return lib


@functools.lru_cache(maxsize=1)
def is_available() -> bool:
    """Whether the C kernel builds and loads here (a working C compiler with OpenMP)."""
    try:
        library()
    except NativeBuildError:
        return False
    return True


def build_driver() -> Path:
    """Build the sanitizer driver: kernel.c as a standalone executable under ASan and UBSan.

    Run as ``driver in.bin out.bin`` (format in kernel.c); tests/test_sanitizers.py uses it.
    """
    return build(SANITIZE_FLAGS, suffix=".asan")


def loop_iterations(delta: int, value: int, base: int) -> int:
    """The kernel's counted-loop iteration count: least t >= 1 with (value + t delta) mod base == 0, or 0.

    >>> loop_iterations(-1, 3, 256), loop_iterations(2, 1, 256)
    (3, 0)
    """
    return int(library().synthenv_loop_iterations(delta, value, base))


def compile_tokens(tokens: torch.Tensor, num_threads: int = 0) -> Program:
    """The traditional compiler's passes in C, one program per thread: the same IR, bit for bit.

    ``compilers/traditional.py`` is data-parallel torch, the right shape for a GPU; on a CPU
    its few dozen passes over ``[N, L]`` tensors cost more than running the programs. This
    is the same algorithm run sequentially per program (tests check ``ir.equal``).

    >>> from synthenv.language import encode_batch
    >>> int(compile_tokens(encode_batch(["+++[->++<]"])).num_ops[0])  # ADD 3, LOOP, ADD, MOVE, ADD, MOVE, JNZ
    7
    """
    _check_cpu(tokens.device, "the tokens")
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape [N, L], got {tuple(tokens.shape)}")
    tokens = tokens.to(torch.int64).contiguous()  # [N, L]
    num, length = tokens.shape
    program = Program(torch.empty((num, length + 1, 5), dtype=torch.int32), torch.empty(num, dtype=torch.int32),
                      torch.empty(num, dtype=torch.bool), torch.empty(num, dtype=torch.int32))
    rc = library().synthenv_compile(tokens.data_ptr(), num, length, program.code.data_ptr(),
                                    program.num_ops.data_ptr(), program.balanced.data_ptr(),
                                    program.lengths.data_ptr(), num_threads)
    if rc != 0:
        raise MemoryError(f"the native compiler could not allocate its scratch space ({length} tokens)")
    return program


def score_outputs(execution: Execution, task: Task, num_threads: int = 0) -> tuple[torch.Tensor, ...]:
    """``synthenv.scoring``'s reward in C, one program per thread, for CPU tensors.

    Returns ``(rewards, solved, case_rewards, case_correct, program_status)`` with the dtypes
    of ``synthenv.scoring.Scores``; tests/test_scoring.py checks it against the torch scorer.
    """
    _check_cpu(execution.outputs.device, "the execution")
    cases = task.tensors("cpu")
    # Named locals keep converted copies alive while the kernel reads them.
    outputs = execution.outputs.to(torch.int32).contiguous()  # [N, K, O]
    lengths = execution.output_lengths.to(torch.int32).contiguous()  # [N, K]
    status = execution.status.to(torch.int8).contiguous()  # [N, K]
    num_programs, num_cases, num_outputs = outputs.shape
    if num_outputs < cases.expected.shape[1]:
        raise ValueError(f"execution keeps {num_outputs} outputs per case, the task needs {cases.expected.shape[1]}")
    rewards = torch.empty(num_programs, dtype=torch.float64)
    solved = torch.empty(num_programs, dtype=torch.bool)
    case_rewards = torch.empty((num_programs, num_cases), dtype=torch.float64)
    case_correct = torch.empty((num_programs, num_cases), dtype=torch.bool)
    program_status = torch.empty(num_programs, dtype=torch.int8)
    library().synthenv_score(
        outputs.data_ptr(), lengths.data_ptr(), status.data_ptr(),
        num_programs, num_cases, num_outputs, cases.expected.data_ptr(), cases.expected_lengths.data_ptr(),
        cases.expected.shape[1], task.base, rewards.data_ptr(), solved.data_ptr(), case_rewards.data_ptr(),
        case_correct.data_ptr(), program_status.data_ptr(), num_threads)
    return rewards, solved, case_rewards, case_correct, program_status


def _check_outputs(num_outputs: int | None, task: Task) -> int:
    if num_outputs is None:
        return max(1, task.max_output_length)
    if not isinstance(num_outputs, int) or num_outputs < 1:
        raise ValueError(f"num_outputs must be a positive int or None, got {num_outputs!r}")
    return num_outputs


def _empty(num_programs: int, num_cases: int, num_outputs: int) -> Execution:
    """Uninitialised result tensors: the kernel writes every element."""
    return Execution(
        torch.empty((num_programs, num_cases, num_outputs), dtype=torch.int32),
        torch.empty((num_programs, num_cases), dtype=torch.int32),
        torch.empty((num_programs, num_cases), dtype=torch.int8),
        torch.empty((num_programs, num_cases), dtype=torch.int32),
    )


def _result_pointers(result: Execution) -> tuple[int, ...]:
    return tuple(t.data_ptr() for t in (result.outputs, result.output_lengths, result.status, result.steps))


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
        library()

    def run(self, program: Program, task: Task, num_outputs: int | None = None, early_abort: bool = False) -> Execution:
        """Run ``program`` on all of ``task``'s cases; see ``Execution`` for the contract."""
        _check_cpu(program.device, "the program")
        num_outputs = _check_outputs(num_outputs, task)
        code = program.code.to(torch.int32).contiguous()  # [N, P, 5], no copy when already so
        cases = task.tensors("cpu")
        num_programs, num_slots, num_cases = code.shape[0], code.shape[1], cases.num_cases
        result = _empty(num_programs, num_cases, num_outputs)
        rc = library().synthenv_run(
            code.data_ptr(), num_programs, num_slots, cases.inputs.data_ptr(), cases.input_lengths.data_ptr(),
            num_cases, cases.inputs.shape[1], task.base, task.max_steps, int(bool(early_abort)),
            *_result_pointers(result), num_outputs, self.num_threads)
        if rc != 0:
            raise MemoryError(f"the native kernel could not allocate its tapes ({task.max_steps} cells per thread)")
        return finalize(result, program, task)


def run_naive(tokens: torch.Tensor, task: Task, num_outputs: int | None = None, num_threads: int = 0,
              early_abort: bool = True) -> Execution:
    """The benchmark's reference: a plain C interpreter of raw BF tokens (no compiler).

    What a careful CPU programmer writes without a compiler: a precomputed bracket map, one
    command per step, each program's cases in order, stopping at the first failing case with
    ``early_abort`` (the others are ``ABORTED``, as in the ``cpu`` pipeline). ``num_threads``:
    OpenMP threads over programs (0 = all cores).

    >>> from synthenv.language import encode_batch
    >>> from synthenv import tasks
    >>> run_naive(encode_batch([",[>,]+[,<.]"]), tasks.get("reverse")).status.sum().item()
    0
    """
    _check_cpu(tokens.device, "the tokens")
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape [N, L], got {tuple(tokens.shape)}")
    num_outputs = _check_outputs(num_outputs, task)
    tokens = tokens.to(torch.int64).contiguous()  # [N, L]
    cases = task.tensors("cpu")
    result = _empty(tokens.shape[0], cases.num_cases, num_outputs)
    rc = library().synthenv_naive(
        tokens.data_ptr(), tokens.shape[0], tokens.shape[1], cases.inputs.data_ptr(), cases.input_lengths.data_ptr(),
        cases.num_cases, cases.inputs.shape[1], task.base, task.max_steps, int(task.strict_syntax),
        int(bool(early_abort)), *_result_pointers(result), num_outputs, num_threads)
    if rc != 0:
        raise MemoryError(f"the naive interpreter could not allocate its tapes ({task.max_steps} cells per thread)")
    return result


def run_driver(driver: Path, program: Program | torch.Tensor, task: Task, num_outputs: int | None = None,
               early_abort: bool = False, num_threads: int = 0, compile: bool = False) -> Execution:
    """Run the standalone kernel ``driver`` (see ``build_driver``) in a subprocess.

    ``program`` is a compiled ``Program`` (the IR engine) or ``[N, L]`` tokens: run by the
    naive interpreter, or with ``compile`` compiled by the C compiler and run by the IR engine
    (strict syntax is not applied then). A sanitizer report makes the driver fail: this raises
    ``RuntimeError`` with its output.
    """
    import numpy as np

    num_outputs = _check_outputs(num_outputs, task)
    naive = isinstance(program, torch.Tensor)
    mode = (2 if compile else 1) if naive else 0
    data = program.to(torch.int64) if naive else program.code.to(torch.int32)
    data = data.cpu().contiguous()
    cases = task.tensors("cpu")
    num, width, num_cases = data.shape[0], data.shape[1], cases.num_cases
    header = np.array([mode, num, width, num_cases, cases.inputs.shape[1], task.base, task.max_steps,
                       int(early_abort), num_outputs, num_threads, int(task.strict_syntax)], dtype=np.int64)
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
    return execution if naive else finalize(execution, program, task)
