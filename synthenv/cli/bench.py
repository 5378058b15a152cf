"""``synthenv bench``: programs compiled, run and scored per second, every configuration side by side."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from synthenv import storage

QUICK_NUM_ENVS = (1024, 4096)
FULL_NUM_ENVS = (1024, 4096, 8192)


@dataclass(frozen=True)
class BenchCommand:
    """Episodes per second (program mode: compile + run + score) of backend x engine configurations.

    References in the same run: the 'cpu' pipeline (every ratio is against it) and a naive C
    interpreter of raw BF on one core and on all cores. Warm-up calls are excluded. The default
    is a quick run (a minute or two on 2 CPU cores); --full measures the grid of BENCHMARKS.md.
    Ctrl-C stops the run and keeps the configurations measured so far (in --json).
    """

    full: bool = False
    """Measure BENCHMARKS.md's grid: every configuration, the lockstep torch engine included (on
    --torch-programs programs), at 1024, 4096 and 8192 programs per call."""
    configs: tuple[str, ...] | None = None
    """backend:engine pairs (default: every configuration but traditional:torch, which --full adds);
    configurations the device cannot run are skipped with a note."""
    tasks: tuple[str, ...] = ("reverse",)
    """Tasks to score against."""
    workloads: tuple[str, ...] = ("uniform", "near")
    """Program workloads: uniform, near (mutated solutions), loop_heavy."""
    num_envs: tuple[int, ...] | None = None
    """Programs per call (batch sizes; default: 1024 4096, with --full 1024 4096 8192)."""
    repeats: int = 3
    """Timed calls per configuration (after one warm-up call)."""
    cpu_programs: int = 64
    """Programs per call for the slow pure-Python cpu pipeline (rates are per program)."""
    torch_programs: int = 128
    """Programs per call for the lockstep torch engine (about 30 programs/s on a CPU)."""
    device: str = "auto"
    """Device of the IR backends: cpu, cuda, cuda:N or auto (cuda when available)."""
    seed: int = 0
    """Seed of the workloads."""
    length: int = 100
    """Tokens per program (at most 4096)."""
    torch_threads: int = 0
    """torch intra-op threads (0 = torch's default)."""
    json: Path | None = None
    """Write one JSON record per configuration here (checked before the run starts)."""
    plot: Path | None = None
    """Write a PNG bar chart here: references in grey, synthenv's configurations in colour, the
    hardware in the caption."""
    logdir: Path | None = None
    """Write TensorBoard scalars (bench/...) here."""
    progress: bool = True
    """Show a progress bar."""
    model: bool = False
    """Fit the latency model (synthenv.costmodel) per configuration; print its predicted
    programs per second beside the measured ones (needs 2+ batch sizes), predictions at
    --model-sizes, and the energy if measured."""
    model_sizes: tuple[int, ...] = (256, 65536)
    """Batch sizes to extrapolate the latency model to (with --model)."""

    def __post_init__(self) -> None:
        from synthenv import tasks, workloads
        from synthenv.bench import parse_config
        from synthenv.checks import require_positive_int, require_seed
        from synthenv.errors import UserError
        from synthenv.language import MAX_LEN
        from synthenv.registry import unknown_name_message

        for config in self.grid_configs:
            parse_config(config)
        for name in self.tasks:
            tasks.get(name)
        for name in self.workloads:
            if name not in workloads.WORKLOADS:
                raise UserError(unknown_name_message("workload", name, list(workloads.WORKLOADS)))
        for field, values in (("num_envs", self.grid_num_envs), ("model_sizes", self.model_sizes)):
            if not values or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in values):
                raise UserError(f"{field} must be positive ints, got {values!r}")
        for field in ("repeats", "cpu_programs", "torch_programs"):
            require_positive_int(field, getattr(self, field))
        if not isinstance(self.length, int) or not 1 <= self.length <= MAX_LEN:
            raise UserError(f"length must be an int in [1, {MAX_LEN}] (tokens per program), got {self.length!r}")
        require_seed("seed", self.seed, allow_none=False)
        if not isinstance(self.torch_threads, int) or self.torch_threads < 0:
            raise UserError(f"torch_threads must be an int >= 0 (0 = torch's default), got {self.torch_threads!r}")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise UserError(f"device must be 'auto', 'cpu' or 'cuda[:i]', got {self.device!r}")

    @property
    def grid_configs(self) -> tuple[str, ...]:
        """The configurations measured: ``configs``, else the quick or the full default."""
        from synthenv.bench import FULL_CONFIGS, QUICK_CONFIGS

        return self.configs if self.configs is not None else (FULL_CONFIGS if self.full else QUICK_CONFIGS)

    @property
    def grid_num_envs(self) -> tuple[int, ...]:
        """The batch sizes measured: ``num_envs``, else the quick or the full default."""
        return self.num_envs if self.num_envs is not None else (FULL_NUM_ENVS if self.full else QUICK_NUM_ENVS)

    def run(self) -> int:
        import torch

        from synthenv import bench, tasks
        from synthenv.checks import require_writable, resolve_device

        for path, what in ((self.json, "--json"), (self.plot, "--plot")):  # fail now, not after the run
            if path is not None:
                require_writable(path, what)
        if self.logdir is not None:
            require_writable(self.logdir, "--logdir", directory=True)
        if self.torch_threads:
            torch.set_num_threads(self.torch_threads)
        device = self.device if self.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        device = str(resolve_device(device))  # cuda without CUDA: a clear error, not a run of the references only
        caps = {("cpu", "reference"): self.cpu_programs, ("*", "torch"): self.torch_programs}
        records: list[bench.Record] = []
        try:
            _, notes = bench.run_suite([bench.parse_config(c) for c in self.grid_configs],
                                       [tasks.get(n) for n in self.tasks], self.workloads, self.grid_num_envs,
                                       self.repeats, device, caps, self.seed, self.length, self.progress, records)
        except KeyboardInterrupt:
            raise KeyboardInterrupt(self._save_partial(records)) from None
        print(_hardware_line(bench.hardware()))
        print(bench.format_table(records))
        if self.model:
            self._print_model(records, device)
        for note in notes:
            print(note)
        if self.json:
            self._write_json(records)
        if self.plot:
            bench.write_plot(records, self.plot)
        if self.logdir:
            bench.write_tensorboard(records, self.logdir)
        return 0

    def _write_json(self, records) -> None:
        storage.write_json(self.json, [r.to_json() for r in records], "--json")

    def _save_partial(self, records) -> str:
        """After Ctrl-C: print and save what was measured; returns the one-line account."""
        from synthenv import bench

        if not records:
            return "nothing was measured yet"
        print(bench.format_table(records))
        if not self.json:
            return f"{len(records)} configurations measured (above); pass --json PATH to keep them"
        self._write_json(records)
        return f"saved the {len(records)} configurations measured so far to {self.json}"

    def _print_model(self, records, device: str) -> None:
        from synthenv.costmodel import EnergyMeter, format_model_table

        print("\nlatency model: T(N) = fixed + (compile + execute) * max(N, saturation); "
              "held-out = predicted by a fit without that point")
        print(format_model_table(records, self.model_sizes))
        energy = [r for r in records if r.joules_per_program is not None]
        for r in energy:
            print(f"energy {r.label} N={r.num_envs} {r.task}/{r.workload}: {r.joules_per_program:.3g} J/program")
        if not energy:
            print(f"energy: {EnergyMeter(device).source}")


def _hardware_line(hw: dict) -> str:
    return (f"hardware: {hw['cpu']} ({hw['cores']} cores), torch {hw['torch']} ({hw['torch_threads']} threads), "
            f"CUDA {hw['cuda']}, GPU {hw['gpu']}, CuPy {hw['cupy']}, {hw['c_compiler']}")
