"""``synthenv bench``: episodes per second of every backend x engine, side by side in one run.

An episode in program mode is one program compiled, run on every case of a task and
scored: ``synthenv.pipeline.Evaluator`` end to end. ``measure`` times one configuration
(warm-up excluded) and returns a ``Record``; ``run_suite`` measures a grid of them with a
progress bar. References measured in the same run: the ``cpu`` pipeline (the paper's
CPU-centric starting point; every ratio is taken against it) and a naive native interpreter
of raw BF (``synthenv.engines.native.run_naive``) on one core and on all cores.

Adding a backend (say ``neural``) needs nothing here: register it as a compiler and name it
in the configurations (``neural:native``). Other references go into ``REFERENCES``; the
``traditional-torch`` backend (the traditional compiler forced onto its data-parallel torch
passes, which a CPU otherwise skips for the same passes in C) is measured from ``COMPILERS``.

>>> import torch
>>> from synthenv import tasks, workloads
>>> record = measure("traditional", "torch", workloads.make("uniform", 4), tasks.get("reverse"), repeats=1)
>>> record.backend, record.num_envs
('traditional', 4)
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field

import torch

from synthenv import engines, workloads
from synthenv.compilers.traditional import TraditionalCompiler
from synthenv.costmodel import EnergyMeter
from synthenv.engines import native
from synthenv.errors import UserError
from synthenv.execution import Execution
from synthenv.pipeline import Evaluator
from synthenv.registry import unknown_name_message
from synthenv.tasks import Task


@dataclass(frozen=True)
class NaivePipeline:
    """The naive reference as a pipeline backend: raw BF interpreted in C, no compiler.

    Attributes:
        num_threads: OpenMP threads over programs (0 = all cores).
    """

    num_threads: int = 0
    name: str = "naive"
    engines: tuple[str, ...] = ("1-core", "all-cores")

    def execute(self, tokens: torch.Tensor, task: Task, num_outputs: int | None = None,
                early_abort: bool = True) -> Execution:
        """Run ``tokens [N, L]`` on every case of ``task`` (with ``early_abort``, each program stops
        at its first failing case)."""
        return native.run_naive(tokens, task, num_outputs, self.num_threads, early_abort)


REFERENCES: dict[tuple[str, str], Callable[[], object]] = {
    ("naive", "1-core"): lambda: NaivePipeline(1),
    ("naive", "all-cores"): lambda: NaivePipeline(0),
}
"""Benchmark-only backends (not in the compiler registry): (backend, engine) -> pipeline factory."""

COMPILERS: dict[str, Callable[[], object]] = {"traditional-torch": lambda: TraditionalCompiler(impl="torch")}
"""Benchmark-only compiler backends (not in the compiler registry), run with any engine."""

FULL_CONFIGS = ("cpu:reference", "naive:1-core", "naive:all-cores", "traditional:torch", "traditional:native",
                "traditional-torch:native", "traditional:cuda", "neural:native", "hybrid:native", "neural:cuda",
                "hybrid:cuda")
"""The configurations of ``synthenv bench --full`` (BENCHMARKS.md's grid)."""

QUICK_CONFIGS = tuple(c for c in FULL_CONFIGS if c != "traditional:torch")
"""The default configurations: all but the lockstep torch engine (the readable reference engine,
about 30 programs/s on a CPU: minutes per measurement)."""

BASELINE = ("cpu", "reference")


@dataclass(frozen=True)
class Record:
    """One measured configuration (one JSON record of ``synthenv bench --json``).

    Attributes:
        backend, engine, num_envs, workload, task: the configuration; ``num_envs`` is the
            number of programs per call (the ``cpu`` pipeline is given fewer, see ``cpu_programs``).
        programs_per_s: programs compiled, run and scored per second (warm-up excluded).
        vm_steps_per_s: raw BF steps the runs account for (``Execution.steps`` summed) per second.
        compile_share: fraction of the time spent compiling (0 for pipelines that interpret).
        seconds: timed seconds in all; repeats: timed calls.
        hardware: what it ran on (``hardware()``).
        joules_per_program: energy per program where the hardware reports it (an NVML or RAPL
            counter, ``synthenv.costmodel.EnergyMeter``), else None: not measured.
    """

    backend: str
    engine: str
    num_envs: int
    workload: str
    task: str
    programs_per_s: float
    vm_steps_per_s: float
    compile_share: float
    seconds: float
    repeats: int
    hardware: dict = field(default_factory=dict)
    joules_per_program: float | None = None

    @property
    def label(self) -> str:
        return f"{self.backend}:{self.engine}"

    def to_json(self) -> dict:
        return asdict(self)


def _first_line(command: Sequence[str]) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=1)
def hardware() -> dict:
    """The machine: CPU model and cores, torch and CUDA versions, GPU, C compiler."""
    info = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    compiler = native.find_compiler()
    info["c_compiler"] = _first_line([compiler, "--version"]) if compiler else None
    try:
        import cupy

        info["cupy"] = cupy.__version__
    except ImportError:
        info["cupy"] = None
    return info


def make_evaluator(backend: str, engine: str, device: torch.device | str = "cpu") -> Evaluator:
    """An ``Evaluator`` for a configuration, including the benchmark-only references."""
    if (backend, engine) in REFERENCES:
        return Evaluator(REFERENCES[(backend, engine)](), None)
    if backend in COMPILERS:
        return Evaluator(COMPILERS[backend](), engines.select(engine, torch.device(device)))
    if backend == "naive":
        valid = [e for b, e in REFERENCES if b == "naive"]
        raise ValueError(unknown_name_message("engine", engine, valid))
    return Evaluator.create(backend, engine, device)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # sync point: timing only, never on the step path


def measure(backend: str, engine: str, tokens: torch.Tensor, task: Task, repeats: int = 3, workload: str = "",
            evaluator: Evaluator | None = None) -> Record:
    """Time ``repeats`` end-to-end evaluations of ``tokens [N, L]`` after one warm-up call.

    The compile share comes from timing the backend's ``compile`` alone on the same tokens,
    in a separate loop, so the end-to-end numbers are untouched by it.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be a positive int, got {repeats!r}")
    device = tokens.device
    evaluator = evaluator or make_evaluator(backend, engine, device)
    for _ in range(getattr(evaluator.backend, "warmup_calls", 1)):  # the hybrid: until its audit rate settles
        execution, _ = evaluator(tokens, task)  # warm-up: builds kernels, fills caches
    _synchronize(device)
    steps = 0
    with EnergyMeter(device) as meter:
        start = time.perf_counter()
        for _ in range(repeats):
            execution, _ = evaluator(tokens, task)
            steps += execution.steps.sum(dtype=torch.int64)
        _synchronize(device)
        seconds = time.perf_counter() - start
    compile_seconds = 0.0
    if evaluator.engine is not None:
        start = time.perf_counter()
        for _ in range(repeats):
            evaluator.backend.compile(tokens)
        _synchronize(device)
        compile_seconds = time.perf_counter() - start
    num = tokens.shape[0] * repeats
    joules = meter.joules / num if meter.joules is not None else None
    return Record(backend, engine, int(tokens.shape[0]), workload, task.name, num / seconds,
                  int(steps) / seconds, min(1.0, compile_seconds / seconds), seconds, repeats, hardware(), joules)


def parse_config(text: str) -> tuple[str, str]:
    """``"backend:engine"`` -> ``(backend, engine)``, both names checked (with "did you mean" hints).

    >>> parse_config("traditional:native")
    ('traditional', 'native')
    >>> parse_config("tradtional:native")
    Traceback (most recent call last):
        ...
    synthenv.errors.UserError: configuration 'tradtional:native': unknown backend 'tradtional'. Did you mean ...
    """
    from synthenv import compilers
    from synthenv.compilers.cpu import CPUPipeline

    backend, sep, engine = text.partition(":")
    if not sep or not backend or not engine:
        raise UserError(f"a configuration is 'backend:engine' (e.g. 'traditional:native'), got {text!r}")
    references = list(dict.fromkeys(b for b, _ in REFERENCES))
    backends = compilers.names() + list(COMPILERS) + references
    if backend not in backends:
        raise UserError(f"configuration {text!r}: {unknown_name_message('backend', backend, backends)}")
    if backend in references:
        valid = [e for b, e in REFERENCES if b == backend]
    elif backend == "cpu":
        valid = list(CPUPipeline.engines)
    else:
        valid = ["auto", *engines.names()]
    if engine not in valid:
        raise UserError(f"configuration {text!r}: {unknown_name_message(f'{backend} engine', engine, valid)}")
    return backend, engine


def runnable(backend: str, engine: str, device: torch.device) -> str | None:
    """None if the configuration can run on ``device``, else why not (for a skip note)."""
    if (backend, engine) in REFERENCES or backend == "cpu":
        return None
    try:
        engines.select(engine, device)
    except (ValueError, ImportError, RuntimeError) as error:
        return str(error).splitlines()[0]
    return None


def ratios(records: Iterable[Record]) -> dict[int, float]:
    """``id(record) -> programs_per_s / cpu pipeline's`` for records whose (task, workload) has a baseline."""
    records = list(records)
    base = {(r.task, r.workload): r.programs_per_s for r in records if (r.backend, r.engine) == BASELINE}
    return {id(r): r.programs_per_s / base[(r.task, r.workload)] for r in records if (r.task, r.workload) in base}


def format_table(records: Sequence[Record]) -> str:
    """The terminal table: one row per record, with the ratio to the cpu pipeline."""
    ratio = ratios(records)
    header = (f"{'task':<10} {'workload':<10} {'backend:engine':<22} {'num_envs':>8} {'programs/s':>12} "
              f"{'vm steps/s':>12} {'compile':>8} {'x cpu':>9}")
    lines = [header, "-" * len(header)]
    for r in records:
        x = f"{ratio[id(r)]:9.1f}" if id(r) in ratio else f"{'-':>9}"
        lines.append(f"{r.task:<10} {r.workload:<10} {r.label:<22} {r.num_envs:>8} {r.programs_per_s:>12,.0f} "
                     f"{r.vm_steps_per_s:>12.3g} {r.compile_share:>8.0%} {x}")
    return "\n".join(lines)


def make_tokens(workload: str, num: int, task: Task, seed: int = 0, length: int = 100,
                device: torch.device | str = "cpu") -> torch.Tensor:
    """``[num, length]`` programs of ``workload``; ``near`` mutates ``task``'s own solution when it has one."""
    if workload == "near" and task.solution:
        generator = torch.Generator().manual_seed(seed)
        return workloads.near(num, length, generator, device, task_names=[task.name])
    return workloads.make(workload, num, length, seed, device)


def batch_sizes(backend: str, engine: str, num_envs: Sequence[int], caps: dict[tuple[str, str], int]) -> list[int]:
    """The batch sizes to measure a configuration at: ``num_envs``, capped for the slow ones."""
    cap = caps.get((backend, engine)) or caps.get((backend, "*")) or caps.get(("*", engine))
    return sorted({min(n, cap) if cap else n for n in num_envs})


def run_suite(configs: Sequence[tuple[str, str]], task_list: Sequence[Task], workload_names: Sequence[str],
              num_envs: Sequence[int], repeats: int = 3, device: torch.device | str = "cpu",
              caps: dict[tuple[str, str], int] | None = None, seed: int = 0, length: int = 100,
              progress: bool = True, records: list[Record] | None = None) -> tuple[list[Record], list[str]]:
    """Measure every configuration x task x workload x batch size; returns (records, skip notes).

    Each record is appended to ``records`` (when given) as soon as it is measured, so that a
    caller interrupted by Ctrl-C still has the configurations measured so far.
    """
    from tqdm import tqdm

    device = torch.device(device)
    caps = caps or {}
    notes, plan = [], []
    for backend, engine in configs:
        why = runnable(backend, engine, device)
        if why:
            notes.append(f"skipped {backend}:{engine}: {why}")
            continue
        for task in task_list:
            for workload in workload_names:
                plan += [(backend, engine, task, workload, n) for n in batch_sizes(backend, engine, num_envs, caps)]
    records = [] if records is None else records
    evaluators: dict[tuple[str, str], Evaluator] = {}
    for backend, engine, task, workload, n in tqdm(plan, desc="bench", disable=not progress, unit="config"):
        on = torch.device("cpu") if (backend, engine) in REFERENCES or backend == "cpu" else device
        if (backend, engine) not in evaluators:
            evaluators[(backend, engine)] = make_evaluator(backend, engine, on)
        tokens = make_tokens(workload, n, task, seed, length, on)
        records.append(measure(backend, engine, tokens, task, repeats, workload, evaluators[(backend, engine)]))
    return records, notes


def write_tensorboard(records: Sequence[Record], logdir: str | os.PathLike) -> None:
    """Scalars ``bench/{task}/{workload}/{backend}-{engine}/{programs_per_s,vm_steps_per_s}``, step = num_envs."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(logdir))
    for r in records:
        prefix = f"bench/{r.task}/{r.workload}/{r.backend}-{r.engine}"
        writer.add_scalar(f"{prefix}/programs_per_s", r.programs_per_s, r.num_envs)
        writer.add_scalar(f"{prefix}/vm_steps_per_s", r.vm_steps_per_s, r.num_envs)
        writer.add_scalar(f"{prefix}/compile_share", r.compile_share, r.num_envs)
    writer.close()


REFERENCE_COLOR = "tab:gray"
"""Bar colour of the references (the ``cpu`` pipeline and the naive interpreter) in the plot."""

CONFIG_COLOR = "tab:blue"
"""Bar colour of synthenv's own configurations in the plot."""


def is_reference(record: Record) -> bool:
    """Whether ``record`` measures a reference (the ``cpu`` pipeline or the naive interpreter)."""
    return (record.backend, record.engine) == BASELINE or (record.backend, record.engine) in REFERENCES


def hardware_caption(hw: dict) -> str:
    """The plot's caption: CPU model and cores, GPU (or none), torch and its threads.

    >>> hardware_caption({"cpu": "AMD EPYC", "cores": 2, "gpu": None, "torch": "2.13.0", "torch_threads": 2})
    'AMD EPYC, 2 cores; GPU: none; torch 2.13.0 (2 threads)'
    """
    return (f"{hw.get('cpu', 'unknown CPU')}, {hw.get('cores', '?')} cores; GPU: {hw.get('gpu') or 'none'}; "
            f"torch {hw.get('torch', '?')} ({hw.get('torch_threads', '?')} threads)")


def plot_figure(records: Sequence[Record]):
    """A matplotlib figure: programs/s per configuration (log scale), one panel per (task, workload),
    references in ``REFERENCE_COLOR``, synthenv's configurations in ``CONFIG_COLOR``, the hardware
    in the caption."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    groups = list(dict.fromkeys((r.task, r.workload) for r in records))
    ratio = ratios(records)
    fig, axes = plt.subplots(1, max(1, len(groups)), figsize=(6 * max(1, len(groups)), 5), squeeze=False)
    for ax, (task, workload) in zip(axes[0], groups):
        rows = [r for r in records if (r.task, r.workload) == (task, workload)]
        labels = [f"{r.label}\nN={r.num_envs}" for r in rows]
        colors = [REFERENCE_COLOR if is_reference(r) else CONFIG_COLOR for r in rows]
        bars = ax.bar(range(len(rows)), [r.programs_per_s for r in rows], color=colors)
        for bar, r in zip(bars, rows):
            if id(r) in ratio:
                ax.annotate(f"{ratio[id(r)]:.3g}x", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(rows)), labels, rotation=60, ha="right", fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("programs / s (compile + run + score)")
        ax.set_title(f"{task}, {workload} (ratios vs cpu pipeline)")
    axes[0][0].legend(handles=[Patch(color=REFERENCE_COLOR, label="references (cpu pipeline, naive interpreter)"),
                               Patch(color=CONFIG_COLOR, label="synthenv configurations")], fontsize=7,
                      loc="upper left")
    hw = records[0].hardware if records and records[0].hardware else hardware()
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.text(0.5, 0.01, hardware_caption(hw), ha="center", va="bottom", fontsize=8)
    return fig


def write_plot(records: Sequence[Record], path: str | os.PathLike) -> None:
    """``plot_figure`` as a PNG file."""
    import matplotlib.pyplot as plt

    fig = plot_figure(records)
    fig.savefig(path, format="png", dpi=120)
    plt.close(fig)
