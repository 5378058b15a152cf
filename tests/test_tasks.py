"""Tasks: test-set generation (golden values derived by hand), registry, user tasks."""

from __future__ import annotations

import random

import pytest

from native import require_native
from synthenv import reference, tasks
from synthenv.language import Status
from synthenv.registry import UnknownNameError
from synthenv.tasks import Py2Random, Task
from synthenv.tasks.task import MAX_BASE, MAX_STEPS

# The first values of random.Random(6849275409234).random(); Mersenne Twister seeding and
# random() are the same on Python 2 and 3, so these are what PQT's generator saw.
STREAM = [0.6743224976462586, 0.19368798867089754, 0.6859650134513176, 0.9501793353597769,
          0.4021124521835461, 0.15580151053806657, 0.5532330381395931]


def test_the_stream_is_python_3s_random():
    rng = random.Random(6849275409234)
    assert [rng.random() for _ in STREAM] == STREAM


def test_py2_randrange_by_hand():
    rng = Py2Random(6849275409234)
    # randrange(1, 7) = 1 + int(0.6743... * 6) = 1 + int(4.046) = 5 (Python 3's randrange gives 6 here).
    assert rng.randrange(1, 7) == 5
    assert random.Random(6849275409234).randrange(1, 7) != 5
    # randrange(256) = int(0.1937... * 256) = int(49.58) = 49
    assert rng.randrange(256) == 49
    with pytest.raises(ValueError, match="empty range"):
        rng.randrange(3, 3)


def test_py2_shuffle_by_hand():
    # i=3: j=int(0.674*4)=2 -> [0,1,3,2]; i=2: j=int(0.194*3)=0 -> [3,1,0,2]; i=1: j=int(0.686*2)=1.
    items = [0, 1, 2, 3]
    Py2Random(6849275409234).shuffle(items)
    assert items == [3, 1, 0, 2]


def test_reverse_first_case_by_hand():
    # L = 1 + int(0.674*6) = 5; x_i = 1 + int(r_i * 255) for the next five r_i.
    inputs, expected = tasks.get("reverse").cases[0]
    assert inputs == (50, 175, 243, 103, 40)
    assert expected == (40, 103, 243, 175, 50, 0)


def test_divide_2_first_case_by_hand():
    # int(0.674 * 256) = 172; 172 // 2 = 86
    assert tasks.get("divide-2").cases[0] == ((172,), (86,))


def test_echo_twice_first_case_by_hand():
    # dflt(): L = 5, x_i = int(r_i * 256); the reference program prints x, 0, x, 0.
    x = (49, 175, 243, 102, 39)
    assert tasks.get("echo-twice").cases[0] == (x, x + (0,) + x + (0,))


def test_dedup_first_case_structure_by_hand():
    # num_unique = 1 + int(0.194 * 4) = 1; repeats = 1 + int(0.686 * 4) = 3 -> [v, v, v, 0].
    inputs, expected = tasks.get("dedup").cases[0]
    assert len(inputs) == 4 and len(set(inputs[:3])) == 1 and inputs[3] == 0 and 1 <= inputs[0] <= 6
    assert expected == (inputs[0], 0)


def test_count_char_fixed_cases_then_random_ones():
    cases = tasks.get("count-char").cases
    assert cases[:5] == (((10, 0), (0,)), ((1, 0), (1,)), ((1, 1, 0), (2,)),
                         ((9, 4, 19, 11, 5, 0), (0,)), ((24, 11, 26, 1, 15, 0), (1,)))
    for inputs, (count,) in cases[5:]:
        assert inputs.count(1) == count and all(2 <= v <= 26 for v in inputs if v != 1)


def test_fixed_tasks():
    assert tasks.get("add").num_cases == 9
    assert tasks.get("add").cases[6] == ((221, 251), (216, 0))
    bools = tasks.get("bool-logic").cases
    assert [c[0] for c in bools] == [(x, y, z) for x in (0, 1) for y in (0, 1) for z in (0, 1)]
    assert [c[1][0] for c in bools] == [1, 0, 0, 1, 1, 0, 1, 0]  # f = x~z + ~y~z + ~xyz by hand
    assert tasks.get("print-hello").cases == (((), (8, 5, 12, 12, 15)),)
    assert tasks.get("reverse-tune").num_cases == 5 and tasks.get("remove-char-tune").num_cases == 8


@pytest.mark.parametrize("name", tasks.names(), ids=str)
def test_every_task_is_well_formed(name):
    task = tasks.get(name)
    assert task.name == name
    assert task.num_cases == {"add": 9, "bool-logic": 8, "print-hello": 1, "reverse-tune": 5,
                              "remove-char-tune": 8}.get(name, 16)
    for inputs, expected in task.cases:
        assert all(0 <= v < task.base for v in inputs + expected)
    if task.solution is not None:
        assert reference.score_program(task.solution, task.cases, task.base, task.max_steps).solved


def test_bases_follow_the_spec():
    bases = {"count-char": 27, "bool-logic": 2, "print-hello": 27, "remove-char-tune": 27}
    for name in tasks.names("paper"):
        assert tasks.get(name).base == bases.get(name, 256)


def test_starter_echo_echoes_zero_terminated_inputs():
    task = tasks.get("echo")
    assert tasks.names("starter") == ["echo"] and "echo" not in tasks.names("paper") + tasks.names("user")
    assert (task.base, task.num_cases, task.max_steps) == (256, 16, 5000)
    for inputs, expected in task.cases:
        assert 2 <= len(inputs) <= 6 and inputs[-1] == 0 and all(inputs[:-1])
        assert expected == inputs[:-1]
    assert len({inputs for inputs, _ in task.cases}) > 10  # drawn, not one repeated case


def test_registry_names_and_errors():
    assert len(tasks.names("paper")) == 26 and tasks.names("tuning") == ["reverse-tune", "remove-char-tune"]
    assert tasks.names("all") == tasks.names("paper") + tasks.names("tuning") + tasks.names("starter")
    with pytest.raises(UnknownNameError, match="Did you mean 'reverse'"):
        tasks.get("revrse")
    with pytest.raises(ValueError, match="suite must be one of"):
        tasks.names("bogus")


def test_user_task_from_pairs_and_registration():
    task = Task.from_pairs("user-inc", [([1], [2]), ([5], [6])], base=10)
    tasks.register(task)
    try:
        assert tasks.get("user-inc") is task and "user-inc" in tasks.names("user")
        with pytest.raises(ValueError, match="already registered"):
            tasks.register(task)
    finally:
        tasks.unregister("user-inc")
    assert "user-inc" not in tasks.names()
    with pytest.raises(ValueError, match="built-in task"):
        tasks.unregister("reverse")


def test_user_task_from_program():
    task = Task.from_program("twice", ",[->++<]>.", lambda r: [r.randrange(0, 100)], num_cases=5, base=256)
    for (x,), (y,) in task.cases:
        assert y == 2 * x
    with pytest.raises(ValueError, match="must succeed"):
        Task.from_program("hang", ",[]", lambda r: [1], num_cases=2)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(name="t", cases=[([300], [1])], base=256), "must lie in \\[0, base=256\\)"),
        (dict(name="t", cases=[], base=256), "needs 1 to 1024 .* cases"),
        (dict(name="t", cases=[([1], [1])] * 1025), "needs 1 to 1024 .* got 1025"),
        (dict(name="t", cases=[([1] * 4097, [1])]), "more than 4096 values"),
        (dict(name="t", cases=[([1], [1])], base=1), r"base must be an int in \[2, 2147483647\].*got 1"),
        # the native engine carried the base as int32: 2**31 printed negative values (the largest base is 2**31 - 1)
        (dict(name="t", cases=[([1], [1])], base=2**31), r"base must be an int in \[2, 2147483647\]"),
        (dict(name="t", cases=[([1], [1])], base=256.0), "base must be an int"),
        (dict(name="t", cases=[([1], [1])], max_steps=0), r"max_steps must be an int in \[1, 1000000\].*got 0"),
        (dict(name="t", cases=[([1], [1])], max_steps=2**32 + 50), r"max_steps .*4294967346"),
        (dict(name="t", cases=[([1], [1])], max_steps=1_000_001), r"max_steps must be an int in \[1, 1000000\]"),
        (dict(name="t", cases=[(1, 2)]), "must be a pair"),
        (dict(name="../x", cases=[([1], [1])]), "a task name is a label .* got '../x'"),
        (dict(name="/abs", cases=[([1], [1])]), "without '/'"),
        (dict(name="x" * 101, cases=[([1], [1])]), "1 to 100 printable"),
        (dict(name="a\nb", cases=[([1], [1])]), "printable"),
        (dict(name="..", cases=[([1], [1])]), "a task name is a label"),
        (dict(name="t", cases=[([1], [1])], dialect="lenient"), "unknown dialect 'lenient'; the presets are"),
    ],
)
def test_bad_task_definitions_raise_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Task(**kwargs)


def test_case_tensors_are_padded_and_cached():
    task = tasks.get("reverse")
    tensors = task.tensors("cpu")
    assert tensors is task.tensors("cpu")
    assert tensors.inputs.shape == (16, max(len(i) for i, _ in task.cases))
    assert tensors.expected_lengths.tolist() == [len(o) for _, o in task.cases]
    assert tensors.inputs.dtype == tensors.expected.dtype


def test_reference_program_failure_status_is_reported():
    assert reference.run(",[]", [1]).status == Status.STEP_LIMIT


def test_the_largest_base_and_step_limit_are_accepted():
    task = Task("t", (((1,), (1,)),), base=MAX_BASE, max_steps=MAX_STEPS)
    assert (task.base, task.max_steps) == (2**31 - 1, 1_000_000)


@pytest.mark.parametrize("engine", ["torch", "native"])
def test_a_large_base_runs_exactly(engine):
    """Base 100 000: counted loops in closed form (the torch engine's old base x base table needed
    74 GB here), including a proven hang (an odd value never reaches 0 by steps of 2)."""
    import dataclasses

    from synthenv import engines
    from synthenv.compilers.traditional import TraditionalCompiler
    from synthenv.language import encode_batch

    if engine == "native":
        require_native()
    task = Task.from_pairs("big", [([99_999], [0]), ([70_001], [0]), ([2], [0])], base=100_000, max_steps=4000)
    programs = [",[-].", ",[--].", ",[+++].", ",[->+<]>.", ",+[-->+<]>."]
    execution = engines.get(engine).run(TraditionalCompiler(impl="torch").compile(encode_batch(programs, 12)), task)
    for i, code in enumerate(programs):
        for k, (inputs, _) in enumerate(task.cases):
            want = reference.run(code, inputs, task.base, task.max_steps, task.dialect)
            got = (int(execution.status[i, k]), int(execution.steps[i, k]))
            assert got == (want.status, want.steps), (code, inputs)
            if want.status == Status.OK:
                assert execution.outputs[i, k, : len(want.output)].tolist() == list(want.output), (code, inputs)
    assert dataclasses.replace(task, base=MAX_BASE).base == MAX_BASE
