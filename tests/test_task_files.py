"""Task files (``synthenv train --task my_task.json``): a good file becomes a Task, a bad one an error
naming the file and the field."""

from __future__ import annotations

import json

import pytest

from synthenv import tasks
from synthenv.dialect import ESOLANG, PQT
from synthenv.tasks import Task, TaskFileError, load_task_file
from synthenv.tasks.files import MAX_FILE_BYTES, task_document, task_from_document


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
    ({"name": "x", "cases": [[[1], [2], [3]]]}, ["field 'cases', case 0 must be [input, expected_output]"]),
    ({"name": "x", "cases": [[[1], [2]], [[1.5], [2]]]}, ["case 1 must be"]),
    ({"name": "x", "cases": [[[1], [2]]], "base": 1}, ["field 'base' must be an int in [2, 2147483647]", "got 1"]),
    ({"name": "x", "cases": [[[1], [2]]], "base": True}, ["field 'base'"]),
    ({"name": "x", "cases": [[[1], [2]]], "max_steps": 0}, ["field 'max_steps' must be an int in [1, 1000000]"]),
    ('{"name": "x", "cases": [[[1], [2]]], "base": ' + "9" * 5000 + "}", ["holds a value that cannot be read"]),
    ("[" * 100_000 + "]" * 100_000, ["nests too deeply"]),
    ({"name": "../../x", "cases": [[[1], [2]]]}, ["a task name is a label", "'../../x'"]),
    ({"name": "/etc/x", "cases": [[[1], [2]]]}, ["a task name is a label"]),
    ({"name": "x", "cases": [["ab", "AB"]], "base": 27}, ["a task with text cases has base 256"]),
    ({"name": "x", "cases": [["a", "b"]], "dialect": "lax"}, ["field 'dialect'", "unknown dialect 'lax'", "standard"]),
    ({"name": "x", "cases": [["a", "b"]], "dialect": {"left_edge": "bounce"}}, ["left_edge must be one of"]),
    ({"name": "x", "cases": [["a", "b"]], "dialect": {"edge": "wrap"}}, ["unknown dialect field(s) ['edge']"]),
    ({"name": "x", "cases": [["a", "b"]], "dialect": 3}, ["a dialect is a preset name"]),
    ({"name": "x", "cases": [[[300], [2]]]}, ["case 0: input values must lie in [0, base=256)"]),
    ({"name": "x", "cases": [[[1], [2]]], "bsae": 10}, ["unknown field(s) ['bsae']"]),
])
def test_a_bad_file_names_the_file_and_the_field(tmp_path, document, words):
    path = write(tmp_path, document)
    with pytest.raises(TaskFileError) as error:
        load_task_file(path)
    message = str(error.value)
    assert path in message and all(word in message for word in words), message


def test_text_cases_and_a_dialect(tmp_path):
    """Strings are text (their UTF-8 bytes, base 256); a file without a dialect gets the standard one."""
    task = load_task_file(write(tmp_path, {"name": "shout", "cases": [["hi", "HI"], ["é", [1, 2]]]}))
    assert task.text and task.base == 256 and task.cases == (((104, 105), (72, 73)), ((195, 169), (1, 2)))
    assert (task.dialect.brackets, task.dialect.left_edge, task.dialect.end_of_input) == ("strict", "error", "zero")
    assert load_task_file(write(tmp_path, {"name": "x", "cases": [[[1], [2]]], "dialect": "pqt"})).dialect == PQT
    wrap = load_task_file(write(tmp_path, {"name": "x", "cases": [[[1], [2]]],
                                           "dialect": {"left_edge": "wrap", "tape_cells": 9}}))
    assert (wrap.dialect.brackets, wrap.dialect.left_edge, wrap.dialect.tape_cells) == ("strict", "wrap", 9)


def test_a_task_written_out_reads_back_the_same(tmp_path):
    for task in (tasks.get("reverse"), Task.from_pairs("t", [("a b", "A_B"), ("", "x")], dialect=ESOLANG)):
        again = task_from_document(json.loads(json.dumps(task_document(task))), "here")
        assert (again.cases, again.base, again.max_steps, again.dialect, again.text) == \
            (task.cases, task.base, task.max_steps, task.dialect, task.text)


def test_a_file_too_large_or_a_device_is_refused_before_it_is_read(tmp_path):
    with pytest.raises(TaskFileError, match="larger than"):
        load_task_file(_big(tmp_path))


def _big(tmp_path):
    path = tmp_path / "big.json"
    with open(path, "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk space used
    return str(path)


def test_a_missing_file_says_what_task_accepts(tmp_path):
    with pytest.raises(TaskFileError, match="does not exist; pass a registered task name"):
        tasks.from_spec(str(tmp_path / "nope.json"))
