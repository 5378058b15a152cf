"""Search experience: the edits that moved an island search forward on generated training tasks.

The default agent's island search (``agents.island_search``, with random edits and crossover only: no
policy) runs for ``generations`` generations on each task, composed from its parts here rather than
through the trainer. Every random child that beats the best program its island had so far is an
example: its parent, the parent's per-case feedback and the random edits that made it. Random edits are
drawn uniformly, so these are samples of the edits *given* that they moved the search forward; a policy
fitted to them by likelihood writes edits that move a search forward more often than uniform ones (it
learns the posterior of uniform mutation given success, as expert iteration distils a search into a
policy). Repair examples (``agents.repair``) teach the last steps to a solution; these teach the steps
in the middle of a search, where the agent spends most of its time.

Beside the examples the collector keeps *probes*: parents drawn uniformly from the islands, with their
reward and their island's best, on which ``probe_rates`` judges any writer of variants offline by the
agent's own yardstick (the share of variants that beat their island's best: ``charts/new_best_rate_*``) and
by the share that never halt (``charts/step_limit_rate_*``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from synthenv.pipeline import Evaluator
from synthenv.tasks import Task

from .feedback import NUM_FEATURES
from .island_config import PPOConfig
from .island_search import IslandSearch
from .islands import Islands
from .operators import EDIT_FIELDS, Members
from .priority_queue import EMPTY, ProgramQueue
from .repair import RepairSet, evaluate, run_outcomes
from .rows import row_hashes
from .variation import Edits, apply_edits

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

    def every(self, stride: int) -> Probes:
        """Every ``stride``-th probe."""
        return Probes(*(getattr(self, name)[::stride] for name in _PROBE_FIELDS))

    @staticmethod
    def join(parts: list[Probes]) -> Probes:
        return Probes(*(torch.cat([getattr(p, name) for p in parts]) for name in _PROBE_FIELDS))


_PROBE_FIELDS = tuple(f.name for f in dataclasses.fields(Probes))


def search_config(config: PPOConfig | None = None) -> PPOConfig:
    """The island search the experience comes from: the default agent's islands, random edits and crossover
    only (no policy, no idioms), no elitist phase."""
    return PPOConfig(elitist=False, policy_fraction=0.0, idiom_fraction=0.0, policy="scratch") if config is None \
        else config


def search_experience(tasks: Sequence[tuple[Task, str]], generations: int, seed: int, evaluator: Evaluator,
                      max_len: int, config: PPOConfig | None = None,
                      probes_per_generation: int = PROBES_PER_GENERATION) -> tuple[RepairSet, Probes]:
    """Run the island search on each of ``tasks`` (``(task, solution)`` pairs: the solution is not used)
    for ``generations`` generations; return the random edits that made a new island best, and
    ``probes_per_generation`` probes from each generation. Task i's search draws from a generator seeded by
    ``(seed, i)``: the result is a function of the arguments alone (on one machine and thread count)."""
    config = search_config(config)
    if config.policy_children:
        raise ValueError("the search experience comes from random edits and crossover; use policy_fraction=0")
    examples, probes = [], []
    for group, (task, _) in enumerate(tasks):
        found, seen = _search(task, group, generations, seed, evaluator, max_len, config, probes_per_generation)
        examples.append(found)  # one tensor per field and task: thousands of small ones fragment the heap
        probes.append(seen)
    return RepairSet.join(examples), Probes.join(probes)


def _search(task: Task, group: int, generations: int, seed: int, evaluator: Evaluator, max_len: int,
            config: PPOConfig, probes_per_generation: int) -> tuple[RepairSet, Probes]:
    """One task's search (see ``search_experience``)."""
    state = np.random.SeedSequence([seed, group]).generate_state(1)[0]
    generators = [torch.Generator().manual_seed(int(state))]
    members = Members(generators)
    g, c = config.islands, config.children_per_island
    islands = Islands(generators, g, config.island_size, max_len, config.initial_length, NUM_FEATURES)
    queue = ProgramQueue(1, config.queue_size, max_len, torch.device("cpu"),
                         extras={"features": ((NUM_FEATURES,), torch.float32)})
    search = IslandSearch(config, None)
    random_slot = (torch.arange(c) >= config.child_slots["random"].start).repeat(g)  # [G C]
    examples, probes = [], []
    for _ in range(generations):
        proposal = search.propose(members, islands, queue)
        programs = proposal.programs[0]  # [B, L]
        rewards, features, _ = evaluate(evaluator, programs, task, max_len)
        hashes = row_hashes(programs)
        best = islands.best[0].repeat_interleave(c)  # [G C] each child's island best before this generation
        parents = proposal.parents
        hits = (rewards[: g * c] > best) & (best > EMPTY) & random_slot  # sync point (below): data collection
        rows = hits.nonzero()[:, 0]
        edits = Edits(*(getattr(proposal.edits, name)[0, rows] for name in EDIT_FIELDS))
        examples.append(RepairSet(parents.tokens[0, rows], parents.features[0, rows], edits,
                                  torch.full((len(rows),), group)))
        known = (parents.rewards[0] > EMPTY).nonzero()[:, 0]
        pick = known[torch.randperm(len(known), generator=generators[0])[:probes_per_generation]]
        probes.append(Probes(parents.tokens[0, pick], parents.features[0, pick], parents.rewards[0, pick],
                             best[pick], torch.full((len(pick),), group)))
        search.learn(proposal, rewards[None], features[None], hashes[None])
        queue.push(programs[None], rewards[None], hashes[None], features=features[None])
    return RepairSet.join(examples), Probes.join(probes)


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
