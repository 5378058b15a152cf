"""``synthenv library``: write a library of known programs, what the default agent's first generation runs.

The default agent runs every program of its library before any fresh program (``agents.search.library``); the one shipped
in the package is this command's output with its defaults (BENCHMARKS.md names it). With ``--from-runs DIR`` it adds
the solutions that runs of the default agent found; ``synthenv train --library PATH`` starts from the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

import tyro

from synthenv.agents.search.library import LibraryConfig, make_library
from synthenv.checks import require_writable


@dataclass(frozen=True)
class LibraryCommand:
    """Write a library file: the solutions of generated training tasks and, with --from-runs, those runs found."""

    config: Annotated[LibraryConfig, tyro.conf.arg(name="")] = field(default_factory=LibraryConfig)
    """The library (its fields are options of their own)."""

    def run(self) -> int:
        require_writable(self.config.out, "library file (--out)")
        make_library(self.config, log=lambda line: print(line, flush=True))
        return 0
