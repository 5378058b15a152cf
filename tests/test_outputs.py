"""The files the tools write: only where the user asked (never over a device, a pipe or a folder), atomically (a
failed write leaves the old file), and a table keeps every cell it holds; damaged inputs are one line each."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from synthenv import storage
from synthenv.checkpoint import CheckpointError, save_checkpoint
from synthenv.checks import require_writable
from synthenv.cli import main
from synthenv.errors import UserError
from synthenv.table import Budget, Grid, cell_keys, fill, load_cells, summarize_cell
from synthenv.agents import RunResult

BUDGET = Budget(npe=64, seconds=None, seeds=1, max_len=6, backend="traditional", engine="auto", device="cpu")


def fake_cell(task: str, algo: str) -> dict:
    """A cell computed by hand (no training): one solved run."""
    return summarize_cell(task, algo, [RunResult(task, algo, 0, True, 8, 0.5, ",.", 1.0, None, 100.0)], 0.5)


@pytest.fixture
def pipe(tmp_path) -> Path:
    """A named pipe with a reader, so that a write to it would not block: refused, or the test fails."""
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    yield path
    os.close(reader)


def is_pipe(path: Path) -> bool:
    return stat.S_ISFIFO(path.stat().st_mode)


# -- destinations -------------------------------------------------------------------------------------------

def test_a_destination_that_is_not_a_regular_file_is_refused_and_left_alone(pipe):
    with pytest.raises(UserError, match="is not a regular file \\(a pipe\\)"):
        require_writable(pipe, "--json-out")
    with pytest.raises(CheckpointError, match="is not a regular file \\(a pipe\\)"):
        save_checkpoint(pipe, {"step": 1})  # an atomic rename would replace the pipe by a zip file
    with pytest.raises(UserError, match="a character device"):
        storage.write_json("/dev/null", [], "--json")
    assert is_pipe(pipe) and stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("argv", [
    ["train", "--task", "print-hello", "--algo", "random", "--npe", "64", "--log-dir", "None", "--json-out", "{pipe}"],
    ["train", "--task", "print-hello", "--algo", "random", "--npe", "64", "--log-dir", "None", "--checkpoint",
     "{pipe}"],
    ["library", "--tasks", "2", "--out", "{pipe}"],
    ["fit-prior", "--tasks", "2", "--out", "{pipe}"],
    ["pretrain", "--tasks", "2", "--steps", "1", "--out", "{pipe}"],
])
def test_the_commands_refuse_a_pipe_as_an_output_in_one_line(capsys, pipe, argv):
    assert main([arg.format(pipe=pipe) for arg in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a regular file (a pipe)" in err, err
    assert is_pipe(pipe)


def test_the_table_refuses_a_pipe_for_its_json(capsys, pipe):
    assert main(["table", "--tasks", "print-hello", "--algos", "random", "--seeds", "1", "--npe", "64",
                 "--out", str(pipe.with_suffix(""))]) == 2
    assert "not a regular file (a pipe)" in capsys.readouterr().err and is_pipe(pipe)


# -- atomic writes --------------------------------------------------------------------------------------------

FULL_DISK = r"""
import resource, signal, sys
from synthenv.table import Budget, Grid, summarize_cell
from synthenv.agents import RunResult
from synthenv.errors import UserError

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of a signal
budget = Budget(npe=64, seconds=None, seeds=1, max_len=6, backend="traditional", engine="auto", device="cpu")
grid = Grid([("print-hello", "random"), ("add", "random")], budget, sys.argv[1])
grid.resume()
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
result = RunResult("add", "random", 0, True, 8, 0.5, ",.", 1.0, None, 100.0)
try:
    grid.keep(summarize_cell("add", "random", [result], 0.5))
except UserError as error:
    print(error)
"""


def test_a_table_write_that_fails_half_way_leaves_the_old_json(tmp_path):
    """A file-size limit (as a full disk would) stops the rewrite of the JSON after a new cell: the old JSON
    stays whole and the next run resumes from it."""
    out = tmp_path / "t"
    grid = Grid([("print-hello", "random")], BUDGET, str(out))
    grid.keep(fake_cell("print-hello", "random"))
    old = (tmp_path / "t.json").read_bytes()
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(out), str(len(old) + 100)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "cannot write the table" in done.stdout and "nothing was changed" in done.stdout
    assert (tmp_path / "t.json").read_bytes() == old
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert set(load_cells(tmp_path / "t.json", BUDGET)) == {("print-hello", "random")}


# -- the table's cells ------------------------------------------------------------------------------------------

def test_a_rerun_with_fewer_tasks_keeps_the_other_cells_and_reports_the_asked_ones(tmp_path):
    out = str(tmp_path / "t")
    ran = []

    def runner(task, algo):
        ran.append((task, algo))
        return fake_cell(task, algo)

    first = Grid(cell_keys(["print-hello", "add"], ["random", "ga"]), BUDGET, out)
    fill(first, runner)
    first.write()
    again = Grid(cell_keys(["add"], ["random"]), BUDGET, out)
    fill(again, runner)
    markdown = again.write()
    assert len(ran) == 4  # the rerun trained nothing
    stored = json.loads(Path(out + ".json").read_text())
    assert {(c["task"], c["algo"]) for c in stored["cells"]} == {(t, a) for t in ("print-hello", "add")
                                                                for a in ("random", "ga")}
    assert markdown.splitlines()[0] == "| task | random |" and "print-hello" not in markdown


def test_an_empty_tasks_option_is_refused_and_writes_nothing(capsys, tmp_path):
    out = tmp_path / "t"
    Grid([("print-hello", "random")], BUDGET, str(out)).keep(fake_cell("print-hello", "random"))
    before = (tmp_path / "t.json").read_bytes()
    for empty in (["--tasks"], ["--algos"]):
        assert main(["table", *empty, "--out", str(out)]) == 2
        assert "is empty" in capsys.readouterr().err
    assert (tmp_path / "t.json").read_bytes() == before


def test_every_column_is_checked_before_the_first_cell(capsys, tmp_path):
    argv = ["table", "--tasks", "print-hello", "--algos", "random", "ppo:policy=missing.pt", "--seeds", "1",
            "--npe", "64", "--out", str(tmp_path / "t")]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "missing.pt" in captured.err and captured.err.count("\n") == 1
    assert not (tmp_path / "t.json").exists() and "solved" not in captured.out


@pytest.mark.parametrize(("text", "words"), [
    ("[]", "a JSON list"),
    ('{"cells": {}}', "'cells' is a dict"),
    ('{"cells": [3]}', "cell 0 is a int"),
    ('{"cells": [{"algo": "random", "wall_s": 1, "results": []}]}', "cell 0 has no valid 'task' (missing)"),
    ('{"cells": [{"task": "add", "algo": "random", "results": []}]}', "cell 0 has no valid 'wall_s' (missing)"),
    ('{"cells": [{"task": "add", "algo": "random", "wall_s": "1", "results": []}]}', "'wall_s' (a str)"),
    ("[" * 100_000 + "]" * 100_000, "nests too deeply"),
    ("{ not json", "is not a table's JSON"),
])
def test_a_damaged_table_json_is_one_line_naming_the_file(tmp_path, text, words):
    path = tmp_path / "t.json"
    path.write_text(text)
    document = json.loads(text) if text.startswith("{\"") else None
    if isinstance(document, dict):
        path.write_text(json.dumps({**dataclasses.asdict(BUDGET), **document}))
    with pytest.raises(UserError) as caught:
        load_cells(path, BUDGET)
    message = str(caught.value)
    assert str(path) in message and words in message and "\n" not in message, message


def test_a_stored_result_of_the_wrong_kind_is_named(tmp_path):
    cell = fake_cell("add", "random")
    cell["results"][0]["npe"] = "eight"
    path = tmp_path / "t.json"
    path.write_text(json.dumps({**dataclasses.asdict(BUDGET), "cells": [cell]}))
    with pytest.raises(UserError, match="result 0: 'npe' is a str"):
        load_cells(path, BUDGET)


# -- the single env -------------------------------------------------------------------------------------------

def test_the_single_env_refuses_steps_after_close_and_bools_as_tokens():
    from synthenv.env import SynthEnv

    env = SynthEnv("reverse", max_len=5)
    env.reset(seed=0)
    for token in (True, False):
        with pytest.raises(ValueError, match="a token id in \\[0, 9\\)"):
            env.step(token)
    env.step(1)
    env.close()
    for call in (lambda: env.step(1), lambda: env.reset(seed=0), env.action_masks):
        with pytest.raises(RuntimeError, match="closed"):
            call()


def test_library_from_runs_refuses_a_solution_that_is_not_bf(tmp_path):
    from synthenv.agents.run.data import FILE_NAME, run_solutions, save_run_data
    from synthenv.tasks import get

    run = tmp_path / "runs" / "one"
    run.mkdir(parents=True)
    save_run_data(run / FILE_NAME, get("print-hello"), None, 0, "+\n+")
    with pytest.raises(CheckpointError, match="'\\\\n', which is not a BF command"):
        run_solutions(tmp_path / "runs")
    assert torch.load(run / FILE_NAME, weights_only=True)["solution"] == "+\n+"
