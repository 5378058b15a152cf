"""synthenv's C sources (VM, compile passes, naive interpreter) under AddressSanitizer and UBSan.

The library's sources and ``synthenv/testing/driver.c`` are built as one standalone executable
(``synthenv.testing.sanitizer.build_driver``: ``-fsanitize=address,undefined
-fno-sanitize-recover=all``) and run in a subprocess (an ASan shared library cannot be loaded
into an uninstrumented Python without LD_PRELOAD). It must run clean on tens of thousands of
random programs and give exactly the normal build's results.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from synthenv import compilers, native_build, tasks, workloads
from synthenv.compilers.traditional import compile_native
from synthenv.dialect import PQT
from synthenv.engines.native import NativeEngine
from synthenv.naive import run_naive
from synthenv.native_build import NativeBuildError
from synthenv.testing import sanitizer

COMPILER = compilers.get("traditional")
FIELDS = ("outputs", "output_lengths", "status", "steps")


@pytest.fixture(scope="module")
def driver():
    if native_build.find_compiler() is None:
        pytest.skip("no C compiler")
    try:
        return sanitizer.build_driver()
    except NativeBuildError as error:
        pytest.skip(f"the C compiler cannot build with -fsanitize=address,undefined: {error}")


@pytest.fixture(autouse=True)
def strict_sanitizers(monkeypatch):
    monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=1:halt_on_error=1:abort_on_error=0")
    monkeypatch.setenv("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")


def assert_identical(a, b):
    for name in FIELDS:
        assert torch.equal(getattr(a, name), getattr(b, name)), name


RUNS = [  # (workload, programs, task, early_abort)
    ("uniform", 10_000, tasks.get("reverse"), False),
    ("loop_heavy", 10_000, tasks.get("reverse"), True),
    ("near", 5_000, tasks.get("reverse"), False),
    ("loop_heavy", 3_000, dataclasses.replace(tasks.get("count-char"), max_steps=700), False),
    ("uniform", 3_000, tasks.get("bool-logic"), True),
    ("loop_heavy", 3_000, dataclasses.replace(tasks.get("add"), max_steps=157,
                                                          dialect=dataclasses.replace(PQT, brackets="strict")), False),
]


@pytest.mark.slow
@pytest.mark.parametrize("workload, num, task, early_abort", RUNS, ids=[f"{r[0]}-{r[2].name}" for r in RUNS])
def test_ir_kernel_is_clean_and_matches_the_normal_build(driver, workload, num, task, early_abort):
    program = COMPILER.compile(workloads.make(workload, num, seed=num + len(workload)))
    sanitized = sanitizer.run_driver(driver, program, task, early_abort=early_abort)
    assert_identical(sanitized, NativeEngine().run(program, task, early_abort=early_abort))


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["uniform", "loop_heavy", "near"])
def test_naive_interpreter_is_clean_and_matches_the_normal_build(driver, workload):
    tokens = workloads.make(workload, 3_000, seed=4)
    task = tasks.get("reverse")
    assert_identical(sanitizer.run_driver(driver, tokens, task, early_abort=True),
                     run_naive(tokens, task, early_abort=True))


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["uniform", "loop_heavy", "near"])
def test_c_compiler_is_clean_and_matches_the_normal_build(driver, workload):
    """Driver mode 2: tokens compiled by synthenv_compile, then run (tests compile_native too)."""
    tokens = workloads.make(workload, 4_000, seed=8)
    task = tasks.get("reverse")
    want = NativeEngine().run(compile_native(tokens), task, early_abort=True)
    assert_identical(sanitizer.run_driver(driver, tokens, task, early_abort=True, compile=True), want)


def test_the_sanitizer_catches_an_out_of_bounds_tape(driver, tmp_path, monkeypatch):
    """A kernel with a one-cell tape must be reported, or the clean runs above prove nothing."""
    monkeypatch.setenv("SYNTHENV_CACHE_DIR", str(tmp_path / "cache"))
    sources = sanitizer.driver_sources()
    source = sources[0].read_text()  # engines/native.c
    allocation = "cell_t *tape = (cell_t *)calloc((size_t)cells, sizeof(cell_t));"
    assert source.count(allocation) == 1
    broken = tmp_path / sources[0].name
    broken.write_text(source.replace(allocation, "cell_t *tape = (cell_t *)calloc(1, sizeof(cell_t));"))
    broken_driver = sanitizer.build_driver((broken, *sources[1:]))
    program = COMPILER.compile(torch.tensor([[1, 1, 3, 7]]))  # `>>+.`: writes cell 2
    with pytest.raises(RuntimeError, match="AddressSanitizer|runtime error"):  # ASan or UBSan
        sanitizer.run_driver(broken_driver, program, tasks.get("reverse"))
