"""``synthenv bench``: programs compiled, run and scored per second, every configuration side by side."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from synthenv.bench import DEFAULT_CONFIGS


@dataclass(frozen=True)
class BenchCommand:
    """Episodes per second (program mode: compile + run + score) of backend x engine configurations.

    References in the same run: the ``cpu`` pipeline (every ratio is against it) and a naive C
    interpreter of raw BF on one core and on all cores. Warm-up calls are excluded.
    """

    configs: tuple[str, ...] = DEFAULT_CONFIGS
    """``backend:engine`` pairs; configurations the device cannot run are skipped with a note."""
    tasks: tuple[str, ...] = ("reverse",)
    """Tasks to score against."""
    workloads: tuple[str, ...] = ("uniform", "near")
    """Program workloads: ``uniform``, ``near`` (mutated solutions), ``loop_heavy``."""
    num_envs: tuple[int, ...] = (1024, 8192)
    """Programs per call (batch sizes)."""
    repeats: int = 3
    """Timed calls per configuration (after one warm-up call)."""
    cpu_programs: int = 64
    """Programs per call for the slow pure-Python ``cpu`` pipeline (rates are per program)."""
    torch_programs: int = 1024
    """Programs per call for the lockstep ``torch`` engine."""
    device: str = "auto"
    """Device of the IR backends: ``cpu``, ``cuda`` or ``auto`` (cuda when available)."""
    seed: int = 0
    """Seed of the workloads."""
    length: int = 100
    """Tokens per program."""
    torch_threads: int = 0
    """torch intra-op threads (0 = torch's default)."""
    json: Path | None = None
    """Write one JSON record per configuration here."""
    plot: Path | None = None
    """Write a PNG bar chart here."""
    logdir: Path | None = None
    """Write TensorBoard scalars (``bench/...``) here."""
    progress: bool = True
    """Show a progress bar."""
    model: bool = False
    """Fit the latency model (``synthenv.costmodel``) per configuration and print predicted beside measured
    programs/s (needs 2+ ``num_envs``), with predictions at ``model_sizes``, and the energy measured if any."""
    model_sizes: tuple[int, ...] = (256, 65536)
    """Batch sizes to extrapolate the latency model to (with ``--model``)."""

    def __post_init__(self) -> None:
        from synthenv import tasks, workloads
        from synthenv.bench import parse_config
        from synthenv.registry import unknown_name_message

        for config in self.configs:
            parse_config(config)
        for name in self.tasks:
            tasks.get(name)
        for name in self.workloads:
            if name not in workloads.WORKLOADS:
                raise ValueError(unknown_name_message("workload", name, list(workloads.WORKLOADS)))
        for field, value in (("num_envs", self.num_envs), ("repeats", (self.repeats,)),
                             ("cpu_programs", (self.cpu_programs,)), ("torch_programs", (self.torch_programs,))):
            if not value or any(not isinstance(v, int) or v < 1 for v in value):
                raise ValueError(f"{field} must be positive ints, got {value!r}")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:i]', got {self.device!r}")

    def run(self) -> int:
        import torch

        from synthenv import bench, tasks

        if self.torch_threads:
            torch.set_num_threads(self.torch_threads)
        device = self.device if self.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        caps = {("cpu", "reference"): self.cpu_programs, ("*", "torch"): self.torch_programs}
        records, notes = bench.run_suite([bench.parse_config(c) for c in self.configs],
                                         [tasks.get(n) for n in self.tasks], self.workloads, self.num_envs,
                                         self.repeats, device, caps, self.seed, self.length, self.progress)
        hw = bench.hardware()
        print(f"hardware: {hw['cpu']} ({hw['cores']} cores), torch {hw['torch']} ({hw['torch_threads']} threads), "
              f"CUDA {hw['cuda']}, GPU {hw['gpu']}, CuPy {hw['cupy']}, {hw['c_compiler']}")
        print(bench.format_table(records))
        if self.model:
            from synthenv.costmodel import EnergyMeter, format_model_table

            print("\nlatency model: T(N) = fixed + (compile + execute) * max(N, saturation); "
                  "held-out = predicted by a fit without that point")
            print(format_model_table(records, self.model_sizes))
            energy = [r for r in records if r.joules_per_program is not None]
            for r in energy:
                print(f"energy {r.label} N={r.num_envs} {r.task}/{r.workload}: {r.joules_per_program:.3g} J/program")
            if not energy:
                print(f"energy: {EnergyMeter(device).source}")
        for note in notes:
            print(note)
        if self.json:
            self.json.parent.mkdir(parents=True, exist_ok=True)
            self.json.write_text(json.dumps([r.to_json() for r in records], indent=2))
        if self.plot:
            self.plot.parent.mkdir(parents=True, exist_ok=True)
            bench.write_plot(records, self.plot)
        if self.logdir:
            bench.write_tensorboard(records, self.logdir)
        return 0
