"""Tasks in other interpreters' dialects and text tasks: what users bring (synthenv.dialect, docs/semantics.md §5).

The engines' exactness in every dialect is tests/test_differential.py's; here: text tasks end to end, the agents on
strict tasks, and an interpreter that is not synthenv's (tests/strict_bf.py) accepting what they report.
"""

from __future__ import annotations

import json

import pytest

import strict_bf
import synthenv
from synthenv import agents, reference, tasks, workloads
from synthenv.agents import TrainConfig
from synthenv.cli import main
from synthenv.dialect import ESOLANG, PQT, STANDARD
from synthenv.env import SynthVecEnv
from synthenv.compilers.traditional import drop_unmatched_brackets
from synthenv.language import Status, decode_batch, encode_batch
from synthenv.tasks import Task

FIRST_LAST = Task.from_pairs("first-last", [("abcde", "a e"), ("X", "X X"), ("hello", "h o"), ("ab", "a b"),
                                           ("xyz12", "x 2"), ("Qq", "Q q")])
ECHO = Task.from_pairs("echo-line", [("hello", "hello"), ("a b", "a b"), ("X", "X"), ("", ""), ("12 3", "12 3")])
SHOUT = Task.from_pairs("shout", [("a", "b"), ("hi", "ij"), ("xyz", "yz{"), ("", "")], dialect=ESOLANG)


def test_the_independent_interpreter_agrees_with_the_oracle_on_the_standard_dialect():
    """tests/strict_bf.py and synthenv.reference, written apart, on random programs in the standard dialect."""
    programs = decode_batch(workloads.make("near", 300, seed=5)) + [",[.,]", ">,[>,]<[.<]", "<", "[", ",[.,"]
    for code in programs:
        for inputs in ((), (104, 105), (1, 2, 3, 0, 7)):
            mine = reference.run(code, inputs, 256, 2000, STANDARD)
            try:
                theirs = strict_bf.execute(code, bytes(inputs), max_steps=1999)
            except strict_bf.Refused:
                theirs = None
            assert (mine.status == Status.OK) == (theirs is not None), code
            if theirs is not None:
                assert bytes(mine.output) == theirs, code


def test_without_unmatched_brackets_a_program_prints_the_same_in_pqt_and_runs_under_strict_brackets():
    tokens = workloads.make("uniform", 400, seed=2)
    balanced = decode_batch(drop_unmatched_brackets(tokens))
    for code, fixed in zip(decode_batch(tokens), balanced):
        assert reference.match_brackets(fixed)[1]
        for inputs in ((3, 1, 2), ()):
            before, after = reference.run(code, inputs, dialect=PQT), reference.run(fixed, inputs, dialect=PQT)
            if before.status == Status.OK:  # fewer steps: it can only halt where the original halted
                assert (after.status, after.output) == (Status.OK, before.output)


@pytest.mark.parametrize("algo", ["islands", "mutation"])
def test_the_agents_solve_strict_text_tasks_with_programs_a_standard_interpreter_accepts(algo):
    """Every program an agent reports as solving a strict task, and its minimal form, runs in tests/strict_bf.py
    and prints every expected output there."""
    for task in (ECHO, FIRST_LAST):
        results = agents.train(TrainConfig(task=task, algo=algo, seeds=(0,), npe=1_200_000,
                                           log_dir=None, progress=False))
        for result in results:
            if result.solved:
                for code in (result.best_program, result.minimal_program):
                    assert strict_bf.passes(code, task.cases), (task.name, code)
        assert any(r.solved for r in results), (task.name, algo)


def test_a_program_an_interpreter_refuses_is_never_a_solution_of_a_strict_task():
    """Under PQT's dialect `]`, and `<` on cell 0, are harmless; in the standard dialect they fail the program."""
    echo_pqt = Task.from_pairs("echo-pqt", ECHO.cases, dialect=PQT)
    for code in ("],[.,]", "<,[.,]", ",[.,]]"):
        assert synthenv.score([code], echo_pqt).solved.item()
        assert not synthenv.score([code], ECHO).solved.item()
        assert not strict_bf.passes(code, ECHO.cases)


def test_rstrip_and_text_through_the_env_and_score():
    result = synthenv.score([",[+.,]", ",[+.,]++++++++++.", ",[.,]"], SHOUT)
    assert result.solved.tolist() == [True, True, False]  # a trailing newline is ignored under rstrip
    assert result.output_lengths[1].tolist() == [1, 2, 3, 0]  # counted up to the last non-whitespace value


def write(tmp_path, document, name="t.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def test_score_and_tasks_show_a_text_task_file_as_text(tmp_path, capsys):
    path = write(tmp_path, {"name": "shout", "cases": [["hi", "HI"], ["ok", "OK"]], "description": "upper-case"})
    assert main(["score", "--task", path, ",[.,]", ",[--------------------------------.,]"]) == 0
    out = capsys.readouterr().out
    assert "base 256, text" in out and "strict brackets, left edge is an error" in out
    assert "'hi'" in out and "'HI'" in out and "solved yes" in out  # the second program upper-cases
    assert main(["tasks", "--task", path]) == 0
    out = capsys.readouterr().out
    assert "dialect standard" in out and "'ok'" in out and "'OK'" in out
    assert main(["tasks", "--suite", "paper"]) == 0
    assert "pqt" in capsys.readouterr().out


def test_the_run_summary_shows_a_text_task_as_text(tmp_path, capsys):
    path = write(tmp_path, {"name": "echo-line", "cases": [["hello", "hello"], ["a b", "a b"]]})
    assert main(["train", "--task", path, "--log-dir", "None", "--no-progress", "--npe", "100000"]) == 0
    assert "case 0: input 'hello' -> printed 'hello', expected 'hello'" in capsys.readouterr().out


def test_env_dialect_override(tmp_path):
    env = SynthVecEnv("reverse", 2, mode="program", max_len=8, dialect="standard")
    assert env.task.dialect == STANDARD and tasks.get("reverse").dialect == PQT
    env.reset(seed=0)
    _, rewards, _, _, info = env.step(encode_batch(["<,.", ",."], 8))
    assert info["program_status"].tolist() == [Status.LEFT_EDGE, Status.OK]


def test_a_text_task_gets_longer_programs_its_domains_knowledge_and_its_outputs_constants():
    """On a text task the default agent writes programs of up to 256 tokens, starts from the text library and prior,
    and its first generation runs the constants of the task's outputs: here, the whole answer."""
    from synthenv.agents import TrainConfig, Trainer
    from synthenv.agents.search.knowledge import constant_pieces, first_programs

    greet = Task.from_pairs("greet", [("Ada", "Hello, Ada!"), ("Bo", "Hello, Bo!"), ("", "Hello, !"), ("Cy", "Hello, Cy!")])
    pieces = constant_pieces(greet)
    assert [bytes(reference.run(p, (), 256, 20_000, STANDARD).output) for p in pieces] == [b"Hello, ", b"!"]
    wrapped = first_programs(greet, [",[.,]"], 256)
    assert any(reference.solves(p, greet) for p in wrapped)  # the greeting around an echo
    trainer = Trainer(TrainConfig(task=greet, seeds=(0,), log_dir=None, progress=False, npe=4096))
    assert trainer.config.max_len == 256 and trainer.algorithm.library_slots > 900
    assert trainer.run()[0].solved
    assert Trainer(TrainConfig(task="reverse", seeds=(0,), log_dir=None, progress=False, npe=4096)).config.max_len == 100
    assert constant_pieces(tasks.get("reverse")) == []  # a task of ints has none
