"""User tasks from JSON files, for ``synthenv train --task my_task.json``, ``synthenv table`` and ``synthenv score``.

A task file holds one object::

    {"name": "shout", "cases": [["hi", "HI!"], ["ok", "OK!"]], "dialect": "standard"}
    {"name": "double", "base": 256, "cases": [[[2], [4]], [[3], [6]]], "max_steps": 5000}

``name`` and ``cases`` are required: each case a pair ``[input, expected_output]``, each part a list of ints or a
string (text: its UTF-8 bytes; a task with text is shown as text and has base 256). ``dialect`` is a preset
(``"standard"``, the default: strict brackets, ``<`` on cell 0 an error, ``,`` at end of input 0; ``"pqt"``;
``"esolang"``) or an object of the fields of ``synthenv.dialect.Dialect`` over the standard dialect
(``{"left_edge": "wrap"}``): a task file gets the dialect of a standard interpreter unless it says otherwise,
since that is where its programs will run. ``base`` defaults to 256, ``max_steps`` to 5000; ``description`` and
``solution`` are optional. Anything malformed is a ``TaskFileError`` naming the file, the field and the fix.
"""

from __future__ import annotations

from pathlib import Path

from synthenv.dialect import FIELDS as DIALECT_FIELDS
from synthenv.dialect import PRESETS, Dialect
from synthenv.errors import UserError
from synthenv.language import DEFAULT_MAX_STEPS
from synthenv.storage import read_json

from .task import MAX_BASE, MAX_CASES, MAX_STEPS, Task

FIELDS = {"name": "a non-empty string (a label: no '/')",
          "cases": "a non-empty list of [input, expected_output] pairs, each an int list or a string",
          "base": f"an int in [2, {MAX_BASE}] (default 256; text tasks 256)",
          "max_steps": f"an int in [1, {MAX_STEPS}] (default {DEFAULT_MAX_STEPS})",
          "dialect": f"a preset ({', '.join(PRESETS)}) or an object with fields among {', '.join(DIALECT_FIELDS)}",
          "description": "a string", "solution": "a BF program (string)"}
MAX_FILE_BYTES = 16 * 2**20
"""Largest task file read (docs/limits.md)."""


class TaskFileError(UserError):
    """A task file that cannot be read or does not describe a task."""


def is_task_file(spec: str) -> bool:
    """Whether ``spec`` names a task file rather than a registered task (it ends in ``.json``)."""
    return isinstance(spec, str) and spec.lower().endswith(".json")


def load_task_file(path: str | Path) -> Task:
    """Read a ``Task`` from a JSON task file (format in the module docstring).

    >>> import json, tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    ...     json.dump({"name": "shout", "cases": [["hi", "HI"], ["no", "NO"]]}, f)
    >>> task = load_task_file(f.name); os.unlink(f.name)
    >>> task.name, task.num_cases, task.base, task.text, task.dialect.brackets
    ('shout', 2, 256, True, 'strict')
    """
    where = f"task file {str(path)!r}"
    try:
        document = read_json(path, "task file", MAX_FILE_BYTES,
                             missing="pass a registered task name (synthenv tasks) or the path of a JSON task file")
    except UserError as error:
        raise TaskFileError(str(error)) from None
    return task_from_document(document, where)


def task_from_document(document: object, where: str) -> Task:
    """A ``Task`` from a parsed task-file object (``where`` names it in errors)."""
    if not isinstance(document, dict):
        raise TaskFileError(f"{where} must hold one JSON object with the fields {sorted(FIELDS)}, "
                            f"got a {type(document).__name__}")
    unknown = sorted(set(document) - set(FIELDS), key=str)
    if unknown:
        raise TaskFileError(f"{where}: unknown field(s) {unknown}; the fields are {sorted(FIELDS)}")
    for name in ("name", "cases"):
        if name not in document:
            raise TaskFileError(f"{where}: missing field {name!r} ({FIELDS[name]})")
    _check(where, document, "name", isinstance(document["name"], str) and document["name"].strip() != "")
    cases = document["cases"]
    _check(where, document, "cases", isinstance(cases, list) and 0 < len(cases) <= MAX_CASES)
    text = False
    for index, case in enumerate(cases):
        if not (isinstance(case, list) and len(case) == 2 and all(_part(part) for part in case)):
            raise TaskFileError(f"{where}: field 'cases', case {index} must be [input, expected_output], each an int "
                                f"list or a string, got {case!r:.100}")
        text = text or any(isinstance(part, str) for part in case)
    for name, low, high in (("base", 2, MAX_BASE), ("max_steps", 1, MAX_STEPS)):
        if name in document:
            value = document[name]
            _check(where, document, name, isinstance(value, int) and not isinstance(value, bool) and low <= value <= high)
    if text and document.get("base", 256) != 256:
        raise TaskFileError(f"{where}: a task with text cases has base 256 (bytes), got base {document['base']!r}; "
                            "drop the field 'base' or write the cases as int lists")
    for name in ("description", "solution"):
        if name in document:
            _check(where, document, name, isinstance(document[name], str))
    try:
        dialect = Dialect.parse(document.get("dialect"))
    except UserError as error:
        raise TaskFileError(f"{where}: field 'dialect': {error}") from None
    try:
        return Task.from_pairs(document["name"], [tuple(case) for case in cases], base=document.get("base", 256),
                               max_steps=document.get("max_steps", DEFAULT_MAX_STEPS), dialect=dialect,
                               solution=document.get("solution"), description=document.get("description", ""))
    except ValueError as error:
        raise TaskFileError(f"{where}: {error}") from None


def task_document(task: Task) -> dict:
    """``task`` as a task-file object (``task_from_document`` reads it back; text cases as strings where they
    decode as UTF-8).

    >>> doc = task_document(Task.from_pairs("shout", [("hi", "HI")]))
    >>> doc["cases"], doc["dialect"]["left_edge"]
    ([['hi', 'HI']], 'error')
    """
    def part(values: tuple[int, ...]) -> list[int] | str:
        if task.text:
            try:
                return bytes(values).decode("utf-8")
            except (UnicodeDecodeError, ValueError):
                pass
        return list(values)

    document = {"name": task.name, "base": task.base, "max_steps": task.max_steps, "dialect": task.dialect.to_dict(),
                "cases": [[part(i), part(o)] for i, o in task.cases], "description": task.description}
    if task.solution is not None:
        document["solution"] = task.solution
    return document


def _part(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, list)
                                      and all(isinstance(v, int) and not isinstance(v, bool) for v in value))


def _check(where: str, document: dict, name: str, ok: bool) -> None:
    if not ok:
        raise TaskFileError(f"{where}: field {name!r} must be {FIELDS[name]}, got {document[name]!r:.100}")
