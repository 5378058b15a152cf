"""``synthenv pretrain``: pretrain the edit policy of ``ppo`` (the search with a learned operator) across
generated tasks.

Supervised repair (``agents.pretraining.pretrain``): corrupted solutions of generated training tasks, their
per-case feedback, and the edits that repair them; with ``--from-runs DIR``, what runs found too. Writes a
policy file that ``synthenv train --algo ppo --policy PATH`` starts from; the one shipped in the package
(``--policy pretrained``, where ``ppo`` starts) is this command's output with the settings BENCHMARKS.md's model
card names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

import tyro

from synthenv.agents.pretraining.pretrain import PretrainConfig, pretrain
from synthenv.checks import require_writable


@dataclass(frozen=True)
class PretrainCommand:
    """Pretrain the edit policy of --algo ppo across generated tasks; write a policy file with its card.

    The examples: repairs of corrupted solutions (--corruptions) and what earlier runs found (--from-runs runs:
    their improving edits and solutions). The card reports the policy's repair, new-best and step-limit rates on
    held-out tasks beside random edits'. Start a run from it with 'synthenv train --algo ppo --policy PATH'.
    """

    config: Annotated[PretrainConfig, tyro.conf.arg(name="")] = field(default_factory=PretrainConfig)
    """The pretraining run (its fields are options of their own)."""

    def run(self) -> int:
        require_writable(self.config.out, "policy file (--out)")
        pretrain(self.config, log=lambda line: print(line, flush=True))
        return 0
