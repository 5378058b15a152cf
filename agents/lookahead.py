"""One-edit lookahead: the single point edits that improve a search's parents, as examples for the edit policy.

A parent of ``n`` tokens has ``17 n + 8`` single point edits (a substitution or an insertion of each of the 8
commands at each position, a deletion at each, and 8 appends). Running all of them is cheap for the env (a few
thousand programs a parent), and it labels the parent exactly: these edits raise its reward, the others do not.
The edit policy learns them by likelihood, so it learns the distribution of a one-step lookahead expert given the
parent and its feedback (expert iteration with the cheapest expert there is). A uniform single edit improves a
parent drawn from a search about one time in three hundred, and about half of the improving edits change a
constant (a ``+`` or ``-`` beside others), which the policy learns to read from the program around them.

The parents are those the island search draws (``agents.experience``: random edits and crossover, the default
agent's islands) on generated training tasks, so the examples come from the part of a search where the agent
spends its time, as the search-experience examples do; unlike those, every improving edit of a parent is known,
not only the one random draw that happened to find it, and no example carries edits that did nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from synthenv.pipeline import Evaluator
from synthenv.tasks import Task

from .experience import Probes, search_experience
from .operators import EDIT_FIELDS
from .repair import RepairSet, run_outcomes
from .rows import program_lengths
from .variation import DELETE, INSERT, NUM_COMMANDS, SUBSTITUTE, Edits, apply_edits

GENERATIONS = 150
"""Generations of the island search on each task whose parents are labelled (the probes' searches')."""
PARENTS_PER_GENERATION = 4
"""Parents drawn from the islands at each generation of a task's search."""
EXAMPLES_PER_PARENT = 8
"""At most this many of a parent's improving edits become examples (drawn uniformly), so that a parent with a
long run of ``+`` (whose every insertion improves it alike) does not outweigh the others."""
CHUNK = 64
"""Parents whose single edits are run in one batch (about 100 k programs)."""

_KINDS = torch.tensor([SUBSTITUTE] * NUM_COMMANDS + [INSERT] * NUM_COMMANDS + [DELETE])
_TOKENS = torch.tensor([*range(1, NUM_COMMANDS + 1), *range(1, NUM_COMMANDS + 1), 1])
"""The 17 single edits at one position: substitute or insert each command, delete (its token ignored)."""


def single_edits(parents: torch.Tensor, max_edits: int) -> tuple[torch.Tensor, Edits]:
    """Every single point edit of each of ``parents [N, L]``: ``owners [M]`` (the parent of each) and the edits
    ``[M, max_edits]`` in the policy's format (the first edit active, the others not), parent by parent in
    position order.

    >>> owners, edits = single_edits(torch.tensor([[3, 0]]), max_edits=2)
    >>> len(owners), edits.positions[:, 0].max().item(), int(edits.active.sum())   # 17 at 0, 8 appends at 1
    (25, 1, 25)
    """
    width = parents.shape[1]
    lengths = program_lengths(parents)  # [N]
    per_position = len(_KINDS)
    positions = torch.arange(width + 1).repeat_interleave(per_position)  # [(L + 1) 17]
    kinds, tokens = _KINDS.repeat(width + 1), _TOKENS.repeat(width + 1)
    valid = (positions < lengths[:, None]) | (
        (positions == lengths[:, None]) & (kinds == INSERT) & (lengths < width)[:, None])  # [N, (L + 1) 17]
    owners, which = valid.nonzero(as_tuple=True)
    m = len(owners)
    first = lambda values, fill: torch.cat(  # noqa: E731  [M, E]: the edit, then inactive fillers
        [values[which][:, None], torch.full((m, max_edits - 1), fill, dtype=torch.int64)], dim=1)
    active = torch.zeros((m, max_edits), dtype=torch.bool)
    active[:, 0] = True
    return owners, Edits(first(positions, 0), first(kinds, SUBSTITUTE), first(tokens, 1), active)


def label(parents: Probes, tasks: Sequence[tuple[Task, str]], evaluator: Evaluator, max_edits: int,
          generator: torch.Generator, per_parent: int = EXAMPLES_PER_PARENT) -> RepairSet:
    """The examples of ``parents`` (``groups`` index ``tasks``): for each parent, up to ``per_parent`` of the single
    edits that raise its reward above ``parents.rewards`` (drawn by ``generator``); a parent that no single edit
    improves gives none."""
    parts = []
    for group, (task, _) in enumerate(tasks):
        rows = (parents.groups == group).nonzero()[:, 0]
        for chunk in rows.split(CHUNK):
            tokens = parents.parents[chunk]
            owners, edits = single_edits(tokens, max_edits)
            children = apply_edits(tokens[owners][None], Edits(*(getattr(edits, n)[None] for n in EDIT_FIELDS)))[0]
            rewards, _ = run_outcomes(evaluator, children, task)
            better = rewards > parents.rewards[chunk][owners]  # sync point (below): data collection
            keep = _at_most(owners, better, per_parent, generator)
            picked = chunk[owners[keep]]
            parts.append(RepairSet(parents.parents[picked], parents.features[picked],
                                   Edits(*(getattr(edits, n)[keep] for n in EDIT_FIELDS)), parents.groups[picked]))
    return RepairSet.join(parts)


def _at_most(owners: torch.Tensor, chosen: torch.Tensor, limit: int, generator: torch.Generator) -> torch.Tensor:
    """Indices of ``chosen [M]`` rows, at most ``limit`` for each owner, drawn uniformly (``owners`` ascending)."""
    index = chosen.nonzero()[:, 0]
    if not len(index):
        return index
    shuffled = index[torch.randperm(len(index), generator=generator)]
    order = owners[shuffled].argsort(stable=True)  # grouped by owner, uniform order within each
    grouped, who = shuffled[order], owners[shuffled[order]]
    start = torch.searchsorted(who, who, right=False)  # where each owner's group begins
    rank = torch.arange(len(who)) - start
    return grouped[rank < limit].sort().values


def lookahead_examples(tasks: Sequence[tuple[Task, str]], seed: int, evaluator: Evaluator, max_len: int,
                       max_edits: int, generator: torch.Generator,
                       generations: int = GENERATIONS,
                       parents_per_generation: int = PARENTS_PER_GENERATION) -> RepairSet:
    """Search each of ``tasks`` (``agents.experience``, seeded by ``(seed, task index)``), draw
    ``parents_per_generation`` parents at each of ``generations`` generations, and label them (``label``)."""
    _, parents = search_experience(tasks, generations, seed, evaluator, max_len,
                                   probes_per_generation=parents_per_generation)
    return label(parents, tasks, evaluator, max_edits, generator)
