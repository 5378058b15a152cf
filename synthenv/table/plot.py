"""The table's picture: the share of runs solved within t seconds, and within n programs executed.

The "solved within t" curves of solver benchmarking, drawn from a table's JSON document (its cells'
per-seed results): for each algorithm (column), the fraction of its (task, seed) runs that solved
within t, a step that rises at each run's time (or NPE) to solve; the caption names the budget and the
hardware the cells ran on.

>>> document = {"algos": ["ga"], "cells": [{"task": "add", "algo": "ga", "results": [
...     {"solved": True, "seconds": 2.0, "npe": 500}, {"solved": False, "seconds": 9.0, "npe": 900}]}]}
>>> curve = solve_curves(document, "seconds")[0]
>>> curve.at(1.0), curve.at(2.0), curve.at(100.0)
(0.0, 0.5, 0.5)
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass

from synthenv import storage
from synthenv.table.report import cell_hardware, format_npe

MEASURES = {"seconds": "wall-clock seconds of the cell's job until the solving step",
            "npe": "programs executed (NPE) until the solving batch"}
"""The per-seed result a curve is drawn against, and its axis label."""


@dataclass(frozen=True)
class Curve:
    """One algorithm's share of runs solved within x: a right-continuous step function."""

    algo: str
    solved_at: tuple[float, ...]
    """The x at which each solving run solved, ascending."""
    runs: int
    """All the algorithm's (task, seed) runs, solved or not: the share's denominator."""
    tasks: int
    """Tasks (cells) of the algorithm."""
    tasks_solved: int
    """Tasks solved by at least one seed."""

    def at(self, x: float) -> float:
        """The share of runs solved with a value <= ``x``."""
        return bisect.bisect_right(self.solved_at, x) / self.runs if self.runs else 0.0

    def steps(self, start: float, stop: float) -> tuple[list[float], list[float]]:
        """The curve's corners from ``start`` (share 0) to ``stop``, for ``step(..., where="post")``."""
        xs = [start, *self.solved_at, stop]
        return xs, [self.at(x) for x in xs]

    @property
    def label(self) -> str:
        """The legend entry: the algorithm, its solved runs and tasks."""
        return (f"{self.algo} ({len(self.solved_at)}/{self.runs} runs, {self.tasks_solved}/{self.tasks} tasks "
                "by any seed)")


def solve_curves(document: dict, measure: str) -> list[Curve]:
    """One ``Curve`` per algorithm of ``document`` (a table's JSON) that has cells, against ``measure``
    (``"seconds"`` or ``"npe"``: a ``RunResult`` field), in column order."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {sorted(MEASURES)}, got {measure!r}")
    curves = []
    for algo in document["algos"]:
        cells = [cell for cell in document["cells"] if cell["algo"] == algo]
        if not cells:
            continue
        results = [r for cell in cells for r in cell["results"]]
        solved_at = sorted(float(r[measure]) for r in results if r["solved"])
        tasks_solved = sum(any(r["solved"] for r in cell["results"]) for cell in cells)
        curves.append(Curve(algo, tuple(solved_at), len(results), len(cells), tasks_solved))
    return curves


def machine_text(machine: dict) -> str:
    """A cell's hardware in words.

    >>> machine_text({"cpu": "AMD EPYC 7B13", "cores": 2, "gpu": None})
    'AMD EPYC 7B13, 2 cores'
    """
    text = f"{machine.get('cpu', 'unknown CPU')}, {machine.get('cores', '?')} cores"
    return text + (f", GPU {machine['gpu']}" if machine.get("gpu") else "")


def hardware_text(document: dict) -> str:
    """The hardware the document's cells ran on (each machine once), and how many did not record it
    (tables written before cells recorded it), with the machine that draws the picture.

    >>> hardware_text({"cells": [{"hardware": {"cpu": "Xeon", "cores": 8, "gpu": "NVIDIA H200"}}]})
    'Hardware: Xeon, 8 cores, GPU NVIDIA H200'
    """
    cells = document["cells"]
    machines = list(dict.fromkeys(machine_text(c["hardware"]) for c in cells if "hardware" in c))
    missing = sum("hardware" not in c for c in cells)
    if missing:
        machines.append(f"not recorded for {missing} of {len(cells)} cells (drawn on "
                        f"{machine_text(cell_hardware('cpu'))})")
    return "Hardware: " + "; ".join(machines)


def budget_text(document: dict) -> str:
    """The table's budget and settings in words.

    >>> print(budget_text({"npe": 1000, "seconds": 60, "seeds": 3, "max_len": 100, "backend": "traditional",
    ...                    "engine": "auto", "device": "cpu"}))
    Budget: 60 s per cell (its 3 seeds as one job), 1,000 programs per run; traditional / auto on cpu,
    programs up to 100 tokens
    """
    seconds = ""
    if document.get("seconds") is not None:
        first = document.get("first_seed", 0)
        seeds = f"{document['seeds']} seeds" + (f" from seed {first}" if first else "")
        seconds = f"{document['seconds']:g} s per cell (its {seeds} as one job), "
    return (f"Budget: {seconds}{format_npe(document['npe'])} programs per run; {document['backend']} / "
            f"{document['engine']} on {document['device']}, programs up to {document['max_len']} tokens")


def caption(document: dict) -> str:
    """The picture's caption: what a curve counts, the budget, the hardware."""
    tasks = len(document.get("tasks", [])) or len({c["task"] for c in document["cells"]})
    return "\n".join([
        f"Share of (task, seed) runs solved within t: {tasks} tasks x {document['seeds']} seeds per algorithm; "
        "a run's time is its job's wall clock, the seeds of a cell sharing the machine.",
        budget_text(document), hardware_text(document)])


def plot_figure(document: dict):
    """A matplotlib ``Figure`` (Agg canvas): the solved-within curves against seconds (left) and NPE
    (right), log x, one line per algorithm, the budget as a dotted line where it is in view."""
    # imported here, not at the top: matplotlib adds ~0.4 s to every synthenv command, and only --plot draws
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, 5.5))
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, 2)
    results = [r for cell in document["cells"] for r in cell["results"]]
    for ax, measure in zip(axes, ("seconds", "npe")):
        values = [float(r[measure]) for r in results if float(r[measure]) > 0]
        start = min(values, default=1.0) / 2  # log axis: the curves start at share 0 left of every run
        stop = max(values, default=1.0)
        budget = document.get(measure)
        if budget is not None and budget <= 2 * stop:  # a budget far past every run would squash the curves
            ax.axvline(budget, color="gray", linestyle=":", label=f"budget ({_budget_label(measure, budget)})")
            stop = max(stop, budget)
        for curve in solve_curves(document, measure):
            ax.step(*curve.steps(start, stop), where="post", label=curve.label)
        ax.set_xscale("log")
        ax.set_xlim(start, stop * 1.1)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(MEASURES[measure])
        ax.set_ylabel("share of runs solved")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    axes[0].set_title("solved within t seconds")
    axes[1].set_title("solved within n programs executed")
    figure.tight_layout(rect=(0, 0.1, 1, 1))
    figure.text(0.5, 0.01, caption(document), ha="center", va="bottom", fontsize=8)
    return figure


def _budget_label(measure: str, budget: float) -> str:
    return f"{budget:g} s per cell" if measure == "seconds" else f"{format_npe(budget)} per run"


def write_plot(document: dict, path: str | os.PathLike) -> None:
    """``plot_figure`` as a PNG file at ``path``."""
    figure = plot_figure(document)
    storage.write_atomic(path, lambda f: figure.savefig(f, format="png", dpi=120), "--plot")
