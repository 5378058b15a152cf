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
import functools
import itertools
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synthenv import reference
from synthenv.dialect import PQT
from synthenv.errors import UserError
from synthenv.language import COMMANDS, Status, encode_batch
from synthenv.reference import match_brackets

from . import grammar
from .py2random import Py2Random
from .solutions import KNOWN_SOLUTIONS
from .task import Task

SPLITS = ("train", "test")
SEED_OFFSETS = {"train": 0, "test": 2**40}
"""Each split's seed range starts here; a split holds ``MAX_INDEX`` tasks, so the ranges never meet."""
MAX_INDEX = 2**40

BASES = {256: 0.4, 10: 0.12, 20: 0.12, 27: 0.12, 2: 0.08, 16: 0.06, 7: 0.05, 100: 0.05}
"""Cell bases and their shares: PQT's (256, 27, 20, 10, 2) and a few others."""
MIN_LENGTH, MAX_LENGTH = 4, 30
"""The length range of a task's program, in commands (after ``minimize``)."""
MIN_CASES, MAX_CASES = 10, 16
MIN_DISTINCT_INPUTS = 8
MAX_OUTPUT = 32
TINY_LENGTH = 3
"""Tasks that some program of at most this many commands solves are dropped."""
MAX_ATTEMPTS = 5000
REASONS = ("length", "inputs", "halts", "long_output", "empty", "constant", "identity", "degenerate", "tiny",
           "known_solution", "paper_task")
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
    """Task ``index`` of ``split`` (``"train"`` or ``"test"``): the same on every call and machine.

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


SEEN_TASKS = 4000
"""The training tasks whose solutions ``TRAIN_SOLUTIONS`` holds: 0 .. 3999, what the shipped edit policy was
pretrained on."""
TRAIN_SOLUTIONS = Path(__file__).resolve().parent / "train_solutions.txt"
"""The unique solutions of training tasks 0 .. ``SEEN_TASKS`` - 1, one per line after ``#`` comment lines (written by
``synthenv library``; the default agent's shipped library of known programs)."""


@functools.cache
def train_solutions() -> tuple[str, ...]:
    """The programs of ``TRAIN_SOLUTIONS``, in order."""
    lines = TRAIN_SOLUTIONS.read_text(encoding="utf-8").splitlines()
    return tuple(line for line in lines if line and not line.startswith("#"))


def seen(task: Task) -> bool:
    """Whether a solution of training tasks 0 .. ``SEEN_TASKS`` - 1 solves ``task``: its test set cannot tell it
    apart from a task an agent pretrained on those tasks has seen (the stream is not de-duplicated, and many short
    programs recur).

    >>> seen(generate("test", 0).task), seen(generate("test", 1).task)
    (True, False)
    """
    runs = _runner().run(_seen_programs(), task, None, early_abort=True)
    return bool(_solved(runs, task).any())


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


@functools.cache
def _seen_programs():
    return _runner().compile(list(train_solutions()))


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


NAME_PATTERN = re.compile(r"gen-(?P<split>[^-]*)-(?P<index>.*)")


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


def simplify(code: str) -> str:
    """``code`` without what cannot change its output: ``+-``, ``-+``, ``><``, ``<`` at the start (``<``
    clamps at cell 0), adds just before ``[-]``, loops that start where the cell is 0 (at the start, or
    right after a loop), and trailing code that prints nothing. It prints what ``code`` prints, in fewer
    steps; only a trailing loop that never ends is lost (the generator checks the simplified program).

    >>> simplify("<[.]+-,>.<[-][>]+")
    ',>.'
    """
    previous = None
    while code != previous:
        previous = code
        code = re.sub(r"\+-|-\+|><", "", code).lstrip("<")
        code = re.sub(r"[+-]+(?=\[[-+]\])", "", code)
        code = _drop_dead_loops(code)
        code = _drop_silent_tail(code)
    return code


def _drop_dead_loops(code: str) -> str:
    partner = _partners(code)
    for i, c in enumerate(code):
        if c == "[" and i in partner and (i == 0 or (code[i - 1] == "]" and i - 1 in partner)):
            return code[:i] + code[partner[i] + 1:]
    return code


def _drop_silent_tail(code: str) -> str:
    """Drop top-level commands and loops without a ``.`` from the end."""
    partner = _partners(code)
    while code:
        start = partner.get(len(code) - 1, len(code) - 1) if code[-1] == "]" else len(code) - 1
        if "." in code[start:] or code[-1] == "[":
            return code
        code = code[:start]
    return code


def _partners(code: str) -> dict[int, int]:
    return match_brackets(code)[0]


def _draw(split: str, index: int, tally: Counter | None) -> GeneratedTask:
    check_index(index, split)
    seed = SEED_OFFSETS[split] + index
    rng = Py2Random(seed)
    family = grammar.weighted(rng, {f: f.weight for f in grammar.FAMILIES.values()})
    for _ in range(MAX_ATTEMPTS):
        shape = grammar.choice(rng, family.shapes)
        base = grammar.weighted(rng, BASES)
        program = simplify(family.sample(rng, shape))
        inputs = sample_inputs(rng, shape, base, family.small_values)
        task, reason = _screen(program, inputs, base, task_name(split, index), family, shape)
        if tally is not None:
            tally[reason or "kept"] += 1
        if task is not None:
            return GeneratedTask(task, task.solution, f"{family.name}/{shape}", seed)
    raise RuntimeError(f"no task kept in {MAX_ATTEMPTS} draws for gen-{split}-{index}; a bug in the grammar")


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


def _screen(program: str, inputs: Sequence[tuple[int, ...]], base: int, name: str, family: grammar.Family,
            shape: str) -> tuple[Task | None, str | None]:
    """The task made of ``program`` on ``inputs``, or None and the first filter that drops it."""
    if not MIN_LENGTH <= len(program) <= 2 * MAX_LENGTH:  # minimize may take it below MAX_LENGTH
        return None, "length"
    if len(inputs) < MIN_DISTINCT_INPUTS:
        return None, "inputs"
    runner = _runner()
    runs = runner.run(runner.compile([program]), Task(name, tuple((x, ()) for x in inputs), base, dialect=PQT),
                      MAX_OUTPUT + 1, early_abort=True)
    if (runs.status != Status.OK).any():
        return None, "halts"
    if (runs.lengths > MAX_OUTPUT).any():
        return None, "long_output"
    outputs = [tuple(int(v) for v in runs.outputs[0, k, :n]) for k, n in enumerate(runs.lengths[0])]
    reason = _trivial(inputs, outputs)
    if reason:
        return None, reason
    task = Task(name, tuple(zip(inputs, outputs)), base, dialect=PQT)
    shortest = minimize(program, task)
    if not MIN_LENGTH <= len(shortest) <= MAX_LENGTH:
        return None, "length"
    if not family.keeps(shortest):
        return None, "degenerate"
    solved = _solved(runner.run(_screen_programs(), task, None, early_abort=True), task)  # [N]
    if solved[: len(_TINY)].any():
        return None, "tiny"
    if solved[len(_TINY):].any():
        return None, "known_solution"
    if solves_a_known_task(program) or solves_a_known_task(shortest):
        return None, "paper_task"
    return Task(name, task.cases, base, dialect=PQT, solution=shortest,
                description=f"generated: {family.name}/{shape}"), None


def minimize(program: str, task: Task) -> str:
    """``program`` with commands, loops and bracket pairs deleted while it still solves ``task``: each round
    keeps the shortest variant that solves it (the first such of equal length), until none does.

    >>> task = Task("t", (((1, 2), (3,)), ((4, 1), (5,))), dialect=PQT)
    >>> minimize(",>,<>[<+>-]<.", task)
    ',>,[<+>-]<.'
    """
    runner = _runner()
    while True:
        variants = _deletions(program)
        if not variants:
            return program
        solved = _solved(runner.run(runner.compile(variants), task, None, early_abort=True), task)  # [N]
        kept = [v for v, ok in zip(variants, solved) if ok]
        if not kept:
            return program
        program = min(kept, key=len)


def minimal_equivalent(program: str, task: Task) -> str:
    """``minimize(program, task)`` without its unmatched brackets (no-ops that agents' programs are full of),
    confirmed case by case by the reference interpreter (``synthenv.reference``): a shortest-by-deletion
    program a person can read beside the one an agent wrote. ``program`` itself when it does not solve
    ``task`` or the shorter one does not pass the reference check.

    >>> task = Task("t", (((1, 2), (3,)), ((4, 1), (5,))), dialect=PQT)
    >>> minimal_equivalent(",>,<>[<+>-]<.>[-]", task)
    ',>,[<+>-]<.'
    >>> minimal_equivalent("]],>,][<+>-]<.[", task)
    ',>,[<+>-]<.'
    """
    def solves(code: str) -> bool:
        return reference.solves(code, task)

    if not solves(program):
        return program
    shorter = minimize(program, task)
    matched = _partners(shorter)
    bare = "".join(c for i, c in enumerate(shorter) if c not in "[]" or i in matched)
    if bare != shorter and solves(bare):
        shorter = minimize(bare, task)
    return shorter if solves(shorter) else program


def _deletions(code: str) -> list[str]:
    """``code`` less one command, one loop, or one loop's brackets; each variant once, in position order."""
    partner, variants = _partners(code), {}
    for i, c in enumerate(code):
        if c == "[" and i in partner:
            j = partner[i]
            variants[code[:i] + code[j + 1:]] = None
            variants[code[:i] + code[i + 1: j] + code[j + 1:]] = None
        elif c not in "[]":
            variants[code[:i] + code[i + 1:]] = None
            if code[i + 1: i + 2] not in ("", "[", "]"):  # two neighbours, e.g. `<>`
                variants[code[:i] + code[i + 2:]] = None
    return list(variants)


def _trivial(inputs: Sequence[tuple[int, ...]], outputs: Sequence[tuple[int, ...]]) -> str | None:
    if not all(outputs):
        return "empty"
    _, most = Counter(outputs).most_common(1)[0]
    if most == len(outputs) or 4 * most > 3 * len(outputs):
        return "constant"
    if all(y == x or (x[-1:] == (0,) and y == x[:-1]) for x, y in zip(inputs, outputs)):
        return "identity"
    return None


def solves_a_known_task(program: str) -> list[str]:
    """The paper and tuning tasks that ``program`` solves (their test sets cannot tell it apart).

    >>> solves_a_known_task(",>,[<+>-]<.>.")
    ['add']
    """
    return known_tasks_solved([program])[0]


def known_tasks_solved(programs: Sequence[str]) -> list[list[str]]:
    """For each of ``programs``, the paper and tuning tasks it solves (``solves_a_known_task``), in one batch.

    >>> known_tasks_solved([",>,[<+>-]<.>.", ",."])
    [['add'], []]
    """
    runner, compiled, found = _runner(), None, [set() for _ in programs]
    for union in _union_tasks():
        compiled = compiled if compiled is not None else runner.compile(list(programs))
        correct = _case_correct(runner.run(compiled, union.task, None, early_abort=False), union.task)  # [N, K]
        for name, (a, b) in union.slices.items():
            for row in correct[:, a:b].all(1).nonzero()[0]:
                found[row].add(name)
    return [[name for name in KNOWN_SOLUTIONS if name in names] for names in found]


_TINY = tuple("".join(p) for n in range(1, TINY_LENGTH + 1) for p in itertools.product(COMMANDS, repeat=n))


@functools.cache
def _screen_programs():
    """Every program of at most ``TINY_LENGTH`` commands, then the known solutions, compiled once."""
    return _runner().compile([*_TINY, *KNOWN_SOLUTIONS.values()])


@dataclass(frozen=True)
class _Union:
    task: Task  # the cases of every paper and tuning task of one base, one after another
    slices: dict[str, tuple[int, int]]  # task name -> its cases' range


@functools.cache
def _union_tasks() -> tuple[_Union, ...]:
    from synthenv import tasks

    known = [tasks.get(name) for name in KNOWN_SOLUTIONS]
    unions = []
    for base in sorted({t.base for t in known}):
        cases, slices = [], {}
        for t in known:
            if t.base == base:
                slices[t.name] = (len(cases), len(cases) + t.num_cases)
                cases += t.cases
        unions.append(_Union(Task(f"known-tasks-base-{base}", tuple(cases), base, dialect=PQT), slices))
    return tuple(unions)


@dataclass(frozen=True)
class _Runs:
    status: np.ndarray  # [N, K] int8 Status
    lengths: np.ndarray  # [N, K] values printed (may exceed O)
    outputs: np.ndarray  # [N, K, O] the first O values, zero-padded


def _case_correct(runs: _Runs, task: Task) -> np.ndarray:
    """``[N, K]`` bool: the case ended and printed exactly its expected output."""
    cases = task.tensors("cpu")
    expected, lengths = cases.expected.numpy(), cases.expected_lengths.numpy()  # [K, O'], [K]
    width = min(expected.shape[1], runs.outputs.shape[2])
    same = (runs.outputs[:, :, :width] == expected[None, :, :width]).all(2)  # [N, K]
    return (runs.status == Status.OK) & (runs.lengths == lengths[None]) & same


def _solved(runs: _Runs, task: Task) -> np.ndarray:
    return _case_correct(runs, task).all(1)  # [N]


class _Runner:
    """Runs programs on every case of a task: the native engine on one thread (small batches: a team of
    OpenMP threads costs more than it saves), else the reference interpreter, with the same results."""

    def __init__(self) -> None:
        from synthenv.engines import native

        self.engine = native.NativeEngine(num_threads=1) if native.is_available() else None

    def compile(self, programs: Sequence[str]):
        if self.engine is None:
            return list(programs)
        from synthenv.compilers.traditional import compile_native

        return compile_native(encode_batch(programs), num_threads=1)

    def run(self, compiled, task: Task, num_outputs: int | None, early_abort: bool) -> _Runs:
        num_outputs = num_outputs or max(1, task.max_output_length)
        if self.engine is not None:
            execution = self.engine.run(compiled, task, num_outputs, early_abort)
            return _Runs(execution.status.numpy(), execution.output_lengths.numpy(), execution.outputs.numpy())
        return _run_reference(compiled, task, num_outputs, early_abort)


def _run_reference(programs: Sequence[str], task: Task, num_outputs: int, early_abort: bool) -> _Runs:
    shape = (len(programs), task.num_cases)
    status, lengths = np.zeros(shape, np.int8), np.zeros(shape, np.int32)
    outputs = np.zeros((*shape, num_outputs), np.int32)
    for i, code in enumerate(programs):
        for k, (inputs, _) in enumerate(task.cases):
            if early_abort and (status[i, :k] != Status.OK).any():
                status[i, k] = Status.ABORTED
                continue
            run = reference.run(code, inputs, task.base, task.max_steps, task.dialect)
            status[i, k] = run.status
            if run.status == Status.OK:
                output = task.dialect.judged(run.output)
                lengths[i, k] = len(output)
                outputs[i, k, : min(len(output), num_outputs)] = output[:num_outputs]
    return _Runs(status, lengths, outputs)


@functools.cache
def _runner() -> _Runner:
    return _Runner()
