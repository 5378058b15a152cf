"""``synthenv table``: the PQT-style results table (successes/K and mean NPE per task and algorithm)."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

from .train import Algo, TrainCommand

DEFAULT_TASKS = ("print-hello", "reverse-tune", "remove-char-tune", "shift-left", "echo-second-seq", "add",
                 "divide-2", "bool-logic")


@dataclass(frozen=True)
class TableCommand:
    """Run every (task, algorithm) pair for K seeds at one NPE budget; write a markdown and a JSON table.

    The K seeds of a pair train as one batched job. A cell reads ``successes/K`` and the mean
    NPE of the successful runs (PQT's table format, PQT_SPEC §4). Cells already in the JSON
    output with the same budget and seeds are reused, so an interrupted table resumes.
    """

    tasks: tuple[str, ...] = DEFAULT_TASKS
    """Tasks (rows)."""
    algos: tuple[Algo, ...] = ("ppo", "pqt", "pg-pqt", "reinforce", "ga", "random")
    """Algorithms (columns)."""
    seeds: int = 5
    """K, runs per cell (seeds 0 .. K-1)."""
    npe: int = 20_000
    """Budget per run (programs executed)."""
    backend: str = "traditional"
    """Compiler backend."""
    engine: str = "auto"
    """Engine."""
    device: str = "cpu"
    """Torch device."""
    max_len: int = 100
    """Tokens per program."""
    out: str = "runs/table"
    """Output prefix: writes ``{out}.md`` and ``{out}.json``."""
    log_dir: str | None = None
    """TensorBoard root for every run (None: no logs)."""
    fresh: bool = False
    """Recompute cells even if ``{out}.json`` has them."""
    progress: bool = False
    """Show a progress bar per job."""

    def run(self) -> int:
        from synthenv import tasks

        for task in self.tasks:
            tasks.resolve(task)
        if self.seeds < 1:
            raise ValueError(f"seeds must be a positive int, got {self.seeds!r}")
        json_path, md_path = Path(self.out + ".json"), Path(self.out + ".md")
        json_path.parent.mkdir(parents=True, exist_ok=True)
        cells = {} if self.fresh or not json_path.exists() else _load_cells(json_path, self.npe, self.seeds)
        for task in self.tasks:
            for algo in self.algos:
                if (task, algo) in cells:
                    continue
                cells[(task, algo)] = self._run_cell(task, algo)
                cell = cells[(task, algo)]
                print(f"{task:>18} {algo:>9}: {cell['successes']}/{cell['runs']} solved, mean NPE "
                      f"{_fmt_npe(cell['mean_npe'])}, {cell['programs_per_s']:.0f} programs/s, "
                      f"{cell['wall_s']:.0f} s", flush=True)
                json_path.write_text(json.dumps(self._document(cells), indent=2))
        md_path.write_text(render_markdown(self._document(cells)))
        print(render_markdown(self._document(cells)))
        return 0

    def _run_cell(self, task: str, algo: str) -> dict:
        from synthenv import agents

        command = TrainCommand(task=task, algo=algo, npe=self.npe, num_seeds=self.seeds, backend=self.backend,
                               engine=self.engine, device=self.device, max_len=self.max_len, log_dir=self.log_dir,
                               progress=self.progress)
        start = time.perf_counter()
        results = agents.train(command.train_config())
        wall = time.perf_counter() - start
        solved = [r for r in results if r.solved]
        return {"task": task, "algo": algo, "runs": len(results), "successes": len(solved),
                "mean_npe": sum(r.npe for r in solved) / len(solved) if solved else None,
                "mean_best_reward": sum(r.best_reward for r in results) / len(results),
                "programs_per_s": results[0].programs_per_s, "wall_s": wall,
                "results": [dataclasses.asdict(r) for r in results]}

    def _document(self, cells: dict) -> dict:
        return {"npe": self.npe, "seeds": self.seeds, "backend": self.backend, "engine": self.engine,
                "device": self.device, "max_len": self.max_len, "tasks": list(self.tasks), "algos": list(self.algos),
                "cells": [cells[key] for key in sorted(cells)]}


def _load_cells(path: Path, npe: int, seeds: int) -> dict:
    document = json.loads(path.read_text())
    if document.get("npe") != npe or document.get("seeds") != seeds:
        return {}
    return {(c["task"], c["algo"]): c for c in document.get("cells", [])}


def _fmt_npe(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def render_markdown(document: dict) -> str:
    """The table: one row per task, one column per algorithm, ``successes/K (mean NPE)`` per cell;
    then the programs/s of each algorithm and a second table of the mean best reward.

    >>> doc = {"npe": 100, "seeds": 2, "tasks": ["add"], "algos": ["ppo"], "cells": [
    ...     {"task": "add", "algo": "ppo", "runs": 2, "successes": 1, "mean_npe": 64.0, "programs_per_s": 10.0}]}
    >>> print(render_markdown(doc).splitlines()[2])
    | add | 1/2 (64) |
    """
    cells = {(c["task"], c["algo"]): c for c in document["cells"]}
    algos = [a for a in document["algos"] if any(key[1] == a for key in cells)]
    lines = ["| task | " + " | ".join(algos) + " |", "|---|" + "---|" * len(algos)]
    for task in document["tasks"]:
        row = []
        for algo in algos:
            cell = cells.get((task, algo))
            row.append("" if cell is None else f"{cell['successes']}/{cell['runs']} ({_fmt_npe(cell['mean_npe'])})")
        lines.append(f"| {task} | " + " | ".join(row) + " |")
    speeds = []
    for algo in algos:
        rates = [c["programs_per_s"] for key, c in cells.items() if key[1] == algo]
        speeds.append(f"{sum(rates) / len(rates):,.0f}" if rates else "")
    if "seeds" in document and len(cells) > 1:
        lines.append("| programs/s (mean) | " + " | ".join(speeds) + " |")
        lines += ["", "Mean best reward (1.0 = solved):", "", lines[0], lines[1]]
        for task in document["tasks"]:
            row = [f"{cells[(task, a)].get('mean_best_reward', float('nan')):.3f}" if (task, a) in cells else ""
                   for a in algos]
            lines.append(f"| {task} | " + " | ".join(row) + " |")
    return "\n".join(lines)
