"""The default agent's island search: each member's islands breed children by a mix of operators.

Every generation each of a member's G islands draws C parents from its programs and writes C
children: the first ``policy_fraction`` of them by the edit policy (``operators.PolicyEdits``, V
variants of each parent it reads), the next ``splice_fraction`` by crossover with a mate drawn from
the member's queue or from the island (``operators.Crossover``), the next ``idiom_fraction`` by putting an
idiom (a short fresh program) into the parent (``operators.Idioms``), the rest as random variants
(``operators.RandomEdits``). Every child slot draws its random variant first, so that a slot's
random numbers never depend on the mix; the policy, crossover and idioms then write theirs over their share.
Optionally (``elite_fraction``) a share of the generation is random variants of the member's queue,
the mutation baseline's search beside the islands. Islands keep their best unique programs and
restart when they stall (``agents.search.islands``).

``propose`` returns a typed ``IslandProposal``; ``learn`` scores it against the env's rewards, merges
the children into the islands and returns an ``IslandOutcome``: the charts, the improving edits for
the learner's imitation queue and the policy variants' gains for its rollout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from synthenv.language import Status

from .members import masked_mean
from ..policy.editor import EditPolicy
from .config import PPOConfig
from .islands import Islands
from .operators import Children, Crossover, Idioms, Members, Parents, PolicyEdits, RandomEdits, cat_edits, reshape_edits
from .queue import EMPTY, ProgramQueue
from .variation import Edits, member_uniform, random_programs

QUEUE_MATE_SHARE = 0.5
"""Chance that a crossover's mate comes from the member's queue (its best programs of all islands and
generations) rather than from the parent's own island."""

UNRUN_BEST = -1.0
"""What an island whose programs have not run yet (best ``EMPTY``) counts as in ``charts/island_best_mean``."""


@dataclass(frozen=True)
class ImprovingEdits:
    """A generation's edited children for the imitation queue, ``[S', N, ...]`` rows: ``rewards`` is the
    child's reward where it beat its parent by an edit, else ``EMPTY``."""

    children: torch.Tensor
    rewards: torch.Tensor
    parents: torch.Tensor
    features: torch.Tensor
    edits: Edits


@dataclass(frozen=True)
class IslandProposal:
    """One generation of the islands of S' members: the programs it proposes and what ``learn`` needs."""

    members: Members
    islands: Islands
    """The members' islands (a copy of their rows when not every member steps: write it back)."""
    parents: Parents
    """``[S', G x C]`` the parents of the islands' children (features zero without ``feedback``)."""
    edits: Edits
    """``[S', G x C, E]`` the edits that made each child (a crossover's or idiom's slot holds its unused random
    edits)."""
    children: torch.Tensor
    """``[S', G, C, L]`` the islands' children."""
    policy: Children | None
    """The policy's variants, ``[S', G x policy_children]`` (None without policy variants)."""
    elite: tuple[Parents, Children] | None
    """The random variants of the member's queue (``elite_fraction``), with their parents."""

    @property
    def programs(self) -> torch.Tensor:
        """``[S', B, L]``: the islands' children, then the queue's variants."""
        s, g, c, length = self.children.shape
        tokens = self.children.view(s, g * c, length)
        return tokens if self.elite is None else torch.cat([tokens, self.elite[1].tokens], dim=1)


@dataclass(frozen=True)
class IslandOutcome:
    """What one generation of the islands found: ``stats`` (``[S']`` charts), the ``improving`` edits, and
    the policy variants' ``gains`` and ``known`` (``[S', G x policy_children]``; None without them)."""

    stats: dict[str, torch.Tensor]
    improving: ImprovingEdits
    gains: torch.Tensor | None
    known: torch.Tensor | None


class IslandSearch:
    """The operators that breed the islands' children, and how their children are scored and kept."""

    def __init__(self, config: PPOConfig, policy: EditPolicy, idioms: Callable = random_programs):
        """``idioms`` draws the idioms (``variation.random_programs``' arguments), as the agent's fresh programs."""
        self.config = config
        self.random = RandomEdits(config.max_edits)
        self.crossover = Crossover()
        self.idioms = Idioms(idioms, config.idiom_length)
        self.policy = PolicyEdits(policy, config.variants_per_parent)

    def propose(self, members: Members, islands: Islands, queue: ProgramQueue) -> IslandProposal:
        """One generation of ``members``' ``islands``, with crossover mates from their ``queue``."""
        config, generators = self.config, members.generators
        s, g, c, kinds = len(generators), config.islands, config.children_per_island, config.child_slots
        n_pol, n_spl, n_idi = config.policy_children, config.splice_children, config.idiom_children
        tokens, features, rewards = islands.sample_parents(generators, c)  # [S', G, C, ...]
        v = config.variants_per_parent
        if n_pol and v > 1:  # the policy's children: V of each of its first n_pol / V parents
            for value in (tokens, features, rewards):  # expand, not repeat_interleave: no sync on a GPU
                head = value[:, :, :n_pol // v, None]
                value[:, :, :n_pol] = head.expand(*head.shape[:3], v, *head.shape[4:]).flatten(2, 3)
        if not config.feedback:
            features = torch.zeros_like(features)
        length = tokens.shape[-1]
        slots = lambda x, part: x[:, :, part].reshape(s, -1, *x.shape[3:])  # noqa: E731  [S', G x part, ...]

        def parents_of(part: slice, *mates: torch.Tensor) -> Parents:  # the parents of one kind's slots
            return Parents(slots(tokens, part), slots(features, part), slots(rewards, part), *mates)

        parents = parents_of(slice(None))
        random = self.random(parents, members)  # every slot: its random numbers never depend on the mix
        children, edits = random.tokens.view(s, g, c, length), reshape_edits(random.edits, s, g, c)
        policy = None
        if n_pol:
            part = kinds["policy"]
            policy = self.policy(parents_of(part), members)
            children[:, :, part] = policy.tokens.view(s, g, n_pol, length)
            edits = cat_edits([reshape_edits(policy.edits, s, g, n_pol),
                               Edits(*(x[:, :, n_pol:] for x in (edits.positions, edits.kinds, edits.tokens,
                                                                 edits.active)))], dim=2)
        if n_spl:
            part = kinds["crossover"]
            queued, _ = queue.sample(g * n_spl, generators)  # [S', G n_spl, L]
            mates, _, _ = islands.sample_parents(generators, n_spl)  # [S', G, n_spl, L]
            from_queue = member_uniform(generators, (g, n_spl, 1), tokens.device) < QUEUE_MATE_SHARE
            from_queue = from_queue & queue.valid[:, :1, None, None]  # an empty queue offers nothing
            mates = torch.where(from_queue, queued.view(s, g, n_spl, length), mates)
            spliced = self.crossover(parents_of(part, mates.reshape(s, -1, length)), members)
            children[:, :, part] = spliced.tokens.view(s, g, n_spl, length)
        if n_idi:
            part = kinds["idiom"]
            idioms = self.idioms(parents_of(part), members)
            children[:, :, part] = idioms.tokens.view(s, g, n_idi, length)
        elite = self._elite_variants(members, queue) if config.elite_variants else None
        return IslandProposal(members, islands, parents, reshape_edits(edits, s, g * c), children, policy, elite)

    def _elite_variants(self, members: Members, queue: ProgramQueue) -> tuple[Parents, Children]:
        """Random variants of programs drawn from the member's queue (empty programs while it is empty)."""
        slots = queue.sample_slots(self.config.elite_variants, members.generators)  # [S', elite variants]
        parents = Parents(ProgramQueue.gather(queue.tokens, slots), ProgramQueue.gather(queue.extras["features"], slots),
                          ProgramQueue.gather(queue.rewards, slots))
        return parents, self.random(parents, members)

    def learn(self, proposal: IslandProposal, rewards: torch.Tensor, features: torch.Tensor,
              hashes: torch.Tensor, status: torch.Tensor | None = None) -> IslandOutcome:
        """Score ``proposal`` by the env's ``rewards [S', B]`` (with the children's ``features [S', B, F]``,
        ``hashes [S', B]`` and, for the ``step_limit_rate`` charts, their program ``status [S', B]``), merge the
        children into the islands, restart the stalled ones."""
        config, islands, generators = self.config, proposal.islands, proposal.members.generators
        s, g, c, length = proposal.children.shape
        n_pol, n_isl, kinds = config.policy_children, g * c, config.child_slots
        island_rewards = rewards[:, :n_isl].view(s, g, c)
        parent_rewards = proposal.parents.rewards.view(s, g, c)
        known = parent_rewards > EMPTY  # [S', G, C] the parent had been run: a gain is defined
        gains = torch.where(known, island_rewards - parent_rewards, 0.0)
        improved = known & (gains > 0)
        island_best = islands.best[:, :, None]  # [S', G, 1] before this generation's children
        stats = _rates("improve_rate", improved, known, kinds)
        stats.update(_rates("new_best_rate", island_rewards > island_best,
                            (island_best > EMPTY).expand_as(island_rewards), kinds))
        if status is not None:  # children that never halted: the costliest to run, and worth nothing
            hung = status[:, :n_isl].view(s, g, c) == Status.STEP_LIMIT
            stats.update(_rates("step_limit_rate", hung, torch.ones_like(hung), kinds))
        slot = torch.arange(c, device=rewards.device)
        edited = (slot < n_pol) | (slot >= kinds["random"].start)  # crossovers and idioms are not edits
        parts = [ImprovingEdits(proposal.children.reshape(s, -1, length),
                                torch.where(improved & edited, island_rewards, EMPTY).reshape(s, -1),
                                proposal.parents.tokens, proposal.parents.features, proposal.edits)]
        if proposal.elite is not None:
            parents, children = proposal.elite
            elite_rewards = rewards[:, n_isl:]
            elite_known = parents.rewards > EMPTY  # [S', elite variants]
            elite_improved = elite_known & (elite_rewards > parents.rewards)
            stats["charts/improve_rate_elite"] = masked_mean(elite_improved.float(), elite_known)
            parts.append(ImprovingEdits(children.tokens, torch.where(elite_improved, elite_rewards, EMPTY),
                                        parents.tokens, parents.features, children.edits))
        fresh = islands.fresh(generators)
        patience = config.patience if config.restarts else torch.iinfo(torch.int64).max
        ties = member_uniform(generators, (g, config.island_size + c), rewards.device) if config.drift else None
        restarted = islands.merge(proposal.children, island_rewards, features[:, :n_isl].view(s, g, c, -1),
                                  hashes[:, :n_isl].view(s, g, c), fresh, patience, ties)
        stats.update({"charts/island_restarts": restarted.float().sum(1),
                      "charts/island_best_mean": islands.best.clamp(min=UNRUN_BEST).mean(1)})
        policy_part = (slice(None), slice(None), slice(0, n_pol))
        return IslandOutcome(stats, _join(parts), gains[policy_part].reshape(s, -1) if n_pol else None,
                             known[policy_part].reshape(s, -1) if n_pol else None)


def _join(parts: list[ImprovingEdits]) -> ImprovingEdits:
    """The islands' rows, then the queue variants' (one part: as it is, no copy)."""
    if len(parts) == 1:
        return parts[0]
    cat = lambda name: torch.cat([getattr(part, name) for part in parts], dim=1)  # noqa: E731
    return ImprovingEdits(cat("children"), cat("rewards"), cat("parents"), cat("features"),
                          cat_edits([part.edits for part in parts], dim=1))


def _rates(chart: str, hits: torch.Tensor, known: torch.Tensor, kinds: dict[str, slice]) -> dict[str, torch.Tensor]:
    """``[S']`` share of each kind of child (policy, crossover, idiom, random) that ``hits [S', G, C]``, over the
    children where it is defined (``known``): ``improve_rate`` beat their parent, ``new_best_rate`` beat
    the best program their island had reached (the search's frontier moved), ``step_limit_rate`` ran out of
    steps on some case (never halted). ``kinds``: each kind's slots (``PPOConfig.child_slots``)."""
    return {f"charts/{chart}_{name}": masked_mean(hits[:, :, part].float(), known[:, :, part])
            for name, part in kinds.items() if hits[:, :, part].numel()}
