"""The cuda engine: cuda.cu compiles with nvcc (when on PATH; NVRTC always: tests/test_cuda_compile.py),
clear errors without a GPU or CuPy, the bounded tape cache, and, on a GPU (``@pytest.mark.cuda``),
the same Execution as the native engine, case by case, early abort included."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import torch

from synthenv import compilers, engines, tasks, workloads
from synthenv.engines import cuda
from synthenv.engines.cuda import CudaEngine, KernelVariant, TapeCache
from synthenv.engines.native import NativeEngine
from synthenv.language import Status
from synthenv.tasks import Task

COMPILER = compilers.get("traditional")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("variant", cuda.variants(), ids=str)
def test_cuda_source_compiles_with_nvcc(tmp_path, variant):
    """cuda.cu (with vm.h inlined) compiles to PTX with nvcc too, with the kernel entry point."""
    source, ptx = tmp_path / "cuda.cu", tmp_path / "kernel.ptx"
    source.write_text(cuda.kernel_source())
    done = subprocess.run(["nvcc", "--ptx", *variant.options, str(source), "-o", str(ptx)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert ".entry synthenv_run_cuda" in ptx.read_text()


def test_tape_cache_is_bounded_by_bytes_and_evicts_the_least_recently_used():
    made = []

    def make(size):
        return lambda: made.append(size) or torch.zeros(size, dtype=torch.uint8)

    cache = TapeCache(max_bytes=1000)
    a = cache.get("a", 400, make(400))
    cache.get("b", 400, make(400))
    assert cache.get("a", 400, make(400)) is a and made == [400, 400]  # a hit makes nothing
    cache.get("c", 400, make(400))  # 1200 > 1000: "b", the least recently used, goes
    assert cache.keys() == ["a", "c"] and cache.bytes == 800
    cache.get("d", 1000, make(1000))  # everything goes
    assert cache.keys() == ["d"] and cache.bytes == 1000
    with pytest.raises(ValueError, match="exceeds the CUDA tape budget.*SYNTHENV_CUDA_TAPE_BYTES"):
        cache.get("e", 1001, make(1001))
    assert cache.keys() == ["d"]


def test_every_variant_has_its_own_options():
    options = {v.options for v in cuda.variants()}
    assert len(options) == len(cuda.variants()) == 4
    assert KernelVariant(True, False).options == ("-std=c++14", "-DSYN_EARLY_ABORT=0", "-DSYN_CELL_U8")


def test_cuda_engine_is_not_available_for_cpu_tensors():
    assert not CudaEngine().available("cpu")
    with pytest.raises(ValueError, match=r'synthenv\[cuda\]'):
        CudaEngine().check_device("cpu")
    with pytest.raises(ValueError, match="CUDA tensors"):
        engines.select("cuda", torch.device("cpu"))
    program = COMPILER.compile(workloads.make("uniform", 2))
    with pytest.raises(ValueError, match="CUDA tensors"):
        CudaEngine().run(program, tasks.get("reverse"))


def test_missing_cupy_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` fail
    with pytest.raises(ImportError, match=r'pip install "synthenv\[cuda\]"'):
        cuda._cupy()
    assert not cuda.cupy_available()


needs_cupy = pytest.mark.skipif(not cuda.cupy_available(), reason="CuPy is not installed or sees no GPU")


def assert_same(a, b):
    """The same Execution, every field of every case (the contract leaves nothing engine-specific)."""
    for name in ("status", "steps", "output_lengths", "outputs"):
        assert torch.equal(getattr(a, name).cpu(), getattr(b, name).cpu()), name


@pytest.mark.cuda
@needs_cupy
@pytest.mark.parametrize("early_abort", [False, True])
@pytest.mark.parametrize("workload", ["uniform", "loop_heavy", "near"])
@pytest.mark.parametrize("task_name", ["reverse", "count-char", "bool-logic"])
def test_cuda_matches_native(workload, task_name, early_abort):
    tokens = workloads.make(workload, 3000, seed=1)
    task = tasks.get(task_name)
    want = NativeEngine().run(COMPILER.compile(tokens), task, early_abort=early_abort)
    got = CudaEngine().run(COMPILER.compile(tokens.cuda()), task, early_abort=early_abort)
    assert got.status.device.type == "cuda"
    assert_same(got, want)


@pytest.mark.cuda
@needs_cupy
def test_cuda_int32_cells_and_more_items_than_threads():
    """A base above 256 uses int32 cells; 40k programs x 16 cases exceed the resident threads."""
    wide = Task.from_pairs("wide", [([300 + k], [300 + k]) for k in range(16)], base=512)
    tokens = workloads.make("loop_heavy", 40_000, seed=2)
    for task in (wide, tasks.get("reverse")):
        want = NativeEngine().run(COMPILER.compile(tokens), task)
        assert_same(CudaEngine().run(COMPILER.compile(tokens.cuda()), task), want)


@pytest.mark.cuda
@needs_cupy
def test_cuda_early_abort_and_side_stream():
    tokens = workloads.make("uniform", 4000, seed=3)
    task = tasks.get("reverse")
    program = COMPILER.compile(tokens.cuda())
    full = CudaEngine().run(program, task)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fast = CudaEngine().run(program, task, early_abort=True)
    stream.synchronize()
    aborted = fast.status == Status.ABORTED
    failing = (fast.status != Status.OK) & ~aborted
    assert aborted.any() and not (aborted.any(1) & ~failing.any(1)).any()  # ABORTED only after a failing case
    assert_same(fast, full.canonical(early_abort=True))  # the full run brought to the contract
    assert torch.equal(fast.program_status, full.program_status)
    again = CudaEngine().run(program, task, early_abort=True)  # does not depend on thread timing
    assert_same(again, fast)


@pytest.mark.cuda
@needs_cupy
def test_auto_picks_cuda_for_cuda_devices():
    assert engines.select("auto", torch.device("cuda")).name == "cuda"
