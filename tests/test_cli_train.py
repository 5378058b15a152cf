"""``synthenv train`` and ``synthenv table`` end to end on tiny budgets (smoke tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synthenv.cli import main
from synthenv.cli.train import TrainCommand, algorithm_config

ALGOS = ["ppo", "pqt", "pg-pqt", "reinforce", "ga", "random"]


def _event_tags(run_dir: Path) -> tuple[set[str], set[str]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir))
    accumulator.Reload()
    tags = accumulator.Tags()
    return set(tags["scalars"]), set(tags["tensors"])


@pytest.mark.parametrize("algo", ALGOS)
def test_every_algorithm_trains_through_the_cli_and_logs_to_tensorboard(tmp_path, capsys, algo):
    batch = "10" if algo == "ga" else "8"
    argv = ["train", "--task", "reverse-tune", "--algo", algo, "--npe", "24", "--max-len", "8", "--batch-size",
            batch, "--seed", "3", "--log-dir", str(tmp_path), "--log-every", "1", "--no-progress",
            "--json-out", str(tmp_path / "out.json")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "seed 3:" in out and "reverse-tune / " + algo in out
    runs = list(tmp_path.glob(f"reverse-tune__{algo}__3__*"))
    assert len(runs) == 1 and list(runs[0].glob("events.out.tfevents*"))
    scalars, tensors = _event_tags(runs[0])
    assert {"charts/episodic_return", "charts/success_rate", "charts/programs_per_s", "programs/step_limit_rate",
            "programs/mean_length"} <= scalars
    assert {"programs/best_program/text_summary", "hyperparameters/text_summary"} <= tensors
    if algo == "ppo":
        assert {"losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/approx_kl",
                "losses/clipfrac"} <= scalars
    results = json.loads((tmp_path / "out.json").read_text())
    expected_npe = 10 + 8 if algo == "ga" else 24  # GA: 10 new, then 8 new + 2 hall-of-fame replays
    assert results[0]["seed"] == 3 and (results[0]["solved"] or results[0]["npe"] == expected_npe)


def test_checkpoint_and_resume_through_the_cli(tmp_path, capsys):
    common = ["train", "--task", "reverse-tune", "--algo", "ppo", "--max-len", "6", "--batch-size", "8",
              "--log-dir", "None", "--log-every", "1", "--no-progress", "--checkpoint", str(tmp_path / "c.pt"),
              "--checkpoint-every", "1"]
    assert main(common + ["--npe", "16"]) == 0
    assert (tmp_path / "c.pt").exists()
    assert main(common + ["--npe", "32", "--resume", str(tmp_path / "c.pt"), "--json-out",
                          str(tmp_path / "r.json")]) == 0
    result = json.loads((tmp_path / "r.json").read_text())[0]
    assert result["solved"] or result["npe"] == 32  # continued from 16 to 32


def test_table_writes_markdown_and_json_and_reuses_cells(tmp_path, capsys):
    out = str(tmp_path / "table")
    argv = ["table", "--tasks", "reverse-tune", "print-hello", "--algos", "random", "ga", "--seeds", "2",
            "--npe", "100", "--max-len", "6", "--out", out]
    assert main(argv) == 0
    document = json.loads(Path(out + ".json").read_text())
    assert len(document["cells"]) == 4 and all(c["runs"] == 2 for c in document["cells"])
    markdown = Path(out + ".md").read_text()
    assert markdown.splitlines()[0] == "| task | random | ga |"
    assert "| reverse-tune | " in markdown and "programs/s" in markdown
    capsys.readouterr()
    assert main(argv) == 0  # every cell is reused: nothing is trained again
    assert "solved" not in capsys.readouterr().out.split("| task |")[0]


def test_options_that_do_not_apply_are_refused():
    with pytest.raises(ValueError, match="--learning-rate does not apply to algo 'ga'"):
        algorithm_config("ga", TrainCommand(algo="ga", learning_rate=0.1))
    with pytest.raises(ValueError, match="--policy does not apply"):
        algorithm_config("random", TrainCommand(algo="random", policy="transformer"))
    config = algorithm_config("pqt", TrainCommand(algo="pqt", queue_weight=7.0, suppress_eos=False))
    assert config.queue_weight == 7.0 and config.allow_eos
    assert algorithm_config("ppo", TrainCommand(policy="transformer")).policy.kind == "transformer"


def test_an_unknown_task_names_the_valid_ones(capsys):
    assert main(["train", "--task", "reverce", "--no-progress", "--log-dir", "None"]) == 2  # a user error: exit code 2
    assert "Did you mean 'reverse'" in capsys.readouterr().err


def test_the_quick_start_default_solves_its_task(tmp_path, capsys):
    """README's quick start, ``synthenv train`` with its defaults (PPO, seed 0, starter task echo)."""
    assert main(["train", "--no-progress", "--log-dir", "None", "--json-out", str(tmp_path / "out.json")]) == 0
    (result,) = json.loads((tmp_path / "out.json").read_text())
    assert (result["task"], result["algo"], result["seed"]) == ("echo", "ppo", 0)
    assert result["solved"] and result["npe"] <= TrainCommand().npe
    from synthenv import reference, tasks

    task = tasks.get("echo")
    assert reference.score_program(result["best_program"], task.cases, task.base, task.max_steps).solved
