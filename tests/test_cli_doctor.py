"""``synthenv doctor`` on a CPU-only machine: it reports what is available, checks every engine
against the reference interpreter, writes JSON, and exits 0 / 1 (a wrong engine) / 2 (no GPU
for --gpu-suite, bad options)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from synthenv import engines, native_cache
from synthenv.cli import main
from synthenv.engines.torch_engine import TorchEngine


def test_doctor_reports_the_machine_and_exactness(tmp_path, capsys):
    report = tmp_path / "doctor.json"
    assert main(["doctor", "--programs", "9", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "NVRTC: 12." in out and "the CUDA kernel compiles" in out
    assert "engines usable: torch" in out
    assert "ok   traditional(torch passes):torch" in out and "ok   cpu:reference" in out
    assert "all checks passed" in out
    data = json.loads(report.read_text())
    assert data["passed"] is True and data["machine"]["nvrtc"]["kernel_compiles"] is True
    pipelines = {row["pipeline"]: row for row in data["exactness_cpu"]}
    assert pipelines["traditional(torch passes):torch"]["passed"] and pipelines["cpu:reference"]["cases"] > 0
    assert {"neural:native", "hybrid:native"} & set(pipelines) or {"neural:torch", "hybrid:torch"} <= set(pipelines)
    native = data["machine"]["native"]  # one library per module that owns C code, each verified where it loads
    assert set(native["libraries"]) >= {"synthenv.engines.native", "synthenv.compilers.traditional", "synthenv.scoring",
                                        "synthenv.naive", "synthenv.agents.search.rows", "synthenv.agents.run.feedback"}
    loaded = [entry for entry in native["libraries"].values() if entry["available"]]
    assert all(native_cache.verify(Path(entry["path"])) for entry in loaded)
    assert f"{len(loaded)} of {len(native['libraries'])} load from {native['cache_dir']}" in out
    assert native["cpu"] == native_cache.cpu_identity()["model"] and f"(built for {native['cpu']})" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_gpu_suite_without_a_gpu_says_so_and_exits_2(capsys):
    assert main(["doctor", "--gpu-suite", "--programs", "3"]) == 2
    assert "--gpu-suite needs an NVIDIA GPU" in capsys.readouterr().err


def test_bad_options_exit_2(tmp_path, capsys):
    assert main(["doctor", "--programs", "1"]) == 2
    assert "--programs must be an int >= 3" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["doctor", "--json", str(blocker / "report.json")]) == 2
    assert "cannot write --json" in capsys.readouterr().err


@dataclasses.dataclass(frozen=True)
class OffByOneEngine(TorchEngine):
    """An engine with a bug: every step count is one too high."""

    name: str = "off-by-one"

    def run(self, program, task, num_outputs=None, early_abort=False):
        execution = super().run(program, task, num_outputs, early_abort)
        return dataclasses.replace(execution, steps=execution.steps + 1)


def test_a_wrong_engine_fails_the_doctor(capsys):
    engines.register("off-by-one", OffByOneEngine)
    try:
        assert main(["doctor", "--programs", "3"]) == 1
    finally:
        engines._registry.unregister("off-by-one")
    out = capsys.readouterr().out
    assert "FAIL traditional:off-by-one" in out and "steps" in out and "SOME CHECKS FAILED" in out


def test_a_gpu_check_that_raises_is_a_failed_entry_not_the_end_of_the_suite():
    from synthenv.testing import gpu_suite

    def broken():
        raise RuntimeError("no kernel")

    entry = gpu_suite._check("broken", broken)
    assert entry["passed"] is False and "no kernel" in entry["error"] and entry["name"] == "broken"
    assert gpu_suite._check("fine", lambda: {"passed": True, "x": 1}) == {
        "name": "fine", "passed": True, "seconds": pytest.approx(0, abs=1), "details": {"x": 1}, "error": None}
