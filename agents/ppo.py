"""synthenv's default agent: self-improving PPO that explores variants of its best programs.

Neural-guided evolution at the env's speed, batched over S members (seeds).

Each member starts with an *elitist phase*: the mutation baseline's search (``agents.mutation``:
random variants of the member's queue of best programs; with the same seed, the very programs the
baseline writes), which solves the easy tasks fastest. When the queue has not changed for
``elitist_patience`` generations (the baseline's elite has frozen: from then on it draws from
the same distribution of children forever), the member hands over to the islands described
below. They start from fresh programs (``seeded_islands``: a share of them may start from that
queue instead); the queue stays, as their crossover mates (``elite_mates``; False empties it).
Members hand over independently (checked every 10 generations, the one ``elitist_handover``
sync point), and a member's run never depends on which other seeds share the job. While only
some members have handed over, the islands run for those members alone (on a copy of their
rows), so the members still in their elitist phase step at the baseline's pace. A member that has
solved the task never hands over.

The job's time is shared out: while a running member is in its elitist phase, the islands step
once every ``islands_every`` generations (members past the elitist phase wait between, writing
empty programs that count no NPE), so that a generation of the cheap elitist phase is not held
up by the islands' dearer ones and the elitist phase gets about a fair share of the machine;
once no running member is in it, the islands step every generation. A member that has finished
(solved, or out of budget: ``set_running``) writes empty programs. Each member counts its own
generations (its update steps and hand-over follow that count), so the schedule changes when a
member's generations run, never what they do: a member writes the same programs whatever
``islands_every`` and whichever seeds share its job.

Each member then keeps G islands of its best programs (``agents.islands``); each step (a
*generation*) every island breeds C children, so one env call runs S x G x C programs:

- most children are *random variants* of the island's programs: 1 .. ``max_edits`` point
  substitutions, insertions or deletions (``agents.variation``);
- ``splice_fraction`` are *crossovers*: a piece of a queued program (the member's best across
  islands) or of an island-mate spliced into the parent;
- ``policy_fraction`` are *policy variants*: the edit policy (``agents.editor``) reads the parent
  and its per-case test feedback (which cases fail, by too little or too much output...) in one
  pass and writes the edits, ``variants_per_parent`` variants from each parent it reads (one
  reading serves them all).

Islands keep their best unique programs and restart from fresh programs when they stall
(``patience``), so one stuck search becomes many short independent ones. Optionally
(``elite_fraction``, off by default) a share of each generation is random variants of the
member's queue of best programs, the mutation baseline's elitist search beside the islands.

The policy learns from the population every ``update_every`` generations, by PPO: the clipped
surrogate on its own variants, with advantage = the child's reward minus its parent's
(normalised per member, or risk-seeking on the top ``risk_quantile``); by PQT-style imitation of
a queue of the best *improving* edits found so far, random or its own (a child that beat its
parent, ranked by the child's reward): the policy learns to make the edits that paid off; and
with an entropy bonus against early commitment. TensorBoard shows whether it helps: the rate at
which policy variants improve on their parent beside the rate of random variants
(``charts/improve_rate_policy`` and ``charts/improve_rate_random``), and the rate at which they beat
their island's best program so far, which is what moves the search on (``charts/new_best_rate_*``).

The ablation switches (``elitist=False``, ``policy_fraction=0``, ``pg_weight=0``,
``queue_weight=0``, ``feedback=False``, ``splice_fraction=0``, ``restarts=False``, ``drift=False``,
``islands=1``) turn each ingredient off (``tests/test_agents_default.py`` checks that each changes
what the agent does); ``synthenv table --algos ppo ppo:policy_fraction=0 ...`` compares them. No
host synchronisation in a step but the documented ``elitist_handover`` sync point (every 10
generations, while a member is in its elitist phase) and, on the CPU only, ``editor_width``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from synthenv.checks import require_finite_fields, require_positive_int_fields
from synthenv.language import EOS
from synthenv.syncpoints import sync_point

from .common import (MemberMasks, clip_grad_norm_per_member, generator_states, load_generator_states, masked_mean,
                     member_generators, member_index)
from .editor import EditorConfig, EditPolicy, edit_entropy, edit_log_probs
from .feedback import NUM_FEATURES, Feedback
from .islands import EMPTY, Islands
from .losses import clipped_policy_loss, normalize_advantages, risk_seeking_advantages
from .mutation import mutate
from .optim import MemberAdam
from .priority_queue import ProgramQueue
from .variation import Edits, apply_edits, member_uniform, random_edits, random_programs, row_hashes, splice

_EDIT_FIELDS = ("positions", "kinds", "tokens", "active")
HANDOVER_EVERY = 10
"""Generations between the checks for members whose elitist phase has stalled (a host read each)."""


@dataclass(frozen=True)
class PPOConfig:
    """Hyperparameters of the default agent (see the module docstring)."""

    batch_size: int = 4096
    """Programs per member per step: the children of one generation (the islands' and the elite's)."""
    elitist: bool = True
    """Start with the elitist phase: the mutation baseline's search (children of the member's queue, whose
    size is the baseline's elite), handing over to the islands once it stalls (False: islands from the start)."""
    elitist_patience: int = 200
    """Generations without any change in the member's queue after which the elitist phase hands over (just
    above the longest stall, 194 generations, before a solve of the baseline's on BENCHMARKS.md's side-by-side
    tasks; 100 was faster on 4 of 8 tasks and slower or solved fewer runs on the others: BENCHMARKS.md)."""
    islands_every: int = 4
    """While a running member is in its elitist phase, the islands step once every islands_every
    generations of the job, the members past it waiting between (1: every generation). One elitist generation
    costs about a third of one of the islands' on a CPU (BENCHMARKS.md), so 4 gives each elitist member about
    the share of the machine it would have among seeds all in their elitist phase. Changes when a member's
    generations run, never what they do."""
    seeded_islands: float = 0.0
    """Share of the islands that start from the member's queue at the hand-over (each draws its M programs
    from it); the others start from fresh programs. 0 (the default): all start fresh, and the queue's programs
    reach the islands as crossover mates only (on the 26 paper tasks, 0 solved more tasks and runs than 0.5:
    BENCHMARKS.md)."""
    elite_mates: bool = True
    """At the hand-over the member's queue, the elitist phase's best programs, stays as the islands' crossover
    mates until their own programs displace it (False: the queue is emptied at the hand-over and filled by the
    islands alone)."""
    islands: int = 16
    """G, independent sub-populations per member (must divide the islands' share of batch_size)."""
    island_size: int = 32
    """M, programs kept per island (parents of its next children)."""
    patience: int = 100
    """Generations without improvement after which an island restarts from fresh programs."""
    restarts: bool = True
    """Restart stalled islands (False: islands run on, however long they stall)."""
    drift: bool = True
    """Break ties between equally rewarded programs at random, so that neutral variants can replace
    their parents and an island drifts across a plateau (False: the older program keeps its place)."""
    initial_length: int = 20
    """Fresh programs (the start, restarts) are uniform random programs of 1 .. initial_length commands."""
    max_edits: int = 3
    """A variant makes 1 .. max_edits point edits (random variants: uniform; policy: learned)."""
    splice_fraction: float = 0.1
    """Share of each island's children made by crossover (a splice of a queued program or an island-mate)."""
    policy_fraction: float = 0.0625
    """Share of each island's children written by the edit policy (0: random variants only, no learning)."""
    variants_per_parent: int = 4
    """Policy variants written from each parent the policy reads: its pass reads a parent once and draws
    this many variants of it, and an update relearns them all from one reading, so the policy's cost per
    variant falls about as many times (1: a parent for every variant). The largest number up to this that
    divides both the policy variants per island and update_batch is used."""
    elite_fraction: float = 0.0
    """Share of each generation made by random variants of the member's queue (its best unique programs
    across islands and generations): an elitist mutation search, as the mutation baseline does, beside the
    islands and fed by all of them (0: islands only)."""
    queue_size: int = 64
    """K, best unique programs (crossover mates) and best improving edits (imitation) kept per member."""
    learning_rate: float = 3e-3
    """Adam step size of the edit policy."""
    update_every: int = 8
    """Generations between policy updates (each update learns from all of them)."""
    update_batch: int = 256
    """Policy variants per member each update learns from (drawn from the buffered generations)."""
    update_epochs: int = 2
    """PPO epochs per update (each over the whole update batch)."""
    clip_coef: float = 0.2
    """PPO ratio clip."""
    pg_weight: float = 1.0
    """Weight of PPO's clipped surrogate (0: imitation only)."""
    queue_weight: float = 1.0
    """Weight of the imitation of the queue's improving edits (0: PPO only)."""
    entropy_coef: float = 0.01
    """Entropy bonus weight (per edit)."""
    risk_quantile: float = 0.0
    """Risk-seeking policy gradient (DSO, Petersen et al. 2021): learn only from the top
    risk_quantile of each batch's improvements, with that quantile as the baseline (0: all, normalised)."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip, per member."""
    feedback: bool = True
    """Condition the policy on the parent's per-case test feedback (False: it sees the program only)."""
    editor: EditorConfig = field(default_factory=EditorConfig)
    """The edit policy's architecture (its max_edits follows this config's)."""

    def __post_init__(self) -> None:
        require_positive_int_fields(self, "batch_size", "islands", "island_size", "patience", "initial_length",
                                    "max_edits", "queue_size", "update_every", "update_batch", "update_epochs",
                                    "elitist_patience", "islands_every", "variants_per_parent")
        require_finite_fields(self, "splice_fraction", "policy_fraction", "seeded_islands", low=0.0, high=1.0)
        require_finite_fields(self, "elite_fraction", low=0.0, high=1.0, high_open=True)
        share = self.batch_size - self.elite_children
        if share % self.islands or share < self.islands:
            if not self.elite_children:
                raise ValueError(f"islands={self.islands} must divide batch_size={self.batch_size} (children per island)")
            raise ValueError(f"islands={self.islands} must divide the islands' children, batch_size - elite children "
                             f"= {self.batch_size} - {self.elite_children} = {share} (pick batch_size, islands and "
                             "elite_fraction so that it does)")
        if self.splice_fraction + self.policy_fraction > 1.0:
            raise ValueError(f"splice_fraction + policy_fraction must be <= 1, got {self.splice_fraction} + "
                             f"{self.policy_fraction}")
        require_finite_fields(self, "risk_quantile", low=0.0, high=1.0, high_open=True)
        require_finite_fields(self, "learning_rate", "max_grad_norm", "clip_coef", low=0.0, low_open=True)
        require_finite_fields(self, "pg_weight", "queue_weight", "entropy_coef", low=0.0)
        if self.editor.max_edits != self.max_edits:
            object.__setattr__(self, "editor", dataclasses.replace(self.editor, max_edits=self.max_edits))

    @property
    def elite_children(self) -> int:
        """Random variants of the member's queue per generation."""
        return round(self.batch_size * self.elite_fraction)

    @property
    def children_per_island(self) -> int:
        return (self.batch_size - self.elite_children) // self.islands

    @property
    def policy_children(self) -> int:
        """Policy variants per island per generation."""
        return round(self.children_per_island * self.policy_fraction)

    @property
    def policy_group(self) -> int:
        """K, policy variants per parent read: the largest divisor of the policy variants per island and
        of update_batch that is at most ``variants_per_parent`` (1 without policy variants)."""
        return next(k for k in range(self.variants_per_parent, 0, -1)
                    if self.policy_children % k == 0 and self.update_batch % k == 0) if self.policy_children else 1

    @property
    def splice_children(self) -> int:
        """Crossovers per island per generation."""
        return round(self.children_per_island * self.splice_fraction)


def _cat_edits(parts: list[Edits], dim: int) -> Edits:
    return Edits(*(torch.cat([getattr(p, name) for p in parts], dim=dim) for name in _EDIT_FIELDS))


@dataclass
class _IslandMembers:
    """What one generation of the islands reads and writes, for the S' members past their elitist
    phase: the agent's own objects when every member is past it, else copies of those members' rows
    (``PPO.learn`` writes the islands and the edit queue back), so that members still in their
    elitist phase cost the islands nothing."""

    members: list[int]
    """The S' members, on the host."""
    index: torch.Tensor | None
    """``[S']`` the members, or None: all of them."""
    generators: list[torch.Generator]
    islands: Islands
    queue: ProgramQueue
    """The queue as the generation was proposed (crossover mates), read only."""
    edit_queue: ProgramQueue

    def rows(self, positions: list[int], device: torch.device) -> _IslandMembers:
        """The members at ``positions`` of this view (copies of their rows), for an update of some of them."""
        rows, members = member_index(positions, device), [self.members[i] for i in positions]
        return _IslandMembers(members, member_index(members, device), [self.generators[i] for i in positions],
                              self.islands.members(rows), self.queue.members(rows), self.edit_queue.members(rows))

    def take(self, values: torch.Tensor) -> torch.Tensor:
        """These members' rows of ``values [S, ...]``."""
        return values if self.index is None else values.index_select(0, self.index)

    def spread(self, values: torch.Tensor, num_members: int) -> torch.Tensor:
        """``values [S']`` as ``[S]`` float, NaN for the members in their elitist phase."""
        values = values.float()
        if self.index is None:
            return values
        return values.new_full((num_members,), float("nan")).index_copy(0, self.index, values)


class PPO:
    """The default agent for S members at once (registered as ``ppo``).

    >>> agent = PPO(PPOConfig(batch_size=32, islands=2, island_size=4, queue_size=4), seeds=(0,), max_len=8,
    ...             device=torch.device("cpu"))
    >>> tuple(agent.propose().shape), agent.elitist  # member 0 starts in its elitist phase
    ((1, 32, 8), [True])
    """

    @property
    def uses_features(self) -> bool:
        """Whether the trainer computes ``Feedback.features`` for the generation just proposed: when some
        member's islands stepped in it (its islands and edit policy read them), and at every generation when
        the queue's features will be read (``seeded_islands``, ``elite_fraction``). Otherwise nothing reads
        them: the trainer skips them and the queue keeps zeros for the members in their elitist phase (those
        past it queue nothing while they wait), so that phase costs about what the mutation baseline's steps
        cost (BENCHMARKS.md)."""
        return self._queue_features_read or (self._tick and bool(self._island_past))

    @property
    def _queue_features_read(self) -> bool:
        """Whether anything reads the features of the queue's programs (the hand-over's seeded islands, the
        elite variants); without them the queue's features are never read."""
        return self.config.seeded_islands > 0 or self.config.elite_fraction > 0

    def __init__(self, config: PPOConfig, seeds: tuple[int, ...], max_len: int, device: torch.device):
        self.config, self.max_len, self.device = config, max_len, device
        self.seeds = tuple(int(seed) for seed in seeds)
        self.programs_per_step = config.batch_size
        self.generators = member_generators(seeds, device)
        s, g, m, e = len(seeds), config.islands, config.island_size, config.max_edits
        # the elitist phase: the mutation baseline's generators and first children, so a member's
        # elitist phase is the baseline's run with the same seed
        self.elitist_generators = member_generators(seeds, device)
        self.elitist = [config.elitist] * s  # on the host: members still in their elitist phase
        self.elitist_mask = torch.full((s,), config.elitist, dtype=torch.bool, device=device)  # [S] the same, on the device
        self.elite_children = random_programs(self.elitist_generators, (config.batch_size,), max_len,
                                              config.initial_length, device)  # [S, B, L]
        self.elite_score = torch.full((s,), EMPTY, dtype=torch.float64, device=device)  # [S] the queue's reward sum
        self.elite_stale = torch.zeros(s, dtype=torch.int64, device=device)  # [S] generations it has not changed
        self.solved = torch.zeros(s, dtype=torch.bool, device=device)  # [S] the member has written a solving program
        self.islands = Islands(self._fresh(), NUM_FEATURES)
        self.queue = ProgramQueue(s, config.queue_size, max_len, device,
                                  extras={"features": ((NUM_FEATURES,), torch.float32)})
        self.edit_queue = ProgramQueue(s, config.queue_size, max_len, device, extras={
            "parents": ((max_len,), torch.int64), "features": ((NUM_FEATURES,), torch.float32),
            "edit_positions": ((e,), torch.int64), "edit_kinds": ((e,), torch.int64),
            "edit_tokens": ((e,), torch.int64), "edit_active": ((e,), torch.bool)})
        self.editor = EditPolicy(config.editor, s, NUM_FEATURES, self.generators, device)
        self.optimizer = MemberAdam(list(self.editor.parameters()), lr=config.learning_rate, eps=1e-5)
        n = g * config.policy_children * config.update_every  # policy variants per update
        read = n // config.policy_group  # the parents they were drawn from
        self.buffer = {
            "parents": torch.zeros((s, read, max_len), dtype=torch.int64, device=device),
            "features": torch.zeros((s, read, NUM_FEATURES), dtype=torch.float32, device=device),
            "positions": torch.zeros((s, n, e), dtype=torch.int64, device=device),
            "kinds": torch.zeros((s, n, e), dtype=torch.int64, device=device),
            "tokens": torch.ones((s, n, e), dtype=torch.int64, device=device),
            "active": torch.zeros((s, n, e), dtype=torch.bool, device=device),
            "log_probs": torch.zeros((s, n), dtype=torch.float32, device=device),
            "gains": torch.zeros((s, n), dtype=torch.float32, device=device),
            "valid": torch.zeros((s, n), dtype=torch.bool, device=device),
        }
        self.generation = 0
        self.member_generation = [0] * s  # on the host: generations each member has stepped (its own clock)
        self.running = [True] * s  # on the host: members not finished (set_running)
        self.stepped = [True] * s  # on the host: members that wrote programs in the last propose
        self._tick = True  # the islands stepped in the last propose
        self._member_mask = MemberMasks(device)
        self._pending: dict = {}
        self._set_island_members()

    def new_programs(self, step: int) -> int:
        return self.config.batch_size

    def _fresh(self, generators: list[torch.Generator] | None = None) -> torch.Tensor:
        """``[S, G, M, L]`` fresh random programs (the start, and every restart), one member per generator."""
        config = self.config
        return random_programs(self.generators if generators is None else generators,
                               (config.islands, config.island_size), self.max_len, config.initial_length, self.device)

    def set_running(self, running: list[bool]) -> None:
        """The members still running (host ``[S]``, from the trainer): the others write empty programs and
        keep their state."""
        if len(running) != len(self.elitist):
            raise ValueError(f"running has {len(running)} members, this agent has {len(self.elitist)}")
        self.running = [bool(flag) for flag in running]
        self._set_island_members()

    def _set_island_members(self) -> None:
        """Note on the device which running members are past their elitist phase, when only some members
        are (after a hand-over, a member's finish or a resume; no index when all are: nothing to pick)."""
        self._island_past = [member for member, (elitist, running) in enumerate(zip(self.elitist, self.running))
                             if running and not elitist]
        some = len(self._island_past) < len(self.elitist)
        self._island_index = member_index(self._island_past, self.device) if some else None

    def _islands_tick(self) -> bool:
        """Whether the islands step this generation: every generation once no running member is in its
        elitist phase, else every ``islands_every``-th."""
        elitist_running = any(elitist and running for elitist, running in zip(self.elitist, self.running))
        return not elitist_running or self.generation % self.config.islands_every == 0

    def _island_members(self) -> _IslandMembers:
        index = self._island_index
        if index is None:
            return _IslandMembers(list(range(len(self.generators))), None, self.generators, self.islands, self.queue,
                                  self.edit_queue)
        return _IslandMembers(self._island_past, index, [self.generators[member] for member in self._island_past],
                              self.islands.members(index), self.queue.members(index), self.edit_queue.members(index))

    def propose(self) -> torch.Tensor:
        """One generation: the elitist phase's children for members in it, the islands' for the others
        (when they step), empty programs for members that wait or have finished."""
        self._pending, self._tick = {}, self._islands_tick()
        islands = bool(self._island_past) and self._tick
        self.stepped = [running and (elitist or islands) for elitist, running in zip(self.elitist, self.running)]
        for member, stepped in enumerate(self.stepped):
            if not stepped:  # the row's programs end at once; its elite children are never proposed again
                self.elite_children[member, :, 0].fill_(EOS)
        if not islands:
            return self.elite_children
        view = self._island_members()
        children = self._propose_islands(view)
        self._pending["members"] = view
        return children if view.index is None else self.elite_children.index_copy(0, view.index, children)

    def _propose_islands(self, view: _IslandMembers) -> torch.Tensor:
        """Random variants, crossovers and policy variants of each island's programs, then random
        variants of the queue's (the elite); ``[S', B, L]`` for the members ``view``."""
        config, generators = self.config, view.generators
        s, g, c, length = len(generators), config.islands, config.children_per_island, self.max_len
        n_pol, n_spl = config.policy_children, config.splice_children
        parents, features, parent_rewards = view.islands.sample_parents(generators, c)  # [S', G, C, ...]
        k = config.policy_group
        if n_pol and k > 1:  # the policy's children: K of each of its first n_pol / K parents
            for value in (parents, features, parent_rewards):  # expand, not repeat_interleave: no sync on a GPU
                head = value[:, :, :n_pol // k, None]
                value[:, :, :n_pol] = head.expand(*head.shape[:3], k, *head.shape[4:]).flatten(2, 3)
        if not config.feedback:
            features = torch.zeros_like(features)
        flat = parents.reshape(s, g * c, length)
        edits = random_edits(generators, flat, config.max_edits)  # [S', G*C, E]
        edits = Edits(*(getattr(edits, name).view(s, g, c, -1) for name in _EDIT_FIELDS))
        log_probs = policy_parents = policy_features = None
        if n_pol:
            policy_parents = parents[:, :, :n_pol:k].reshape(s, g * n_pol // k, length)
            policy_features = features[:, :, :n_pol:k].reshape(s, g * n_pol // k, -1)
            policy_edits, log_probs = self.editor.sample(policy_parents, policy_features, generators, view.index, k)
            policy_edits = Edits(*(getattr(policy_edits, name).view(s, g, n_pol, -1) for name in _EDIT_FIELDS))
            edits = _cat_edits([policy_edits, Edits(*(getattr(edits, name)[:, :, n_pol:] for name in _EDIT_FIELDS))],
                               dim=2)
        children = apply_edits(parents, edits)  # [S, G, C, L]
        if n_spl:
            part = slice(n_pol, n_pol + n_spl)
            queued, _ = view.queue.sample(g * n_spl, generators)  # [S', G*n_spl, L]
            mates, _, _ = view.islands.sample_parents(generators, n_spl)  # [S', G, n_spl, L]
            from_queue = member_uniform(generators, (g, n_spl, 1), self.device) < 0.5
            from_queue = from_queue & view.queue.valid[:, :1, None, None]  # an empty queue offers nothing
            mates = torch.where(from_queue, queued.view(s, g, n_spl, length), mates)
            spliced = splice(generators, parents[:, :, part].reshape(s, -1, length), mates.reshape(s, -1, length))
            children[:, :, part] = spliced.view(s, g, n_spl, length)  # children is apply_edits' own tensor
        self._pending = {"parents": parents, "features": features, "parent_rewards": parent_rewards,
                         "edits": edits, "children": children, "log_probs": log_probs,
                         "policy_parents": policy_parents, "policy_features": policy_features}  # the parents read
        if config.elite_children:
            self._pending["elite"] = self._elite_variants(view)
            return torch.cat([children.view(s, g * c, length), self._pending["elite"]["children"]], dim=1)
        return children.view(s, g * c, length)

    def _elite_variants(self, view: _IslandMembers) -> dict[str, torch.Tensor]:
        """Random variants of programs drawn from the member's queue (empty programs while it is empty)."""
        queue = view.queue
        slots = queue.sample_slots(self.config.elite_children, view.generators)  # [S', E]
        parents = ProgramQueue.gather(queue.tokens, slots)  # [S', E, L]
        edits = random_edits(view.generators, parents, self.config.max_edits)
        return {"parents": parents, "features": ProgramQueue.gather(queue.extras["features"], slots),
                "parent_rewards": ProgramQueue.gather(queue.rewards, slots), "edits": edits,
                "children": apply_edits(parents, edits)}

    def learn(self, feedback: Feedback) -> dict[str, torch.Tensor]:
        config, s = self.config, len(self.generators)
        hashes = row_hashes(feedback.tokens)  # [S, B]: once for the islands and both queues
        features, rewards, solved = feedback.features, feedback.rewards, feedback.solved.any(1)
        if not all(self.stepped):  # the empty programs of members that waited are not theirs to keep
            stepped = self._member_mask(self.stepped)
            rewards, solved = torch.where(stepped[:, None], rewards, EMPTY), solved & stepped
        if not self._queue_features_read:  # a member in its elitist phase queues zeros (see uses_features):
            if features.shape[-1] != NUM_FEATURES:  # its state never depends on the other members' phases
                features = rewards.new_zeros((*rewards.shape, NUM_FEATURES))
            elif any(self.elitist):
                features = torch.where(self.elitist_mask[:, None, None], 0.0, features)
        self.queue.push(feedback.tokens, rewards, hashes=hashes, features=features)
        self.solved = self.solved | solved
        stats = {"programs/queue_best": self.queue.rewards[:, 0], "programs/queue_worst": self.queue.rewards[:, -1],
                 "charts/elitist_phase": self.elitist_mask.float()}
        learned = torch.zeros(s, dtype=torch.bool, device=self.device)
        view = self._pending.get("members")
        if view is not None:  # some member is past its elitist phase
            island_stats = self._learn_islands(view, view.take(feedback.rewards), view.take(feedback.features),
                                               view.take(hashes))
            stats.update({k: view.spread(v, s) for k, v in island_stats.items()})
        if any(self.elitist):
            self._learn_elitist()
        self.generation += 1
        self.member_generation = [count + stepped for count, stepped in zip(self.member_generation, self.stepped)]
        # each member's policy learns every update_every generations of its own
        due = [] if view is None or not config.policy_children else [
            i for i, member in enumerate(view.members) if self.member_generation[member] % config.update_every == 0]
        if due:
            updating = view if len(due) == len(view.members) else view.rows(due, self.device)
            learned = self._member_mask([m in updating.members for m in range(s)])
            stats.update({k: updating.spread(v, s) for k, v in self._update(updating, learned).items()})
        if view is not None and view.index is not None:
            self.islands.put_members(view.index, view.islands)
            self.edit_queue.put_members(view.index, view.edit_queue)
        stats["_learned"] = learned
        if any(self.elitist) and self.generation % HANDOVER_EVERY == 0:
            self._hand_over_stalled()
        return stats

    def _learn_elitist(self) -> None:
        """The elitist phase's step: note whether the queue changed, breed the next children from it."""
        config = self.config
        score = torch.where(self.queue.valid, self.queue.rewards.double(), 0.0).sum(1)  # [S], never decreases
        changed = score > self.elite_score
        self.elite_score = torch.where(changed, score, self.elite_score)
        self.elite_stale = torch.where(changed, 0, self.elite_stale + 1)
        self.elite_children = mutate(self.queue, config.batch_size, config.max_edits, self.elitist_generators)

    def _hand_over_stalled(self) -> None:
        """Hand the members whose queue has stalled for ``elitist_patience`` generations, and that have not
        solved the task, over to their islands."""
        with sync_point("elitist_handover"):
            stalled = ((self.elite_stale >= self.config.elitist_patience) & ~self.solved).tolist()
            handed = [member for member, (elitist, stall, running)
                      in enumerate(zip(self.elitist, stalled, self.running)) if elitist and stall and running]
            for member in handed:
                self._hand_over(member)
            if handed:
                self._set_island_members()  # a copy of the members' list to the device

    def _hand_over(self, member: int) -> None:
        """Start ``member``'s islands: ``seeded_islands`` of them from its queue, the others fresh.

        What the member's islands, edit policy and generator did while it was in its elitist phase
        (other members' islands ran beside it) is dropped: its generator is reseeded from its seed
        and this generation, its islands and update buffer start anew, and its policy has not
        learned yet (nothing of its own was offered). So its run depends on its seed alone."""
        config, device = self.config, self.device
        g, m = config.islands, config.island_size
        generator = self.generators[member]
        seed = np.random.SeedSequence([self.seeds[member], self.member_generation[member]]).generate_state(1)[0]
        generator.manual_seed(int(seed))
        tokens = random_programs([generator], (g, m), self.max_len, config.initial_length, device)[0]  # [G, M, L]
        rewards = torch.full((g, m), EMPTY, dtype=torch.float32, device=device)
        features = torch.zeros((g, m, NUM_FEATURES), dtype=torch.float32, device=device)
        hashes = torch.zeros((g, m), dtype=torch.int64, device=device)
        seeded = round(g * config.seeded_islands)
        if seeded:
            slots = self.queue.member_slots(member, (seeded, m), generator)  # [seeded, M]
            tokens[:seeded] = self.queue.tokens[member][slots]
            rewards[:seeded] = self.queue.rewards[member][slots]
            features[:seeded] = self.queue.extras["features"][member][slots]
            hashes[:seeded] = self.queue.hashes[member][slots]
        self.islands.start_member(member, tokens, rewards, features, hashes)
        if not config.elite_mates:
            self.queue.rewards[member].fill_(EMPTY)  # every slot empty: the islands' programs fill it anew
        self.buffer["valid"][member].fill_(False)  # in place, no tensor from Python data (a copy to a GPU)
        self.elitist_mask[member].fill_(False)
        self.elitist[member] = False

    def _learn_islands(self, view: _IslandMembers, all_rewards: torch.Tensor, all_features: torch.Tensor,
                       hashes: torch.Tensor) -> dict[str, torch.Tensor]:
        """The islands' step for the members ``view``, from their rows of the generation's ``rewards [S', B]``,
        ``features [S', B, F]`` and ``hashes [S', B]``; statistics ``[S']``."""
        config, pending, generators = self.config, self._pending, view.generators
        s, g, c = len(generators), config.islands, config.children_per_island
        n_pol, n_spl, n_isl = config.policy_children, config.splice_children, g * c
        rewards = all_rewards[:, :n_isl].view(s, g, c)
        features = all_features[:, :n_isl].view(s, g, c, -1)
        parent_rewards = pending["parent_rewards"]
        known = parent_rewards > EMPTY  # [S', G, C] the parent had been run: a gain is defined
        gains = torch.where(known, rewards - parent_rewards, 0.0)
        improved = known & (gains > 0)
        island_best = view.islands.best[:, :, None]  # [S', G, 1] before this generation's children
        stats = self._rates("improve_rate", improved, known, n_pol, n_spl)
        stats.update(self._rates("new_best_rate", rewards > island_best, (island_best > EMPTY).expand_as(rewards),
                                 n_pol, n_spl))
        edited = torch.arange(c, device=self.device)
        edited = (edited < n_pol) | (edited >= n_pol + n_spl)  # crossovers are not edits
        variants = [self._variants(pending, rewards, improved & edited)]
        if config.elite_children:
            elite, elite_rewards = pending["elite"], all_rewards[:, n_isl:]
            elite_known = elite["parent_rewards"] > EMPTY  # [S', E]
            elite_improved = elite_known & (elite_rewards > elite["parent_rewards"])
            stats["charts/improve_rate_elite"] = masked_mean(elite_improved.float(), elite_known)
            variants.append({**elite, "rewards": torch.where(elite_improved, elite_rewards, EMPTY)})
        self._remember_edits(view.edit_queue, variants, hashes)
        if n_pol:
            self._store(view, gains[:, :, :n_pol], known[:, :, :n_pol])
        fresh = self._fresh(generators)
        patience = config.patience if config.restarts else torch.iinfo(torch.int64).max
        ties = member_uniform(generators, (g, config.island_size + c), self.device) if config.drift else None
        restarted = view.islands.merge(pending["children"], rewards, features, hashes[:, :n_isl].view(s, g, c), fresh,
                                       patience, ties)
        stats.update({"charts/island_restarts": restarted.float().sum(1),
                      "charts/island_best_mean": view.islands.best.clamp(min=-1.0).mean(1)})
        return stats

    @staticmethod
    def _rates(chart: str, hits: torch.Tensor, known: torch.Tensor, n_pol: int, n_spl: int) -> dict:
        """``[S]`` share of each kind of child (policy, random, crossover) that ``hits [S, G, C]``, over
        the children where it is defined (``known``): ``improve_rate`` beat their parent, ``new_best_rate``
        beat the best program their island had reached (the search's frontier moved)."""
        parts = {"policy": slice(0, n_pol), "crossover": slice(n_pol, n_pol + n_spl),
                 "random": slice(n_pol + n_spl, None)}
        return {f"charts/{chart}_{name}": masked_mean(hits[:, :, part].float(), known[:, :, part])
                for name, part in parts.items() if hits[:, :, part].numel()}

    def _variants(self, pending: dict, rewards: torch.Tensor, improving: torch.Tensor) -> dict:
        """The islands' children as ``[S, G*C, ...]`` rows for the imitation set (``rewards`` EMPTY
        where the child did not beat its parent by an edit)."""
        s, length, e = rewards.shape[0], self.max_len, self.config.max_edits
        edits = pending["edits"]
        return {"children": pending["children"].reshape(s, -1, length),
                "rewards": torch.where(improving, rewards, EMPTY).reshape(s, -1),
                "parents": pending["parents"].reshape(s, -1, length),
                "features": pending["features"].reshape(s, -1, NUM_FEATURES),
                "edits": Edits(*(getattr(edits, name).reshape(s, -1, e) for name in _EDIT_FIELDS))}

    @staticmethod
    def _remember_edits(edit_queue: ProgramQueue, variants: list[dict], hashes: torch.Tensor) -> None:
        """Queue the edits that beat their parent, ranked by the child's reward (the imitation set).

        ``variants``: the islands' children, then the elite's, each a dict of ``[S', N, ...]`` rows
        (``_variants``) in the order of the generation's programs (``hashes [S', B]``)."""
        if len(variants) == 1:  # no elite: the islands' rows as they are (a cat of one would copy them)
            cat, edits = variants[0].__getitem__, variants[0]["edits"]
        else:
            cat = lambda name: torch.cat([v[name] for v in variants], dim=1)  # noqa: E731
            edits = _cat_edits([v["edits"] for v in variants], dim=1)
        edit_queue.push(cat("children"), cat("rewards"), hashes, parents=cat("parents"), features=cat("features"),
                        **{f"edit_{name}": getattr(edits, name) for name in _EDIT_FIELDS})

    def _store(self, view: _IslandMembers, gains: torch.Tensor, known: torch.Tensor) -> None:
        """Put this generation's policy variants in their slot of the members ``view``'s update buffer (each
        member's slot follows its own generations)."""
        pending = self._pending
        s, n_pol = len(view.generators), self.config.policy_children
        width = self.config.islands * n_pol
        values = {"parents": pending["policy_parents"], "features": pending["policy_features"],  # one per K variants
                  "log_probs": pending["log_probs"], "gains": gains.reshape(s, width),
                  "valid": known.reshape(s, width)}
        values.update({name: getattr(pending["edits"], name)[:, :, :n_pol].reshape(s, width, -1)
                       for name in _EDIT_FIELDS})
        slots = [self.member_generation[member] % self.config.update_every for member in view.members]
        for position in sorted(set(slots)):
            rows = [i for i, other in enumerate(slots) if other == position]
            index, take = view.index, None  # the buffer's rows, and which of the view's rows go there
            if len(rows) < len(slots):
                index = member_index([view.members[i] for i in rows], self.device)
                take = member_index(rows, self.device)
            for name, value in values.items():
                slot = slice(position * value.shape[1], (position + 1) * value.shape[1])
                value = value if take is None else value.index_select(0, take)
                if index is None:
                    self.buffer[name][:, slot] = value
                else:
                    self.buffer[name][:, slot].index_copy_(0, index, value)  # in place, through the view

    def _update(self, view: _IslandMembers, members: torch.Tensor) -> dict[str, torch.Tensor]:
        """PPO + imitation on a sample of the buffered policy variants and the queue of improving edits,
        for the members ``view`` (``members``: the same as an ``[S]`` mask; the others' parameters and optimizer
        state stay as they are); statistics ``[S']``."""
        config, queue, k = self.config, view.edit_queue, self.config.policy_group
        size = self.buffer["parents"].shape[1]  # parents read, each with its K variants
        n = min(config.update_batch // k, size)
        keys = member_uniform(view.generators, (size,), self.device)
        chosen = keys.argsort(dim=1)[:, :n]  # [S', n]: a uniform sample of parents without replacement
        variants = (chosen[..., None] * k + torch.arange(k, device=self.device)).view(chosen.shape[0], n * k)

        def gather(name: str, value: torch.Tensor) -> torch.Tensor:
            index = chosen if name in ("parents", "features") else variants  # per parent read, or per variant
            return view.take(value).gather(1, index.view(*index.shape, *([1] * (value.dim() - 2))).expand(
                -1, -1, *value.shape[2:]))

        buffer = {name: gather(name, value) for name, value in self.buffer.items()}
        valid = buffer["valid"]
        if config.risk_quantile:
            advantages, valid = risk_seeking_advantages(buffer["gains"], valid, config.risk_quantile)
            advantages = normalize_advantages(advantages, valid, center=False)
        else:
            advantages = normalize_advantages(buffer["gains"], valid)
        edits = Edits(*(buffer[name] for name in _EDIT_FIELDS))
        queued = Edits(*(queue.extras[f"edit_{name}"] for name in _EDIT_FIELDS))
        parents = torch.cat([buffer["parents"], queue.extras["parents"]], dim=1)
        features = torch.cat([buffer["features"], queue.extras["features"]], dim=1)
        totals: dict[str, torch.Tensor] = {}
        for _ in range(config.update_epochs):
            logits = self.editor.logits(parents, features, view.index)
            own, imitated = logits.select(slice(0, n)), logits.select(slice(n, None))
            log_ratio = edit_log_probs(own, edits) - buffer["log_probs"]
            ratio = log_ratio.exp()
            policy_loss = clipped_policy_loss(advantages, ratio, valid, config.clip_coef)  # [S]
            entropy = masked_mean(edit_entropy(own, edits), valid)
            queue_loss = masked_mean(-edit_log_probs(imitated, queued), queue.valid)
            loss = config.pg_weight * policy_loss + config.queue_weight * queue_loss - config.entropy_coef * entropy
            self.optimizer.zero_grad()
            loss.sum().backward()  # members share no parameters: the sum keeps their gradients apart
            grad_norm = view.take(clip_grad_norm_per_member(list(self.editor.parameters()), config.max_grad_norm))
            self.optimizer.step(members)
            with torch.no_grad():
                step = {"losses/policy_loss": policy_loss, "losses/queue_loss": queue_loss,
                        "losses/entropy": entropy, "losses/grad_norm": grad_norm,
                        "losses/approx_kl": masked_mean((ratio - 1) - log_ratio, valid),
                        "losses/old_approx_kl": masked_mean(-log_ratio, valid),
                        "losses/clipfrac": masked_mean(((ratio - 1).abs() > config.clip_coef).float(), valid)}
            for key, value in step.items():
                totals[key] = totals.get(key, 0.0) + value.detach() / config.update_epochs
        totals["charts/learning_rate"] = torch.full_like(totals["losses/entropy"], config.learning_rate)
        return totals

    def state_dict(self) -> dict:
        return {"islands": self.islands.state_dict(), "queue": self.queue.state_dict(),
                "edit_queue": self.edit_queue.state_dict(), "editor": self.editor.state_dict(),
                "optimizer": self.optimizer.state_dict(), "buffer": {k: v.clone() for k, v in self.buffer.items()},
                "generation": self.generation, "member_generation": list(self.member_generation),
                "running": list(self.running),
                "generators": generator_states(self.generators),
                "elitist": list(self.elitist), "elite_children": self.elite_children.clone(),
                "elite_score": self.elite_score.clone(), "elite_stale": self.elite_stale.clone(),
                "solved": self.solved.clone(),
                "elitist_generators": generator_states(self.elitist_generators),
                "config": dataclasses.asdict(self.config)}

    def load_state_dict(self, state: dict) -> None:
        self.islands.load_state_dict(state["islands"])
        self.queue.load_state_dict(state["queue"])
        self.edit_queue.load_state_dict(state["edit_queue"])
        self.editor.load_state_dict(state["editor"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.buffer = {k: v.to(self.device).clone() for k, v in state["buffer"].items()}
        self.generation, self.member_generation = state["generation"], list(state["member_generation"])
        load_generator_states(self.generators, state["generators"])
        if len(state["elitist"]) != len(self.elitist):
            raise ValueError(f"checkpoint has {len(state['elitist'])} members, this run has {len(self.elitist)}; "
                             "resume with the same seeds")
        self.elitist = [bool(flag) for flag in state["elitist"]]
        self.elitist_mask = torch.tensor(self.elitist, dtype=torch.bool, device=self.device)
        self.running = [bool(flag) for flag in state["running"]]
        self._set_island_members()
        for name in ("elite_children", "elite_score", "elite_stale", "solved"):
            setattr(self, name, state[name].to(self.device).clone())
        load_generator_states(self.elitist_generators, state["elitist_generators"])
