"""Generated tasks (``synthenv.tasks.generated``): deterministic, split-disjoint, solved by their own program
under the reference interpreter, non-trivial, and decontaminated against the paper and tuning tasks."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from synthenv import reference, tasks
from synthenv.errors import UserError
from synthenv.language import Status
from synthenv.registry import UnknownNameError
from synthenv.tasks import beyond_grammar, generated, grammar, known, minimize, runner, text_grammar
from synthenv.tasks.py2random import Py2Random
from synthenv.tasks.solutions import HAND_WRITTEN, KNOWN_SOLUTIONS
from synthenv.tasks.task import Task

NUM_CHECKED = 50  # tasks checked per split against the reference interpreter (the test split's reported 50)


@pytest.fixture(scope="module")
def samples() -> dict[str, list[generated.GeneratedTask]]:
    return {split: [generated.generate(split, i) for i in range(NUM_CHECKED)] for split in generated.SPLITS}


def solves(code: str, task: Task) -> bool:
    """``code`` prints exactly the expected output on every case (reference interpreter, first mismatch stops)."""
    for inputs, expected in task.cases:
        run = reference.run(code, inputs, task.base, task.max_steps)
        if run.status != Status.OK or run.output != expected:
            return False
    return True


def test_the_same_split_and_index_give_the_same_task_and_others_differ():
    first = generated.generate("train", 3)
    assert generated.generate("train", 3) == first and first.task.name == "gen-train-3"
    others = [generated.generate("train", i) for i in (0, 1, 2, 4)] + [generated.generate("test", 3)]
    assert all(other.task.cases != first.task.cases for other in others)
    assert [t.task.name for t in itertools.islice(generated.stream("train", 2), 3)] == [
        "gen-train-2", "gen-train-3", "gen-train-4"]
    assert next(generated.stream("train", 3)) == first


def test_the_held_out_stream_is_pinned():
    """The test split is what agents are reported on: a change to the grammar or the filters changes it, and
    must be made knowingly (update these values, and say so in BENCHMARKS.md)."""
    assert [generated.generate("test", i).program for i in range(5)] == [
        ",+++++.", ",>,[>++<<->-]>.<<.", ">,[>+>,]<[.<].", ",[->>++<<]--.>>.", ">,[.>,]<[.<]."]
    assert generated.generate("test", 0).task.cases[0] == ((162,), (167,))


def test_train_and_test_are_disjoint(samples):
    train, test = samples["train"], samples["test"]
    assert not {t.task.name for t in train} & {t.task.name for t in test}
    assert not {t.seed for t in train} & {t.seed for t in test}
    assert max(t.seed for t in train) < generated.SEED_OFFSETS["test"] <= min(t.seed for t in test)
    assert [t.seed for t in test] == [2**40 + i for i in range(NUM_CHECKED)]
    assert not {t.task.cases for t in train} & {t.task.cases for t in test}


@pytest.mark.parametrize("split", generated.SPLITS)
def test_every_task_is_solved_by_its_program_within_the_step_limit(samples, split):
    """Each task is its stream's kind (ints in PQT's dialect, or text in the standard one), has distinct inputs, and
    its program solves it by the reference interpreter, in the task's dialect."""
    stream = generated.STREAMS[split]
    cases = generated.TEXT_CASES if stream.text else (generated.MIN_DISTINCT_INPUTS, generated.MAX_CASES)
    for item in samples[split]:
        task = item.task
        assert task.solution == item.program and stream.min_length <= len(item.program) <= stream.max_length
        assert (task.max_steps, task.dialect, task.text) == (stream.max_steps, stream.dialect, stream.text)
        assert cases[0] <= task.num_cases <= cases[1] and (task.base == 256 or not stream.text)
        assert len({inputs for inputs, _ in task.cases}) == task.num_cases
        score = reference.score_program(item.program, task.cases, task.base, task.max_steps, task.dialect)
        assert score.solved and score.reward == 1.0, item
        assert all(run.status == Status.OK and run.steps < task.max_steps for run in score.runs)
        family, shape = item.family.split("/")
        assert family in stream.families and shape in stream.families[family].shapes
        assert stream.families[family].keeps(item.program)


def test_the_splits_draw_their_streams_families_and_only_those():
    """Beyond families are held out whole: no core split samples one, and the beyond splits sample only them."""
    core = set(grammar.FAMILIES)
    for split, stream in generated.STREAMS.items():
        families = {generated.generate(split, i).family.split("/")[0] for i in range(40)}
        assert families <= set(stream.families), split
        assert (families <= core) == (stream is generated.CORE), split
    assert not set(beyond_grammar.FAMILIES) & core and not set(text_grammar.FAMILIES) & core


def test_beyond_tasks_are_solved_by_no_library_program_and_no_known_solution(samples):
    """The beyond splits are decontaminated against the shipped library (the training solutions), the paper and
    tuning tasks' known solutions and the tiny programs (tasks.known)."""
    for split in ("beyond-tune", "beyond-test"):
        for item in samples[split][:20]:
            assert not known.seen(item.task), item
            assert not known.solves_a_known_task(item.program), item
    counts = generated.filter_counts("beyond-tune", 5)
    assert counts["kept"] == 5 and set(counts) <= {"kept", *generated.REASONS}


@pytest.mark.parametrize("split", generated.SPLITS)
def test_outputs_are_not_trivial(samples, split):
    longest = generated.MAX_TEXT_OUTPUT if generated.STREAMS[split].text else generated.MAX_OUTPUT
    for item in samples[split]:
        outputs = [out for _, out in item.task.cases]
        assert all(outputs) and 0 < len(max(outputs, key=len)) <= longest, item
        assert 4 * Counter(outputs).most_common(1)[0][1] <= 3 * len(outputs), item  # not (nearly) constant
        assert not all(out == x or out == x[:-1] and x[-1:] == (0,) for x, out in item.task.cases), item


def test_the_stream_covers_the_families_shapes_and_bases(samples):
    both = samples["train"] + samples["test"]
    assert len({t.family.split("/")[0] for t in both}) >= 6
    assert len({t.family.split("/")[1] for t in both}) == len(grammar.SHAPES)
    assert len({t.task.base for t in both}) >= 5


@pytest.mark.parametrize("split", generated.SPLITS)
def test_no_generated_task_is_a_paper_or_tuning_task(samples, split):
    """Both directions, with the reference interpreter: the program solves no paper or tuning task, and no
    known solution of one solves the generated task."""
    known = {name: tasks.get(name) for name in KNOWN_SOLUTIONS}
    for item in samples[split]:
        assert not [name for name, task in known.items() if solves(item.program, task)], item
        assert not [name for name, code in KNOWN_SOLUTIONS.items() if solves(code, item.task)], item


def test_a_contaminated_candidate_is_dropped():
    family = grammar.FAMILIES["random"]
    rng = Py2Random(1)
    lists = [tuple(rng.randrange(256) for _ in range(1 + rng.randrange(6))) for _ in range(12)]
    echo_twice = KNOWN_SOLUTIONS["echo-twice"]  # its own test set's reference program, on other inputs
    assert generated._screen(echo_twice, lists, 256, "t", family, "seq") == (None, "known_solution")
    # Solves `add` (the last `,` reads 0 past add's two inputs) but prints the third input of a triple, which
    # add's known solution does not: only the other direction catches it.
    add_like = ",>,[<+>-]<.>,."
    assert known.solves_a_known_task(add_like) == ["add"] and solves(add_like, tasks.get("add"))
    triples = [(a, b, c) for a, b, c in itertools.product((3, 50, 200), (1, 7, 90), (5, 9))]
    assert generated._screen(add_like, triples, 256, "t", family, "triple") == (None, "paper_task")
    task, reason = generated._screen(",>,[<+>-]<.>,+.", triples, 256, "t", family, "triple")
    assert reason is None and solves(task.solution, task) and len(task.solution) <= len(",>,[<+>-]<.>,+.")


def screen(code: str, inputs: list[tuple[int, ...]], base: int = 256, family: str = "random") -> str | None:
    return generated._screen(code, inputs, base, "t", grammar.FAMILIES[family], "one")[1]


def test_the_other_filters_name_their_reason():
    values = [(v,) for v in range(1, 13)]
    assert screen(",>.", values) == "length"
    assert screen(",>++.<.", [(0,), (1,)]) == "inputs"
    assert screen(",[>+<]>.", values) == "halts"
    assert screen(",[.-]", [(v,) for v in range(30, 42)]) == "long_output"
    assert screen(",-[.[-]]", values) == "empty"  # prints nothing on 1
    assert screen(",,,,[]..", values) == "constant"
    assert screen(",>>+<<[-]>>.", values) == "constant"
    assert screen(">>>,.", values) == "identity"
    assert screen(",[.,]", [(v, 0) for v in range(1, 13)]) == "identity"  # echo without the terminator
    assert screen(",[->++<]>.", values, family="nested") == "degenerate"  # no loop inside a loop
    assert screen(",[->++<]>.", values, family="counted") is None
    # base 7: six `+` are one `-`, which no deletion finds, but `,-.` (3 commands) solves it
    assert screen(",++++++.", [(a, b) for a in range(7) for b in range(2)], base=7) == "tiny"


def test_minimize_keeps_a_solution_and_simplify_keeps_the_output():
    task = Task("t", (((1, 2), (3,)), ((4, 1), (5,)), ((0, 0), (0,))))
    assert minimize.minimize(",>,<>[<+>-]<.+-", task) == ",>,[<+>-]<."
    for code in ("<[.]+-,>.<[-][>]+", ",[->+<]>[-<+>]<.", ",+[-]-.", ",>,<[->>+<<]><."):
        simple = minimize.simplify(code)
        assert len(simple) <= len(code)
        for inputs in ((3, 4), (0, 9), (200, 1)):
            assert reference.run(simple, inputs).output == reference.run(code, inputs).output, code


@pytest.mark.parametrize("name", list(KNOWN_SOLUTIONS), ids=str)
def test_every_known_solution_solves_its_task(name):
    task = tasks.get(name)
    assert reference.score_program(KNOWN_SOLUTIONS[name], task.cases, task.base, task.max_steps).solved
    assert name in known.solves_a_known_task(KNOWN_SOLUTIONS[name])


def test_there_is_a_known_solution_for_every_paper_and_tuning_task():
    assert list(KNOWN_SOLUTIONS) == tasks.names("paper") + tasks.names("tuning")
    assert set(HAND_WRITTEN) == {"reverse", "remove-char", "count-char", "add", "bool-logic", "print-hello",
                                 "reverse-tune", "remove-char-tune"}


def test_the_reference_interpreter_gives_the_same_tasks(monkeypatch):
    """Where no C compiler works the generator screens with the reference interpreter: the same stream."""
    native = [generated.generate("train", i) for i in (0, 1)]
    shared = runner.runner()  # the one runner the generator, minimisation and decontamination use
    assert shared.engine is not None
    monkeypatch.setattr(shared, "engine", None)
    known.screen_programs.cache_clear()  # compiled for the engine: compiled anew for the interpreter
    try:
        assert [generated.generate("train", i) for i in (0, 1)] == native
    finally:
        known.screen_programs.cache_clear()


def test_filter_counts_add_up():
    tally = generated.filter_counts("train", 5, start=10)
    assert tally["kept"] == 5 and set(tally) <= {"kept", *generated.REASONS}


def test_get_and_from_spec_resolve_generated_names_without_registering_them():
    task = tasks.get("gen-test-7")
    assert task == generated.generate("test", 7).task and tasks.from_spec("gen-test-7") == task
    assert tasks.resolve("gen-test-7") is task  # cached
    assert not [n for n in tasks.names() if n.startswith("gen-")]
    with pytest.raises(ValueError, match="generated tasks'"):
        tasks.register(Task.from_pairs("gen-train-1", [([1], [2])]))


def test_expand_lists_suites_slices_and_names():
    assert tasks.expand("paper") == tasks.names("paper") and len(tasks.expand("paper")) == 26
    assert tasks.expand("tune") == tasks.expand("tuning") == ["reverse-tune", "remove-char-tune"]
    assert tasks.expand("generated-test:50") == [f"gen-test-{i}" for i in range(50)]
    assert tasks.expand(["add", "generated-train:3:5", "gen-test-9", "my_task.json"]) == [
        "add", "gen-train-3", "gen-train-4", "gen-test-9", "my_task.json"]


@pytest.mark.parametrize(("spec", "error", "words"), [
    ("revrse", UnknownNameError, ["Did you mean 'reverse'", "generated-test:<count>", "gen-test-<index>"]),
    ("gen-tset-3", UserError, ["unknown split 'tset'", "Did you mean 'test'", "train, test"]),
    ("gen-test-07", UserError, ["without leading zeros", "did you mean 'gen-test-7'"]),
    ("gen-test-x", UserError, ["non-negative integer", "'x'"]),
    ("gen-test-1099511627776", UserError, ["[0, 2**40)", "1099511627776"]),
    ("gen-test", UserError, ["gen-{split}-{index}", "'gen-test'"]),
    ("generated-tset:5", UserError, ["unknown split 'tset'", "Did you mean 'test'"]),
    ("generated-test:abc", UserError, ["generated-<split>:<count>", "'generated-test:abc'"]),
    ("generated-test:0", UserError, ["selects no generated tasks", "start 0 and stop 0"]),
    ("generated-test:9:3", UserError, ["selects no generated tasks"]),
])
def test_bad_specs_say_what_is_wrong(spec, error, words):
    with pytest.raises(error) as raised:
        tasks.expand(spec)
    assert all(word in str(raised.value) for word in words), str(raised.value)
    if spec.startswith("gen-") or spec == "revrse":
        with pytest.raises(error):
            tasks.get(spec)


def test_bad_generate_arguments():
    with pytest.raises(UserError, match="unknown split 'valid'.*Valid splits: train, test"):
        generated.generate("valid", 0)
    for index in (-1, 2**40, 1.0, True):
        with pytest.raises(UserError, match=r"int in \[0, 2\*\*40\)"):
            generated.generate("test", index)


def test_the_tasks_command_lists_generated_tasks(capsys):
    from synthenv.cli.tasks import TasksCommand

    assert TasksCommand(generated="test", count=3, start=1).run() == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["task", "base", "cases", "family", "program"] and len(lines) == 4
    assert lines[1].split()[0] == "gen-test-1" and lines[1].split()[-1] == generated.generate("test", 1).program
    with pytest.raises(ValueError, match="count must be a positive int, got 0"):
        TasksCommand(generated="test", count=0)
