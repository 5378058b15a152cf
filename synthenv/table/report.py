"""A table's statistics and its markdown: cells summarised from their per-seed results.

A cell is one (task, algorithm spec) pair trained for K seeds as one job; its summary is a dict (JSON data)
with the per-seed results under ``"results"`` (``synthenv.agents.RunResult`` as a dict), from which every
other field is computed again when a table is read back (``synthenv.table.grid.load_cells``).

>>> censored_median([2.0, None, 1.0])
2.0
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence

import torch

from synthenv.agents import RunResult
from synthenv.bench import hardware
from synthenv.checks import resolve_device


def censored_median(values: Sequence[float | None]) -> float | None:
    """The median of per-run values where None (an unsolved run) is longer than any value; None unless
    more than half the runs have a value (else the median is an unsolved run, or between one and a value),
    or of no runs.

    >>> censored_median([3.0, None, 1.0]), censored_median([3.0, None, None]), censored_median([4.0, 2.0])
    (3.0, None, 3.0)
    """
    if not values:
        return None
    ranked = sorted(values, key=lambda v: (v is None, v or 0.0))
    middle = statistics.median_low(range(len(ranked))), statistics.median_high(range(len(ranked)))
    picked = [ranked[i] for i in middle]
    return None if None in picked else sum(picked) / 2


def _median(values: Sequence[float]) -> float | None:
    """The plain median; None of no values."""
    return statistics.median(values) if values else None


def summarize_cell(task: str, algo: str, results: Sequence[RunResult], wall: float,
                   hardware: dict | None = None) -> dict:
    """A table cell from one job's per-seed results.

    Args:
        task, algo: the cell's row and column (the algorithm spec as given).
        results: one ``RunResult`` per seed.
        wall: the job's wall-clock seconds.
        hardware: what the job ran on (CPU model, cores, GPU or None); None: not recorded.
    """
    solved = [r for r in results if r.solved]
    cell = {"task": task, "algo": algo, "runs": len(results), "successes": len(solved),
            "mean_npe": sum(r.npe for r in solved) / len(solved) if solved else None,
            "median_npe": censored_median([r.npe if r.solved else None for r in results]),
            "median_seconds": censored_median([r.seconds if r.solved else None for r in results]),
            "median_npe_solved": _median([r.npe for r in solved]),
            "median_seconds_solved": _median([r.seconds for r in solved]),
            "mean_best_reward": sum(r.best_reward for r in results) / len(results),
            "programs_per_s": results[0].programs_per_s, "wall_s": wall,
            "results": [dataclasses.asdict(r) for r in results]}
    if hardware is not None:
        cell["hardware"] = hardware
    return cell


def cell_hardware(device: str) -> dict:
    """What a cell on ``device`` runs on: the CPU model and cores, and the GPU when ``device`` is CUDA."""
    resolved = resolve_device(device)
    machine = hardware()
    gpu = torch.cuda.get_device_name(resolved) if resolved.type == "cuda" else None
    return {"cpu": machine["cpu"], "cores": machine["cores"], "gpu": gpu}


def format_npe(value: float | None) -> str:
    """An NPE for the table (``-``: none).

    >>> format_npe(1234567.0), format_npe(None)
    ('1,234,567', '-')
    """
    return "-" if value is None else f"{value:,.0f}"


def format_seconds(value: float | None) -> str:
    """Seconds for the table (``-``: none).

    >>> format_seconds(12.34)
    '12.3 s'
    """
    return "-" if value is None else f"{value:.1f} s"


def cell_line(cell: dict) -> str:
    """One progress line per finished cell."""
    return (f"{cell['task']:>18} {cell['algo']:>12}: {cell['successes']}/{cell['runs']} solved, median "
            f"{format_seconds(cell.get('median_seconds'))} / NPE {format_npe(cell.get('median_npe'))}, "
            f"{cell['programs_per_s']:,.0f} programs/s, {cell['wall_s']:.0f} s")


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
    header = ["| task | " + " | ".join(algos) + " |", "|---|" + "---|" * len(algos)]
    lines = header + [f"| {task} | " + " | ".join(_cell_text(cells.get((task, a))) for a in algos) + " |"
                      for task in document["tasks"]]
    if len(cells) > 1:
        totals = [str(sum(c["successes"] > 0 for key, c in cells.items() if key[1] == a)) for a in algos]
        speeds = []
        for algo in algos:
            rates = [c["programs_per_s"] for key, c in cells.items() if key[1] == algo]
            speeds.append(f"{sum(rates) / len(rates):,.0f}" if rates else "")
        lines.append("| tasks solved (any seed) | " + " | ".join(totals) + " |")
        lines.append("| programs/s (mean) | " + " | ".join(speeds) + " |")
        lines += ["", "Mean best reward (1.0 = solved):", "", *header]
        for task in document["tasks"]:
            row = [f"{cells[(task, a)].get('mean_best_reward', float('nan')):.3f}" if (task, a) in cells else ""
                   for a in algos]
            lines.append(f"| {task} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def _cell_text(cell: dict | None) -> str:
    """``successes/K``, then ``(median s, median NPE)`` when at least half the runs solved."""
    if cell is None:
        return ""
    text = f"{cell['successes']}/{cell['runs']}"
    if cell.get("median_seconds") is not None:
        text += f" ({format_seconds(cell['median_seconds'])}, {format_npe(cell.get('median_npe'))})"
    return text
