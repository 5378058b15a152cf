"""``synthenv table``: the results grid (tasks x algorithms, K seeds per cell) at an NPE or time budget."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from synthenv import agents, distributed
from synthenv.compilers import DEFAULT_BACKEND
from synthenv.table import Budget, Grid, cell_keys, fill, train_cell

DEFAULT_TASKS = ("print-hello", "reverse-tune", "remove-char-tune", "shift-left", "echo-second-seq", "add",
                 "divide-2", "bool-logic")


@dataclass(frozen=True)
class TableCommand:
    """Run every (task, algorithm) pair for K seeds at one budget; write a markdown and a JSON table.

    The K seeds of a pair train as one batched job. Under torchrun ('torchrun --nproc-per-node N -m
    synthenv table ...') the ranks take cells in turn and rank 0 writes the same table. A cell reads
    'successes/K' and the median time and NPE to solve over all K runs, an unsolved run counting as
    longer than any ('-' unless more than half solved). The PQT paper's table reports successes and the
    mean NPE of the successful runs; the JSON has both, and the successes-only medians. Time is the
    job's wall clock, the K seeds sharing the machine. Cells already in the JSON output with the same budget
    and seeds are reused, so an interrupted table resumes; a JSON of another budget is refused (--fresh
    replaces it). An algorithm may carry config changes:
    'ppo:policy_fraction=0,restarts=False' is a column of its own (for ablations).

    --plot PATH also draws the table as a PNG: per algorithm, the share of its (task, seed) runs solved
    within t seconds and within n programs executed, with the budget and the hardware in the caption.
    To redraw a finished table, run the same command with --plot: every cell is reused from the JSON and
    nothing trains.
    """

    tasks: tuple[str, ...] = DEFAULT_TASKS
    """Tasks (rows): names, JSON task files or suites: 'paper' (the 26 paper tasks), 'tune' (the 2 tuning tasks),
    'generated-test:50' (the first 50 held-out generated tasks), 'generated-train:100:200' (a slice)."""
    algos: tuple[str, ...] = tuple(agents.names())
    """Algorithms (columns), each NAME or NAME:field=value,field=value."""
    seeds: int = 5
    """K, runs per cell (seeds first_seed .. first_seed + K - 1)."""
    first_seed: int = 0
    """The first seed of every cell: another table with --first-seed K adds K fresh seeds to one of seeds 0 .. K-1."""
    npe: int = agents.TrainConfig.npe  # the training job's default (PQT's largest)
    """Budget per run (programs executed)."""
    seconds: float | None = None
    """Wall-clock budget per cell (its K seeds together); whichever budget binds first ends the cell."""
    backend: str = DEFAULT_BACKEND
    """Compiler backend."""
    engine: str = "auto"
    """Engine."""
    device: str = "cpu"
    """Torch device."""
    max_len: int | None = None
    """The most tokens a program may have; None: 100 on a task of ints, 256 on a text task."""
    out: str = "runs/table"
    """Output prefix: writes {out}.md and {out}.json."""
    plot: str | None = None
    """Also draw the solved-within-t picture here (a PNG); None: no picture."""
    log_dir: str | None = None
    """TensorBoard root for every run (None: no logs)."""
    fresh: bool = False
    """Recompute cells even if {out}.json has them."""
    progress: bool = False
    """Show a progress bar per job."""

    def run(self) -> int:
        budget = Budget(npe=self.npe, seconds=self.seconds, seeds=self.seeds, max_len=self.max_len,
                        backend=self.backend, engine=self.engine, device=self.device, first_seed=self.first_seed)
        grid = Grid(cell_keys(self.tasks, self.algos), budget, self.out, self.plot)
        team = distributed.start(self.device, "table")  # None unless launched by torchrun
        if team is None:
            fill(grid, functools.partial(train_cell, budget=budget, log_dir=self.log_dir, progress=self.progress),
                 resume=not self.fresh)
        else:
            with team.guard():
                team.require_same_command(self)
                rank_budget = dataclasses.replace(budget, device=team.device)
                fill(grid, functools.partial(train_cell, budget=rank_budget, log_dir=self.log_dir,
                                             progress=self.progress and team.is_main), team, resume=not self.fresh)
            if not team.is_main:
                return 0
        print(grid.write())
        return 0
