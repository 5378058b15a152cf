"""The library of known programs (``agents.search.library``): what the default agent's first generation runs before its
fresh programs, the shipped one (the solutions of the training tasks the shipped policy saw, none of which solves a
paper or tuning task), library files as user data, ``synthenv library``, and the held-out test tasks whose behaviour
no training solution has (``tasks.known.seen``, ``generated-unseen:<count>``)."""

from __future__ import annotations

import pytest
import torch
from synthenv.agents import PPOConfig, TrainConfig, Trainer, train
from synthenv.agents.search.agent import IslandAgent
from synthenv.agents.search.library import SHIPPED, Library, LibraryConfig, build_library, read_library
from synthenv.tasks import generated, known

from synthenv import reference, tasks
from synthenv.cli import main
from synthenv.errors import UserError
from synthenv.language import decode_batch, encode_batch

CPU = torch.device("cpu")
SMALL = {"batch_size": 64, "islands": 2, "island_size": 4, "queue_size": 8, "variants_per_parent": 1}


def test_a_library_file_is_one_program_per_line_and_a_bad_line_is_refused_with_its_number(tmp_path):
    path = tmp_path / "lib.txt"
    path.write_text("# what it holds\n,[.,]\n\n  ,.  \n,[.,]\n")
    assert read_library(path).programs == [",[.,]", ",."]  # comments, blanks and the duplicate dropped
    path.write_text(",.\n# fine\n,x.\n")
    with pytest.raises(UserError, match=r"line 3: 'x' is not a BF command"):
        read_library(path)
    path.write_text("# nothing\n\n")
    with pytest.raises(UserError, match="holds no program"):
        read_library(path)


def test_the_first_generation_runs_the_library_first_and_draws_the_rest_as_before():
    texts = [",[->+<]>.", ",.", "+" * 30]  # the last cannot be written in 12 commands
    library = Library(texts)
    config = PPOConfig(**SMALL, library="none")
    fresh = IslandAgent(config, seeds=(0, 1), max_len=12, device=CPU).propose().clone()
    first = library.first_generation(fresh.clone(), [torch.Generator().manual_seed(s) for s in (0, 1)])
    assert [decode_batch(first[m, :2]) for m in (0, 1)] == [texts[:2]] * 2
    assert torch.equal(first[:, 2:], fresh[:, 2:])  # the other slots keep their fresh programs
    many = Library([f",{'+' * k}." for k in range(1, 11)])  # 10 programs for 4 slots: 4 distinct ones a member
    drawn = many.first_generation(torch.zeros((2, 4, 12), dtype=torch.int64),
                                  [torch.Generator().manual_seed(s) for s in (0, 1)])
    rows = [decode_batch(drawn[m]) for m in (0, 1)]
    assert all(len(set(row)) == 4 and set(row) <= set(many.programs) for row in rows) and rows[0] != rows[1]


def test_a_task_a_library_program_solves_is_solved_by_the_first_generation(tmp_path):
    """gen-train-5030 (not among the library's tasks 0-3999) is seen: a training solution solves it. With the shipped
    library the default agent solves it with its first generation's programs; with none, its first generation (prior
    samples) does not."""
    task = tasks.get("gen-train-5030")
    assert known.seen(task)
    batch = 4096  # the whole shipped library fits in one generation
    runs = {}
    for library in ("shipped", "none"):
        config = PPOConfig(**{**SMALL, "batch_size": batch}, library=library)
        (runs[library],) = train(TrainConfig(task=task.name, algo="ppo", algo_config=config, npe=batch, seeds=(0,),
                                             log_dir=None, progress=False))
    assert runs["shipped"].solved and runs["shipped"].npe == batch
    assert reference.score_program(runs["shipped"].best_program, task.cases, task.base).solved
    assert not runs["none"].solved
    path = tmp_path / "mine.txt"  # a library of one program of the user's: the same
    path.write_text(runs["shipped"].best_program + "\n")
    (mine,) = train(TrainConfig(task=task.name, algo="ppo", algo_config=PPOConfig(**SMALL, library=str(path)),
                                npe=64, seeds=(5,), log_dir=None, progress=False))
    assert mine.solved and mine.npe == 64


def test_library_kept_is_how_many_of_the_best_known_programs_the_queue_is_offered():
    """After the first generation on reverse-tune (which no library program solves) the member's queue holds none of
    the library's programs with library_kept=0, its 3 best with 3; with all of them offered, a queue at least as good
    slot by slot (the fresh programs are the same: the setting only changes what the queue is offered)."""
    library = read_library(SHIPPED["int"]).programs
    task = tasks.get("reverse-tune")
    queues = {}
    for kept in (0, 3, 64):
        config = PPOConfig(**{**SMALL, "batch_size": 4096}, library_kept=kept)
        trainer = Trainer(TrainConfig(task=task.name, algo="ppo", algo_config=config, seeds=(0,), log_dir=None,
                                      progress=False, stop_on_success=False))
        fresh = set(decode_batch(trainer.algorithm.search.children[0, len(library):]))
        trainer.step()
        queue = trainer.algorithm.queue
        known = [(text, reward) for text, reward in zip(decode_batch(queue.tokens[0]), queue.rewards[0].tolist())
                 if text in library and text not in fresh]  # queued programs only the library offered
        queues[kept] = queue.rewards[0].tolist(), known
    assert queues[0][1] == []
    best = sorted(reference.score_program(p, task.cases, task.base).reward for p in library)[::-1][:3]
    assert sorted(reward for _, reward in queues[3][1])[::-1] == pytest.approx(best, abs=1e-6)
    assert len(queues[64][1]) >= 3
    assert all(a >= b for a, b in zip(queues[64][0], queues[3][0])) and queues[64][0] != queues[0][0]


def test_the_shipped_library_is_the_training_solutions_and_solves_no_paper_or_tuning_task():
    library = read_library(SHIPPED["int"])
    assert len(library) == len(known.train_solutions()) == 2660
    first = [generated.generate("train", i).program for i in range(150)]
    assert set(first) <= set(library.programs)
    assert library.programs[:len(set(first))] == list(dict.fromkeys(first))  # in task order, as built
    assert all(len(found) == 0 for found in known.known_tasks_solved(library.programs))
    assert known.known_tasks_solved([",>,[<+>-]<.>."]) == [["add"]]  # the check finds what a program solves


def test_seen_test_tasks_are_those_a_training_solution_solves():
    """Checked against the reference interpreter: gen-test-0 is solved by some training solution, the first unseen
    test task by none of the first 400 (the whole check is the native engine's, tests/test_differential.py)."""
    assert generated.unseen(3) == [1, 3, 6] and tasks.expand("generated-unseen:3") == ["gen-test-1", "gen-test-3",
                                                                                        "gen-test-6"]
    seen, unseen = tasks.get("gen-test-0"), tasks.get("gen-test-1")
    solutions = known.train_solutions()
    assert any(reference.score_program(p, seen.cases, seen.base).solved for p in solutions)
    assert not any(reference.score_program(p, unseen.cases, unseen.base).solved for p in solutions[:400])
    for spec in ("generated-unseen:0", "generated-unseen:x", "generated-unseen"):
        with pytest.raises(UserError, match="generated-unseen:<count>"):
            tasks.expand(spec)
    with pytest.raises(UserError, match="count must be an int >= 0"):
        generated.unseen(-1)


def test_synthenv_library_writes_training_and_run_solutions(tmp_path, capsys):
    """A run that solved (gen-train-5030, by a program of the shipped library) leaves its solution for the next
    library."""
    config = PPOConfig(**{**SMALL, "batch_size": 4096})
    (result,) = train(TrainConfig(task="gen-train-5030", algo="ppo", algo_config=config, npe=4096, seeds=(0,),
                                  log_dir=str(tmp_path / "runs"), progress=False))
    assert result.solved
    out = tmp_path / "lib.txt"
    assert main(["library", "--tasks", "20", "--from-runs", str(tmp_path / "runs"), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    written = read_library(out).programs
    expected = list(dict.fromkeys([generated.generate("train", i).program for i in range(20)]
                                  + [result.best_program]))
    assert written == expected
    assert build_library(20)[0].programs == expected[:-1]
    assert "--from-runs" in out.read_text().splitlines()[1]
    with pytest.raises(ValueError, match="empty"):
        LibraryConfig(tasks=0)
    assert torch.equal(Library(written).tokens(12, CPU),
                       encode_batch([p for p in written if len(p) <= 12], 12))


@pytest.mark.parametrize(("argv", "words"), [
    (["library", "--tasks", "-1"], ["tasks", "-1"]),
    (["library", "--tasks", "0"], ["empty"]),
    (["library", "--tasks", "1", "--from-runs", "/nowhere/at/all"], ["/nowhere/at/all"]),
    (["train", "--task", "add", "--library", "/nowhere/lib.txt", "--npe", "64", "--log-dir", "None"],
     ["the library file '/nowhere/lib.txt' does not exist; library (--library) is 'shipped'"]),
    (["train", "--task", "add", "--library", "", "--npe", "64", "--log-dir", "None"], ["library", "'shipped'"]),
])
def test_library_errors_are_one_line(capsys, tmp_path, argv, words):
    code = main(argv + (["--out", str(tmp_path / "l.txt")] if argv[0] == "library" else []))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"synthenv {argv[0]}: error: "), err
    for word in words:
        assert word in err, (word, err)
