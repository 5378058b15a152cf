"""``synthenv pretrain``: pretrain the default agent's edit policy across generated tasks.

Supervised repair (``agents.pretrain``, the default): corrupted solutions of generated training tasks,
their per-case feedback, and the edits that repair them; with ``--search-generations N``, search
experience too: the random edits that made a new island best in N generations of the island search on
each training task; with ``--pg-steps N``, N steps of the default agent's PPO update on the policy's own
variants of parents from searches of training tasks (``agents.pretrain_pg``). Writes a policy file that
``synthenv train --policy PATH`` starts from; the one shipped in the package (``--policy pretrained``, the
default agent's start) is this command's output with the settings BENCHMARKS.md's model card names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

import tyro

from synthenv.agents.pretrain import PretrainConfig, pretrain
from synthenv.checks import require_writable


@dataclass(frozen=True)
class PretrainCommand:
    """Pretrain the edit policy across generated tasks; write a policy file with its card.

    The examples: repairs of corrupted solutions (--corruptions), the random edits that made a new island best
    in searches of the tasks (--search-generations), and what earlier runs of the default agent found
    (--from-runs runs: their improving edits and solutions); then, with --pg-steps, PPO on the policy's own variants
    of parents from searches of the tasks. The card reports the policy's repair, new-best and step-limit rates on
    held-out tasks beside random edits'. Start a run from it with 'synthenv train --policy PATH'.
    """

    config: Annotated[PretrainConfig, tyro.conf.arg(name="")] = field(default_factory=PretrainConfig)
    """The pretraining run (its fields are options of their own)."""

    def run(self) -> int:
        require_writable(self.config.out, "policy file (--out)")
        pretrain(self.config, log=lambda line: print(line, flush=True))
        return 0
