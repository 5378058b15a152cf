"""The native engine (vm.h through native.c and the C compiler): exactness against the oracle and
the torch engine, early abort, dynamic hang detection, counted-loop arithmetic (the VM's against
the torch engine's closed form), the fallback when no compiler exists, and the naive reference
interpreter. The build cache: tests/test_native_build.py; the C compile passes: tests/test_compiler.py."""

from __future__ import annotations

import dataclasses
import functools
import warnings

import pytest
import torch

from native import require_native
import synthenv
from synthenv.compilers.traditional import TraditionalCompiler
from synthenv.dialect import PQT
from synthenv import compilers, engines, native_build, reference, tasks, workloads
from synthenv.engines import common, native
from synthenv.engines.native import NativeEngine
from synthenv.naive import run_naive
from synthenv.native_build import NativeBuildError
from synthenv.engines.torch_engine import TorchEngine
from synthenv.ir import Program
from synthenv.language import Status, decode_batch, encode_batch
from synthenv.scoring import score_outputs
from synthenv.tasks import Task

COMPILER = TraditionalCompiler(impl="torch")  # the data-parallel passes: the reference for the C ones
TASKS = {
    "reverse-300": dataclasses.replace(tasks.get("reverse"), name="reverse-300", max_steps=300),
    "count-char-400": dataclasses.replace(tasks.get("count-char"), name="count-char-400", max_steps=400),
    "bool-logic-200": dataclasses.replace(tasks.get("bool-logic"), name="bool-logic-200", max_steps=200),
    "add-strict-300": dataclasses.replace(tasks.get("add"), name="add-strict-300", max_steps=300,
                                          dialect=dataclasses.replace(PQT, brackets="strict")),
}
WORKLOADS = ("uniform", "loop_heavy", "near")

@pytest.fixture(autouse=True)
def _native_built():
    require_native(native.LIBRARY)


@functools.lru_cache(maxsize=None)
def programs_of(workload: str, num: int, seed: int) -> tuple[str, ...]:
    return tuple(decode_batch(workloads.make(workload, num, seed=seed)))


def run_native(programs, task, early_abort=False, num_outputs=None, num_threads=0):
    program = COMPILER.compile(encode_batch(list(programs), 100))
    return NativeEngine(num_threads=num_threads).run(program, task, num_outputs, early_abort)


def run_raw(programs, task):
    """The kernel's result with failed cases keeping what they printed (how far a hang ran)."""
    return NativeEngine().run_raw(COMPILER.compile(encode_batch(list(programs), 100)), task, keep_failed=True)


def assert_matches_oracle(programs, task, execution):
    """Every case: status; steps (max_steps on STEP_LIMIT, 0 on SYNTAX_ERROR); ok outputs;
    failed cases print nothing (the contract, synthenv/execution.py)."""
    status, steps = execution.status.tolist(), execution.steps.tolist()
    lengths, outputs = execution.output_lengths.tolist(), execution.outputs.tolist()
    for i, code in enumerate(programs):
        for k, (inputs, _) in enumerate(task.cases):
            want = reference.run(code, inputs, task.base, task.max_steps, task.dialect)
            where = f"program {code!r} case {k}"
            assert status[i][k] == want.status, where
            assert steps[i][k] == (want.steps if want.status != Status.SYNTAX_ERROR else 0), where
            if want.status == Status.OK:
                assert lengths[i][k] == len(want.output), where
                kept = min(len(want.output), len(outputs[i][k]))
                assert tuple(outputs[i][k][:kept]) == want.output[:kept], where
            else:
                assert lengths[i][k] == 0 and not any(outputs[i][k]), where


@pytest.mark.parametrize("task_name", list(TASKS))
@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_case_matches_the_oracle(workload, task_name):
    """Short step limits, so runs trip the limit inside folded ops and counted loops; bases 256, 27, 2."""
    programs = programs_of(workload, 250, seed=len(task_name) * 7 + len(workload))
    task = TASKS[task_name]
    assert_matches_oracle(programs, task, run_native(programs, task))


def assert_same_results(a, b):
    """The same Execution, every field of every case (the contract leaves nothing engine-specific)."""
    for name in ("outputs", "output_lengths", "status", "steps"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name


@pytest.mark.parametrize("early_abort", [False, True])
@pytest.mark.parametrize("workload", WORKLOADS)
def test_matches_the_torch_engine_at_the_full_step_limit(workload, early_abort):
    """The torch engine has no dynamic hang detection and never stops early, so this also shows
    that neither the hang rule nor early abort changes a result."""
    tokens = workloads.make(workload, 100, seed=5)
    program = COMPILER.compile(tokens)
    task = tasks.get("reverse")
    assert_same_results(NativeEngine().run(program, task, early_abort=early_abort),
                        TorchEngine().run(program, task, early_abort=early_abort))


def test_thread_count_does_not_change_results():
    program = COMPILER.compile(workloads.make("uniform", 600, seed=9))
    task = tasks.get("reverse")
    one, two = NativeEngine(num_threads=1).run(program, task), NativeEngine(num_threads=2).run(program, task)
    for name in ("outputs", "output_lengths", "status", "steps"):
        assert torch.equal(getattr(one, name), getattr(two, name))


@pytest.mark.parametrize("workload", ["uniform", "loop_heavy"])
def test_early_abort_only_aborts_failed_programs_and_keeps_ok_cases_exact(workload):
    program = COMPILER.compile(workloads.make(workload, 1500, seed=3))
    task = tasks.get("reverse")
    full = NativeEngine().run(program, task, early_abort=False)
    fast = NativeEngine().run(program, task, early_abort=True)
    aborted = fast.status == Status.ABORTED  # [N, K]
    failing = (fast.status != Status.OK) & ~aborted
    assert aborted.any()
    assert not (aborted.any(1) & ~failing.any(1)).any()  # ABORTED only next to a failing case
    ok = fast.status == Status.OK
    for name in ("outputs", "output_lengths", "steps"):
        assert torch.equal(getattr(fast, name)[ok], getattr(full, name)[ok])
    assert torch.equal(full.status[failing], fast.status[failing])
    assert torch.equal(full.program_status, fast.program_status)
    assert not fast.outputs[aborted].any() and not fast.output_lengths[aborted].any() and not fast.steps[aborted].any()
    for name in ("outputs", "output_lengths", "status", "steps"):  # the full run brought to the contract
        assert torch.equal(getattr(fast, name), getattr(full.canonical(early_abort=True), name)), name
    assert torch.equal(score_outputs(full, task).rewards, score_outputs(fast, task).rewards)
    # Cases run in order: everything after the first failing case is aborted, nothing before it.
    first = torch.where(failing.any(1), failing.int().argmax(1), task.num_cases)  # [N]
    after = torch.arange(task.num_cases)[None, :] > first[:, None]
    assert torch.equal(aborted, after)


HANGS = ["+[]", "+[.]", "+[<]", "+[..]", "+[,-]", ">+[<>]", "+[.<]", ">+[.<>]", "+[,.-]", "+[>+-<]"]


@pytest.mark.parametrize("code", HANGS)
def test_innermost_loops_that_change_nothing_are_proven_hangs(code):
    """The oracle runs them to the step limit; the kernel stops within a few iterations."""
    task = tasks.get("reverse")
    execution = run_native([code], task)
    assert_matches_oracle([code], task, execution)
    assert (execution.status == Status.STEP_LIMIT).all()
    if "." in code and "," not in code:  # how far it ran shows in the raw output count (not in the contract)
        assert 0 < int(run_raw([code], task).output_lengths.max()) <= 4 * code.count(".")


def test_a_full_write_log_skips_the_check_instead_of_guessing():
    """16 unchanged writes fill the log; a 17th position (here the loop counter) must not be ignored."""
    full = ">+-" * 16 + "<" * 16  # 16 distinct cells rewritten with their own value
    terminates = "+++[." + full + "-]"
    detected = "+[." + full + "]"  # 16 entries: the log holds them all, the hang is proven
    overflows = "+[." + ">+-" * 17 + "<" * 17 + "]"  # 17 entries: the check is skipped, it runs to the limit
    programs = [terminates, detected, overflows]
    task = tasks.get("reverse")
    execution = run_native(programs, task)
    assert_matches_oracle(programs, task, execution)
    assert (execution.status[0] == Status.OK).all() and (execution.output_lengths[0] == 3).all()
    assert (execution.status[1:] == Status.STEP_LIMIT).all()
    raw = run_raw(programs, task)  # failed cases keep their output count: how far each ran
    assert (raw.output_lengths[1] == 1).all() and (raw.output_lengths[2] > 20).all()


def test_reading_input_is_progress_until_the_input_runs_out():
    """`,[,]` rewrites the same value while input lasts (not a hang), then reads zeros."""
    task = Task.from_pairs("fives", [([5, 5, 5, 0], [5]), ([5, 5, 5], [5]), ([7], [7])], base=10)
    programs = [",[,]", ",[.,]", ",[,+]", ">+[<,>]", ",[<,]"]
    assert_matches_oracle(programs, task, run_native(programs, task))


def closed_form(deltas, values, base):
    """The torch engine's counted-loop iterations (engines/common.py) for pairs of ints."""
    deltas, values = torch.tensor(deltas, dtype=torch.int64), torch.tensor(values, dtype=torch.int64)
    return common.loop_iterations(common.loop_solver(deltas, base), values, base).tolist()


def brute_force(d, v, base):
    return next((t for t in range(1, base + 1) if (v + t * d) % base == 0), 0)


@pytest.mark.parametrize("base", [2, 3, 10, 20, 27, 256])
def test_loop_iterations_closed_form_equals_the_vm_and_brute_force(base):
    pairs = [(d, v) for d in range(-base, base) for v in range(1, base)]
    torch_form = closed_form([d for d, _ in pairs], [v for _, v in pairs], base)
    for (d, v), t in zip(pairs, torch_form):
        assert native.loop_iterations(d, v, base) == t == brute_force(d, v, base), (d, v, base)


@pytest.mark.parametrize("base", [2**31 - 1, 100_000, 2**31 - 2])
def test_loop_iterations_for_large_bases(base):
    pairs = [(1, 5), (-1, 5), (3, 7), (123456789, 98765), (base - 2, 1), (6, 3), (6, 2), (0, 9), (base, 4)]
    torch_form = closed_form([d for d, _ in pairs], [v for _, v in pairs], base)
    for (d, v), t in zip(pairs, torch_form):
        assert native.loop_iterations(d, v, base) == t, (d, v, base)
        assert t == 0 or (v + t * d) % base == 0
    if base == 2**31 - 1:  # prime: every d != 0 has an inverse
        assert torch_form[:5] == [(-v * pow(d, -1, base)) % base for d, v in pairs[:5]]
    assert closed_form([6, 6], [3, 2], 512) == [0, 85]  # gcd 2 does not divide 509; 2 + 85 * 6 = 512


def test_outputs_keep_the_first_values_and_count_all():
    task = tasks.get("reverse")
    execution = run_native(["+.+.+.+.+."], task, num_outputs=2)
    assert execution.outputs.shape[-1] == 2
    assert execution.outputs[0, 0].tolist() == [1, 2]
    assert (execution.output_lengths == 5).all()


def test_empty_batch_and_bad_arguments():
    task = tasks.get("reverse")
    empty = NativeEngine().run(COMPILER.compile(torch.zeros((0, 10), dtype=torch.int64)), task)
    assert empty.status.shape == (0, task.num_cases)
    with pytest.raises(ValueError, match="num_outputs"):
        run_native(["+."], task, num_outputs=0)


def test_wrong_device_errors_are_clear():
    meta = Program(*(torch.zeros(s, dtype=d, device="meta") for s, d in
                     [((1, 2, 5), torch.int32), ((1,), torch.int32), ((1,), torch.bool), ((1,), torch.int32)]))
    with pytest.raises(ValueError, match="native engine runs on CPU tensors.*meta"):
        NativeEngine().run(meta, tasks.get("reverse"))
    with pytest.raises(ValueError, match="CPU tensors"):
        engines.select("native", torch.device("cuda"))


@pytest.fixture
def no_compiler(monkeypatch):
    monkeypatch.setattr(native_build, "find_compiler", lambda: None)
    native_build.reset()
    monkeypatch.setattr(engines, "_warned", set())
    yield
    native_build.reset()


def test_auto_falls_back_to_torch_with_one_warning_when_no_compiler(no_compiler):
    with pytest.warns(RuntimeWarning, match="falls back to the slow 'torch' engine.*C compiler") as caught:
        engine = engines.select("auto", torch.device("cpu"))
    assert engine.name == "torch"
    assert len(caught) == 1 and "\n" not in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second time: silent
        assert engines.select("auto", torch.device("cpu")).name == "torch"
    with pytest.raises(NativeBuildError, match="needs a C compiler"):
        engines.select("native", torch.device("cpu"))


def test_the_whole_pipeline_still_works_without_a_compiler(no_compiler):
    with pytest.warns(RuntimeWarning, match="falls back"):
        result = synthenv.score([",[>,]+[,<.]", ",[>,]<[.<]", "+."], "reverse")  # torch compile, engine, scorer
    assert result.solved.tolist() == [True, False, False]
    assert result.rewards[1].item() == -2 / 64


def test_auto_picks_native_on_cpu():
    assert engines.select("auto", torch.device("cpu")).name == "native"


@pytest.mark.parametrize("early_abort", [True, False])
@pytest.mark.parametrize("task_name", ["reverse-300", "add-strict-300"])
def test_naive_reference_equals_the_cpu_pipeline(task_name, early_abort):
    """The benchmark's naive C interpreter gives exactly the cpu pipeline's Execution."""
    task = TASKS[task_name]
    tokens = torch.cat([workloads.make(w, 100, seed=2) for w in WORKLOADS])
    want = compilers.get("cpu").execute(tokens, task, early_abort=early_abort)
    for threads in (1, 0):
        got = run_naive(tokens, task, num_threads=threads, early_abort=early_abort)
        for name in ("outputs", "output_lengths", "status", "steps"):
            assert torch.equal(getattr(got, name), getattr(want, name)), name
