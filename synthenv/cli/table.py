"""``synthenv table``: the results grid (tasks x algorithms, K seeds per cell) at an NPE or time budget."""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
import typing
from dataclasses import dataclass
from pathlib import Path

from synthenv.agents.trainer import DEFAULT_NPE
from synthenv.checks import require_writable
from synthenv.compilers import DEFAULT_BACKEND
from synthenv.language import DEFAULT_MAX_LEN

DEFAULT_TASKS = ("print-hello", "reverse-tune", "remove-char-tune", "shift-left", "echo-second-seq", "add",
                 "divide-2", "bool-logic")


@dataclass(frozen=True)
class TableCommand:
    """Run every (task, algorithm) pair for K seeds at one budget; write a markdown and a JSON table.

    The K seeds of a pair train as one batched job. Under torchrun ('torchrun --nproc-per-node N -m
    synthenv table ...') the ranks take cells in turn and rank 0 writes the same table. A cell reads
    'successes/K' and the median time and NPE to solve over all K runs, an unsolved run counting as
    longer than any ('-' when fewer than half solved). The PQT paper's table reports successes and the
    mean NPE of the successful runs; the JSON has both, and the successes-only medians. Time is the
    job's wall clock, the K seeds sharing the machine. Cells already in the JSON output with the same budget
    and seeds are reused, so an interrupted table resumes. An algorithm may carry config changes:
    'ppo:policy_fraction=0,restarts=False' is a column of its own (for ablations).
    """

    tasks: tuple[str, ...] = DEFAULT_TASKS
    """Tasks (rows): registered names or JSON task files; 'paper' expands to the 26 paper tasks."""
    algos: tuple[str, ...] = ("ppo", "mutation", "pqt", "pg-pqt", "reinforce", "ga", "random")
    """Algorithms (columns), each NAME or NAME:field=value,field=value."""
    seeds: int = 5
    """K, runs per cell (seeds 0 .. K-1)."""
    npe: int = DEFAULT_NPE
    """Budget per run (programs executed)."""
    seconds: float | None = None
    """Wall-clock budget per cell (its K seeds together); whichever budget binds first ends the cell."""
    backend: str = DEFAULT_BACKEND
    """Compiler backend."""
    engine: str = "auto"
    """Engine."""
    device: str = "cpu"
    """Torch device."""
    max_len: int = DEFAULT_MAX_LEN
    """The most tokens a program may have."""
    out: str = "runs/table"
    """Output prefix: writes {out}.md and {out}.json."""
    log_dir: str | None = None
    """TensorBoard root for every run (None: no logs)."""
    fresh: bool = False
    """Recompute cells even if {out}.json has them."""
    progress: bool = False
    """Show a progress bar per job."""

    def cell_specs(self) -> list[tuple[str, str]]:
        """Every (task, algorithm spec) cell in table order; checks every name first."""
        from synthenv import tasks

        names = [name for task in self.tasks for name in (tasks.names("paper") if task == "paper" else [task])]
        for task in names:
            tasks.from_spec(task)
        for spec in self.algos:
            parse_algo(spec)
        if not isinstance(self.seeds, int) or self.seeds < 1:
            raise ValueError(f"seeds must be a positive int, got {self.seeds!r}")
        return [(task, algo) for task in names for algo in self.algos]

    def run(self) -> int:
        from synthenv import distributed

        specs = self.cell_specs()
        json_path, md_path = Path(self.out + ".json"), Path(self.out + ".md")
        team = distributed.start(self.device, "table")  # None unless launched by torchrun
        if team is None:
            cells = self.load(json_path)
            for task, algo in specs:
                if (task, algo) not in cells:
                    self.keep(cells, specs, json_path, self.run_cell(task, algo))
        else:
            with team.guard():
                team.require_same_command(self)
                cells = self.run_over_ranks(team, specs, json_path)
            if not team.is_main:
                return 0
        document = self.document(cells, specs)
        json_path.write_text(json.dumps(document, indent=2))
        md_path.write_text(render_markdown(document))
        print(render_markdown(document))
        return 0

    def load(self, json_path: Path) -> dict:
        """The cells an earlier run of this table left in ``json_path`` (none with ``--fresh``)."""
        require_writable(json_path, "--out")
        return {} if self.fresh or not json_path.exists() else load_cells(json_path, self.budget())

    def keep(self, cells: dict, specs: list[tuple[str, str]], json_path: Path, cell: dict) -> None:
        """Record a finished cell: print its line, rewrite the JSON (what a resumed table reuses)."""
        cells[(cell["task"], cell["algo"])] = cell
        print(cell_line(cell), flush=True)
        json_path.write_text(json.dumps(self.document(cells, specs), indent=2))

    def run_over_ranks(self, team, specs: list[tuple[str, str]], json_path: Path) -> dict:
        """Every rank takes the next cell left to do from a shared counter (greedy) and posts its result;
        rank 0 writes each result as it comes (between its own cells) and returns them all (the
        others return None). Cells are seeded per seed, so a cell does not depend on the rank."""
        cells = self.load(json_path) if team.is_main else None
        todo = team.broadcast([key for key in specs if key not in cells] if team.is_main else None)
        worker = dataclasses.replace(self, device=team.device, progress=self.progress and team.is_main)
        waiting = list(range(len(todo)))  # rank 0: cells not yet written

        def gather(wait: bool) -> None:
            for index in list(waiting):
                cell = team.collect(f"cell/{index}", wait=wait)
                if cell is not None:
                    self.keep(cells, specs, json_path, cell)
                    waiting.remove(index)

        while (index := team.claim("cells")) < len(todo):
            team.post(f"cell/{index}", worker.run_cell(*todo[index]))
            if team.is_main:
                gather(wait=False)
        if team.is_main:
            gather(wait=True)
        return cells

    def budget(self) -> dict:
        """What makes two tables' cells comparable (a resumed table reuses cells with the same budget)."""
        return {"npe": self.npe, "seconds": self.seconds, "seeds": self.seeds, "max_len": self.max_len,
                "backend": self.backend, "engine": self.engine, "device": self.device}

    def run_cell(self, task: str, spec: str) -> dict:
        from synthenv import agents

        algo, config = parse_algo(spec)
        start = time.perf_counter()
        results = agents.train(agents.TrainConfig(
            task=task, algo=algo, npe=self.npe, seconds=self.seconds, seeds=tuple(range(self.seeds)),
            algo_config=config, backend=self.backend, engine=self.engine, device=self.device, max_len=self.max_len,
            log_dir=self.log_dir, progress=self.progress))
        return summarize_cell(task, spec, results, time.perf_counter() - start)

    def document(self, cells: dict, specs: list[tuple[str, str]]) -> dict:
        tasks_in_order = list(dict.fromkeys(task for task, _ in specs))
        return {**self.budget(), "tasks": tasks_in_order, "algos": list(self.algos),
                "cells": [cells[key] for key in specs if key in cells]}


def parse_algo(spec: str) -> tuple[str, object]:
    """``NAME`` or ``NAME:field=value,...`` -> (algorithm name, its config with those changes).

    >>> parse_algo("ppo:policy_fraction=0,restarts=False")[1].policy_fraction
    0.0
    """
    from synthenv import agents
    from synthenv.registry import unknown_name_message

    name, _, changes = spec.partition(":")
    if name not in agents.names():
        raise ValueError(unknown_name_message("algorithm", name, agents.names()))
    config = agents.default_config(name)
    if not changes:
        return name, config
    fields = {f.name: f for f in dataclasses.fields(config)}
    hints = typing.get_type_hints(type(config))
    updates = {}
    for item in changes.split(","):
        key, sep, text = item.partition("=")
        if not sep or key not in fields:
            raise ValueError(f"algorithm spec {spec!r}: {item!r} must be field=value with a field of "
                             f"{type(config).__name__}: {sorted(fields)}")
        updates[key] = _parse_value(spec, key, text, hints[key])
    return name, dataclasses.replace(config, **updates)


def _parse_value(spec: str, key: str, text: str, kind: object) -> object:
    if kind is bool:
        if text not in ("True", "False", "true", "false", "1", "0"):
            raise ValueError(f"algorithm spec {spec!r}: {key} takes True or False, got {text!r}")
        return text in ("True", "true", "1")
    for candidate in (int, float):
        if kind is candidate or candidate in typing.get_args(kind):
            try:
                return candidate(text)
            except ValueError:
                raise ValueError(f"algorithm spec {spec!r}: {key} takes a {candidate.__name__}, got {text!r}") from None
    return text


def censored_median(values: list[float | None]) -> float | None:
    """The median of per-run values where None (an unsolved run) is longer than any value; None when
    fewer than half the runs have a value.

    >>> censored_median([3.0, None, 1.0]), censored_median([3.0, None, None]), censored_median([4.0, 2.0])
    (3.0, None, 3.0)
    """
    ranked = sorted(values, key=lambda v: (v is None, v or 0.0))
    middle = statistics.median_low(range(len(ranked))), statistics.median_high(range(len(ranked)))
    picked = [ranked[i] for i in middle]
    return None if None in picked else sum(picked) / 2


def summarize_cell(task: str, algo: str, results, wall: float) -> dict:
    """A table cell from one job's per-seed results."""
    solved = [r for r in results if r.solved]
    median = lambda values: statistics.median(values) if values else None  # noqa: E731
    return {"task": task, "algo": algo, "runs": len(results), "successes": len(solved),
            "mean_npe": sum(r.npe for r in solved) / len(solved) if solved else None,
            "median_npe": censored_median([r.npe if r.solved else None for r in results]),
            "median_seconds": censored_median([r.seconds if r.solved else None for r in results]),
            "median_npe_solved": median([r.npe for r in solved]),
            "median_seconds_solved": median([r.seconds for r in solved]),
            "mean_best_reward": sum(r.best_reward for r in results) / len(results),
            "programs_per_s": results[0].programs_per_s, "wall_s": wall,
            "results": [dataclasses.asdict(r) for r in results]}


def cell_line(cell: dict) -> str:
    """One progress line per finished cell."""
    return (f"{cell['task']:>18} {cell['algo']:>12}: {cell['successes']}/{cell['runs']} solved, median "
            f"{_fmt_seconds(cell.get('median_seconds'))} / NPE {_fmt_npe(cell.get('median_npe'))}, "
            f"{cell['programs_per_s']:,.0f} programs/s, {cell['wall_s']:.0f} s")


def load_cells(path: Path, budget: dict) -> dict:
    """Cells of an earlier run of the same table (same budget), keyed by (task, algo); each summary is
    recomputed from its per-seed results, so a table written by an older version reads the same."""
    from synthenv.agents import RunResult

    document = json.loads(path.read_text())
    if any(document.get(key) != value for key, value in budget.items()):
        return {}
    cells = {}
    for cell in document.get("cells", []):
        if "results" in cell:
            results = [RunResult(**{f.name: r[f.name] for f in dataclasses.fields(RunResult)}) for r in cell["results"]]
            cell = summarize_cell(cell["task"], cell["algo"], results, cell["wall_s"])
        cells[(cell["task"], cell["algo"])] = cell
    return cells


def _fmt_npe(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _fmt_seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def render_markdown(document: dict) -> str:
    """The table: one row per task, one column per algorithm, ``successes/K (median s, median NPE)``
    per cell; then the programs/s of each algorithm and a table of the mean best reward.

    >>> doc = {"npe": 100, "seeds": 2, "tasks": ["add"], "algos": ["ppo"], "cells": [
    ...     {"task": "add", "algo": "ppo", "runs": 2, "successes": 1, "median_npe": 64.0, "median_seconds": 0.5,
    ...      "programs_per_s": 10.0}]}
    >>> print(render_markdown(doc).splitlines()[2])
    | add | 1/2 (0.5 s, 64) |
    """
    cells = {(c["task"], c["algo"]): c for c in document["cells"]}
    algos = [a for a in document["algos"] if any(key[1] == a for key in cells)]
    lines = ["| task | " + " | ".join(algos) + " |", "|---|" + "---|" * len(algos)]
    for task in document["tasks"]:
        row = []
        for algo in algos:
            cell = cells.get((task, algo))
            row.append("" if cell is None else f"{cell['successes']}/{cell['runs']}" + (
                f" ({_fmt_seconds(cell.get('median_seconds'))}, {_fmt_npe(cell.get('median_npe'))})"
                if cell.get("median_seconds") is not None else ""))
        lines.append(f"| {task} | " + " | ".join(row) + " |")
    if len(cells) > 1:
        totals = [str(sum(c["successes"] > 0 for key, c in cells.items() if key[1] == a)) for a in algos]
        speeds = []
        for algo in algos:
            rates = [c["programs_per_s"] for key, c in cells.items() if key[1] == algo]
            speeds.append(f"{sum(rates) / len(rates):,.0f}" if rates else "")
        lines.append("| tasks solved (any seed) | " + " | ".join(totals) + " |")
        lines.append("| programs/s (mean) | " + " | ".join(speeds) + " |")
        lines += ["", "Mean best reward (1.0 = solved):", "", lines[0], lines[1]]
        for task in document["tasks"]:
            row = [f"{cells[(task, a)].get('mean_best_reward', float('nan')):.3f}" if (task, a) in cells else ""
                   for a in algos]
            lines.append(f"| {task} | " + " | ".join(row) + " |")
    return "\n".join(lines)
