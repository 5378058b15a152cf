"""``synthenv score`` and the ``synthenv`` dispatcher (smoke tests on real programs)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from synthenv import reference, tasks
from synthenv.cli import main


def run_cli(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_solution_scores_one_and_every_case_is_listed(capsys):
    out = run_cli(capsys, "score", "--task", "reverse", ",[>,]+[,<.]")
    assert "program 1: ',[>,]+[,<.]'" in out
    assert "reward 1.000000   solved yes   status OK" in out
    task = tasks.get("reverse")
    case_lines = [line for line in out.splitlines() if line.strip().split(" ")[0].isdigit()]
    assert len(case_lines) == task.num_cases
    inputs, expected = task.cases[0]
    first = case_lines[0].split()
    assert first[:3] == ["0", "ok", "ok"]
    assert str(list(expected)) in case_lines[0] and str(list(inputs)) in case_lines[0]


def test_several_programs_with_failures_match_the_oracle(capsys):
    programs = [",[.,]", ",[>,]<[.<]", "[", "-[+]"]
    out = run_cli(capsys, "score", "--task", "reverse", "--", *programs)
    task = tasks.get("reverse")
    for i, program in enumerate(programs):
        truth = reference.score_program(program, task.cases, task.base, task.max_steps)
        assert f"program {i + 1}: {program!r}" in out
        assert f"reward {truth.reward:.6f}" in out
    assert "status STEP_LIMIT" in out and "step_limit" in out  # ,[>,]<[.<] never ends (docs/semantics.md §1)
    case_line = next(line for line in out.split("program 1")[1].splitlines() if line.strip().startswith("7 "))
    assert "[30]" in case_line and "[30, 0]" in case_line  # ,[.,] echoes the input; reverse wants [30, 0]


def test_no_cases_flag_prints_only_the_verdict(capsys):
    out = run_cli(capsys, "score", "--task", "add", "--no-cases", ",>,[<+>-]<.")
    assert "reward 0.125000   solved no" in out and "expected" not in out


def error_line(capsys, *argv: str) -> str:
    """The one stderr line of a user error (exit code 2)."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("synthenv score: error: "), err
    return err


def test_unknown_task_exits_with_a_hint(capsys):
    assert "Did you mean 'reverse'" in error_line(capsys, "score", "--task", "revrse", ",.")


def test_missing_programs_exit_with_an_example(capsys):
    assert "give at least one BF program" in error_line(capsys, "score", "--task", "reverse")


def test_ignored_characters_are_a_warning_or_with_strict_an_error(capsys):
    assert main(["score", "--task", "reverse", "--no-cases", "hello world"]) == 0
    out, err = capsys.readouterr()
    assert "reward 0.000000" in out
    assert err.count("\n") == 1 and err.startswith("synthenv score: warning: program 1 'hello world'")
    assert "'helowrd'" in err and "scored as the empty program" in err and "--strict" in err
    err = error_line(capsys, "score", "--task", "reverse", "--strict", "hello world")
    assert "'helowrd'" in err and "drop --strict" in err
    run_cli(capsys, "score", "--task", "reverse", "--strict", "--no-cases", ",[>,]+[,<.]  _ anything after EOS")
    assert capsys.readouterr().err == ""  # spaces and what follows EOS are not warned about
    assert main(["score", "--task", "reverse", "--no-cases", ",[>,]+[,<.] x"]) == 0
    assert "scored as ',[>,]+[,<.]'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--help"], ["score", "--help"], ["tasks", "--help"]])
def test_help_works(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out = capsys.readouterr().out
    assert exit_info.value.code == 0 and "usage: synthenv" in out
    if argv[0] == "score":
        assert "PROGRAM" in out and "--task" in out


def test_python_dash_m_synthenv_runs_score():
    done = subprocess.run([sys.executable, "-m", "synthenv", "score", "--task", "print-hello", "--no-cases", ","],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "program 1: ','" in done.stdout and "solved no" in done.stdout
