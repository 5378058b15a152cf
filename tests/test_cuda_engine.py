"""The cuda engine: kernel.c's CUDA path compiles (nvcc, when on PATH), clear errors without a
GPU or CuPy, and, on a GPU (``@pytest.mark.cuda``), exact agreement with the native engine."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import torch

from synthenv import compilers, engines, tasks, workloads
from synthenv.engines import cuda, native
from synthenv.engines.cuda import CudaEngine
from synthenv.engines.native import NativeEngine
from synthenv.language import Status
from synthenv.tasks import Task

COMPILER = compilers.get("traditional")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("cells", ["int32", "u8"])
def test_cuda_source_compiles_with_nvcc(tmp_path, cells):
    """The CUDA half of kernel.c (behind SYN_CUDA) compiles to PTX with the kernel entry point."""
    ptx = tmp_path / "kernel.ptx"
    defines = ["-DSYN_CELL_U8"] if cells == "u8" else []
    done = subprocess.run(["nvcc", "--ptx", "-x", "cu", "-std=c++14", *defines, str(native.SOURCE), "-o", str(ptx)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert ".entry synthenv_run_cuda" in ptx.read_text()


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


def assert_same(a, b, *, ok_only_outputs=True):
    assert torch.equal(a.status.cpu(), b.status.cpu())
    assert torch.equal(a.steps.cpu(), b.steps.cpu())
    ok = (a.status == Status.OK).cpu()
    assert torch.equal(a.output_lengths.cpu()[ok], b.output_lengths.cpu()[ok])
    assert torch.equal(a.outputs.cpu()[ok], b.outputs.cpu()[ok])


@pytest.mark.cuda
@needs_cupy
@pytest.mark.parametrize("workload", ["uniform", "loop_heavy", "near"])
@pytest.mark.parametrize("task_name", ["reverse", "count-char", "bool-logic"])
def test_cuda_matches_native(workload, task_name):
    tokens = workloads.make(workload, 3000, seed=1)
    task = tasks.get(task_name)
    want = NativeEngine().run(COMPILER.compile(tokens), task)
    got = CudaEngine().run(COMPILER.compile(tokens.cuda()), task)
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
    assert not (aborted.any(1) & ~failing.any(1)).any()  # ABORTED only next to a failing case
    ok = fast.status == Status.OK
    for name in ("outputs", "output_lengths", "steps"):
        assert torch.equal(getattr(fast, name)[ok], getattr(full, name)[ok])
    assert torch.equal(fast.program_status, full.program_status)


@pytest.mark.cuda
@needs_cupy
def test_auto_picks_cuda_for_cuda_devices():
    assert engines.select("auto", torch.device("cuda")).name == "cuda"
