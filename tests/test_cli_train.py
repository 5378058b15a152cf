"""``synthenv train`` and ``synthenv table`` end to end on tiny budgets (smoke tests), and the CLI
generated from the algorithm configs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from synthenv import agents
from synthenv.cli import main
from synthenv.cli.train import TrainCommand, command_type

ALGOS = agents.names()
TINY = {"islands": ["--batch-size", "32", "--islands", "2", "--island-size", "4", "--queue-size", "4", "--no-elitist"],
        "ppo": ["--batch-size", "32", "--islands", "2", "--island-size", "4", "--queue-size", "4",
                "--update-every", "1", "--update-batch", "8", "--no-elitist", "--variants-per-parent", "1"],
        "mutation": ["--batch-size", "8", "--elite", "4"], "ga": ["--batch-size", "10"]}


def _event_tags(run_dir: Path) -> tuple[set[str], set[str]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir))
    accumulator.Reload()
    tags = accumulator.Tags()
    return set(tags["scalars"]), set(tags["tensors"])


@pytest.mark.parametrize("algo", ALGOS)
def test_every_algorithm_trains_through_the_cli_and_logs_to_tensorboard(tmp_path, capsys, algo):
    argv = ["train", "--task", "reverse-tune", "--algo", algo, "--npe", "64", "--max-len", "8", "--seed", "3",
            "--log-dir", str(tmp_path), "--log-every", "1", "--no-progress", "--json-out", str(tmp_path / "out.json"),
            *TINY.get(algo, ["--batch-size", "8"])]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "seed 3:" in out and f"reverse-tune / {algo}: solved" in out and "programs/s (agent included)" in out
    runs = list(tmp_path.glob(f"reverse-tune__{algo}__3__*"))
    assert len(runs) == 1 and list(runs[0].glob("events.out.tfevents*"))
    scalars, tensors = _event_tags(runs[0])
    assert {"charts/episodic_return", "charts/success_rate", "charts/programs_per_s", "programs/step_limit_rate",
            "programs/mean_length", "hparams/solved", "hparams/npe"} <= scalars
    assert {"programs/best_program/text_summary", "hyperparameters/text_summary"} <= tensors
    if algo == "ppo":
        assert {"losses/policy_loss", "losses/queue_loss", "losses/entropy", "losses/approx_kl",
                "losses/old_approx_kl", "losses/clipfrac", "losses/grad_norm", "charts/learning_rate",
                "charts/improve_rate_policy", "charts/improve_rate_random", "programs/queue_best"} <= scalars
    if algo == "islands":  # no edit policy: nothing learns
        assert not {tag for tag in scalars if tag.startswith("losses/") or tag.endswith("_policy")}
        assert "programs/queue_best" in scalars
    if algo in ("pqt", "pg-pqt", "reinforce"):
        assert {"losses/explained_variance", "charts/learning_rate", "losses/grad_norm"} <= scalars
    (result,) = json.loads((tmp_path / "out.json").read_text())
    assert result["seed"] == 3 and (result["solved"] or result["npe"] <= 64) and result["seconds"] > 0


def test_hparams_reach_the_hparams_dashboard(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert main(["train", "--task", "reverse-tune", "--algo", "random", "--npe", "16", "--batch-size", "8",
                 "--max-len", "6", "--log-dir", str(tmp_path), "--no-progress"]) == 0
    (run,) = list(tmp_path.glob("reverse-tune__random__0__*"))
    accumulator = EventAccumulator(str(run))
    accumulator.Reload()
    plugins = accumulator.PluginTagToContent("hparams")
    assert "_hparams_/experiment" in plugins and "_hparams_/session_start_info" in plugins
    assert "_hparams_/session_end_info" in plugins


def test_checkpoint_and_resume_through_the_cli(tmp_path, capsys):
    common = ["train", "--task", "reverse-tune", "--algo", "ppo", "--max-len", "6", *TINY["ppo"],
              "--log-dir", "None", "--log-every", "1", "--no-progress", "--checkpoint", str(tmp_path / "c.pt"),
              "--checkpoint-every", "1"]
    assert main(common + ["--npe", "64"]) == 0
    assert (tmp_path / "c.pt").exists()
    assert main(common + ["--npe", "128", "--resume", str(tmp_path / "c.pt"), "--json-out",
                          str(tmp_path / "r.json")]) == 0
    result = json.loads((tmp_path / "r.json").read_text())[0]
    assert result["solved"] or result["npe"] == 128  # continued from 64 to 128


def test_a_task_file_trains_from_the_shell_and_a_malformed_one_names_its_field(tmp_path, capsys):
    task = tmp_path / "double.json"
    task.write_text(json.dumps({"name": "dot-file", "base": 2, "cases": [[[], [0]]]}))
    assert main(["train", "--task", str(task), "--algo", "random", "--batch-size", "64", "--max-len", "1",
                 "--log-dir", "None", "--no-progress", "--json-out", str(tmp_path / "out.json")]) == 0
    (result,) = json.loads((tmp_path / "out.json").read_text())
    assert result["task"] == "dot-file" and result["solved"] and result["best_program"] == "."
    task.write_text(json.dumps({"name": "bad", "cases": [[[1], 2]]}))
    capsys.readouterr()
    assert main(["train", "--task", str(task), "--no-progress", "--log-dir", "None"]) == 2
    err = capsys.readouterr().err
    assert "field 'cases', case 0" in err and err.count("\n") == 1


def test_seconds_bound_the_run_and_the_summary_says_so(tmp_path, capsys):
    assert main(["train", "--task", "reverse", "--algo", "random", "--seconds", "0.5", "--max-len", "20",
                 "--log-dir", "None", "--no-progress", "--log-every", "1", "--json-out", str(tmp_path / "o.json")]) == 0
    (result,) = json.loads((tmp_path / "o.json").read_text())
    assert not result["solved"] and result["seconds"] >= 0.5  # it ran until the time budget was spent,
    assert result["npe"] < agents.TrainConfig().npe  # which bound before the NPE budget
    out = capsys.readouterr().out
    assert f"seed 0: not solved in {result['npe']:,} programs" in out
    assert "reverse / random: solved 0/1, mean NPE to solve -;" in out


def _fields(config, prefix=""):
    """Every leaf field of a (nested) config dataclass, as CLI flag names."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            yield from _fields(value, f"{prefix}{f.name}.")
        else:
            yield f"--{prefix}{f.name}".replace("_", "-"), value


@pytest.mark.parametrize("algo", ALGOS)
def test_every_config_field_is_an_option_of_its_own(algo, capsys):
    """The CLI is generated from the configs: each field (nested ones with a prefix) is settable."""
    with pytest.raises(SystemExit):
        main(["train", "--algo", algo, "--help"])
    help_text = capsys.readouterr().out
    for flag, _ in _fields(agents.default_config(algo)):
        assert flag in help_text, flag
    # and a field set from the shell reaches the config
    flag, value = next((f, v) for f, v in _fields(agents.default_config(algo)) if type(v) is int)
    import tyro

    command = tyro.cli(command_type(algo), args=["--algo", algo, flag, str(value * 2)])
    assert command.config != agents.default_config(algo) and command.train_config().algo_config == command.config


def test_one_set_of_defaults_and_one_name_per_concept():
    assert TrainCommand().job == agents.TrainConfig()  # the command's job options are TrainConfig's own fields
    for algo in ALGOS:
        names = {f.name for f in dataclasses.fields(agents.default_config(algo))}
        assert not names & {"ent_coef", "queue_coef", "population", "lr"}, algo  # entropy_coef, queue_weight...


def test_the_quick_start_default_is_a_task_that_shows_the_search_at_work():
    """README's quick start trains on reverse: a first generation of random programs does not solve it."""
    assert agents.TrainConfig().task == "reverse" and agents.TrainConfig().algo == "islands"


def test_a_solved_run_reports_its_program_and_a_minimal_equivalent(tmp_path, capsys):
    """The summary, the JSON and TensorBoard show the solving program and, beside it, a minimal equivalent
    that the reference interpreter confirms: no command, loop or bracket pair of it can go."""
    from synthenv import reference, tasks

    assert main(["train", "--task", "echo", "--no-progress", "--log-dir", str(tmp_path / "logs"), "--json-out",
                 str(tmp_path / "out.json")]) == 0
    (result,) = json.loads((tmp_path / "out.json").read_text())
    assert (result["task"], result["algo"], result["seed"], result["solved"]) == ("echo", "islands", 0, True)
    task = tasks.get("echo")
    solves = lambda code: reference.score_program(code, task.cases, task.base, task.max_steps).solved  # noqa: E731
    best, minimal = result["best_program"], result["minimal_program"]
    assert solves(best) and solves(minimal) and len(minimal) <= len(best)
    assert not any(solves(variant) for variant in tasks.minimize.deletions(minimal))
    out = capsys.readouterr().out
    assert f"{best!r}" in out and (minimal == best or f"(minimal: {minimal!r})" in out)
    (run,) = list((tmp_path / "logs").glob("echo__islands__0__*"))
    assert "programs/minimal_program/text_summary" in _event_tags(run)[1]


def test_training_on_the_hybrid_backend_logs_the_audit(tmp_path, capsys):
    """The hybrid's miscompile bound reaches TensorBoard during training (verify/*), read as typed stats."""
    assert main(["train", "--task", "reverse-tune", "--algo", "random", "--npe", "64", "--batch-size", "32",
                 "--max-len", "8", "--backend", "hybrid", "--log-dir", str(tmp_path), "--log-every", "1",
                 "--no-progress"]) == 0
    (run,) = list(tmp_path.glob("reverse-tune__random__0__*"))
    scalars, _ = _event_tags(run)
    assert {"verify/miscompile_bound", "verify/audit_rate", "verify/sampled"} <= scalars
