"""The GPU checks and a short GPU benchmark, in one call: ``synthenv doctor --gpu-suite --json PATH``.

For the day a machine with an NVIDIA GPU is there: everything the CPU cannot prove, each check
independent (one failure does not stop the others), all results in one JSON document.

Checks: the cuda engine against the reference interpreter (``exactness.check_all`` on CUDA)
and against the native engine on large batches (every field of every case, early abort on and
off, int32 and byte cells, a side stream, a repeat that must not depend on thread timing); the
env's step in program and token mode for every IR backend under the sync guard and
``torch.cuda.set_sync_debug_mode("error")``; CUDA-graph steps against eager ones. Benchmark:
programs compiled, run and scored per second by traditional, neural and hybrid on the cuda
engine at a few batch sizes.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable

import torch

from synthenv import compilers, engines, tasks, workloads
from synthenv.engines.cuda import CudaEngine
from synthenv.engines.native import NativeEngine
from synthenv.pipeline import Evaluator
from synthenv.tasks import Task
from synthenv.testing import exactness
from synthenv.testing.syncguard import forbid_host_sync

FIELDS = ("status", "steps", "output_lengths", "outputs")


def _check(name: str, body: Callable[[], dict]) -> dict:
    start = time.perf_counter()
    try:
        details = body()
        passed, error = bool(details.pop("passed", True)), None
    except Exception:  # a failed check is data in the report, not the end of the suite
        details, passed, error = {}, False, traceback.format_exc()
    return {"name": name, "passed": passed, "seconds": round(time.perf_counter() - start, 2), "details": details,
            "error": error}


def cuda_vs_reference(num_programs: int = 300) -> dict:
    outcomes = exactness.check_all(num_programs, device="cuda")
    return {"passed": all(o.passed for o in outcomes), "pipelines": {o.name: o.summary() for o in outcomes}}


def cuda_vs_native(num_programs: int = 20_000) -> dict:
    wide = Task.from_pairs("wide", [([300 + k], [300 + k]) for k in range(16)], base=512)  # int32 cells
    compiler, results = compilers.get("traditional"), {}
    for task in (tasks.get("reverse"), tasks.get("count-char"), tasks.get("bool-logic"), wide):
        for workload in ("uniform", "loop_heavy", "near"):
            tokens = workloads.make(workload, num_programs, seed=len(task.name) + len(workload))
            program, gpu_program = compiler.compile(tokens), compilers.get("traditional").compile(tokens.cuda())
            for early_abort in (False, True):
                want = NativeEngine().run(program, task, early_abort=early_abort)
                stream = torch.cuda.Stream()
                with torch.cuda.stream(stream):  # a side stream: the engine launches on torch's current one
                    got = CudaEngine().run(gpu_program, task, early_abort=early_abort)
                stream.synchronize()
                again = CudaEngine().run(gpu_program, task, early_abort=early_abort)
                bad = [f for f in FIELDS if not torch.equal(getattr(got, f).cpu(), getattr(want, f))]
                bad += [f"{f} (repeat)" for f in FIELDS if not torch.equal(getattr(again, f), getattr(got, f))]
                results[f"{task.name}/{workload}/abort={early_abort}"] = bad or "identical"
    return {"passed": all(v == "identical" for v in results.values()), "runs": results}


def sync_debug() -> dict:
    results = {}
    for backend in ("traditional", "neural", "hybrid"):
        for mode in ("program", "token"):
            from synthenv.env import SynthVecEnv

            env = SynthVecEnv("reverse", num_envs=256, mode=mode, max_len=30, device="cuda", engine="cuda",
                              backend=backend, validate_actions=False)
            env.reset(seed=0)
            env.step(env.sample_actions())  # lookup tables, kernels and tapes are built on the first step
            allow = ("hybrid_audit",) if backend == "hybrid" else ()
            with forbid_host_sync(allow=allow, raise_on_hit=False, cuda_debug=True) as guard:
                for _ in range(3 if mode == "program" else 35):
                    env.step(env.sample_actions())
            results[f"{backend}/{mode}"] = guard.report() or "no host sync"
    return {"passed": all(v == "no host sync" for v in results.values()), "steps": results}


def cuda_graphs() -> dict:
    from synthenv.env import SynthVecEnv

    results = {}
    for backend in ("traditional", "neural"):
        options = dict(num_envs=1024, max_len=40, device="cuda", engine="cuda", backend=backend, iterations=2)
        eager, graphed = SynthVecEnv("reverse", **options), SynthVecEnv("reverse", cuda_graphs=True, **options)
        eager.reset(seed=0)
        graphed.reset(seed=0)
        same = True
        for step in range(6):
            actions = workloads.make("near" if step % 2 else "uniform", 1024, 40, seed=step, device="cuda")
            a, b = eager.step(actions), graphed.step(actions)
            same &= all(torch.equal(a[0][k], b[0][k]) for k in a[0]) and all(torch.equal(x, y)
                                                                           for x, y in zip(a[1:4], b[1:4]))
        results[backend] = "graph == eager" if same else "DIFFERS"
    return {"passed": all(v == "graph == eager" for v in results.values()), "backends": results}


def benchmark(sizes: tuple[int, ...] = (4096, 65_536, 262_144), seconds: float = 1.0) -> list[dict]:
    """Programs per second, compile + run + score, uniform 100-token programs on ``reverse``."""
    task, rows = tasks.get("reverse"), []
    for backend in ("traditional", "neural", "hybrid"):
        evaluator = Evaluator(compilers.get(backend), engines.get("cuda"))
        for size in sizes:
            tokens = workloads.make("uniform", size, seed=1, device="cuda")
            for _ in range(getattr(evaluator.backend, "warmup_calls", 1)):
                evaluator(tokens, task)
            torch.cuda.synchronize()
            repeats, start = 0, time.perf_counter()
            while repeats < 3 or time.perf_counter() - start < seconds:
                evaluator(tokens, task)
                repeats += 1
                torch.cuda.synchronize()
                if repeats >= 50:
                    break
            elapsed = time.perf_counter() - start
            rows.append({"config": f"{backend}:cuda", "num_programs": size, "repeats": repeats,
                         "programs_per_s": round(size * repeats / elapsed)})
    return rows


def run(num_programs: int = 300) -> dict:
    """Every check and the benchmark; ``passed`` says whether every check passed."""
    checks = [_check("cuda engine vs the reference interpreter", lambda: cuda_vs_reference(num_programs)),
              _check("cuda engine vs the native engine, case by case", cuda_vs_native),
              _check("env steps under torch.cuda.set_sync_debug_mode('error')", sync_debug),
              _check("CUDA graph steps vs eager steps", cuda_graphs)]
    bench = _check("benchmark", lambda: {"rows": benchmark()})
    device = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"device": {"name": device.name, "memory_gib": round(device.total_memory / 2**30, 1),
                       "multiprocessors": device.multi_processor_count},
            "checks": checks, "benchmark": bench, "passed": all(c["passed"] for c in checks)}
