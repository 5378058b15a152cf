"""User errors at the command line are one line on stderr and exit code 2; bugs keep their traceback.

The train/table cases use the flags of ``synthenv train``/``table`` that every version keeps.
An error may come from tyro while it parses the arguments, from a config that checks its values
or from synthenv while the command runs: each is one line, ``synthenv <command>: error: ...``.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch

from synthenv.checkpoint import save_checkpoint
from synthenv.cli import main
from synthenv.cli.tasks import TasksCommand

TINY = {"--log-dir": "None", "--npe": "16", "--batch-size": "8", "--max-len": "8", "--log-every": "1",
        "--algo": "random"}
"""A run that ends in a second, for the options a case does not set."""


def run_main(capsys, argv: list[str]) -> tuple[int, str]:
    """(exit code, stderr) of ``synthenv argv``, whether tyro or synthenv reported the error."""
    try:
        code = main(argv)
    except SystemExit as exit_info:  # tyro's own box, under SYNTHENV_TRACEBACK=1
        code = exit_info.code
    return code, capsys.readouterr().err


def assert_user_error(code: int, err: str, command: str, *words: str) -> None:
    """Exit code 2 and one line, ``synthenv <command>: error: ...``, that has ``words``."""
    assert code == 2, err
    prefix = f"synthenv {command}: error: " if command else "synthenv: error: "
    assert err.startswith(prefix) and err.count("\n") == 1, err
    for word in words:
        assert word in err, (word, err)


def train_args(**changes: str) -> list[str]:
    args = {**TINY, **changes}
    return ["train", "--no-progress"] + [item for pair in args.items() for item in pair]


@pytest.mark.parametrize(("option", "value", "words"), [
    ("--task", "nope", ["unknown task 'nope'", "Valid tasks:"]),
    ("--task", "revrse", ["Did you mean 'reverse'"]),
    ("--backend", "nope", ["unknown backend 'nope'", "traditional"]),
    ("--npe", "0", ["npe", "got 0"]),
    ("--npe", "-1", ["npe", "got -1"]),
    ("--num-seeds", "0", ["num_seeds", "got 0"]),
    ("--batch-size", "0", ["batch_size", "got 0"]),
    ("--max-len", "0", ["max_len", "got 0"]),
    ("--max-len", "100000", ["max_len", "100000"]),
    ("--seed", "-5", ["seed", "-5"]),
    ("--log-every", "0", ["log_every", "got 0"]),
    ("--npe", "lots", ["Error parsing --npe", "'lots'", "synthenv train --help"]),  # tyro: not an int
    ("--seed", "abc", ["Error parsing --seed", "'abc'"]),
])
def test_train_option_errors(capsys, option, value, words):
    assert_user_error(*run_main(capsys, train_args(**{option: value})), "train", *words)


@pytest.mark.parametrize(("argv", "command", "words"), [
    (["table", "--first-seed", "abc"], "table", ["--first-seed", "'abc'", "(see synthenv table --help)"]),
    (["table", "--bogus", "3"], "table", ["Unrecognized options: --bogus"]),
    (["pretrain", "--editor.hidden", "x"], "pretrain", ["--editor.hidden", "'x'"]),
    (["tabel"], "", ["unknown command 'tabel'", "Did you mean 'table'", "Valid commands:"]),
    ([], "", ["no command given", "train", "synthenv --help"]),
    (["--version"], "", ["Unrecognized options: --version", "(see synthenv --help)"]),
    (["train", "--learning-rate", "0.1"], "train",  # the default agent has no edit policy: say which agents have one
     ["options: --learning-rate", "(see synthenv train --help); --learning-rate is an option of --algo ppo, pqt, "
      "pg-pqt, reinforce"]),
    (["train", "--algo", "ga", "--no-drift"], "train", ["--no-drift is an option of --algo islands, ppo"]),
])
def test_parse_errors_are_one_line(capsys, argv, command, words):
    """tyro's own refusals (a value of the wrong type, an unknown flag or command) read like synthenv's: the message
    alone, without the title, rules and footer of tyro's box."""
    code, err = run_main(capsys, argv)
    assert_user_error(code, err, command, *words)
    assert "--- " not in err and "helptext" not in err and not re.search(r"error: (Value error|Unrecognized options) ", err)


def test_parse_error_box_with_traceback_env(capsys, monkeypatch):
    """SYNTHENV_TRACEBACK=1 keeps tyro's whole message (its help text for the option) for debugging."""
    monkeypatch.setenv("SYNTHENV_TRACEBACK", "1")
    code, err = run_main(capsys, ["table", "--first-seed", "abc"])
    assert code == 2 and "Argument helptext" in err and "synthenv table: error" not in err


def test_train_unwritable_log_dir_and_checkpoint(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    under_a_file = str(tmp_path / "file" / "sub")
    assert_user_error(*run_main(capsys, train_args(**{"--log-dir": under_a_file})), "train", under_a_file)
    checkpoint = str(tmp_path / "file" / "c.pt")
    assert_user_error(*run_main(capsys, train_args(**{"--checkpoint": checkpoint, "--checkpoint-every": "1"})),
                      "train", "file")


def test_train_resume_from_a_missing_file(tmp_path, capsys):
    missing = str(tmp_path / "missing.pt")
    assert_user_error(*run_main(capsys, train_args(**{"--resume": missing})), "train", "missing.pt")


@pytest.mark.parametrize("content", [b"junk", b"", b"\x80\x04K\x01."], ids=["junk", "empty", "pickle"])
def test_train_resume_from_a_bad_file(tmp_path, capsys, content):
    path = tmp_path / "bad.pt"
    path.write_bytes(content)
    assert_user_error(*run_main(capsys, train_args(**{"--resume": str(path)})), "train", "bad.pt", "checkpoint")


def test_train_resume_from_a_checkpoint_of_another_program(tmp_path, capsys):
    path = tmp_path / "other.pt"
    save_checkpoint(path, {"weights": torch.ones(2)})
    assert_user_error(*run_main(capsys, train_args(**{"--resume": str(path)})), "train", "other.pt")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised when CUDA is missing")
def test_train_on_cuda_without_cuda(capsys):
    assert_user_error(*run_main(capsys, train_args(**{"--device": "cuda"})), "train", "needs CUDA", "--device cpu")


@pytest.mark.parametrize(("option", "value", "words"), [
    ("--device", "tpu", ["device must be a torch device such as 'cpu'", "got 'tpu'"]),
    ("--engine", "warp", ["unknown engine 'warp'", "native"]),
    ("--suite", "nope", ["unknown task spec 'nope'"]),
])
def test_bench_reward_names_a_bad_option_before_its_header(capsys, option, value, words):
    code = main(["bench-reward", option, value, "--batches", "16"])
    printed = capsys.readouterr()
    assert_user_error(code, printed.err, "bench-reward", *words)
    assert printed.out == ""  # refused before the machine line and the table's header


def test_table_unknown_task(capsys, tmp_path):
    code, err = run_main(capsys, ["table", "--tasks", "nope", "--out", str(tmp_path / "t")])
    assert_user_error(code, err, "table", "unknown task spec 'nope'")


def test_ctrl_c_is_one_line_and_130(capsys, monkeypatch):
    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(TasksCommand, "run", interrupted)
    assert main(["tasks"]) == 130
    assert capsys.readouterr().err == "synthenv tasks: interrupted (Ctrl-C)\n"


@pytest.mark.parametrize("error", [IndexError("list index out of range"), AssertionError("invariant"),
                                   RuntimeError("a bug"), KeyError("x")])
def test_a_bug_keeps_its_traceback(monkeypatch, error):
    def buggy(self):
        raise error

    monkeypatch.setattr(TasksCommand, "run", buggy)
    with pytest.raises(type(error)):
        main(["tasks"])


def test_user_errors_show_their_traceback_on_request(monkeypatch, capsys):
    def bad(self):
        raise ValueError("a bad option")

    monkeypatch.setattr(TasksCommand, "run", bad)
    assert main(["tasks"]) == 2
    assert capsys.readouterr().err == "synthenv tasks: error: a bad option\n"
    monkeypatch.setenv("SYNTHENV_TRACEBACK", "1")
    with pytest.raises(ValueError, match="a bad option"):
        main(["tasks"])


@pytest.mark.parametrize(("argv", "command", "words"), [
    (["train", "--npe", "0", "--no-progress", "--log-dir", "None"], "train", ["npe", "got 0"]),
    (["score", "--task", "reverse", "--strict", "hello"], "score", ["not BF commands"]),
    (["bench", "--configs", "tradtional:native"], "bench", ["Did you mean 'traditional'"]),
    (["tasks", "--suite", "nope"], "tasks", ["nope"]),
])
def test_the_installed_command_exits_2_without_a_traceback(argv, command, words):
    done = subprocess.run([sys.executable, "-m", "synthenv", *argv], capture_output=True, text=True, timeout=300)
    assert done.stdout == "" or "Traceback" not in done.stdout
    assert_user_error(done.returncode, done.stderr, command, *words)
