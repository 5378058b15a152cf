"""Probes: parents drawn from island searches of generated tasks, on which a writer of edits is judged offline.

The default agent's island search (``agents.search.generation``, with random edits and crossover only: no
policy, no idioms) runs for ``generations`` generations on each task, composed from its parts here rather than
through the trainer. Each generation it keeps *probes*: parents drawn uniformly from the islands, with their
reward and their island's best, on which ``probe_rates`` judges any writer of variants by the agent's own
yardstick (the share of variants that beat their island's best: ``charts/new_best_rate_*``) and by the share
that never halt (``charts/step_limit_rate_*``). ``synthenv pretrain`` reports the policy's rates beside random
edits'.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from synthenv.pipeline import Evaluator
from synthenv.tasks import Task

from ..run.feedback import NUM_FEATURES
from ..search.config import PPOConfig
from ..search.generation import IslandSearch
from ..search.islands import Islands
from ..search.operators import Members
from ..search.queue import EMPTY, ProgramQueue
from ..search.rows import row_hashes
from ..search.variation import Edits, apply_edits
from .repair import evaluate, run_outcomes

PROBES_PER_GENERATION = 16
"""Parents kept as probes from each generation of the search."""


@dataclass(frozen=True)
class Probes:
    """N parents drawn from the islands during a search: ``parents [N, L]``, their ``features [N, F]``,
    ``rewards [N]``, their island's best reward ``island_best [N]`` at the time, and ``groups [N]`` (which
    task of the set each came from)."""

    parents: torch.Tensor
    features: torch.Tensor
    rewards: torch.Tensor
    island_best: torch.Tensor
    groups: torch.Tensor

    def __len__(self) -> int:
        return self.parents.shape[0]

    @staticmethod
    def join(parts: list[Probes]) -> Probes:
        return Probes(*(torch.cat([getattr(p, name) for p in parts]) for name in _PROBE_FIELDS))


_PROBE_FIELDS = tuple(f.name for f in dataclasses.fields(Probes))


SEARCH = PPOConfig(elitist=False, policy_fraction=0.0, idiom_fraction=0.0, policy="scratch")
"""The island search the probes come from: the default agent's islands, random edits and crossover only (no
policy, no idioms), no elitist phase."""


def search_probes(tasks: Sequence[tuple[Task, str]], generations: int, seed: int, evaluator: Evaluator,
                  max_len: int) -> Probes:
    """Run the island search on each of ``tasks`` (``(task, solution)`` pairs: the solution is not used) for
    ``generations`` generations and keep ``PROBES_PER_GENERATION`` probes from each generation. Task i's search
    draws from a generator seeded by ``(seed, i)``: the result is a function of the arguments alone (on one
    machine and thread count)."""
    return Probes.join([_search(task, group, generations, seed, evaluator, max_len)
                        for group, (task, _) in enumerate(tasks)])


def _search(task: Task, group: int, generations: int, seed: int, evaluator: Evaluator, max_len: int) -> Probes:
    """One task's search (see ``search_probes``)."""
    state = np.random.SeedSequence([seed, group]).generate_state(1)[0]
    generators = [torch.Generator().manual_seed(int(state))]
    members, config = Members(generators), SEARCH
    g, c = config.islands, config.children_per_island
    islands = Islands(generators, g, config.island_size, max_len, config.initial_length, NUM_FEATURES)
    queue = ProgramQueue(1, config.queue_size, max_len, torch.device("cpu"),
                         extras={"features": ((NUM_FEATURES,), torch.float32)})
    search = IslandSearch(config, None)
    probes = []
    for _ in range(generations):
        proposal = search.propose(members, islands, queue)
        programs = proposal.programs[0]  # [B, L]
        rewards, features, _ = evaluate(evaluator, programs, task, max_len)
        hashes = row_hashes(programs)
        best = islands.best[0].repeat_interleave(c)  # [G C] each child's island best before this generation
        parents = proposal.parents
        known = (parents.rewards[0] > EMPTY).nonzero()[:, 0]  # sync point: data collection
        pick = known[torch.randperm(len(known), generator=generators[0])[:PROBES_PER_GENERATION]]
        probes.append(Probes(parents.tokens[0, pick], parents.features[0, pick], parents.rewards[0, pick],
                             best[pick], torch.full((len(pick),), group)))
        search.learn(proposal, rewards[None], features[None], hashes[None])
        queue.push(programs[None], rewards[None], hashes[None], features=features[None])
    return Probes.join(probes)


def probe_rates(write: Callable[[torch.Tensor, torch.Tensor, int], Edits], tasks: Sequence[tuple[Task, str]],
                probes: Probes, variants: int, evaluator: Evaluator, max_len: int) -> tuple[float, float]:
    """The share of variants that beat their island's best (the *new-best rate*) and the share that never halted
    (the *step-limit rate*): ``variants`` of each probe written by ``write(parents [1, N, L], features [1, N, F],
    variants) -> edits [1, N variants, E]``."""
    hits, hung, total = 0, 0, 0
    for group, (task, _) in enumerate(tasks):
        rows = (probes.groups == group).nonzero()[:, 0]
        if not len(rows):
            continue
        parents = probes.parents[rows]
        edits = write(parents[None], probes.features[rows][None], variants)
        children = apply_edits(parents[None].repeat_interleave(variants, dim=1), edits)[0]
        rewards, limited = run_outcomes(evaluator, children, task)
        hits += int((rewards > probes.island_best[rows].repeat_interleave(variants)).sum())  # sync point: judging
        hung += int(limited.sum())
        total += len(children)
    return hits / max(total, 1), hung / max(total, 1)
