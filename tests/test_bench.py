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


def test_measure_records_rates_that_agree_with_its_raw_numbers():
    """programs/s and VM steps/s are what the record's own counts and seconds give, and the steps are the
    programs' real step counts (each pipeline's, which the differential tests make equal)."""
    task = tasks.get("reverse")
    tokens = workloads.make("uniform", 8)
    records = [bench.measure("cpu", "reference", tokens, task, repeats=1, workload="uniform"),
               bench.measure("traditional", "native", tokens, task, repeats=2, workload="uniform")]
    for record in records:
        execution, _ = bench.make_evaluator(record.backend, record.engine)(tokens, task)
        steps = int(execution.steps.sum())
        assert steps > 0 and record.num_envs == 8 and record.seconds > 0
        assert record.programs_per_s == pytest.approx(record.num_envs * record.repeats / record.seconds, rel=1e-12)
        assert record.vm_steps_per_s == pytest.approx(steps * record.repeats / record.seconds, rel=1e-12)
    assert records[0].compile_share == 0.0 and records[1].repeats == 2
    cpu, native = records
    ratio = bench.ratios(records)
    assert ratio[id(native)] == pytest.approx((native.num_envs * native.repeats / native.seconds)
                                              / (cpu.num_envs * cpu.repeats / cpu.seconds), rel=1e-12)
    row = next(line for line in bench.format_table(records).splitlines() if "traditional:native" in line)
    assert row.split()[-1] == f"{ratio[id(native)]:.1f}"
    with pytest.raises(ValueError, match="repeats"):
        bench.measure("cpu", "reference", tokens, task, repeats=0)


def _record(backend, engine, task, workload, programs, seconds):
    return bench.Record(backend, engine, programs, workload, task, programs / seconds, 0.0, 0.0, seconds, 1)


def test_ratios_divide_by_the_baseline_of_the_same_task_and_workload():
    cpu_uniform = _record("cpu", "reference", "reverse", "uniform", 4, 2.0)  # 2 programs/s
    cpu_near = _record("cpu", "reference", "reverse", "near", 4, 0.5)  # 8 programs/s
    fast_uniform = _record("traditional", "native", "reverse", "uniform", 1000, 1.0)
    fast_near = _record("traditional", "native", "reverse", "near", 1000, 1.0)
    no_baseline = _record("traditional", "native", "add", "uniform", 1000, 1.0)  # no cpu record for add
    records = [fast_uniform, cpu_near, no_baseline, cpu_uniform, fast_near]
    assert bench.ratios(records) == {id(fast_uniform): 500.0, id(fast_near): 125.0, id(cpu_uniform): 1.0,
                                     id(cpu_near): 1.0}
    rows = bench.format_table(records).splitlines()[2:]
    assert [row.split()[-1] for row in rows] == ["500.0", "1.0", "-", "1.0", "125.0"]


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


def _exit_code(capsys, argv) -> tuple[int, str]:
    """main's exit code and its one line on stderr."""
    code = main(argv)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("synthenv"), err
    return code, err


@pytest.mark.parametrize(("argv", "message"), [
    (["--configs", "tradtional:native"], "unknown backend 'tradtional'. Did you mean 'traditional'"),
    (["--configs", "traditional:nativ"], "unknown traditional engine 'nativ'. Did you mean 'native'"),
    (["--length", "0"], r"length must be an int in [1, 4096]"),
    (["--length", "5000"], r"length must be an int in [1, 4096]"),
    (["--num-envs", "0"], "num_envs must be positive ints"),
    (["--repeats", "0"], "repeats must be a positive int"),
    (["--seed", "-1"], "seed must be an int in [0, 2**64)"),
    (["--torch-threads", "-1"], "torch_threads must be an int >= 0"),
])
def test_bad_options_exit_2_without_a_traceback(capsys, argv, message):
    code, err = _exit_code(capsys, ["bench", *argv])
    assert code == 2 and message in err


def test_an_unwritable_json_fails_before_measuring(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench, "run_suite", lambda *a, **k: pytest.fail("measured before checking --json"))
    (tmp_path / "file").write_text("")
    for option, path in (("--json", tmp_path / "file" / "b.json"), ("--plot", tmp_path),
                         ("--logdir", tmp_path / "file")):
        assert main(["bench", "--no-progress", option, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"synthenv bench: error: {option} ") and "writable" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised when CUDA is missing")
def test_cuda_without_cuda_is_a_clear_error(capsys):
    assert main(["bench", "--device", "cuda", "--no-progress"]) == 2
    assert "needs CUDA" in capsys.readouterr().err


def test_ctrl_c_keeps_what_was_measured(tmp_path, capsys, monkeypatch):
    measure, calls = bench.measure, []

    def interrupted(*args, **kwargs):
        calls.append(args)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return measure(*args, **kwargs)

    monkeypatch.setattr(bench, "measure", interrupted)
    out = tmp_path / "b.json"
    argv = ["bench", "--configs", "cpu:reference", "traditional:native", "--num-envs", "8", "16", "--cpu-programs",
            "4", "--repeats", "1", "--workloads", "uniform", "--device", "cpu", "--no-progress", "--json", str(out)]
    assert main(argv) == 130
    captured = capsys.readouterr()
    saved = f"saved the 2 configurations measured so far to {out}"
    assert captured.err == f"synthenv bench: interrupted (Ctrl-C); {saved}\n"
    records = json.loads(out.read_text())
    assert [(r["backend"], r["num_envs"]) for r in records] == [("cpu", 4), ("traditional", 8)]
    assert "traditional:native" in captured.out  # the partial table


def test_the_default_is_quick_and_full_is_the_benchmarks_md_grid():
    import re
    import shlex
    from pathlib import Path

    import tyro

    quick, full = BenchCommand(), BenchCommand(full=True)
    assert "traditional:torch" not in quick.grid_configs and quick.grid_num_envs == (1024, 4096)
    assert full.grid_configs == bench.FULL_CONFIGS and "traditional:torch" in full.grid_configs
    assert set(full.grid_configs) - set(quick.grid_configs) == {"traditional:torch"}
    assert BenchCommand(full=True, num_envs=(64,)).grid_num_envs == (64,)  # explicit options win
    text = (Path(__file__).parents[1] / "BENCHMARKS.md").read_text()
    command = re.search(r"^synthenv bench (--full .*)$", text, re.MULTILINE).group(1)  # the CPU grid's command
    documented = tyro.cli(BenchCommand, args=_drop_outputs(shlex.split(command)))
    grid = ("grid_configs", "grid_num_envs", "tasks", "workloads", "repeats", "cpu_programs", "torch_programs",
            "length")
    assert {g: getattr(full, g) for g in grid} == {g: getattr(documented, g) for g in grid}


def _drop_outputs(args: list[str]) -> list[str]:
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("--json", "--plot", "--logdir"):
            skip = True
        else:
            out.append(arg)
    return out


def test_plot_colours_references_apart_and_captions_the_hardware(tmp_path):
    task = tasks.get("reverse")
    tokens = workloads.make("uniform", 8)
    records = [bench.measure(b, e, tokens, task, repeats=1, workload="uniform")
               for b, e in (("cpu", "reference"), ("naive", "1-core"), ("traditional", "native"))]
    fig = bench.plot_figure(records)
    from matplotlib.colors import to_rgba

    colors = [patch.get_facecolor() for patch in fig.axes[0].patches]
    assert colors == [to_rgba(bench.REFERENCE_COLOR)] * 2 + [to_rgba(bench.CONFIG_COLOR)]
    caption = " ".join(t.get_text() for t in fig.texts)
    hw = bench.hardware()
    assert hw["cpu"] in caption and f"{hw['cores']} cores" in caption and "GPU: " in caption
    bench.write_plot(records, tmp_path / "b.png")
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"
