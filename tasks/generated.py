"""Generated tasks: an unbounded, seeded stream of small synthesis tasks, for pretraining and held-out tests.

Each task comes from a short BF program drawn from a grammar of idioms (``synthenv.tasks.grammar``:
straight-line code, counted loops that copy, add or multiply into other cells, loops that print as they
count, nested counted loops, loops over a 0-terminated list, lists stored and walked, and uniformly random
programs) and from inputs of one shape (one value, a pair, a triple, a 0-terminated list of 1 to 8 nonzero
values, or PQT's list of values that may be 0, with no terminator) in one cell base (256, 27, 20, 16, 10, 7,
2 or 100). A task has 10 to 16 cases with distinct inputs (as few as 8 where a shape has fewer in a base:
base 2 has 8 triples); the expected outputs are what the program prints under PQT's semantics (docs/semantics.md §1, 5000
steps). The task's ``solution`` is the drawn program after ``simplify`` and ``minimize`` (commands deleted
while it still solves the task), so its length bounds the shortest solution's: 4 to 30 commands.

A drawn program and its inputs are kept only if all of these hold, else both are drawn again (the first
failing filter is counted, ``filter_counts``):

- ``length``: the program has 4 to 30 commands (at most 60 before ``minimize``);
- ``inputs``: at least 8 distinct inputs could be drawn (base 2 has only 4 pairs);
- ``halts``: it ends within the step limit on every input;
- ``long_output``: no case prints more than 32 values;
- ``empty``: every case prints something;
- ``constant``: the outputs differ between cases, and no single output is the answer to more than 3/4 of
  them;
- ``identity``: the outputs are not the inputs unchanged (nor the inputs without their 0 terminator, the
  starter task ``echo``) on every case; transformed echoes (``,[+.,]``) are kept;
- ``degenerate``: the minimized program keeps its family's idiom (a counted family's loop, a nested
  family's inner loop, a list family's reading loop);
- ``tiny``: no program of 1 to 3 commands solves the task (all 584 are tried);
- ``known_solution`` (decontamination): no known solution of a paper or tuning task
  (``synthenv.tasks.solutions``) solves the task;
- ``paper_task`` (decontamination): the program (as drawn, and minimized) solves no paper or tuning task.

The two decontamination filters drop every task that a paper or tuning task's test set cannot tell apart
from it, in either direction, so pretraining on the stream never trains on a paper task. Screening runs on
the native engine on one thread (the reference interpreter where no C compiler works: the same results,
tests/test_differential.py), a few milliseconds per task.

Splits: ``train`` and ``test`` draw from disjoint seed ranges (``seed``: index, and 2**40 + index), one
``Py2Random`` per task, so a task is a function of (split, index) alone, the same on every machine. Task
``i`` of a split is named ``gen-{split}-{i}``; ``synthenv.tasks.get`` and ``from_spec`` resolve such names,
``synthenv.tasks.expand("generated-test:50")`` lists the first 50. Agents pretrain on ``train`` and are
reported on the first tasks of ``test``. The stream is not de-duplicated: a short program can recur on
other inputs or in another base.

>>> task = generate("test", 3)
>>> task.task.name, task.family, task.task.base, task.program
('gen-test-3', 'counted/pair', 27, ',[->>++<<]--.>>.')
>>> task.task.cases[0]  # (6, 17): prints 6 - 2 - 2 = 25 (mod 27), then 2 * 6
((6, 17), (25, 12))
>>> from synthenv import reference
>>> reference.score_program(task.program, task.task.cases, task.task.base).solved
True
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from synthenv.dialect import PQT, STANDARD, Dialect
from synthenv.errors import UserError
from synthenv.language import DEFAULT_MAX_STEPS, Status

from . import beyond_grammar, grammar, text_grammar
from .esolang import MAX_STEPS as TEXT_MAX_STEPS
from .known import TINY_PROGRAMS, screen_programs, seen, solves_a_known_task
from .minimize import minimize, simplify
from .py2random import Py2Random
from .runner import runner, solved
from .task import Task

MAX_INDEX = 2**40
MAX_SUITE_TASKS = 10_000
"""The most tasks one generated suite names (``generated-test:N``, ``generated-unseen:N``): each is made when
checked, about 5 ms apiece on one core (docs/limits.md)."""
MAX_GENERATED_TASKS = 100_000
"""The most generated tasks one library, prior or pretraining set is built from (about 9 minutes on one core)."""


def check_task_count(name: str, count: object, what: str) -> None:
    """Raise ``ValueError`` unless ``count`` is an int in [0, ``MAX_GENERATED_TASKS``] (``name``: the option)."""
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_GENERATED_TASKS:
        raise ValueError(f"{name} must be an int in [0, {MAX_GENERATED_TASKS}] ({what}; synthenv.tasks.generated."
                         f"MAX_GENERATED_TASKS, docs/limits.md), got {count!r}")


@dataclass(frozen=True)
class Stream:
    """What a split's tasks are made of: a grammar's families, text or int inputs, the dialect and step limit its
    programs run in, the length range of its programs, and whether a task is dropped when a training solution
    (the shipped library's programs) solves it."""

    families: dict
    text: bool
    dialect: Dialect
    max_steps: int
    min_length: int
    max_length: int
    held_out_from_library: bool


CORE = Stream(grammar.FAMILIES, False, PQT, DEFAULT_MAX_STEPS, 4, 30, False)
TEXT = Stream(text_grammar.FAMILIES, True, STANDARD, TEXT_MAX_STEPS, 4, 200, False)
BEYOND = Stream(beyond_grammar.FAMILIES, False, PQT, DEFAULT_MAX_STEPS, 4, 40, True)
STREAMS = {"train": CORE, "test": CORE, "tune": CORE, "text-train": TEXT, "text-tune": TEXT, "text-test": TEXT,
           "beyond-tune": BEYOND, "beyond-test": BEYOND}
"""Each split's stream: PQT's grammar (train, tune, test), the text grammar, and the families beyond the training
grammar (only in the beyond splits)."""
SPLITS = tuple(STREAMS)
SEED_OFFSETS = {split: i * MAX_INDEX for i, split in enumerate(SPLITS)}
"""Each split's seed range starts here; a split holds ``MAX_INDEX`` tasks, so the ranges never meet."""

BASES = {256: 0.4, 10: 0.12, 20: 0.12, 27: 0.12, 2: 0.08, 16: 0.06, 7: 0.05, 100: 0.05}
"""Cell bases and their shares: PQT's (256, 27, 20, 10, 2) and a few others."""
MIN_LENGTH, MAX_LENGTH = CORE.min_length, CORE.max_length
"""The length range of a task's program, in commands (after ``minimize``; the core splits')."""
MIN_CASES, MAX_CASES = 10, 16
MIN_DISTINCT_INPUTS = 8
MAX_OUTPUT = 32
TEXT_CASES = (8, 10)
"""A text task's cases: as few as text tasks of people's have (EsoLang-Bench's have 6), a few more to tell programs
apart."""
MAX_TEXT_OUTPUT = 48
MAX_ATTEMPTS = 5000
REASONS = ("length", "inputs", "halts", "long_output", "empty", "constant", "identity", "degenerate", "tiny",
           "known_solution", "paper_task", "library")
"""The filters, in the order they are applied (module docstring)."""


@dataclass(frozen=True)
class GeneratedTask:
    """One task of the stream.

    Attributes:
        task: the task, named ``gen-{split}-{index}``.
        program: the program it was made from, minimized (``minimize``); it solves the task.
        family: the grammar family and the input shape, e.g. ``"counted/pair"``.
        seed: the seed of the task's generator (unique across splits).
    """

    task: Task
    program: str
    family: str
    seed: int


def generate(split: str, index: int) -> GeneratedTask:
    """Task ``index`` of ``split`` (one of ``SPLITS``): the same on every call and machine.

    >>> generate("train", 0) == generate("train", 0)
    True
    """
    return _draw(split, index, None)


def stream(split: str, start: int = 0) -> Iterator[GeneratedTask]:
    """Tasks ``start``, ``start + 1``, ... of ``split``, without end.

    >>> [t.task.name for t in itertools.islice(stream("train", 5), 2)]
    ['gen-train-5', 'gen-train-6']
    """
    check_index(start, split)
    for index in itertools.count(start):
        yield generate(split, index)


def pairs(split: str, start: int, count: int) -> list[tuple[Task, str]]:
    """Tasks ``start`` to ``start + count - 1`` of ``split``, each with the program it was made from
    (what pretraining learns from: a task and one known solution).

    >>> [task.name for task, _ in pairs("train", 5, 2)], pairs("train", 5, 1)[0][1] == generate("train", 5).program
    (['gen-train-5', 'gen-train-6'], True)
    """
    return [(g.task, g.program) for g in itertools.islice(stream(split, start), count)]


def unseen(count: int, start: int = 0) -> list[int]:
    """The indices of the first ``count`` test tasks from ``start`` on that are not ``seen``: held-out tasks whose
    behaviour no training solution has.

    >>> unseen(3)
    [1, 3, 6]
    """
    check_index(start, "test")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise UserError(f"count must be an int >= 0 (unseen test tasks), got {count!r}")
    found: list[int] = []
    for index in itertools.count(start):
        if len(found) == count:
            return found
        if not seen(generate("test", index).task):
            found.append(index)
    raise AssertionError("unreachable")


def filter_counts(split: str, count: int, start: int = 0) -> Counter:
    """How many drawn candidates each filter dropped while making tasks ``start`` to ``start + count - 1``;
    ``"kept"`` counts the tasks."""
    tally: Counter = Counter()
    for index in range(start, start + count):
        _draw(split, index, tally)
    return tally


def task_name(split: str, index: int) -> str:
    """The registry name of task ``index`` of ``split``: ``gen-{split}-{index}``."""
    check_index(index, split)
    return f"gen-{split}-{index}"


NAME_PATTERN = re.compile(r"gen-(?P<split>.+)-(?P<index>[^-]*)")


def parse_name(name: str) -> tuple[str, int]:
    """``(split, index)`` from a name ``gen-{split}-{index}``; a malformed one raises ``UserError``.

    >>> parse_name("gen-test-7")
    ('test', 7)
    """
    match = NAME_PATTERN.fullmatch(name)
    if match is None:
        raise UserError(f"generated task names are gen-{{split}}-{{index}} with split one of {', '.join(SPLITS)}, "
                        f"got {name!r}; e.g. 'gen-test-7'")
    split, index = match["split"], match["index"]
    check_split(split, name)
    if not re.fullmatch(r"0|[1-9][0-9]*", index):
        hint = f"; did you mean 'gen-{split}-{int(index)}'?" if index.isdigit() else "; e.g. 'gen-test-7'"
        raise UserError(f"the index in generated task name {name!r} must be a non-negative integer without leading "
                        f"zeros, got {index!r}{hint}")
    check_index(int(index), split)
    return split, int(index)


def check_split(split: object, where: str | None = None) -> None:
    """Raise ``UserError`` unless ``split`` is one of ``SPLITS`` (``where``: the name it came from)."""
    if split not in SPLITS:
        close = difflib.get_close_matches(split, SPLITS, n=1) if isinstance(split, str) else []
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UserError(f"unknown split {split!r}{f' in {where!r}' if where else ''}.{hint} Valid splits: "
                        f"{', '.join(SPLITS)}.")


def check_index(index: object, split: str) -> None:
    """Raise ``UserError`` unless ``split`` is a split and ``index`` an int in [0, 2**40)."""
    check_split(split)
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < MAX_INDEX:
        raise UserError(f"a generated task index must be an int in [0, 2**40), got {index!r}")


def _draw(split: str, index: int, tally: Counter | None) -> GeneratedTask:
    check_index(index, split)
    seed, stream = SEED_OFFSETS[split] + index, STREAMS[split]
    rng = Py2Random(seed)
    family = grammar.weighted(rng, {f: f.weight for f in stream.families.values()})
    for _ in range(MAX_ATTEMPTS):
        shape = grammar.choice(rng, family.shapes)
        if stream.text:
            base, program = 256, simplify(family.sample(rng, shape))
            inputs = sample_text_inputs(rng, shape)
        else:
            base = grammar.weighted(rng, BASES)
            program = simplify(family.sample(rng, shape))
            inputs = sample_inputs(rng, shape, base, family.small_values)
        task, reason = _screen(program, inputs, base, task_name(split, index), family, shape, stream)
        if tally is not None:
            tally[reason or "kept"] += 1
        if task is not None:
            return GeneratedTask(task, task.solution, f"{family.name}/{shape}", seed)
    raise RuntimeError(f"no task kept in {MAX_ATTEMPTS} draws for gen-{split}-{index}; a bug in the grammar")


def sample_text_inputs(rng: Py2Random, shape: str) -> list[tuple[int, ...]]:
    """``TEXT_CASES`` distinct text inputs of ``shape`` (``text_grammar.SHAPES``), as UTF-8 bytes, in draw order."""
    num_cases = TEXT_CASES[0] + rng.randrange(TEXT_CASES[1] - TEXT_CASES[0] + 1)
    seen_inputs: dict[tuple[int, ...], None] = {}
    for _ in range(8 * num_cases):
        seen_inputs[tuple(text_grammar.sample_text(rng, shape).encode())] = None
        if len(seen_inputs) == num_cases:
            break
    return list(seen_inputs)


def sample_inputs(rng: Py2Random, shape: str, base: int, small_values: bool) -> list[tuple[int, ...]]:
    """10 to 16 distinct inputs of ``shape`` (fewer when there are not that many), in draw order."""
    high = base
    if small_values or rng.random() < 0.3:  # small values: loops that print per count stay short
        enough = MIN_CASES if grammar.ARITY.get(shape) == 1 else 4  # room for 10 distinct inputs
        high = min(base, max(enough, grammar.choice(rng, (4, 6, 8, 10, 16))))
    max_length = grammar.choice(rng, (4, 6, 6, 8))
    num_cases = MIN_CASES + rng.randrange(MAX_CASES - MIN_CASES + 1)
    seen: dict[tuple[int, ...], None] = {}
    for _ in range(8 * num_cases):
        if shape in grammar.ARITY:
            x = tuple(rng.randrange(high) for _ in range(grammar.ARITY[shape]))
        elif shape == "list":
            x = tuple(rng.randrange(1, high) for _ in range(1 + rng.randrange(max_length))) + (0,)
        else:
            x = tuple(rng.randrange(high) for _ in range(1 + rng.randrange(max_length)))
        seen[x] = None
        if len(seen) == num_cases:
            break
    return list(seen)


def _screen(program: str, inputs: Sequence[tuple[int, ...]], base: int, name: str, family, shape: str,
            stream: Stream = CORE) -> tuple[Task | None, str | None]:
    """The task made of ``program`` on ``inputs``, or None and the first filter that drops it."""
    if not stream.min_length <= len(program) <= 2 * stream.max_length:  # minimize may take it below max_length
        return None, "length"
    if len(inputs) < (TEXT_CASES[0] if stream.text else MIN_DISTINCT_INPUTS):
        return None, "inputs"
    longest = MAX_TEXT_OUTPUT if stream.text else MAX_OUTPUT
    make = lambda cases, **fields: Task(name, cases, base, stream.max_steps, stream.dialect, text=stream.text,  # noqa: E731
                                        **fields)
    run = runner()
    runs = run.run(run.compile([program]), make(tuple((x, ()) for x in inputs)), longest + 1, early_abort=True)
    if (runs.status != Status.OK).any():
        return None, "halts"
    if (runs.lengths > longest).any():
        return None, "long_output"
    outputs = [tuple(int(v) for v in runs.outputs[0, k, :n]) for k, n in enumerate(runs.lengths[0])]
    reason = _trivial(inputs, outputs)
    if reason:
        return None, reason
    task = make(tuple(zip(inputs, outputs)))
    shortest = minimize(program, task)
    if not stream.min_length <= len(shortest) <= stream.max_length:
        return None, "length"
    if not family.keeps(shortest):
        return None, "degenerate"
    found = solved(run.run(screen_programs(), task, None, early_abort=True), task)  # [N]
    if found[: len(TINY_PROGRAMS)].any():
        return None, "tiny"
    if not stream.text:  # the paper's and tuning tasks are int tasks in PQT's dialect
        if found[len(TINY_PROGRAMS):].any():
            return None, "known_solution"
        if solves_a_known_task(program) or solves_a_known_task(shortest):
            return None, "paper_task"
    if stream.held_out_from_library and seen(task):
        return None, "library"
    return make(task.cases, solution=shortest, description=f"generated: {family.name}/{shape}"), None


def _trivial(inputs: Sequence[tuple[int, ...]], outputs: Sequence[tuple[int, ...]]) -> str | None:
    if not all(outputs):
        return "empty"
    _, most = Counter(outputs).most_common(1)[0]
    if most == len(outputs) or 4 * most > 3 * len(outputs):
        return "constant"
    if all(y == x or (x[-1:] == (0,) and y == x[:-1]) for x, y in zip(inputs, outputs)):
        return "identity"
    return None


