"""EsoLang-Bench's Brainfuck problems as a suite: ``esolang:PATH`` (the user's copy) or ``esolang:hf`` (the hub).

EsoLang-Bench (arXiv 2603.09678; github.com/Lossfunk/EsolangBench, MIT; ``Lossfunk/Esolang-Bench`` on the Hugging
Face hub) is 80 problems in four tiers of 20 (easy, medium, hard, extra_hard), each with 6 test cases of text in,
text out. synthenv ships none of its data: point it at the benchmark's JSON file (``esolang_benchmark.json``, whose
``problems`` hold ``id``, ``difficulty``, ``title``, ``description`` and ``input_output_examples``), a folder holding
it, or with ``datasets`` installed and a network, the hub's dataset (rows with ``test_cases``).

Each problem becomes a text task named ``esolang-<id>`` in EsoLang-Bench's dialect (``synthenv.dialect.ESOLANG``,
read off its interpreter and judge): unmatched brackets are a compile error, ``<`` on cell 0 a runtime error, ``,``
at end of input gives 0, cells wrap at 256, and outputs are compared without trailing whitespace. Its interpreter
stops a program after 5 seconds of Python; synthenv's step limit, ``MAX_STEPS``, is far below that, so every
program synthenv reports as solving a problem runs within EsoLang-Bench's limit too (the converse does not hold:
a program that needs more steps counts as failing here). synthenv's comparison ignores only ASCII whitespace at
the end, a subset of what EsoLang-Bench's judge ignores, so a solution here is a solution there.

Specs: ``esolang:PATH`` (all 80), ``esolang:PATH#easy`` (a tier; tiers joined by ``,``), ``esolang:PATH#E01`` (one
problem); ``PATH`` may be ``hf``.

>>> import json, tempfile, os
>>> problem = {"id": "E02", "difficulty": "easy", "title": "Echo Line", "description": "Echo the line.",
...            "input_output_examples": [{"input": "hi", "output": "hi"}, {"input": "", "output": ""}]}
>>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
...     json.dump({"problems": [problem]}, f)
>>> [task.name for task in load(f.name)], expand(f"esolang:{f.name}#easy") == [f"esolang:{f.name}#E02"]
(['esolang-E02'], True)
>>> from synthenv import reference
>>> reference.solves(",[.,]", load(f.name)[0]); os.unlink(f.name)
True
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from synthenv.dialect import ESOLANG
from synthenv.errors import UserError
from synthenv.storage import read_json

from .task import Task

PREFIX = "esolang:"
TIERS = ("easy", "medium", "hard", "extra_hard")
MAX_STEPS = 20_000
"""The step limit of EsoLang-Bench tasks (module docstring)."""
FILE_NAME = "esolang_benchmark.json"
"""The benchmark's file of all 80 problems, as its repository names it."""
HUB_NAME = "Lossfunk/Esolang-Bench"
MAX_FILE_BYTES = 16 * 2**20
FIX = (f"pass EsoLang-Bench's JSON file ({FILE_NAME}, in esolang_bench/data/ of github.com/Lossfunk/EsolangBench), "
       "a folder holding it, or 'hf' for the hub's copy")


class EsolangError(UserError):
    """An EsoLang-Bench spec or file that cannot be read as the benchmark."""


def is_spec(spec: object) -> bool:
    return isinstance(spec, str) and spec.startswith(PREFIX)


def expand(spec: str) -> list[str]:
    """The task specs of ``spec``'s problems, in the benchmark's order: ``esolang:PATH#<id>`` each."""
    source, selection = _split(spec)
    chosen = _select(load(source), selection, spec)
    return [f"{PREFIX}{source}#{task.name.removeprefix('esolang-')}" for task in chosen]


def from_spec(spec: str) -> Task:
    """The one problem that ``esolang:PATH#<id>`` names."""
    source, selection = _split(spec)
    chosen = _select(load(source), selection, spec)
    if len(chosen) != 1 or selection is None:
        raise EsolangError(f"{spec!r} names {len(chosen)} problems; a task is esolang:PATH#<id>, e.g. "
                           f"'{PREFIX}{source}#E01' (a table takes the whole suite or a tier: 'esolang:{source}#easy')")
    return chosen[0]


def tier(task: Task) -> str:
    """A task's tier, as its description records it (``[easy] Echo Line: ...``)."""
    return task.description[1:].partition("]")[0]


def load(source: str) -> list[Task]:
    """Every problem of the benchmark at ``source`` (a JSON file, a folder holding ``esolang_benchmark.json``, or
    ``hf``), as tasks. Read once per file version (path, size and modification time)."""
    if source == "hf":
        return list(_load_hub())
    path = _find(Path(source))
    stat = path.stat()
    return list(_load_file(str(path.resolve()), stat.st_size, stat.st_mtime_ns))


def _split(spec: str) -> tuple[str, str | None]:
    if not is_spec(spec):
        raise EsolangError(f"an EsoLang-Bench spec starts with {PREFIX!r}, got {spec!r}")
    source, _, selection = spec.removeprefix(PREFIX).partition("#")
    if not source:
        raise EsolangError(f"{spec!r} names no source; {FIX}, e.g. 'esolang:{FILE_NAME}'")
    return source, selection or None


def _select(problems: list[Task], selection: str | None, spec: str) -> list[Task]:
    if selection is None:
        return problems
    wanted = selection.split(",")
    ids = {task.name.removeprefix("esolang-"): task for task in problems}
    unknown = [w for w in wanted if w not in TIERS and w not in ids]
    if unknown:
        raise EsolangError(f"{spec!r}: {unknown[0]!r} is neither a tier ({', '.join(TIERS)}) nor a problem id of "
                           f"the file (e.g. {', '.join(list(ids)[:3])})")
    return [task for name, task in ids.items() if name in wanted or tier(task) in wanted]


def _find(path: Path) -> Path:
    if path.is_dir():
        for candidate in (path / FILE_NAME, path / "data" / FILE_NAME, path / "esolang_bench" / "data" / FILE_NAME):
            if candidate.is_file():
                return candidate
        raise EsolangError(f"folder {str(path)!r} holds no {FILE_NAME}; {FIX}")
    if not path.exists():
        raise EsolangError(f"EsoLang-Bench file {str(path)!r} does not exist; {FIX}")
    return path


@functools.lru_cache(maxsize=8)
def _load_file(path: str, size: int, mtime: int) -> tuple[Task, ...]:
    document = read_json(path, "EsoLang-Bench file", MAX_FILE_BYTES)
    problems = document.get("problems") if isinstance(document, dict) else None
    if not isinstance(problems, list) or not problems:
        raise EsolangError(f"EsoLang-Bench file {path!r} has no list of 'problems'; {FIX}")
    return tuple(problem_task(entry, f"EsoLang-Bench file {path!r}, problem {index}")
                 for index, entry in enumerate(problems))


@functools.lru_cache(maxsize=1)
def _load_hub() -> tuple[Task, ...]:
    try:
        import datasets
    except ImportError:
        raise EsolangError('esolang:hf reads the hub with the datasets library: pip install "synthenv[llm]"; or '
                           f"{FIX}") from None
    try:
        rows = datasets.load_dataset(HUB_NAME)["test"]
    except Exception as error:  # offline, or the hub refused: the library's own message
        raise EsolangError(f"could not load {HUB_NAME} from the hub ({type(error).__name__}: {error}); "
                           f"{FIX}") from None
    return tuple(problem_task(dict(row), f"{HUB_NAME}, row {index}") for index, row in enumerate(rows))


def problem_task(entry: object, where: str) -> Task:
    """One problem (a mapping with ``id``, ``difficulty``, ``title``, ``description`` and its test cases under
    ``input_output_examples``, ``test_cases`` or ``tests``) as a text task in EsoLang-Bench's dialect."""
    if not isinstance(entry, dict):
        raise EsolangError(f"{where} is not an object; {FIX}")
    tests = next((entry[k] for k in ("input_output_examples", "test_cases", "tests") if k in entry), None)
    ident, difficulty = entry.get("id"), entry.get("difficulty")
    if not isinstance(ident, str) or not ident or os.sep in ident or "/" in ident:
        raise EsolangError(f"{where} has no id (a string such as 'E01'); {FIX}")
    if not isinstance(tests, list) or not tests or not all(
            isinstance(t, dict) and isinstance(t.get("input", ""), str) and isinstance(t.get("output"), str)
            for t in tests):
        raise EsolangError(f"{where} ({ident}) has no test cases of text input and output; {FIX}")
    title, description = str(entry.get("title", "")), str(entry.get("description", ""))
    try:
        return Task.from_pairs(f"esolang-{ident}", [(t.get("input", ""), t["output"]) for t in tests],
                               max_steps=MAX_STEPS, dialect=ESOLANG,
                               description=f"[{difficulty}] {title}: {description}".strip())
    except ValueError as error:
        raise EsolangError(f"{where} ({ident}): {error}") from None
