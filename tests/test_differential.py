"""The backbone: every exact backend x engine against the plain-Python oracle.

Programs: uniform random 100-token programs, loop-heavy ones, mutations of known solutions,
every task's solution, and hypothesis-generated programs; tasks with bases 2, 27 and 256 and the
largest base accepted, short step limits (so runs trip the limit inside folded ops and counted
loops) and every dialect (strict brackets, each left edge, each end of input, trailing
whitespace ignored: ``synthenv.testing.exactness.dialect_tasks``). Compared: rewards (1e-6), solved flags and program status always; per case, the whole
``Execution`` (status, outputs, output lengths, raw steps), field for field, against what the
oracle gives under the execution contract (synthenv/execution.py), so every engine gives the
same per-case result as every other, early abort included (``test_engines_agree_case_by_case``
compares them with each other directly).
"""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies import idiom_programs, loop_heavy_programs, uniform_programs
from native import require_native
from synthenv import compilers, engines, reference, tasks, workloads
from synthenv.compilers.traditional import TraditionalCompiler
from synthenv.engines import native
from synthenv.engines.cuda import CudaEngine
from synthenv.naive import run_naive
from synthenv.language import Status, decode_batch, encode_batch
from synthenv.pipeline import Evaluator
from synthenv.testing.exactness import base_edge_tasks, dialect_tasks

EXACT_BACKENDS = ("traditional", "cpu")
"""Backends that must agree with the oracle on every program (the neural and hybrid
backends have their own accuracy tests: tests/test_neural_compiler.py, tests/test_hybrid.py)."""
APPROXIMATE_BACKENDS = ("neural", "hybrid")


CPU_ENGINES = [name for name in engines.names() if name != "cuda"]
"""Every CPU engine: a test of the native one skips (with the reason) only where no C compiler is installed, and
fails where one is but the engine does not build (tests/native.py)."""
COMBOS = [("traditional", e) for e in CPU_ENGINES] + [("cpu", "reference")]
COMBO_IDS = [f"{b}-{e}" for b, e in COMBOS]
FAST_ENGINES = [e for e in CPU_ENGINES if e != "torch"]


@pytest.fixture(autouse=True)
def _native_built(request):
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and "native" in callspec.params.values():
        require_native(native.LIBRARY)
TORCH_TASKS = ("reverse", "count-char", "bool-logic", "print-hello", "add", "shift-left", "divide-2", "dedup")

SHORT_LIMIT = dataclasses.replace(tasks.get("reverse"), name="reverse-short", max_steps=157)
STRICT = dataclasses.replace(tasks.get("count-char"), name="count-char-strict", max_steps=600,
                             dialect=dataclasses.replace(tasks.get("count-char").dialect, brackets="strict"))
VARIANTS = {"reverse": tasks.get("reverse"), "count-char": tasks.get("count-char"),
            "bool-logic": tasks.get("bool-logic"), "reverse-short": SHORT_LIMIT, "count-char-strict": STRICT}
DIALECTS = {task.name: task for task in dialect_tasks() + base_edge_tasks()}
"""A task per dialect choice, and the bases at the edges of the accepted range."""
VARIANTS.update(DIALECTS)


@functools.lru_cache(maxsize=None)
def oracle_runs(programs: tuple[str, ...], task_name: str) -> list[tuple[reference.CaseRun, ...]]:
    """Every case of every program, run by the oracle (cached per test session)."""
    task = VARIANTS[task_name]
    return [tuple(reference.run(p, i, task.base, task.max_steps, task.dialect) for i, _ in task.cases)
            for p in programs]


def oracle_scores(programs: tuple[str, ...], task_name: str) -> list[reference.ProgramScore]:
    task = VARIANTS[task_name]
    return [reference.score_program(p, task.cases, task.base, task.max_steps, task.dialect) for p in programs]


@functools.lru_cache(maxsize=None)
def sample(workload: str, num: int, seed: int) -> tuple[str, ...]:
    return tuple(decode_batch(workloads.make(workload, num, seed=seed)))


def evaluate(backend: str, engine: str, programs, task, early_abort: bool = True):
    if (backend, engine) == ("traditional", "torch"):
        # All torch: the data-parallel compiler passes feed the lockstep engine. (On CPU the
        # default traditional backend compiles in C; tests/test_native_engine.py checks the
        # two emit the same IR bit for bit.)
        evaluator = Evaluator(TraditionalCompiler(impl="torch"), engines.get("torch"), early_abort)
    else:
        evaluator = Evaluator.create(backend, engine, "cpu", early_abort=early_abort)
    return evaluator(encode_batch(list(programs), 100), task)


def expected_cases(programs, task_name, early_abort: bool, num_outputs: int):
    """Per program and case ``(status, steps, output length, outputs)`` as the contract derives
    them from the oracle: after a program's first failure (with early abort) ``ABORTED`` and
    zeros; a failed case keeps only its status and steps; an ok case everything, its output as the
    dialect judges it, cut to ``num_outputs`` and zero-padded."""
    expected, dialect = [], VARIANTS[task_name].dialect
    for runs in oracle_runs(tuple(programs), task_name):
        row, failed = [], False
        for run in runs:
            if failed and early_abort:
                row.append((Status.ABORTED, 0, 0, [0] * num_outputs))
            elif run.status != Status.OK:
                row.append((run.status, run.steps, 0, [0] * num_outputs))
            else:
                output = dialect.judged(run.output)
                kept = list(output[:num_outputs])
                row.append((run.status, run.steps, len(output), kept + [0] * (num_outputs - len(kept))))
            failed |= run.status != Status.OK
        expected.append(row)
    return expected


def assert_cases_match(programs, task_name, execution, early_abort: bool):
    """Every field of every case equals the contract's result from the oracle."""
    task = VARIANTS[task_name]
    status, steps = execution.status.tolist(), execution.steps.tolist()
    lengths, outputs = execution.output_lengths.tolist(), execution.outputs.tolist()
    expected = expected_cases(programs, task_name, early_abort, execution.outputs.shape[2])
    for i, row in enumerate(expected):
        for k, want in enumerate(row):
            where = f"program {i} {programs[i]!r}, case {k} {task.cases[k][0]}, early_abort={early_abort}"
            assert (status[i][k], steps[i][k], lengths[i][k], outputs[i][k]) == want, where


def assert_scores_match(programs, task_name, scores):
    want = oracle_scores(tuple(programs), task_name)
    rewards = scores.rewards.tolist()
    solved = scores.solved.tolist()
    status = scores.program_status.tolist()
    for i, w in enumerate(want):
        where = f"program {i} {programs[i]!r}"
        assert abs(rewards[i] - w.reward) <= 1e-6, where
        assert solved[i] == w.solved, where
        assert status[i] == next((r.status for r in w.runs if r.status != Status.OK), Status.OK), where


def test_every_backend_is_covered():
    assert set(compilers.names()) <= set(EXACT_BACKENDS) | set(APPROXIMATE_BACKENDS)


@pytest.mark.parametrize("backend, engine", COMBOS, ids=COMBO_IDS)
@pytest.mark.parametrize("task_name", [name for name in VARIANTS if name not in DIALECTS])
@pytest.mark.parametrize("workload", ["uniform", "loop_heavy", "near"])
def test_per_case_results_match_the_oracle(backend, engine, task_name, workload):
    num = {"torch": 50, "reference": 60}.get(engine, 300)  # the torch engine and the cpu pipeline are slow
    programs = sample(workload, num, seed=sum(map(ord, task_name + workload)))
    for early_abort in (False, True):
        execution, scores = evaluate(backend, engine, programs, VARIANTS[task_name], early_abort)
        assert_cases_match(programs, task_name, execution, early_abort)
        assert_scores_match(programs, task_name, scores)


@pytest.mark.parametrize("backend, engine", COMBOS, ids=COMBO_IDS)
@pytest.mark.parametrize("task_name", list(DIALECTS))
def test_every_dialect_matches_the_oracle_case_by_case(backend, engine, task_name):
    """Each dialect choice, and the edge bases, on a mix of the three workloads: every field of every case."""
    num = {"torch": 20, "reference": 20}.get(engine, 150)
    seed = sum(map(ord, task_name))
    programs = sample("uniform", num, seed) + sample("loop_heavy", num, seed + 1) + sample("near", num, seed + 2)
    for early_abort in (False, True):
        execution, scores = evaluate(backend, engine, programs, VARIANTS[task_name], early_abort)
        assert_cases_match(programs, task_name, execution, early_abort)
        assert_scores_match(programs, task_name, scores)


def test_the_dialect_tasks_reach_what_they_are_for():
    """The oracle's runs of the dialect tasks hit each dialect's cases: left-edge errors, syntax errors, a pointer
    going round the ring, reads past the input, and outputs that end in whitespace."""
    programs = sample("uniform", 150, 1) + sample("loop_heavy", 150, 2)
    seen = {}
    for name, task in DIALECTS.items():
        runs = [r for row in oracle_runs(programs, name) for r in row]
        seen[name] = {r.status for r in runs}, sum(r.status == Status.OK and task.dialect.judged(r.output) != r.output
                                                   for r in runs)
    assert Status.LEFT_EDGE in seen["echo-twice*edge-error-lenient"][0] and Status.SYNTAX_ERROR in seen["add*strict"][0]
    assert seen["lines*rstrip"][1] > 0  # some outputs end in whitespace, which the comparison ignores
    wrapped = [p for p in programs if reference.run(p, (1, 2), 256, 300, DIALECTS["reverse*wrap7"].dialect).output
               != reference.run(p, (1, 2), 256, 300, tasks.get("reverse").dialect).output]
    assert wrapped  # the ring changes what some programs print


def run_everywhere(programs, task, early_abort):
    """The same programs through every exact pipeline available here: name -> Execution."""
    tokens = encode_batch(list(programs), 100)
    runs = {f"{b}-{e}": evaluate(b, e, programs, task, early_abort)[0] for b, e in COMBOS}
    runs["naive"] = run_naive(tokens, task, early_abort=early_abort)
    if CudaEngine().available("cuda"):
        runs["traditional-cuda"] = Evaluator(TraditionalCompiler(), engines.get("cuda"), early_abort)(
            tokens.cuda(), task)[0].to("cpu")
    return runs


@pytest.mark.parametrize("early_abort", [False, True])
@pytest.mark.parametrize("task_name", ["reverse-short", "count-char-strict", "bool-logic", *DIALECTS])
def test_engines_agree_case_by_case(task_name, early_abort):
    """Per case, every engine gives the same Execution as every other: statuses, outputs, output
    lengths and steps, early abort included (the torch engine runs every case and applies it
    afterwards; native stops at the first failure; cuda runs cases in parallel)."""
    require_native(native.LIBRARY)
    programs = sample("loop_heavy", 40, seed=len(task_name)) + sample("uniform", 20, seed=3) + sample("near", 20, seed=4)
    runs = run_everywhere(programs, VARIANTS[task_name], early_abort)
    (first, reference_run), *others = runs.items()
    assert len(runs) >= 2
    for name, run in others:
        for field in ("status", "steps", "output_lengths", "outputs"):
            assert torch.equal(getattr(run, field), getattr(reference_run, field)), f"{name} vs {first}: {field}"


@pytest.mark.parametrize("backend, engine", COMBOS, ids=COMBO_IDS)
def test_solutions_and_their_mutations_on_every_task(backend, engine):
    """Every task's known solution, and mutations of all solutions, scored on every task."""
    # Lockstep pays for its slowest program, so the torch engine gets the solutions alone.
    mutants = sample("near", {"torch": 0, "reference": 40}.get(engine, 400), seed=7)
    programs = tuple(workloads.solutions()) + mutants
    # The torch engine gets bases 256, 27 and 2 and fixed, hand-made and known-code tasks;
    # the fast engines get every task.
    names = TORCH_TASKS if engine == "torch" else tasks.names()
    for name in names:
        VARIANTS.setdefault(name, tasks.get(name))
        _, scores = evaluate(backend, engine, programs, VARIANTS[name])
        assert_scores_match(programs, name, scores)
        solution = tasks.get(name).solution
        if solution is not None:
            assert scores.solved[programs.index(solution)]




@pytest.mark.slow
@pytest.mark.parametrize("engine", FAST_ENGINES or ["torch"])
@pytest.mark.parametrize("workload", ["uniform", "loop_heavy"])
def test_tens_of_thousands_of_programs(engine, workload):
    """Program-level agreement (rewards, solved, status) on 12k programs per workload."""
    num = 12_000 if engine != "torch" else 1_500
    programs = sample(workload, num, seed=11)
    _, scores = evaluate("traditional", engine, programs, VARIANTS["reverse"])
    assert_scores_match(programs, "reverse", scores)


PROGRAM_LISTS = st.lists(st.one_of(uniform_programs, loop_heavy_programs, idiom_programs), min_size=1, max_size=12)
TASK_NAMES = st.sampled_from(["reverse", "count-char", "bool-logic", "reverse-short", "count-char-strict", *DIALECTS])


def check_hypothesis_programs(engine, programs, task_name):
    execution, scores = evaluate("traditional", engine, programs, VARIANTS[task_name], early_abort=False)
    assert_cases_match(programs, task_name, execution, early_abort=False)
    assert_scores_match(programs, task_name, scores)


@pytest.mark.parametrize("engine", FAST_ENGINES)
@given(programs=PROGRAM_LISTS, task_name=TASK_NAMES)
def test_hypothesis_programs(engine, programs, task_name):
    check_hypothesis_programs(engine, programs, task_name)


@settings(max_examples=25)  # each lockstep batch runs as long as its slowest program
@given(programs=PROGRAM_LISTS, task_name=TASK_NAMES)
def test_hypothesis_programs_torch_engine(programs, task_name):
    check_hypothesis_programs("torch", programs, task_name)
