"""The table's grid: its cells (tasks x algorithm specs) at one budget, resumed from JSON, farmed over ranks.

The JSON document (``{out}.json``) holds the budget's fields at its top level, ``tasks`` and ``algos`` in
table order and ``cells``, each a ``synthenv.table.report.summarize_cell`` summary with its per-seed results.
A table reuses the cells of a document with the same budget, whichever version wrote it (each summary is
computed again from its per-seed results), and refuses to overwrite a document of another budget.

A cell is trained by a *cell runner*, ``(task, algorithm spec) -> cell``; ``train_cell`` is the one the
command uses, and any other (a test's) fills the grid the same way.

>>> grid = Grid(cell_keys(["print-hello"], ["random", "ga"]), Budget(npe=64, seconds=None, seeds=2, max_len=6,
...             backend="traditional", engine="auto", device="cpu"), out="runs/example")
>>> grid.todo()
[('print-hello', 'random'), ('print-hello', 'ga')]
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from synthenv import agents, storage, tasks
from synthenv.agents.registry import check_files, parse_algo
from synthenv.checks import require_positive_int, require_seed, require_writable
from synthenv.distributed import Team
from synthenv.errors import UserError
from synthenv.table.plot import write_plot
from synthenv.table.report import cell_hardware, cell_line, render_markdown, summarize_cell

Key = tuple[str, str]
"""A cell's (task, algorithm spec)."""
CellRunner = Callable[[str, str], dict]
"""Computes one cell: (task, algorithm spec) -> its summary (``summarize_cell``)."""


@dataclass(frozen=True)
class Budget:
    """What makes two tables' cells comparable: a resumed table reuses only the cells of the same budget."""

    npe: int
    """Programs executed per run."""
    seconds: float | None
    """Wall-clock seconds per cell (its K seeds together); None: no time limit."""
    seeds: int
    """K, runs per cell (seeds first_seed .. first_seed + K - 1)."""
    max_len: int | None
    """L (None: each task's kind's default, ``TrainConfig.for_task``)."""
    backend: str
    engine: str
    device: str
    first_seed: int = 0
    """The first seed of every cell (a table of JSON that lacks it was made from seed 0)."""

    def __post_init__(self):
        require_positive_int("seeds", self.seeds)
        require_seed("first_seed", self.first_seed, allow_none=False)


def expand_tasks(specs: Sequence[str]) -> list[str]:
    """Task names and task files in order, suites and generated slices expanded (``tasks.expand``: ``paper``,
    ``tune``, ``generated-test:50``...); each one checked.

    >>> len(expand_tasks(["paper"])), expand_tasks(["add", "reverse-tune", "generated-test:1"])
    (26, ['add', 'reverse-tune', 'gen-test-0'])
    """
    names = tasks.expand(list(specs))
    for name in names:
        tasks.from_spec(name)
    return names


def cell_keys(task_specs: Sequence[str], algos: Sequence[str]) -> list[Key]:
    """Every (task, algorithm spec) cell in table order (row by row); checks every task and spec first.

    >>> cell_keys([], ["islands"])
    Traceback (most recent call last):
        ...
    synthenv.errors.UserError: --tasks is empty; name at least one task or suite (e.g. --tasks paper)
    """
    if not task_specs:
        raise UserError("--tasks is empty; name at least one task or suite (e.g. --tasks paper)")
    if not algos:
        raise UserError(f"--algos is empty; name at least one algorithm ({', '.join(agents.names())})")
    for spec in algos:
        check_files(parse_algo(spec)[1])
    return [(task, algo) for task in expand_tasks(task_specs) for algo in algos]


_RESULT_KINDS = {"task": (str,), "algo": (str,), "seed": (int,), "solved": (bool,), "npe": (int,),
                 "seconds": (int, float), "best_program": (str,), "best_reward": (int, float),
                 "run_dir": (str, type(None)), "programs_per_s": (int, float), "minimal_program": (str, type(None))}
"""The JSON kinds of a stored ``RunResult``'s fields."""


def load_cells(path: Path, budget: Budget) -> dict[Key, dict]:
    """The cells an earlier run of the same table left in ``path``, keyed by (task, algo).

    Each summary is computed again from its per-seed results (so a table written by an older version reads
    the same); a cell whose results lack a field is left out, to be run again.

    Raises:
        UserError: ``path`` is not a table's JSON (malformed, too large or too deeply nested, not an object, a
            cell without its task, algorithm, wall time or per-seed results, or with values of the wrong kind),
            or holds a table of another budget (its cells would not be comparable, and running this table would
            overwrite them): the message names the file, what is wrong and the fix.
    """
    fix = "give another --out, or --fresh to replace it"

    def damaged(what: str) -> UserError:
        return UserError(f"{str(path)!r} is not a table's JSON ({what}); {fix}")

    try:
        document = json.loads(storage.read_text(path, "the table"))
    except json.JSONDecodeError as error:
        raise damaged(f"{error.msg} at line {error.lineno}, column {error.colno}") from None
    except RecursionError:
        raise damaged("it nests too deeply to read") from None
    except UserError as error:
        raise UserError(f"{error}; {fix}") from None

    if not isinstance(document, dict):
        raise damaged(f"it holds a JSON {type(document).__name__}, not an object with the budget and the cells")
    defaults = {f.name: f.default for f in dataclasses.fields(Budget) if f.default is not dataclasses.MISSING}
    differences = [f"{key} {stored!r} in the file, {value!r} now" for key, value in dataclasses.asdict(budget).items()
                   if (stored := document.get(key, defaults.get(key))) != value]
    if differences:
        raise UserError(f"{str(path)!r} holds a table of another budget ({'; '.join(differences)}): give the "
                        "options it was made with to resume or redraw it, --fresh to replace it, or another --out")
    stored = document.get("cells", [])
    if not isinstance(stored, list):
        raise damaged(f"'cells' is a {type(stored).__name__}, not a list")
    names = [f.name for f in dataclasses.fields(agents.RunResult)]
    cells, unreadable = {}, 0
    for index, cell in enumerate(stored):
        if not isinstance(cell, dict):
            raise damaged(f"cell {index} is a {type(cell).__name__}, not an object")
        for field, kinds in (("task", str), ("algo", str), ("wall_s", (int, float)), ("results", list)):
            if not isinstance(cell.get(field), kinds) or isinstance(cell.get(field), bool):
                got = "missing" if field not in cell else f"a {type(cell[field]).__name__}"
                raise damaged(f"cell {index} has no valid {field!r} ({got})")
        if not all(isinstance(r, dict) for r in cell["results"]):
            raise damaged(f"cell {index} ({cell['task']}, {cell['algo']}): a per-seed result is not an object")
        if not cell["results"] or not all(name in r for r in cell["results"] for name in names):
            unreadable += 1
            continue
        for seed, result in enumerate(cell["results"]):
            for name, kinds in _RESULT_KINDS.items():
                value = result[name]
                if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                    raise damaged(f"cell {index} ({cell['task']}, {cell['algo']}), result {seed}: {name!r} is a "
                                  f"{type(value).__name__}")
        results = [agents.RunResult(**{name: r[name] for name in names}) for r in cell["results"]]
        summary = summarize_cell(cell["task"], cell["algo"], results, cell["wall_s"], cell.get("hardware"))
        cells[(summary["task"], summary["algo"])] = summary
    if unreadable:
        print(f"{path}: {unreadable} cell(s) lack fields of the per-seed results ({', '.join(names)}); "
              "they run again", flush=True)
    return cells


def train_cell(task: str, spec: str, budget: Budget, log_dir: str | None = None, progress: bool = False) -> dict:
    """One cell: the K seeds of ``spec`` on ``task`` trained as one batched job on ``budget.device``."""
    algo, config = parse_algo(spec)
    start = time.perf_counter()
    results = agents.train(agents.TrainConfig(
        task=task, algo=algo, npe=budget.npe, seconds=budget.seconds,
        seeds=tuple(range(budget.first_seed, budget.first_seed + budget.seeds)),
        algo_config=config, backend=budget.backend, engine=budget.engine, device=budget.device,
        max_len=budget.max_len, log_dir=log_dir, progress=progress))
    return summarize_cell(task, spec, results, time.perf_counter() - start, cell_hardware(budget.device))


class Grid:
    """A table being filled: its cells in order, its budget, the cells done so far and the files it writes
    (``{out}.json``, kept up to date after every cell, ``{out}.md`` and the picture ``plot``, a PNG)."""

    def __init__(self, keys: Sequence[Key], budget: Budget, out: str, plot: str | None = None):
        if plot is not None and not str(plot).lower().endswith(".png"):
            raise ValueError(f"--plot {plot!r}: the picture is a PNG; give a path ending in .png")
        self.keys, self.budget, self.plot = list(keys), budget, plot
        self.json_path, self.markdown_path = Path(out + ".json"), Path(out + ".md")
        self.cells: dict[Key, dict] = {}

    def check_outputs(self) -> None:
        """Raise ``UserError`` now, before any cell runs, if an output cannot be written."""
        require_writable(self.json_path, "--out")
        if self.plot is not None:
            require_writable(self.plot, "--plot")

    def resume(self) -> None:
        """Take the cells an earlier run of this table left in its JSON (``load_cells``); those of tasks or
        algorithms not asked for now are kept in the JSON, left out of the markdown and the picture."""
        if self.json_path.exists():
            self.cells.update(load_cells(self.json_path, self.budget))

    def todo(self) -> list[Key]:
        """The cells not done yet, in table order."""
        return [key for key in self.keys if key not in self.cells]

    def keep(self, cell: dict) -> None:
        """Record a finished cell: print its line, rewrite the JSON (what a resumed table reuses)."""
        self.cells[(cell["task"], cell["algo"])] = cell
        print(cell_line(cell), flush=True)
        storage.write_json(self.json_path, self.document(everything=True), "the table")

    def document(self, everything: bool = False) -> dict:
        """The table as JSON data: the budget, tasks and algorithms in order, the cells done; with
        ``everything``, also the cells of other tasks and algorithms that the JSON held (after the asked ones)."""
        keys = list(self.keys)
        if everything:
            keys += [key for key in self.cells if key not in set(self.keys)]
        return {**dataclasses.asdict(self.budget), "tasks": list(dict.fromkeys(task for task, _ in keys)),
                "algos": list(dict.fromkeys(algo for _, algo in keys)),
                "cells": [self.cells[key] for key in keys if key in self.cells]}

    def write(self) -> str:
        """Write the JSON (every cell), the markdown and the picture (the asked cells; the picture if asked for),
        each atomically; returns the markdown."""
        document = self.document()
        markdown = render_markdown(document)
        storage.write_json(self.json_path, self.document(everything=True), "the table")
        storage.write_text(self.markdown_path, markdown, "the table's markdown")
        if self.plot is not None:
            write_plot(document, self.plot)
        return markdown


def fill(grid: Grid, run_cell: CellRunner, team: Team | None = None, resume: bool = True) -> None:
    """Compute every cell ``grid`` lacks, in this process or over the ranks of ``team``.

    The process that writes (the only one, or rank 0) checks the outputs and, with ``resume``, takes the
    cells already in the grid's JSON first. Under ``team`` every rank takes the next cell left to do from
    a shared counter (greedy) and posts its result; rank 0 keeps each result as it comes (between its own
    cells) and ends with them all, the other ranks' grids stay empty. Cells are seeded per seed, so a cell
    does not depend on the rank that computed it.
    """
    if team is None or team.is_main:
        grid.check_outputs()
        if resume:
            grid.resume()
    if team is None:
        for task, algo in grid.todo():
            grid.keep(run_cell(task, algo))
        return
    todo = team.broadcast(grid.todo() if team.is_main else None)
    waiting = list(range(len(todo)))  # rank 0: cells not yet kept

    def gather(wait: bool) -> None:
        for index in list(waiting):
            cell = team.collect(f"cell/{index}", wait=wait)
            if cell is not None:
                grid.keep(cell)
                waiting.remove(index)

    while (index := team.claim("cells")) < len(todo):
        team.post(f"cell/{index}", run_cell(*todo[index]))
        if team.is_main:
            gather(wait=False)
    if team.is_main:
        gather(wait=True)
