"""The latency model: recovers known parameters from synthetic measurements, predicts other batch
sizes, reports honestly when energy cannot be measured."""

from __future__ import annotations

import glob
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from synthenv import costmodel
from synthenv.costmodel import (
    EnergyMeter,
    LatencyModel,
    Sample,
    fit,
    format_model_table,
    group_samples,
    leave_one_out,
)

TRUE = LatencyModel(fixed=0.003, compile=2e-7, execute=8e-7, saturation=4096)


def synthetic(model: LatencyModel, sizes, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        parts = model.components(n)
        total = sum(parts.values()) * (1 + noise * rng.standard_normal())
        out.append(Sample(n, total, parts["compile"] / sum(parts.values())))
    return out


def test_closed_form_components():
    # T(N) = fixed + (compile + execute) * max(N, saturation)
    assert TRUE.seconds(1024) == pytest.approx(0.003 + 1e-6 * 4096)
    assert TRUE.seconds(65536) == pytest.approx(0.003 + 1e-6 * 65536)
    assert TRUE.programs_per_s(65536) == pytest.approx(65536 / (0.003 + 0.065536))


def test_fit_recovers_parameters_from_exact_data():
    model = fit(synthetic(TRUE, [256, 1024, 4096, 16384, 65536]))
    assert model.saturation == 4096
    assert model.fixed == pytest.approx(TRUE.fixed, rel=1e-6)
    assert model.compile == pytest.approx(TRUE.compile, rel=1e-6)
    assert model.execute == pytest.approx(TRUE.execute, rel=1e-6)


def test_fit_predicts_unseen_sizes_under_noise():
    samples = synthetic(TRUE, [512, 2048, 4096, 8192, 32768], noise=0.02, seed=1)
    model = fit(samples)
    for n in (16384, 131072, 262144):
        assert abs(model.programs_per_s(n) - TRUE.programs_per_s(n)) < 0.08 * TRUE.programs_per_s(n)


def test_two_sizes_fit_a_line():
    model = fit([Sample(1000, 0.002, 0.5), Sample(5000, 0.006, 0.5)])
    assert model.saturation == 1.0
    assert model.seconds(1000) == pytest.approx(0.002) and model.seconds(5000) == pytest.approx(0.006)
    assert model.compile == pytest.approx(model.execute)  # compile share 0.5 throughout
    assert model.seconds(10000) == pytest.approx(0.011)


def test_leave_one_out_and_errors():
    held_out = leave_one_out(synthetic(TRUE, [1024, 65536]))
    assert all(pred is None for _, pred in held_out)  # one size left: nothing to fit
    samples = synthetic(TRUE, [1024, 4096, 8192, 65536])
    held_out = leave_one_out(samples)
    assert sum(pred is not None for _, pred in held_out) == 4
    # 8192 is predicted from 1024, 4096 and 65536, which pin down every parameter.
    sample, pred = held_out[2]
    assert sample.num_envs == 8192 and abs(pred - 8192 / sample.seconds) < 1e-6 * 8192 / sample.seconds
    with pytest.raises(ValueError, match="2 or more batch sizes"):
        fit([Sample(100, 0.1)])
    with pytest.raises(ValueError):
        Sample(0, 0.1)
    with pytest.raises(ValueError):
        Sample(10, 0.1, compile_share=1.5)


@dataclass
class FakeRecord:
    backend: str
    engine: str
    task: str
    workload: str
    num_envs: int
    programs_per_s: float
    compile_share: float


def test_table_from_bench_records():
    records = [FakeRecord("traditional", "native", "reverse", "uniform", s.num_envs, s.num_envs / s.seconds,
                          s.compile_share) for s in synthetic(TRUE, [1024, 4096, 16384])]
    records.append(FakeRecord("cpu", "reference", "reverse", "uniform", 64, 500.0, 0.0))  # one size: no model
    assert set(group_samples(records)) == {("traditional", "native", "reverse", "uniform"),
                                           ("cpu", "reference", "reverse", "uniform")}
    table = format_model_table(records, extra_sizes=(65536,))
    lines = table.splitlines()
    assert "measured/s" in lines[0] and "held-out/s" in lines[0]
    assert sum("traditional:native" in line for line in lines) == 4  # 3 measured + 1 extrapolated
    assert not any(line.startswith("cpu:reference") for line in lines)
    assert f"{TRUE.programs_per_s(65536):,.0f}" in table


RAPL_PATTERN = "/sys/class/powercap/intel-rapl:[0-9]*/energy_uj"
NO_COUNTER = "not measured: no GPU energy counter and no readable RAPL counter (/sys/class/powercap)"


def readable_rapl_counters() -> list[str]:
    """The RAPL counters this machine lets us read, found without the meter."""
    readable = []
    for path in glob.glob(RAPL_PATTERN):
        try:
            int(Path(path).read_text())
            readable.append(path)
        except (OSError, ValueError):
            pass
    return readable


def test_energy_meter_on_this_cpu_reports_what_its_counters_allow():
    counters = readable_rapl_counters()
    with EnergyMeter("cpu") as meter:
        sum(range(10000))
    assert meter.available == bool(counters)
    if counters:  # this machine exposes RAPL
        assert meter.source == f"RAPL CPU package energy ({len(counters)} package(s))"
        assert meter.joules is not None and meter.joules >= 0
    else:  # no /sys/class/powercap (a container, a VM, not Linux) or unreadable counters
        assert meter.source == NO_COUNTER and meter.joules is None


@pytest.fixture
def fake_rapl(tmp_path, monkeypatch):
    """Two readable RAPL package counters and one unreadable, in tmp_path (microjoules)."""
    counters = [tmp_path / f"intel-rapl:{i}" / "energy_uj" for i in range(3)]
    for counter, value in zip(counters, ("1000000", "2000000", "not a number")):
        counter.parent.mkdir()
        counter.write_text(value)

    def fake_glob(pattern):
        assert pattern == RAPL_PATTERN
        return [str(c) for c in counters]

    monkeypatch.setattr(costmodel.glob, "glob", fake_glob)
    return counters[:2]


def test_energy_meter_sums_the_rapl_packages_it_can_read(fake_rapl):
    with EnergyMeter("cpu") as meter:
        fake_rapl[0].write_text("3500000")  # +2.5 J
        fake_rapl[1].write_text("2250000")  # +0.25 J
    assert meter.available and meter.source == "RAPL CPU package energy (2 package(s))"
    assert meter.joules == pytest.approx(2.75)


def test_energy_meter_gives_no_value_when_a_counter_wraps(fake_rapl):
    with EnergyMeter("cpu") as meter:
        fake_rapl[0].write_text("0")  # the counter wrapped: the difference would be negative
    assert meter.available and meter.joules is None


def test_energy_meter_without_counters_says_not_measured(monkeypatch):
    monkeypatch.setattr(costmodel.glob, "glob", lambda pattern: [])
    with EnergyMeter("cpu") as meter:
        sum(range(10000))
    assert not meter.available and meter.joules is None and meter.source == NO_COUNTER


class FakeNVML:
    """pynvml's three calls the meter uses, with an energy counter in millijoules."""

    def __init__(self, millijoules):
        self.millijoules = millijoules
        self.nvmlInit = lambda: None
        self.nvmlDeviceGetHandleByIndex = lambda index: ("handle", index)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        assert handle == ("handle", 0)
        return self.millijoules


def test_energy_meter_on_a_gpu_reads_nvml(monkeypatch):
    nvml = FakeNVML(5_000)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with EnergyMeter("cuda") as meter:
        nvml.millijoules = 7_500
    assert meter.available and meter.source == "NVML total energy (GPU board)" and meter.joules == pytest.approx(2.5)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: import fails
    with EnergyMeter("cuda") as meter:
        pass
    assert not meter.available and meter.joules is None
    assert meter.source == ("not measured: NVML energy counter unavailable (ModuleNotFoundError); "
                            "install nvidia-ml-py on an NVIDIA GPU")
