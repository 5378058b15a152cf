"""The default agents' settings (``agents.search.agent``): frozen dataclasses, one docstring per field.

``IslandsConfig`` holds the search's settings (the default agent, ``islands``); ``PPOConfig`` adds the edit policy's
(``ppo``: the same search with a PPO-trained edit operator). Shared by the agent's parts (the island search, the
learner, the agent that wires them), so that each reads the settings by the same names. Letters: B programs per member
per generation, G islands, M programs per island, C children per island, Q queue size, V variants per parent read, E
edits per variant.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field

from synthenv.checks import require_finite_fields, require_nonnegative_int, require_positive_int_fields

from ..policy.editor import EditorConfig
from .library import require_library
from ..policy.files import require_start


@dataclass(frozen=True)
class IslandsConfig:
    """Settings of the default agent, ``islands`` (see ``agents.search.agent``): the search without an edit policy."""

    batch_size: int = 4096
    """B, programs per member per generation: the children of one generation (the islands' and the elite's)."""
    elitist: bool = True
    """Start with the elitist phase: the mutation baseline's search (children of the member's queue, whose
    size is the baseline's elite), handing over to the islands once it stalls (False: islands from the start)."""
    elitist_patience: int = 200
    """Generations without any change in the member's queue after which its elitist phase hands over to the
    islands (the baseline's elite has frozen: it draws its children from the same distribution from then on)."""
    islands_every: int = 4
    """What one generation of the islands costs, in generations of the elitist phase: the trainer's schedule
    steps a member past its elitist phase once every islands_every generations of the job while some running
    member is still in it, so that the cheap elitist phase gets about a fair share of the machine (1: every
    generation). Changes when a member's generations run, never what they do."""
    seeded_islands: float = 0.0
    """Share of the islands that start from the member's queue at the hand-over (each draws its M programs
    from it); the others start from fresh programs (0: all fresh, and the queue's programs reach the islands
    as crossover mates only)."""
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
    """Fresh programs (the start, restarts) have 1 .. initial_length commands."""
    library: str = "shipped"
    """Known programs the elitist phase's first generation runs before its fresh ones (agents/search/library.py;
    without the elitist phase, none): 'shipped' (the unique solutions of the generated training tasks of the task's
    domain: tasks/train_solutions.txt for tasks of ints, tasks/text_solutions.txt for text tasks), 'none' (fresh
    programs only) or the path of a library file (synthenv library --out: training tasks' solutions and those that
    runs found). On a text task the first generation also runs the constant parts of its outputs, as programs and
    around the library's short programs (agents/search/knowledge.py)."""
    library_kept: int = 64
    """How many of the library's programs, its best on the task, the first generation offers to the member's queue
    (beside its fresh programs); the others count only if they solve the task (0: the library is only searched for
    a solution; queue_size or more: all of them compete for the queue)."""
    fresh: str = "prior"
    """Where fresh programs come from: 'prior' (samples of a Markov model of the solutions of generated training
    tasks of the task's domain, agents.search.prior: BF's idioms, loops balanced) or 'uniform' (uniform random
    commands)."""
    max_edits: int = 3
    """E, a variant makes 1 .. max_edits point edits (random variants: uniform; policy: learned)."""
    splice_fraction: float = 0.1
    """Share of each island's children made by crossover (a splice of a queued program or an island-mate)."""
    idiom_fraction: float = 0.1
    """Share of each island's children made by putting an idiom into a parent: a fresh program of 1 ..
    idiom_length commands (drawn as fresh programs are: the prior's samples, or uniform commands) in place of a
    window no longer than it (0: none)."""
    idiom_length: int = 8
    """The longest idiom idiom_fraction puts into a parent, in commands."""
    piece_share: float = 0.25
    """On a text task, the share of idioms that are a piece of code printing a constant part of its outputs (what
    every output starts with, ends with or is: agents/search/knowledge.py) instead of a fresh program."""
    elite_fraction: float = 0.0
    """Share of each generation made by random variants of the member's queue (its best unique programs
    across islands and generations): an elitist mutation search, as the mutation baseline does, beside the
    islands and fed by all of them (0: islands only)."""
    queue_size: int = 64
    """Q, the size of each member's two queues: its best unique programs (the elitist phase's elite, the
    islands' crossover mates) and its best improving edits (what ppo's edit policy imitates; a run saves them for
    synthenv pretrain --from-runs)."""

    def __post_init__(self) -> None:
        require_positive_int_fields(self, "batch_size", "islands", "island_size", "patience", "initial_length",
                                    "max_edits", "queue_size", "elitist_patience", "islands_every", "idiom_length")
        require_finite_fields(self, "splice_fraction", "idiom_fraction", "seeded_islands", "piece_share", low=0.0,
                              high=1.0)
        require_finite_fields(self, "elite_fraction", low=0.0, high=1.0, high_open=True)
        share = self.batch_size - self.elite_variants
        if share % self.islands or share < self.islands:
            if not self.elite_variants:
                raise ValueError(f"islands={self.islands} must divide batch_size={self.batch_size} (children per island)")
            raise ValueError(f"islands={self.islands} must divide the islands' children, batch_size - elite variants "
                             f"= {self.batch_size} - {self.elite_variants} = {share} (pick batch_size, islands and "
                             "elite_fraction so that it does)")
        shares = self._child_shares()
        if sum(shares.values()) > 1.0:
            raise ValueError(f"{' + '.join(shares)} must be <= 1, got {' + '.join(map(str, shares.values()))}")
        if self.child_slots["idiom"].stop > self.children_per_island:
            kinds = {"policy_fraction": ("policy", self.policy_children),
                     "splice_fraction": ("crossover", self.splice_children),
                     "idiom_fraction": ("idiom", self.idiom_children)}
            names, counts = zip(*(kinds[share] for share in shares))
            raise ValueError(f"{', '.join(names[:-1])} and {names[-1]} children ({' + '.join(map(str, counts))}, "
                             f"rounded) exceed the {self.children_per_island} children per island; lower one of "
                             f"{', '.join(shares)}")
        require_library("library", self.library)
        require_nonnegative_int("library_kept", self.library_kept, "library programs offered to the queue")
        if self.fresh not in ("uniform", "prior"):
            raise ValueError(f"fresh must be 'uniform' or 'prior', got {self.fresh!r}")

    def _child_shares(self) -> dict[str, float]:
        """The shares of an island's children that are not random variants, by field name."""
        return {"splice_fraction": self.splice_fraction, "idiom_fraction": self.idiom_fraction}

    def ppo_config(self) -> PPOConfig:
        """The ``PPOConfig`` of this search without an edit policy (``policy_fraction=0``): what the agent runs."""
        return PPOConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(IslandsConfig)},
                         policy_fraction=0.0)

    @property
    def elite_variants(self) -> int:
        """Random variants of the member's queue per generation (``elite_fraction`` of B)."""
        return round(self.batch_size * self.elite_fraction)

    @property
    def children_per_island(self) -> int:
        """C, each island's children per generation."""
        return (self.batch_size - self.elite_variants) // self.islands

    @property
    def policy_children(self) -> int:
        """Policy variants per island per generation (none without an edit policy)."""
        return 0

    @property
    def splice_children(self) -> int:
        """Crossovers per island per generation."""
        return round(self.children_per_island * self.splice_fraction)

    @property
    def idiom_children(self) -> int:
        """Children per island per generation made by putting an idiom into a parent."""
        return round(self.children_per_island * self.idiom_fraction)

    @property
    def child_slots(self) -> dict[str, slice]:
        """Where each kind of child lies among an island's C children: the policy's variants, then the crossovers,
        the idioms, and random variants in the rest."""
        ends = itertools.accumulate((self.policy_children, self.splice_children, self.idiom_children))
        policy, crossover, idiom = ends
        return {"policy": slice(0, policy), "crossover": slice(policy, crossover), "idiom": slice(crossover, idiom),
                "random": slice(idiom, self.children_per_island)}


@dataclass(frozen=True)
class PPOConfig(IslandsConfig):
    """Settings of ``ppo``: the search of ``IslandsConfig`` with an edit policy fine-tuned by PPO (see
    ``agents.search.agent``)."""

    policy_fraction: float = 0.25
    """Share of each island's children written by the edit policy (0: random variants only, no learning)."""
    variants_per_parent: int = 4
    """V, policy variants written from each parent the policy reads: its pass reads a parent once and draws
    V variants of it, and an update relearns them all from one reading, so the policy's cost per variant
    falls about V times (1: a parent for every variant). Must divide the policy variants per island and
    update_batch."""
    fine_tune: bool = True
    """Fine-tune the edit policy on the task at hand, by PPO on its variants' gains and imitation of the
    improving edits (False: it writes its edits as it starts, never updated: what pretraining alone is worth;
    its variants then cost its pass but no updates)."""
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
    policy: str = "pretrained"
    """Where the edit policy starts: 'pretrained' (the policy shipped in the package, pretrained across generated
    tasks by synthenv pretrain), 'scratch' (random weights) or the path of a policy file (synthenv pretrain --out,
    synthenv train --policy-out). Every member starts from it and fine-tunes it on the task at hand."""
    temperature: float = 1.0
    """The edit policy's sampling temperature: every logit is divided by it, so below 1 its likeliest edits
    are written more often and its variants are less diverse (1: the distribution it learned)."""
    editor: EditorConfig = field(default_factory=EditorConfig)
    """The edit policy's architecture (its max_edits follows this config's; a policy file must have it)."""

    def __post_init__(self) -> None:
        require_finite_fields(self, "policy_fraction", low=0.0, high=1.0)  # before the search's checks count it
        require_positive_int_fields(self, "update_every", "update_batch", "update_epochs", "variants_per_parent")
        super().__post_init__()
        if self.policy_children and (self.policy_children % self.variants_per_parent
                                     or self.update_batch % self.variants_per_parent):
            raise ValueError(f"variants_per_parent={self.variants_per_parent} must divide the policy variants per "
                             f"island ({self.policy_children} = policy_fraction x children per island) and "
                             f"update_batch ({self.update_batch}); pick a divisor of both, or change those")
        require_finite_fields(self, "risk_quantile", low=0.0, high=1.0, high_open=True)
        require_finite_fields(self, "learning_rate", "max_grad_norm", "clip_coef", "temperature", low=0.0,
                              low_open=True)
        require_finite_fields(self, "pg_weight", "queue_weight", "entropy_coef", low=0.0)
        require_start("policy", self.policy)
        if self.editor.max_edits != self.max_edits:
            object.__setattr__(self, "editor", dataclasses.replace(self.editor, max_edits=self.max_edits))

    def _child_shares(self) -> dict[str, float]:
        return {"policy_fraction": self.policy_fraction, **super()._child_shares()}

    @property
    def policy_children(self) -> int:
        """Policy variants per island per generation."""
        return round(self.children_per_island * self.policy_fraction)

    @property
    def policy_reads(self) -> int:
        """Parents the policy reads per island per generation (V variants of each)."""
        return self.policy_children // self.variants_per_parent
