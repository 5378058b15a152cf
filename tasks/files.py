"""User tasks from JSON files, for ``synthenv train --task my_task.json`` and ``synthenv table``.

A task file holds one object::

    {"name": "double", "base": 256, "cases": [[[2], [4]], [[3], [6]]], "max_steps": 5000}

``name`` and ``cases`` are required (each case a pair ``[inputs, expected_output]`` of int
lists); ``base`` defaults to 256, ``max_steps`` to PQT's 5000; ``description`` and ``solution``
are optional. Anything malformed is a ``TaskFileError`` naming the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path

from synthenv.language import DEFAULT_MAX_STEPS

from .task import Task

FIELDS = {"name": "a non-empty string", "cases": "a non-empty list of [inputs, expected_output] pairs of int lists",
          "base": "an int >= 2 (default 256)", "max_steps": f"a positive int (default {DEFAULT_MAX_STEPS})",
          "description": "a string", "solution": "a BF program (string)"}


class TaskFileError(ValueError):
    """A task file that cannot be read or does not describe a task."""


def is_task_file(spec: str) -> bool:
    """Whether ``spec`` names a task file rather than a registered task (it ends in ``.json``)."""
    return isinstance(spec, str) and spec.lower().endswith(".json")


def load_task_file(path: str | Path) -> Task:
    """Read a ``Task`` from a JSON task file (format in the module docstring).

    >>> import json, tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    ...     json.dump({"name": "double", "cases": [[[2], [4]], [[3], [6]]]}, f)
    >>> task = load_task_file(f.name); os.unlink(f.name)
    >>> task.name, task.num_cases, task.base
    ('double', 2, 256)
    """
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise TaskFileError(f"task file {str(path)!r} does not exist; pass a registered task name "
                            "(synthenv tasks) or the path of a JSON task file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise TaskFileError(f"task file {str(path)!r} cannot be read: {error}") from None
    except json.JSONDecodeError as error:
        raise TaskFileError(f"task file {str(path)!r} is not valid JSON ({error.msg} at line {error.lineno}, "
                            f"column {error.colno})") from None
    where = f"task file {str(path)!r}"
    if not isinstance(document, dict):
        raise TaskFileError(f"{where} must hold one JSON object with the fields {sorted(FIELDS)}, "
                            f"got a {type(document).__name__}")
    unknown = sorted(set(document) - set(FIELDS))
    if unknown:
        raise TaskFileError(f"{where}: unknown field(s) {unknown}; the fields are {sorted(FIELDS)}")
    for name in ("name", "cases"):
        if name not in document:
            raise TaskFileError(f"{where}: missing field {name!r} ({FIELDS[name]})")
    _check(where, document, "name", isinstance(document["name"], str) and document["name"].strip() != "")
    cases = document["cases"]
    _check(where, document, "cases", isinstance(cases, list) and len(cases) > 0)
    for index, case in enumerate(cases):
        if not (isinstance(case, list) and len(case) == 2 and all(_int_list(part) for part in case)):
            raise TaskFileError(f"{where}: field 'cases', case {index} must be [inputs, expected_output] with two "
                                f"lists of ints, got {case!r}")
    for name, low in (("base", 2), ("max_steps", 1)):
        if name in document:
            value = document[name]
            _check(where, document, name, isinstance(value, int) and not isinstance(value, bool) and value >= low)
    for name in ("description", "solution"):
        if name in document:
            _check(where, document, name, isinstance(document[name], str))
    try:
        return Task(document["name"], tuple((tuple(i), tuple(o)) for i, o in cases), base=document.get("base", 256),
                    max_steps=document.get("max_steps", DEFAULT_MAX_STEPS), solution=document.get("solution"),
                    description=document.get("description", ""))
    except ValueError as error:
        raise TaskFileError(f"{where}: {error}") from None


def _int_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _check(where: str, document: dict, name: str, ok: bool) -> None:
    if not ok:
        raise TaskFileError(f"{where}: field {name!r} must be {FIELDS[name]}, got {document[name]!r}")
