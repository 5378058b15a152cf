"""``synthenv doctor``: what this machine can run, and whether every engine gives the reference's results."""

from __future__ import annotations

import json
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

from synthenv import storage


@dataclass(frozen=True)
class DoctorCommand:
    """Check this machine: torch and its CUDA, CuPy, NVRTC, the C compiler and OpenMP, the native
    library; then a seconds-long exactness check of every available engine and backend against the
    reference interpreter. With --gpu-suite (a machine with an NVIDIA GPU): the GPU tests and a
    short GPU benchmark, written to one JSON file with --json. Exit code 0: all good; 1: a check
    failed (a bug: please report it with the output); 2: --gpu-suite without a GPU, or a bad option."""

    programs: int = 120
    """Random programs in the exactness check (a third each uniform, loop-heavy, mutated solutions),
    besides every task's solution."""
    gpu_suite: bool = False
    """Run the GPU checks (cuda vs reference and native, per-case contract, no host sync under
    torch.cuda.set_sync_debug_mode('error'), CUDA graphs vs eager) and a short GPU benchmark."""
    json: str | None = None
    """Also write the whole report to this JSON file."""
    seed: int = 0
    """Seed of the random programs."""

    def run(self) -> int:
        if not isinstance(self.programs, int) or self.programs < 3:
            print(f"synthenv doctor: --programs must be an int >= 3, got {self.programs!r}", file=sys.stderr)
            return 2
        target = Path(self.json) if self.json else None
        if target is not None and not _writable(target):
            print(f"synthenv doctor: cannot write --json {str(target)!r}; pick a writable path", file=sys.stderr)
            return 2
        report = {"machine": machine_report()}
        _print_machine(report["machine"])
        if self.gpu_suite and not report["machine"]["gpu"]["usable"]:
            print(f"synthenv doctor: --gpu-suite needs an NVIDIA GPU with CuPy, and this machine has none usable "
                  f"({report['machine']['gpu']['why']})", file=sys.stderr)
            return 2
        from synthenv.testing import exactness

        print(f"\nexactness against the reference interpreter ({self.programs} random programs + every task's "
              "solution; bases 256, 27, 2; short step limits; strict syntax; early abort on and off):")
        outcomes = exactness.check_all(self.programs, "cpu", self.seed)
        for outcome in outcomes:
            print(f"  {'ok  ' if outcome.passed else 'FAIL'} {outcome.name:<32} {outcome.summary()}")
        report["exactness_cpu"] = [_outcome(o) for o in outcomes]
        passed = all(o.passed for o in outcomes)
        if self.gpu_suite:
            from synthenv.testing import gpu_suite

            print("\nGPU suite:")
            report["gpu_suite"] = gpu_suite.run(self.programs)
            for check in report["gpu_suite"]["checks"] + [report["gpu_suite"]["benchmark"]]:
                print(f"  {'ok  ' if check['passed'] else 'FAIL'} {check['name']} ({check['seconds']} s)")
            for row in report["gpu_suite"]["benchmark"]["details"].get("rows", []):
                print(f"       {row['config']:<16} N={row['num_programs']:<7} {row['programs_per_s']:>12,} programs/s")
            passed &= report["gpu_suite"]["passed"]
        report["passed"] = passed
        verdict = "all checks passed" if passed else "SOME CHECKS FAILED: a bug in synthenv, please report this output"
        print(f"\n{verdict}")
        if target is not None:
            storage.write_text(target, json.dumps(report, indent=1, default=str), "the report")
            print(f"report written to {target}")
        return 0 if passed else 1


def _writable(path: Path) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a"):
            pass
        return True
    except OSError:
        return False


def _outcome(outcome) -> dict:
    return {"pipeline": outcome.name, "passed": outcome.passed, "exact_required": outcome.exact,
            "cases": outcome.cases, "programs": outcome.programs, "summary": outcome.summary(),
            "seconds": round(outcome.seconds, 2)}


def machine_report() -> dict:
    """What is installed and usable here (never raises: each part says why it is unavailable)."""
    import torch

    from synthenv import native_build
    from synthenv.engines import cuda

    report = {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
              "torch_cuda": torch.version.cuda}
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() \
        else []
    try:
        import cupy

        cupy_state = {"version": cupy.__version__, "sees_gpu": cuda.cupy_available()}
    except ImportError:
        cupy_state = {"version": None, "sees_gpu": False}
    why = ("" if gpus and cupy_state["sees_gpu"] else
           "torch.cuda.is_available() is False" if not gpus else 'CuPy is missing: pip install "synthenv[cuda]"')
    report["gpu"] = {"devices": gpus, "cupy": cupy_state, "usable": not why, "why": why or None}
    try:
        major, minor = cuda.nvrtc_version()
        cuda.compile_ptx(cuda.variants()[0])
        report["nvrtc"] = {"version": f"{major}.{minor}", "kernel_compiles": True}
    except Exception as error:  # ImportError (not installed) or NvrtcError
        report["nvrtc"] = {"version": None, "kernel_compiles": False, "why": str(error).splitlines()[0]}
    compiler = native_build.find_compiler()
    try:
        version = (native_build.compiler_version(compiler).splitlines() or ["?"])[0] if compiler else None
    except native_build.NativeBuildError as error:
        version = f"does not run: {error}"
    report["c_compiler"] = {"path": compiler, "version": version}
    report["native"] = _native_report()
    return report


def _native_report() -> dict:
    """Each native library (every module that owns C code declares one): whether it loads, from where."""
    import synthenv.agents  # noqa: F401  (declares the agents' libraries; synthenv declares the rest)
    from synthenv import native_build, native_cache
    from synthenv.engines import native

    libraries = {}
    for library in native_build.libraries():
        available = library.is_available()
        reason = library.unavailable_reason()
        libraries[library.name] = {"available": available, "path": str(library.path()) if available else None,
                                   "why": None if available else str(reason).splitlines()[0] if reason else None}
    engine = libraries[native.LIBRARY.name]
    return {"available": engine["available"], "openmp": engine["available"],
            "cache_dir": str(native_cache.cache_dir()), "cpu": native_cache.cpu_identity()["model"],
            "library": engine["path"], "why": engine["why"], "libraries": libraries}


def _print_machine(report: dict) -> None:
    gpu, nvrtc, cc, native = report["gpu"], report["nvrtc"], report["c_compiler"], report["native"]
    cupy = gpu["cupy"]
    if cupy["version"]:
        cupy_line = f"{cupy['version']} ({'sees a GPU' if cupy['sees_gpu'] else 'sees no GPU'})"
    else:
        cupy_line = 'not installed (pip install "synthenv[cuda]")'
    nvrtc_line = f"{nvrtc['version']}, the CUDA kernel compiles" if nvrtc["kernel_compiles"] else \
        f"unavailable: {nvrtc['why']}"
    cc_line = f"{cc['path']} ({cc['version']})" if cc["path"] else "none (install gcc or set $CC)"
    loaded = [name for name, library in native["libraries"].items() if library["available"]]
    native_line = (f"{len(loaded)} of {len(native['libraries'])} load from {native['cache_dir']} "
                   f"(built for {native['cpu']})")
    print("synthenv doctor")
    print(f"  python {report['python']}, torch {report['torch']} (CUDA build: {report['torch_cuda'] or 'no'})")
    print(f"  GPU: {', '.join(gpu['devices']) if gpu['devices'] else 'none (torch.cuda.is_available() is False)'}")
    print(f"  CuPy: {cupy_line}")
    print(f"  NVRTC: {nvrtc_line}")
    print(f"  C compiler: {cc_line}")
    print(f"  native libraries (C + OpenMP): {native_line}")
    for name, library in native["libraries"].items():
        state = Path(library["path"]).name if library["available"] else f"unavailable: {library['why']}"
        print(f"    {name:<32} {state}")
    print(f"  engines usable: {', '.join(_usable_engines(report))}")


def _usable_engines(report: dict) -> list[str]:
    usable = ["torch"]
    if report["native"]["available"]:
        usable.append("native")
    if report["gpu"]["usable"]:
        usable.append("cuda")
    return usable
