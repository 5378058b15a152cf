"""``synthenv fit-prior``: fit the program prior that the default agent's fresh programs come from.

The default agent draws the programs its searches start and restart from a Markov model of generated training
tasks' solutions (``agents.search.prior``; ``synthenv train --fresh uniform``: uniform random commands instead).
The one shipped in the package is this command's output with its defaults (BENCHMARKS.md names it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

import tyro

from synthenv.agents.search.prior import PriorConfig, fit_prior
from synthenv.checks import require_writable


@dataclass(frozen=True)
class FitPriorCommand:
    """Fit the program prior (a Markov model of generated training tasks' solutions); write it with its card."""

    config: Annotated[PriorConfig, tyro.conf.arg(name="")] = field(default_factory=PriorConfig)
    """The fit (its fields are options of their own)."""

    def run(self) -> int:
        require_writable(self.config.out, "prior file (--out)")
        fit_prior(self.config, log=lambda line: print(line, flush=True))
        return 0
