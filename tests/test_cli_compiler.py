"""Smoke tests of ``synthenv train-compiler`` (tiny budget) and ``synthenv compiler-report``."""

from __future__ import annotations

import json

import torch

from synthenv.cli import main
from synthenv.compilers import neural


def test_train_compiler_tiny(tmp_path, capsys):
    out = tmp_path / "w.pt"
    assert main(["train-compiler", "--tiny", "--out", str(out)]) == 0
    assert "saved" in capsys.readouterr().out
    blob = torch.load(out, map_location="cpu", weights_only=True)
    assert blob["metadata"]["train_config"]["steps"] == 3
    model = neural.load_model(out)
    again = tmp_path / "again.pt"
    main(["train-compiler", "--tiny", "--out", str(again)])
    for (name, a), (_, b) in zip(model.state_dict().items(), neural.load_model(again).state_dict().items()):
        assert torch.equal(a, b), name  # seeded and deterministic


def test_compiler_report_detects_an_untrained_model(tmp_path, capsys):
    weights = tmp_path / "tiny.pt"
    main(["train-compiler", "--tiny", "--out", str(weights)])
    capsys.readouterr()
    path = tmp_path / "report.json"
    args = ["compiler-report", "--uniform", "30", "--loop-heavy", "10", "--near", "0", "--tasks", "add",
            "--engine", "torch", "--oracle-sample", "3", "--weights", str(weights), "--json", str(path)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "uniform" in text and "loop_heavy" in text and "add" in text
    report = json.loads(path.read_text())
    uniform = report["workloads"][0]
    assert uniform["workload"] == "uniform" and uniform["programs"] == 30
    assert uniform["ir_mismatches"] > 15  # three training steps teach it nothing
    # every IR mismatch is run by the oracle on each task, plus the IR-exact sample
    assert uniform["oracle_checked"]["add"] == uniform["ir_mismatches"] + min(3, 30 - uniform["ir_mismatches"])
    assert uniform["reward_mismatch_bound"] >= uniform["reward_mismatch_rate"]


def test_compiler_report_shipped_weights(tmp_path, capsys):
    path = tmp_path / "report.json"
    args = ["compiler-report", "--uniform", "300", "--loop-heavy", "0", "--near", "100", "--tasks", "reverse",
            "--engine", "torch", "--oracle-sample", "5", "--json", str(path)]
    assert main(args) == 0
    report = json.loads(path.read_text())
    for row in report["workloads"]:
        # a reward can only differ where the IR does (the traditional pipeline is exact)
        assert row["any_task_mismatches"] <= row["ir_mismatches"] <= row["programs"] * 0.01
        assert row["oracle_checked"]["reverse"] == row["ir_mismatches"] + 5
        assert row["ir_accuracy"] == 1 - row["ir_mismatches"] / row["programs"]
    assert "trained with" in capsys.readouterr().out


def test_train_compiler_never_writes_the_shipped_weights_by_default(tmp_path, monkeypatch, capsys):
    from synthenv.cli.train_compiler import TrainCompilerCommand

    shipped = neural.WEIGHTS_PATH.read_bytes()
    assert (tmp_path / TrainCompilerCommand().out).resolve() != neural.WEIGHTS_PATH.resolve()
    monkeypatch.chdir(tmp_path)
    assert main(["train-compiler", "--tiny"]) == 0
    assert neural.WEIGHTS_PATH.read_bytes() == shipped
    written = tmp_path / "runs" / "neural_weights.pt"
    assert "saved" in capsys.readouterr().out and neural.load_model(written) is not None
    # the weights are usable as documented in --help: a registered backend for synthenv.score
    import synthenv
    from synthenv import compilers

    compilers.register("test-my-neural", lambda: neural.NeuralCompiler(written))
    try:
        assert synthenv.score(["+."], "reverse", backend="test-my-neural").rewards.shape == (1,)
    finally:
        compilers._registry.unregister("test-my-neural")


def test_train_compiler_checks_its_output_before_training(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["train-compiler", "--tiny", "--out", str(tmp_path / "file" / "w.pt")]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("synthenv train-compiler: error: --out ") and "step" not in captured.out
