"""``synthenv table``: the grid (cells, resume from JSON), its statistics and markdown, the algorithm
specs of its columns, and its picture (the share of runs solved within t)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import matplotlib.image
import pytest

from synthenv import agents
from synthenv.agents import RunResult
from synthenv.agents.registry import parse_algo
from synthenv.cli import main
from synthenv.cli.table import TableCommand
from synthenv.errors import UserError
from synthenv.table import (Budget, Grid, caption, cell_hardware, cell_keys, censored_median, fill, load_cells,
                            plot_figure, render_markdown, solve_curves, summarize_cell, write_plot)

BUDGET = Budget(npe=64, seconds=None, seeds=2, max_len=6, backend="traditional", engine="auto", device="cpu")
MACHINE = {"cpu": "AMD EPYC 7B13", "cores": 2, "gpu": None}


def result(task: str, algo: str, seed: int, solved: bool, npe: int, seconds: float, reward: float = 1.0):
    """A ``RunResult`` made by hand."""
    return RunResult(task, algo, seed, solved, npe, seconds, ",." if solved else "", reward if solved else reward / 2,
                     None, 1000.0)


def cell(task: str, algo: str, *runs: tuple[bool, int, float]) -> dict:
    """A cell summarised from hand-made runs ``(solved, npe, seconds)``, seeds 0, 1, ..."""
    return summarize_cell(task, algo, [result(task, algo, i, *run) for i, run in enumerate(runs)], 1.5, MACHINE)


def document(cells: list[dict], budget: Budget = BUDGET) -> dict:
    return {**dataclasses.asdict(budget), "tasks": list(dict.fromkeys(c["task"] for c in cells)),
            "algos": list(dict.fromkeys(c["algo"] for c in cells)), "cells": cells}


# -- the command, end to end on tiny budgets -------------------------------------------------------------

def test_table_writes_markdown_and_json_and_reuses_cells(tmp_path, capsys):
    out = str(tmp_path / "table")
    argv = ["table", "--tasks", "reverse-tune", "print-hello", "--algos", "random", "mutation:batch_size=8,elite=2",
            "--seeds", "2", "--npe", "64", "--max-len", "6", "--out", out, "--plot", str(tmp_path / "table.png")]
    assert main(argv) == 0
    document = json.loads(Path(out + ".json").read_text())
    assert len(document["cells"]) == 4 and all(c["runs"] == 2 for c in document["cells"])
    assert all(c["hardware"]["cores"] >= 1 and c["hardware"]["gpu"] is None for c in document["cells"])
    markdown = Path(out + ".md").read_text()
    assert markdown.splitlines()[0] == "| task | random | mutation:batch_size=8,elite=2 |"
    assert "| reverse-tune | " in markdown and "programs/s" in markdown and "tasks solved" in markdown
    assert matplotlib.image.imread(tmp_path / "table.png").ndim == 3
    capsys.readouterr()
    (tmp_path / "table.png").unlink()
    assert main(argv) == 0  # every cell is reused: nothing is trained again, the picture is drawn again
    assert "solved," not in capsys.readouterr().out.split("| task |")[0]
    assert (tmp_path / "table.png").is_file()
    assert json.loads(Path(out + ".json").read_text()) == document


def test_a_table_of_an_older_version_resumes_and_redraws_without_training(tmp_path, capsys):
    """A JSON written before the summaries had medians or hardware: every cell is reused (its summary
    computed again from the per-seed results) and the picture drawn from it; nothing trains."""
    out = tmp_path / "old"
    fresh = [cell("print-hello", algo, (True, 8, 0.2), (False, 64, 0.5)) for algo in ("random", "ga")]
    old_cells = [{key: c[key] for key in ("task", "algo", "runs", "successes", "mean_npe", "programs_per_s",
                                          "wall_s", "results")} for c in fresh]
    Path(f"{out}.json").write_text(json.dumps(document(old_cells)))
    argv = ["table", "--tasks", "print-hello", "--algos", "random", "ga", "--seeds", "2", "--npe", "64",
            "--max-len", "6", "--out", str(out), "--plot", str(tmp_path / "old.png")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "solved," not in printed  # no cell line: none was computed
    written = json.loads(Path(f"{out}.json").read_text())
    assert [c["median_npe"] for c in written["cells"]] == [None, None]  # 1 of 2 solved: no censored median
    assert [c["median_npe_solved"] for c in written["cells"]] == [8, 8]
    assert "| print-hello | 1/2 | 1/2 |" in printed
    assert matplotlib.image.imread(tmp_path / "old.png").shape[2] in (3, 4)
    assert f"not recorded for 2 of 2 cells (drawn on {cell_hardware('cpu')['cpu']}, " in caption(written)


def test_a_plot_that_is_not_a_png_is_one_error_before_any_cell_runs(tmp_path, capsys):
    code = main(["table", "--tasks", "print-hello", "--algos", "random", "--out", str(tmp_path / "t"),
                 "--plot", str(tmp_path / "t.svg")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "synthenv table: error: --plot" in err and "ending in .png" in err
    assert not (tmp_path / "t.json").exists()


def test_the_default_columns_are_the_registered_algorithms():
    assert TableCommand().algos == tuple(agents.names())


# -- algorithm specs --------------------------------------------------------------------------------------

def test_algorithm_specs_change_config_fields_and_refuse_unknown_ones():
    assert parse_algo("ppo:policy_fraction=0,restarts=False")[1].restarts is False
    assert parse_algo("mutation:elite=3")[1].elite == 3
    with pytest.raises(ValueError, match="field=value with a field of MutationConfig"):
        parse_algo("mutation:elit=3")
    with pytest.raises(ValueError, match="restarts takes True or False"):
        parse_algo("ppo:restarts=maybe")
    with pytest.raises(ValueError, match="Did you mean 'ppo'"):
        parse_algo("ppp")
    with pytest.raises(ValueError, match=r"IslandsConfig: \[.*\]; policy_fraction is a field of ppo$"):
        parse_algo("islands:policy_fraction=0.25")  # the default has no edit policy: say which agent has one


@pytest.mark.parametrize(("spec", "words"), [
    ("mutation:elite", "'elite' must be field=value"),
    ("mutation:elite=3,", "'' must be field=value"),
    ("mutation:elite=three", "elite takes an int, got 'three'"),
    ("mutation:elite=0", "elite must be a positive int, got 0"),  # the config's own check
    ("nope:elite=3", "unknown algorithm 'nope'"),
])
def test_a_bad_spec_names_the_spec_and_the_fix(spec, words):
    with pytest.raises(ValueError, match=words):
        parse_algo(spec)


def test_a_spec_without_changes_is_the_default_config():
    assert parse_algo("ga") == ("ga", agents.default_config("ga"))


def test_a_bad_spec_on_the_command_line_is_one_line(tmp_path, capsys):
    code = main(["table", "--tasks", "print-hello", "--algos", "ga:batch_size=x", "--out", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "batch_size takes an int, got 'x'" in err


# -- statistics and markdown ------------------------------------------------------------------------------

@pytest.mark.parametrize(("values", "expected"), [
    ([], None), ([None], None), ([5.0], 5.0), ([3.0, 1.0, 2.0], 2.0), ([4.0, 2.0], 3.0),
    ([3.0, None, 1.0], 3.0),          # the unsolved run is the longest: the middle is 3
    ([1.0, None], None),              # half solved: the upper middle is unsolved
    ([1.0, 2.0, None, None], None),
    ([1.0, 2.0, 4.0, None], 3.0),     # middle pair 2 and 4
    ([None, 7.0, None], None),
])
def test_censored_median(values, expected):
    assert censored_median(values) == expected


def test_a_cell_summary_counts_unsolved_runs_as_longest():
    summary = cell("add", "ga", (True, 100, 2.0), (False, 500, 9.0), (True, 300, 4.0))
    assert summary["runs"] == 3 and summary["successes"] == 2
    assert summary["median_npe"] == 300 and summary["median_seconds"] == 4.0  # 100, 300, unsolved
    assert summary["median_npe_solved"] == 200 and summary["mean_npe"] == 200
    assert summary["mean_best_reward"] == pytest.approx((1.0 + 0.5 + 1.0) / 3)
    assert summary["hardware"] == MACHINE and [r["seed"] for r in summary["results"]] == [0, 1, 2]


def test_markdown_has_a_row_per_task_a_column_per_algorithm_and_totals():
    cells = [cell("add", "ga", (True, 100, 2.0), (True, 300, 4.0)), cell("add", "random", (False, 64, 1.0)),
             cell("echo", "ga", (True, 1234, 0.5), (False, 64, 1.0))]
    lines = render_markdown(document(cells)).splitlines()
    assert lines[:4] == ["| task | ga | random |", "|---|---|---|", "| add | 2/2 (3.0 s, 200) | 0/1 |",
                         "| echo | 1/2 |  |"]
    assert lines[4:6] == ["| tasks solved (any seed) | 2 | 0 |", "| programs/s (mean) | 1,000 | 1,000 |"]
    assert lines[7] == "Mean best reward (1.0 = solved):"
    assert lines[-2:] == ["| add | 1.000 | 0.500 |", "| echo | 0.750 |  |"]


# -- the grid: resume and filling ---------------------------------------------------------------------------

def fake_runner(calls: list):
    """A cell runner that trains nothing: seed 0 solves at NPE 8, seed 1 does not."""
    def run_cell(task: str, spec: str) -> dict:
        calls.append((task, spec))
        return cell(task, spec, (True, 8, 0.25), (False, 64, 0.5))
    return run_cell


def test_fill_runs_only_the_cells_the_json_lacks_and_keeps_the_json_up_to_date(tmp_path, capsys):
    keys = cell_keys(["print-hello", "add"], ["random", "ga"])
    assert keys == [("print-hello", "random"), ("print-hello", "ga"), ("add", "random"), ("add", "ga")]
    calls = []
    fill(Grid(keys[:2], BUDGET, str(tmp_path / "t")), fake_runner(calls))
    assert calls == keys[:2] and len(json.loads((tmp_path / "t.json").read_text())["cells"]) == 2
    calls.clear()
    fill(Grid(keys, BUDGET, str(tmp_path / "t")), fake_runner(calls))
    assert calls == keys[2:]  # the two in the JSON are reused
    written = json.loads((tmp_path / "t.json").read_text())
    assert [(c["task"], c["algo"]) for c in written["cells"]] == keys and written["tasks"] == ["print-hello", "add"]
    calls.clear()
    fill(Grid(keys, BUDGET, str(tmp_path / "t")), fake_runner(calls), resume=False)  # --fresh
    assert calls == keys


def test_unreadable_cells_run_again_and_a_table_of_another_budget_is_refused(tmp_path, capsys):
    path = tmp_path / "t.json"
    good, bad = cell("add", "ga", (True, 8, 0.1)), cell("add", "random", (True, 8, 0.1))
    bad["results"][0].pop("seconds")
    path.write_text(json.dumps(document([good, bad])))
    assert list(load_cells(path, BUDGET)) == [("add", "ga")]
    assert "1 cell(s) lack fields of the per-seed results" in capsys.readouterr().out
    with pytest.raises(UserError, match=r"another budget \(npe 64 in the file, 128 now\): give the options"):
        load_cells(path, dataclasses.replace(BUDGET, npe=128))
    with pytest.raises(UserError, match="seconds None in the file, 5.0 now; seeds 2 in the file, 3 now"):
        load_cells(path, dataclasses.replace(BUDGET, seeds=3, seconds=5.0))
    path.write_text("{ not json")
    with pytest.raises(UserError, match="is not a table's JSON"):
        load_cells(path, BUDGET)


def test_first_seed_runs_fresh_seeds_and_a_table_of_other_seeds_is_refused(tmp_path, capsys):
    """--first-seed 3 runs seeds 3 and 4; the same table from seed 0 would mix other runs into it and is refused;
    a JSON written before first_seed existed is a table from seed 0 and resumes."""
    out = tmp_path / "t"
    argv = ["table", "--tasks", "print-hello", "--algos", "random", "--seeds", "2", "--npe", "64", "--max-len", "6",
            "--out", str(out)]
    assert main(argv + ["--first-seed", "3"]) == 0
    written = json.loads(Path(f"{out}.json").read_text())
    assert written["first_seed"] == 3 and [r["seed"] for r in written["cells"][0]["results"]] == [3, 4]
    capsys.readouterr()
    assert main(argv) == 2 and "first_seed 3 in the file, 0 now" in capsys.readouterr().err
    older = document([cell("print-hello", "random", (True, 8, 0.2), (False, 64, 0.5))])
    del older["first_seed"]
    Path(f"{out}.json").write_text(json.dumps(older))
    assert list(load_cells(Path(f"{out}.json"), BUDGET)) == [("print-hello", "random")]
    with pytest.raises(UserError, match="first_seed 0 in the file, 3 now"):
        load_cells(Path(f"{out}.json"), dataclasses.replace(BUDGET, first_seed=3))
    with pytest.raises(ValueError, match="first_seed must be an int in"):
        dataclasses.replace(BUDGET, first_seed=-1)


def test_a_table_of_another_budget_is_kept_unless_fresh(tmp_path, capsys):
    """Running or redrawing a table with other options would overwrite the cells already computed."""
    out = tmp_path / "t"
    kept = document([cell("print-hello", "random", (True, 8, 0.2), (False, 64, 0.5))])
    Path(f"{out}.json").write_text(json.dumps(kept))
    argv = ["table", "--tasks", "print-hello", "--algos", "random", "--seeds", "2", "--max-len", "6", "--out", str(out)]
    assert main(argv + ["--npe", "32"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "npe 64 in the file, 32 now" in err and "--fresh to replace it" in err
    assert json.loads(Path(f"{out}.json").read_text()) == kept
    assert main(argv + ["--npe", "32", "--fresh"]) == 0
    assert json.loads(Path(f"{out}.json").read_text())["npe"] == 32


def test_an_unknown_task_or_bad_seed_count_is_refused_before_any_cell():
    with pytest.raises(ValueError, match="unknown task spec 'nope'"):
        cell_keys(["nope"], ["ga"])
    with pytest.raises(ValueError, match="seeds must be a positive int, got 0"):
        dataclasses.replace(BUDGET, seeds=0)


# -- the picture ----------------------------------------------------------------------------------------------

def curves_document() -> dict:
    """Two algorithms on two tasks, 2 seeds each: ga solves 3 of 4 runs, random 1."""
    return document([cell("add", "ga", (True, 100, 2.0), (True, 400, 8.0)),
                     cell("echo", "ga", (True, 200, 1.0), (False, 1000, 30.0)),
                     cell("add", "random", (False, 1000, 30.0), (False, 1000, 30.0)),
                     cell("echo", "random", (True, 900, 20.0), (False, 1000, 30.0))],
                    dataclasses.replace(BUDGET, seconds=30.0, npe=1000))


def test_the_solved_within_curves_are_the_share_of_runs_solved_by_t():
    by_time = {curve.algo: curve for curve in solve_curves(curves_document(), "seconds")}
    ga, random = by_time["ga"], by_time["random"]
    assert [ga.at(t) for t in (0.5, 1.0, 1.5, 2.0, 7.9, 8.0, 30.0)] == [0, 0.25, 0.25, 0.5, 0.5, 0.75, 0.75]
    assert [random.at(t) for t in (19.9, 20.0, 1e9)] == [0, 0.25, 0.25]
    assert (ga.runs, ga.tasks, ga.tasks_solved, random.tasks_solved) == (4, 2, 2, 1)
    assert ga.label == "ga (3/4 runs, 2/2 tasks by any seed)"
    assert ga.steps(0.1, 30.0) == ([0.1, 1.0, 2.0, 8.0, 30.0], [0.0, 0.25, 0.5, 0.75, 0.75])
    by_npe = {curve.algo: curve for curve in solve_curves(curves_document(), "npe")}
    assert [by_npe["ga"].at(n) for n in (99, 100, 200, 399, 400)] == [0, 0.25, 0.5, 0.5, 0.75]
    assert by_npe["random"].solved_at == (900.0,)


def test_a_column_without_cells_has_no_curve_and_a_bad_measure_is_refused():
    doc = dict(curves_document(), algos=["mutation", "ga", "random"])
    assert [curve.algo for curve in solve_curves(doc, "npe")] == ["ga", "random"]
    with pytest.raises(ValueError, match="measure must be one of"):
        solve_curves(doc, "steps")


def test_the_picture_is_a_png_with_two_panels_and_the_hardware_in_its_caption(tmp_path):
    doc = curves_document()
    doc["cells"][0]["hardware"] = {"cpu": "Intel Xeon Platinum 8480C", "cores": 16, "gpu": "NVIDIA H200"}
    text = caption(doc)
    assert "AMD EPYC 7B13, 2 cores" in text and "Intel Xeon Platinum 8480C, 16 cores, GPU NVIDIA H200" in text
    assert "Share of (task, seed) runs solved within t: 2 tasks x 2 seeds" in text
    assert "30 s per cell (its 2 seeds as one job), 1,000 programs per run" in text
    figure = plot_figure(doc)
    assert [t.get_text() for t in figure.texts] == [text]
    left, right = figure.axes
    assert left.get_xscale() == right.get_xscale() == "log"
    assert [t.get_text() for t in left.get_legend().get_texts()] == [
        "budget (30 s per cell)", "ga (3/4 runs, 2/2 tasks by any seed)", "random (1/4 runs, 1/2 tasks by any seed)"]
    write_plot(doc, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _ = matplotlib.image.imread(tmp_path / "curves.png").shape
    assert width > height > 100
