"""The latency model: recovers known parameters from synthetic measurements, predicts other batch
sizes, reports honestly when energy cannot be measured."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from synthenv.costmodel import (
    EnergyMeter,
    LatencyModel,
    Sample,
    fit,
    format_model_table,
    group_samples,
    leave_one_out,
    relative_error,
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
        assert relative_error(model.programs_per_s(n), TRUE.programs_per_s(n)) < 0.08


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
    assert sample.num_envs == 8192 and relative_error(pred, 8192 / sample.seconds) < 1e-6
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


def test_energy_meter_on_the_cpu_is_honest():
    with EnergyMeter("cpu") as meter:
        sum(range(10000))
    if meter.available:
        assert meter.joules is not None and meter.joules >= 0 and "RAPL" in meter.source
    else:
        assert meter.joules is None and meter.source.startswith("not measured")
