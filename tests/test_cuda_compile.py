"""The CUDA kernel compiled in CI, without a GPU: every variant the cuda engine can launch (each
cell type, early abort on and off) and every entry point, to PTX for sm_80 and sm_90, with NVRTC
from the ``nvidia-cuda-nvrtc-cu12`` wheel through ``cuda-bindings`` (the ``dev`` extra). Any
NVRTC error or warning fails. These tests never skip: a machine without NVRTC fails them,
naming the extra to install."""

from __future__ import annotations

from pathlib import Path

import pytest

from synthenv.engines import cuda

ARCHS = ("sm_80", "sm_90")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("variant", cuda.variants(), ids=str)
def test_every_variant_compiles_to_ptx_without_warnings(variant, arch):
    ptx = cuda.compile_ptx(variant, arch)
    assert f".target {arch}" in ptx
    for entry in cuda.ENTRY_POINTS:
        assert f".entry {entry}(" in ptx


def test_variants_cover_cell_types_and_early_abort():
    assert {(v.byte_cells, v.early_abort) for v in cuda.variants()} == {(a, b) for a in (True, False)
                                                                       for b in (True, False)}


def test_early_abort_variant_polls_and_the_other_does_not():
    """The variants differ where they should: only the early-abort kernel keeps the atomic min."""
    with_abort = cuda.compile_ptx(cuda.KernelVariant(byte_cells=True, early_abort=True))
    without = cuda.compile_ptx(cuda.KernelVariant(byte_cells=True, early_abort=False))
    assert "atom.global.min" in with_abort and "atom.global.min" not in without


def test_a_warning_fails_the_compile(monkeypatch):
    """NVRTC has no -Werror; compile_ptx reads its log, so a warning must fail, or the tests above prove less."""
    source = cuda.kernel_source() + '\nextern "C" __global__ void synthenv_unused(int *x) { int unused; x[0] = 1; }\n'
    monkeypatch.setattr(cuda, "kernel_source", lambda: source)
    with pytest.raises(cuda.NvrtcError, match="warning.*unused"):
        cuda.compile_ptx(cuda.variants()[0])


def test_an_error_fails_the_compile(monkeypatch):
    monkeypatch.setattr(cuda, "kernel_source", lambda: cuda.SOURCE.read_text().replace('#include "vm.h"', ""))
    with pytest.raises(cuda.NvrtcError, match="error"):
        cuda.compile_ptx(cuda.variants()[0])


def test_nvrtc_needs_no_gpu_driver():
    """NVRTC comes from the wheel and runs without libcuda: no driver library is loaded here."""
    major, _ = cuda.nvrtc_version()
    assert major == 12
    cuda.compile_ptx(cuda.variants()[0])
    maps = Path("/proc/self/maps")
    if maps.exists():
        assert "libcuda.so" not in maps.read_text()


def test_compiling_leaves_python_s_shared_bytes_alone():
    """NVRTC writes its (here one-byte, empty) log into the buffer it is given; a ``bytes`` buffer
    (``b" " * 1`` is the shared one-byte object) was overwritten, and loading the neural weights
    failed afterwards in the same process."""
    from synthenv.compilers import neural

    cuda.compile_ptx(cuda.variants()[0])
    assert neural.load_model() is not None
