"""Task files (``synthenv train --task my_task.json``): a good file becomes a Task, a bad one an error
naming the file and the field."""

from __future__ import annotations

import json

import pytest

from synthenv import tasks
from synthenv.tasks import TaskFileError, load_task_file


def write(tmp_path, document, name="t.json"):
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def test_a_good_file_is_a_task_with_defaults_and_options(tmp_path):
    task = load_task_file(write(tmp_path, {"name": "inc", "cases": [[[1], [2]], [[5], [6]]]}))
    assert (task.name, task.base, task.max_steps, task.num_cases) == ("inc", 256, 5000, 2)
    assert task.cases == (((1,), (2,)), ((5,), (6,)))
    task = tasks.from_spec(write(tmp_path, {"name": "inc", "base": 10, "max_steps": 100, "description": "add one",
                                            "solution": ",+.", "cases": [[[1], [2]]]}))
    assert (task.base, task.max_steps, task.solution, task.description) == (10, 100, ",+.", "add one")


@pytest.mark.parametrize(("document", "words"), [
    ("{not json", ["is not valid JSON", "line 1"]),
    ([1, 2], ["must hold one JSON object", "got a list"]),
    ({"cases": [[[1], [2]]]}, ["missing field 'name'"]),
    ({"name": "x"}, ["missing field 'cases'"]),
    ({"name": "", "cases": [[[1], [2]]]}, ["field 'name' must be a non-empty string"]),
    ({"name": "x", "cases": []}, ["field 'cases' must be a non-empty list"]),
    ({"name": "x", "cases": [[[1], [2], [3]]]}, ["field 'cases', case 0 must be [inputs, expected_output]"]),
    ({"name": "x", "cases": [[[1], [2]], [[1.5], [2]]]}, ["case 1 must be"]),
    ({"name": "x", "cases": [[[1], [2]]], "base": 1}, ["field 'base' must be an int >= 2", "got 1"]),
    ({"name": "x", "cases": [[[1], [2]]], "base": True}, ["field 'base'"]),
    ({"name": "x", "cases": [[[1], [2]]], "max_steps": 0}, ["field 'max_steps' must be a positive int"]),
    ({"name": "x", "cases": [[[300], [2]]]}, ["case 0: input values must lie in [0, base=256)"]),
    ({"name": "x", "cases": [[[1], [2]]], "bsae": 10}, ["unknown field(s) ['bsae']"]),
])
def test_a_bad_file_names_the_file_and_the_field(tmp_path, document, words):
    path = write(tmp_path, document)
    with pytest.raises(TaskFileError) as error:
        load_task_file(path)
    message = str(error.value)
    assert path in message and all(word in message for word in words), message


def test_a_missing_file_says_what_task_accepts(tmp_path):
    with pytest.raises(TaskFileError, match="does not exist; pass a registered task name"):
        tasks.from_spec(str(tmp_path / "nope.json"))
