"""A latency (and, where measurable, energy) model of one program-mode iteration.

One iteration compiles, runs and scores a batch of N programs. Its time is modelled as

    T(N) = fixed + (compile + execute) * max(N, saturation)

- ``fixed``: what does not grow with the batch: kernel launches (a few dozen torch ops for a
  data-parallel compiler, one kernel per engine call), host synchronisations, Python dispatch.
- ``compile``, ``execute``: work per program at full occupancy (seconds per program), from
  the benchmark's compile share; ``execute`` includes scoring and, for a pipeline that copies
  programs between host and device (the ``cpu`` backend on a GPU), those copies: the model has
  no separate transfer term. On a CPU nothing is copied; the GPU-native backends keep
  everything on the device.
- ``saturation``: parallelism. Below this many programs the device is not full and the time
  stops shrinking; above it, time grows linearly (throughput N / T(N) saturates at
  1 / (compile + execute)).

``fit`` finds the parameters by non-negative least squares on relative errors (each sample
weighs the same whatever its size), for every saturation candidate, keeping the best;
``predict_programs_per_s`` extrapolates to other batch sizes. ``synthenv bench --model``
prints the fitted model's predictions beside the measurements (and leave-one-out
predictions, which are honest: each point is predicted by a model fitted without it).

Energy: ``EnergyMeter`` reads a hardware energy counter where one is readable (NVML's
total-energy counter on NVIDIA GPUs through ``pynvml``; Linux RAPL for the CPU package);
elsewhere it says plainly that energy is not measured.

>>> samples = [Sample(n, 0.002 + 1e-6 * n) for n in (1024, 4096, 16384)]
>>> model = fit(samples)
>>> round(model.programs_per_s(65536))
970386
"""

from __future__ import annotations

import glob
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sample:
    """One measured iteration time.

    Attributes:
        num_envs: programs per iteration (N).
        seconds: seconds per iteration.
        compile_share: fraction of it spent compiling (0 if unknown or interpreted).
    """

    num_envs: int
    seconds: float
    compile_share: float = 0.0

    def __post_init__(self):
        if self.num_envs < 1 or not self.seconds > 0 or not 0.0 <= self.compile_share <= 1.0:
            raise ValueError(f"need num_envs >= 1, seconds > 0, 0 <= compile_share <= 1, got {self!r}")


@dataclass(frozen=True)
class LatencyModel:
    """``T(N) = fixed + (compile + execute) * max(N, saturation)`` (seconds)."""

    fixed: float
    compile: float
    execute: float
    saturation: float = 1.0

    def seconds(self, num_envs: int | float) -> float:
        """Predicted seconds per iteration of ``num_envs`` programs."""
        work = max(float(num_envs), self.saturation)
        return self.fixed + (self.compile + self.execute) * work

    def programs_per_s(self, num_envs: int | float) -> float:
        """Predicted episodes (programs compiled, run and scored) per second."""
        return num_envs / self.seconds(num_envs)

    def components(self, num_envs: int | float) -> dict[str, float]:
        """Seconds per iteration by component."""
        work = max(float(num_envs), self.saturation)
        return {"fixed": self.fixed, "compile": self.compile * work, "execute": self.execute * work}


def _nnls_line(xs: np.ndarray, ys: np.ndarray, weights: np.ndarray) -> tuple[float, float, float]:
    """Non-negative ``y ~ a + b x`` minimising the weighted squared error; returns (a, b, error)."""
    from scipy.optimize import nnls

    design = np.stack([np.ones_like(xs), xs], axis=1) * weights[:, None]
    (a, b), residual = nnls(design, ys * weights)
    return float(a), float(b), float(residual) ** 2


def fit(samples: Sequence[Sample], saturation: float | None = None) -> LatencyModel:
    """Fit a ``LatencyModel`` to measured iterations (at least 2 batch sizes).

    Args:
        samples: measurements of one configuration at several batch sizes.
        saturation: fix the saturation point; by default it is fitted when there are at
            least 3 batch sizes (each measured size is a candidate) and 1 otherwise.
    """
    sizes = sorted({s.num_envs for s in samples})
    if len(sizes) < 2:
        raise ValueError(f"fitting needs measurements at 2 or more batch sizes, got sizes {sizes}")
    n = np.array([s.num_envs for s in samples], dtype=float)
    t = np.array([s.seconds for s in samples], dtype=float)
    share = np.array([s.compile_share for s in samples], dtype=float)
    weights = 1.0 / t  # relative errors
    candidates = [saturation] if saturation is not None else ([1.0] + [float(x) for x in sizes[1:-1]]
                                                               if len(sizes) >= 3 else [1.0])
    best = None
    for sat in candidates:
        work = np.maximum(n, sat)
        fc, wc, err_c = _nnls_line(work, t * share, weights)
        fe, we, err_e = _nnls_line(work, t * (1.0 - share), weights)
        model = LatencyModel(fc + fe, wc, we, sat)
        error = float(np.sum(((np.array([model.seconds(x) for x in n]) - t) * weights) ** 2))
        if best is None or error < best[0] - 1e-15:
            best = (error, model)
    return best[1]


def leave_one_out(samples: Sequence[Sample]) -> list[tuple[Sample, float | None]]:
    """Each sample with the programs/s predicted for it by a model fitted to the *other* batch
    sizes (None when fewer than 2 other sizes remain)."""
    out = []
    for sample in samples:
        others = [s for s in samples if s.num_envs != sample.num_envs]
        if len({s.num_envs for s in others}) < 2:
            out.append((sample, None))
        else:
            out.append((sample, fit(others).programs_per_s(sample.num_envs)))
    return out


class EnergyMeter:
    """Energy used between ``__enter__`` and ``__exit__``, from a hardware counter if any.

    Sources, in order: NVML's total-energy counter of the GPU (``pynvml``, NVIDIA Volta or
    newer) when ``device`` is CUDA; Linux RAPL (``/sys/class/powercap``, CPU package energy)
    for a CPU device. ``joules`` is None when no source is readable, and ``source`` says why.

    >>> with EnergyMeter("cpu") as meter:
    ...     pass
    >>> meter.joules is None or meter.joules >= 0
    True
    """

    def __init__(self, device="cpu"):
        import torch

        self.device = torch.device(device)
        self.joules: float | None = None
        self.source = "not measured: no readable energy counter on this machine"
        self._read = self._find_reader()
        self._start: float | None = None

    def _find_reader(self):
        if self.device.type == "cuda":
            try:
                import pynvml

                pynvml.nvmlInit()
                handle = pynvml.nvmlDeviceGetHandleByIndex(self.device.index or 0)
                pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
            except Exception as error:  # no pynvml, no NVML, or a GPU without the counter
                self.source = f"not measured: NVML energy counter unavailable ({type(error).__name__}); " \
                              "install nvidia-ml-py on an NVIDIA GPU"
                return None
            self.source = "NVML total energy (GPU board)"
            return lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0  # mJ -> J
        files = sorted(glob.glob("/sys/class/powercap/intel-rapl:[0-9]*/energy_uj"))
        readable = []
        for path in files:
            try:
                with open(path) as f:
                    int(f.read())
                readable.append(path)
            except (OSError, ValueError):
                pass
        if not readable:
            self.source = "not measured: no GPU energy counter and no readable RAPL counter (/sys/class/powercap)"
            return None
        self.source = f"RAPL CPU package energy ({len(readable)} package(s))"

        def read() -> float:
            total = 0
            for path in readable:
                with open(path) as f:
                    total += int(f.read())
            return total / 1e6  # uJ -> J

        return read

    @property
    def available(self) -> bool:
        return self._read is not None

    def __enter__(self) -> EnergyMeter:
        self.joules = None
        self._start = self._read() if self._read else None
        return self

    def __exit__(self, *exc) -> None:
        if self._read is not None and self._start is not None:
            used = self._read() - self._start
            self.joules = used if used >= 0 else None  # a counter wrap: no value rather than a wrong one


def group_samples(records: Iterable) -> dict[tuple[str, str, str, str], list[Sample]]:
    """Bench records (``synthenv.bench.Record``) grouped by (backend, engine, task, workload)."""
    groups: dict[tuple[str, str, str, str], list[Sample]] = {}
    for r in records:
        key = (r.backend, r.engine, r.task, r.workload)
        groups.setdefault(key, []).append(Sample(r.num_envs, r.num_envs / r.programs_per_s, r.compile_share))
    return groups


def format_model_table(records: Iterable, extra_sizes: Sequence[int] = ()) -> str:
    """Predicted beside measured programs/s for every configuration measured at 2+ batch sizes.

    Columns: the in-sample fit, the leave-one-out prediction (a model fitted without that
    point; needs 2 other sizes) and the fitted components; then predictions at ``extra_sizes``.
    """
    lines = [f"{'backend:engine':<26} {'task':<10} {'workload':<10} {'N':>7} {'measured/s':>12} {'fit/s':>12} "
             f"{'held-out/s':>12}  model (fixed ms; compile, execute us/program; saturation N)"]
    for (backend, engine, task, workload), samples in group_samples(records).items():
        if len({s.num_envs for s in samples}) < 2:
            continue
        model = fit(samples)
        detail = (f"{model.fixed * 1e3:.3g}; {model.compile * 1e6:.3g}, {model.execute * 1e6:.3g}; "
                  f"{model.saturation:.0f}")
        for sample, held_out in leave_one_out(samples):
            measured = sample.num_envs / sample.seconds
            loo = f"{held_out:12,.0f}" if held_out is not None else f"{'-':>12}"
            lines.append(f"{backend + ':' + engine:<26} {task:<10} {workload:<10} {sample.num_envs:>7} "
                         f"{measured:12,.0f} {model.programs_per_s(sample.num_envs):12,.0f} {loo}  {detail}")
            detail = ""
        for size in extra_sizes:
            if size not in {s.num_envs for s in samples}:
                lines.append(f"{backend + ':' + engine:<26} {task:<10} {workload:<10} {size:>7} {'-':>12} "
                             f"{model.programs_per_s(size):12,.0f} {'-':>12}  (extrapolated)")
    return "\n".join(lines)
