"""``synthenv table``'s results grid: tasks x algorithms, K seeds per cell, at one budget.

- ``synthenv.table.grid``: the cells, their ``Budget``, resume from the table's JSON, cells farmed over
  the ranks of a torchrun job (``fill``), and ``train_cell``, which trains one.
- ``synthenv.table.report``: each cell's statistics (``summarize_cell``, ``censored_median``) and the
  markdown table (``render_markdown``).
- ``synthenv.table.plot``: the picture, the share of runs solved within t seconds and within n programs
  executed (``solve_curves``, ``write_plot``).

>>> from synthenv.table import censored_median
>>> censored_median([1.0, 5.0, None])
5.0
"""

from __future__ import annotations

from synthenv.table.grid import Budget, Grid, cell_keys, expand_tasks, fill, load_cells, train_cell
from synthenv.table.plot import Curve, caption, plot_figure, solve_curves, write_plot
from synthenv.table.report import cell_hardware, cell_line, censored_median, render_markdown, summarize_cell

__all__ = ["Budget", "Grid", "cell_keys", "expand_tasks", "fill", "load_cells", "train_cell", "Curve", "caption",
           "plot_figure", "solve_curves", "write_plot", "cell_hardware", "cell_line", "censored_median",
           "render_markdown", "summarize_cell"]
