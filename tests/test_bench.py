"""``synthenv bench`` smoke tests on a tiny budget (no timing assertions)."""

from __future__ import annotations

import json

import pytest
import torch

from synthenv import bench, tasks, workloads
from synthenv.cli import main
from synthenv.cli.bench import BenchCommand
from synthenv.language import encode_batch

FIELDS = {"backend", "engine", "num_envs", "workload", "task", "programs_per_s", "vm_steps_per_s", "compile_share",
          "hardware"}


def test_cli_writes_json_plot_and_tensorboard(tmp_path, capsys):
    out_json, out_png, logdir = tmp_path / "b.json", tmp_path / "b.png", tmp_path / "tb"
    code = main(["bench", "--configs", "cpu:reference", "naive:1-core", "naive:all-cores", "traditional:native",
                 "traditional-torch:native", "traditional:torch", "traditional:cuda", "--num-envs", "16", "--repeats", "1", "--cpu-programs", "4",
                 "--torch-programs", "8", "--workloads", "uniform", "near", "--device", "cpu", "--json", str(out_json),
                 "--plot", str(out_png), "--logdir", str(logdir), "--no-progress"])
    assert code == 0
    records = json.loads(out_json.read_text())
    seen = {(r["backend"], r["engine"], r["workload"]) for r in records}
    for config in ("cpu:reference", "naive:1-core", "naive:all-cores", "traditional:native", "traditional-torch:native",
                   "traditional:torch"):
        backend, engine = config.split(":")
        assert {(backend, engine, "uniform"), (backend, engine, "near")} <= seen
    for r in records:
        assert FIELDS <= set(r)
        assert r["programs_per_s"] > 0 and 0.0 <= r["compile_share"] <= 1.0
        assert r["hardware"]["cores"] >= 1 and r["hardware"]["torch"] == torch.__version__
    sizes = {(r["backend"], r["engine"]): r["num_envs"] for r in records}
    assert sizes[("cpu", "reference")] == 4 and sizes[("traditional", "torch")] == 8
    assert sizes[("traditional", "native")] == 16
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    events = list(logdir.glob("events.out.tfevents.*"))
    assert events
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = EventAccumulator(str(logdir)).Reload().Tags()["scalars"]
    assert "bench/reverse/uniform/traditional-native/programs_per_s" in tags
    text = capsys.readouterr().out
    assert "x cpu" in text and "cores" in text
    assert "skipped traditional:cuda" in text  # --device cpu: the cuda engine cannot run


def test_measure_returns_a_record_and_the_cpu_baseline_is_one():
    task = tasks.get("reverse")
    tokens = workloads.make("uniform", 8)
    records = [bench.measure("cpu", "reference", tokens, task, repeats=1, workload="uniform"),
               bench.measure("traditional", "native", tokens, task, repeats=2, workload="uniform")]
    assert records[0].compile_share == 0.0 and records[1].repeats == 2
    assert all(r.vm_steps_per_s > 0 for r in records)
    ratio = bench.ratios(records)
    assert ratio[id(records[0])] == 1.0
    assert "traditional:native" in bench.format_table(records)
    with pytest.raises(ValueError, match="repeats"):
        bench.measure("cpu", "reference", tokens, task, repeats=0)


def test_slow_configurations_get_capped_batches():
    caps = {("cpu", "reference"): 64, ("*", "torch"): 1024}
    assert bench.batch_sizes("cpu", "reference", [1024, 8192], caps) == [64]
    assert bench.batch_sizes("traditional", "torch", [512, 8192], caps) == [512, 1024]
    assert bench.batch_sizes("traditional", "native", [1024, 8192], caps) == [1024, 8192]


def test_near_workload_mutates_the_task_solution():
    task = tasks.get("reverse")
    tokens = bench.make_tokens("near", 50, task, seed=1)
    solution = encode_batch([task.solution], 100)[0]
    assert ((tokens != solution).sum(1) <= 3).all()  # at most 3 substitutions


def test_bad_configurations_are_clear_errors():
    with pytest.raises(ValueError, match="backend:engine"):
        bench.parse_config("traditional")
    with pytest.raises(ValueError, match="Did you mean 'uniform'"):
        BenchCommand(workloads=("unifrom",))
    with pytest.raises(ValueError, match="num_envs"):
        BenchCommand(num_envs=(0,))
    with pytest.raises(ValueError, match="Did you mean 'all-cores'"):
        bench.make_evaluator("naive", "all-core")
    assert bench.runnable("traditional", "cuda", torch.device("cpu")) is not None
    assert bench.runnable("traditional", "native", torch.device("cpu")) is None
    assert bench.runnable("traditional-torch", "native", torch.device("cpu")) is None
