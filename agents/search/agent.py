"""synthenv's island agent: an island search with an elitist warm start, a library of known programs and a learned
program prior (``islands``, the default agent), optionally with a PPO-trained edit operator (``ppo``).

The edit policy is an option, not the default, because it does not pay: with it the agent solves as many tasks in
about the same time (BENCHMARKS.md). Batched over S members (seeds), built from parts, each one click away:

- **the elitist phase** (``agents.search.mutation``): each member starts as the mutation baseline's search
  (random variants of its queue of best programs; with ``fresh='uniform'``, ``library='none'`` and the same seed,
  the very programs the baseline writes), which solves the easy tasks fastest. Its first generation runs the
  *library* of known programs (``agents.search.library``: the solutions of the training tasks) before fresh programs. The
  search's elite is the member's *queue* throughout: after the hand-over it keeps the best programs of all its
  islands, their crossover mates.
- **the hand-over**: when a member's queue has not changed for ``elitist_patience`` generations (the
  baseline has frozen: from then on it draws from the same distribution of children forever), the
  member hands over to its islands (checked every ``HANDOVER_CHECK_EVERY`` steps of the job, the one
  ``elitist_handover`` sync point). A member that has solved the task never hands over.
- **the island search** (``agents.search.generation``, ``agents.search.islands``): G islands of the member's best
  unique programs; each generation every island breeds C children by a mix of child *operators*
  (``agents.search.operators``: random edits, crossover with a queued program or an island-mate, edits
  written by the policy and, with ``idiom_fraction``, idioms: short fresh programs put into a parent), keeps
  its best and restarts when it stalls.
- **the learner** (``agents.policy.learner``, ``ppo`` only): the edit policy (``agents.policy.editor``) reads a parent and its
  per-case test feedback and writes edits; it learns by PPO on its variants' gains over their parents
  and by imitation of a queue of the best improving edits found by any operator.
- **fresh programs** (the elitist phase's first generation, the islands' start and restarts): samples of a
  Markov model of generated training tasks' solutions (``agents.search.prior``), or with
  ``fresh='uniform'`` uniform random commands.

The trainer's schedule shares the job's time between members (``generation_costs``, ``set_stepping``):
a member past its elitist phase costs ``islands_every`` elitist generations, so while some member is
still in its elitist phase the islands step once every ``islands_every`` steps. Each member counts its
own generations (its update steps and hand-over follow that count), so the schedule never changes what a
member writes. Which seeds share its job can, after many generations: the edit policy's float arithmetic
over a batch of members rounds differently from that over one, and a last-bit difference changes a sampled
edit (the elitist phase is integer arithmetic and exact). ``propose`` and ``learn`` below are the
whole generation, top to bottom. No host synchronisation in a step but the ``elitist_handover`` sync
point and, on the CPU only, ``editor_width``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from synthenv.syncpoints import sync_point
from synthenv.tasks import Task

from .members import MemberMasks, generator_states, load_generator_states, member_generators
from ..run.feedback import NUM_FEATURES, Feedback
from .config import IslandsConfig, PPOConfig
from .generation import IslandProposal, IslandSearch
from .islands import Islands
from ..policy.learner import EditLearner
from .knowledge import WithPieces, constant_pieces, domain, first_programs
from .library import Library, load_library
from .mutation import MutationConfig, MutationSearch
from .operators import Members
from ..policy.files import save_policy
from .queue import EMPTY, ProgramQueue
from .prior import fresh_source
from ..run.data import save_run_data

HANDOVER_CHECK_EVERY = 10
"""Steps of the job between the checks for members whose elitist phase has stalled (a host read each)."""


class IslandAgent:
    """The island agent for S members at once, registered twice: ``islands`` (an ``IslandsConfig``: no edit policy,
    the default agent) and ``ppo`` (a ``PPOConfig``: the same search with the PPO-trained edit policy).

    >>> IslandAgent(IslandsConfig(), seeds=(0,), max_len=8, device=torch.device("cpu")).config.policy_fraction
    0.0
    >>> config = PPOConfig(batch_size=32, islands=2, island_size=4, queue_size=4, variants_per_parent=1)
    >>> agent = IslandAgent(config, seeds=(0,), max_len=8, device=torch.device("cpu"))
    >>> tuple(agent.propose().shape), agent.elitist  # member 0 starts in its elitist phase
    ((1, 32, 8), [True])
    """

    balance_for_strict = True
    """Its edits open and close brackets one at a time: a strict task runs each program without its unmatched
    brackets (``agents.run.trainer``)."""

    def __init__(self, config: IslandsConfig, seeds: tuple[int, ...], max_len: int, device: torch.device,
                 task: Task | None = None):
        if not isinstance(config, PPOConfig):
            config = config.ppo_config()  # the search alone: no policy children, so no learner is built
        self.config, self.max_len, self.device = config, max_len, device
        self.seeds = tuple(int(seed) for seed in seeds)
        self.programs_per_step = config.batch_size
        s = len(seeds)
        kind = domain(task)  # what the search knows comes from tasks of the same kind: ints or text
        self.fresh = fresh_source(config.fresh, min(config.initial_length, max_len), kind)
        self.search = MutationSearch(MutationConfig(config.batch_size, config.queue_size, config.max_edits,
                                                    config.initial_length), seeds, max_len, device,
                                     keep_features=config.seeded_islands > 0 or config.elite_fraction > 0,
                                     fresh=self.fresh)
        library = load_library(config.library, kind)
        if library is not None and task is not None and task.text:  # and the constants of the task's outputs
            library = Library(first_programs(task, library.programs, max_len) + library.programs)
        self.library_slots = 0  # the first generation's slots that hold the library's programs
        if library is not None:  # the first generation runs the known programs before fresh ones
            self.search.children = library.first_generation(self.search.children, self.search.generators)
            self.library_slots = min(len(library.tokens(max_len, device)), config.batch_size)
        self.generators = member_generators(seeds, device)  # the islands', the operators' and the learner's
        self.islands = Islands(self.generators, config.islands, config.island_size, max_len, config.initial_length,
                               NUM_FEATURES, self.fresh)
        # the edit policy and its learner: only where it writes children (ppo), never for islands
        self.learner = EditLearner(config, self.generators, max_len, device) if config.policy_children else None
        idioms = fresh_source(config.fresh, min(config.idiom_length, max_len), kind)
        pieces = constant_pieces(task)
        if pieces and config.piece_share:
            idioms = WithPieces(pieces, idioms, config.piece_share, max_len)
        self.island_search = IslandSearch(config, self.learner.policy if self.learner is not None else None, idioms)
        self.elitist = [config.elitist] * s  # on the host: members still in their elitist phase
        self.solved = torch.zeros(s, dtype=torch.bool, device=device)  # [S] the member wrote a solving program
        self.generations = [0] * s  # on the host: generations each member has stepped (its own clock)
        self.step_count = 0  # steps of the job
        self.stepping = [True] * s  # on the host: the members that write programs (the trainer's schedule)
        self._masks = MemberMasks(device)
        self._proposal: IslandProposal | None = None  # the islands' part of the generation just proposed

    @property
    def queue(self) -> ProgramQueue:
        """Each member's best unique programs (the elitist phase's elite; the islands' crossover mates)."""
        return self.search.elite

    @property
    def fine_tunes_policy(self) -> bool:
        """Whether the edit policy writes children and learns from them (what ``save_policy`` saves is then
        more than the policy the run started from)."""
        return bool(self.config.policy_children) and self.config.fine_tune

    @property
    def generation_costs(self) -> list[int]:
        return [1 if elitist else self.config.islands_every for elitist in self.elitist]

    @property
    def uses_features(self) -> bool:
        """Whether the trainer computes ``Feedback.features`` for the generation just proposed: when some
        member's islands stepped in it, and every generation when the queue keeps them (``seeded_islands``,
        ``elite_fraction`` read them); otherwise the elitist phase costs what the mutation baseline costs."""
        return self.search.uses_features or self._proposal is not None

    def set_stepping(self, stepping: list[bool]) -> None:
        if len(stepping) != len(self.stepping):
            raise ValueError(f"stepping has {len(stepping)} members, this agent has {len(self.stepping)}")
        self.stepping = [bool(flag) for flag in stepping]
        self.search.set_stepping(self.stepping)  # the islands' rows replace its children for their members

    def new_programs(self, step: int) -> int:
        return self.config.batch_size

    def propose(self) -> torch.Tensor:
        """One generation: the elitist phase's children, the islands' for members past it, empty programs
        for members that do not step."""
        children = self.search.propose()  # [S, B, L]
        ids = tuple(m for m, (stepping, elitist) in enumerate(zip(self.stepping, self.elitist))
                    if stepping and not elitist)
        self._proposal = None
        if not ids:
            return children
        members = self._members(ids)
        islands = self.islands if members.index is None else self.islands.members(members.index)
        queue = self.queue if members.index is None else self.queue.members(members.index)
        self._proposal = self.island_search.propose(members, islands, queue)
        programs = self._proposal.programs
        return programs if members.index is None else children.index_copy(0, members.index, programs)

    def learn(self, feedback: Feedback) -> dict[str, torch.Tensor]:
        config, s, proposal = self.config, len(self.seeds), self._proposal
        if self.step_count == 0 and config.library_kept < self.library_slots:
            feedback = self._keep_best_known(feedback)
        self.search.remember(feedback)  # every stepping member's programs offered to its queue
        self.solved = self.solved | (feedback.solved.any(1) & self._masks(self.stepping))
        stats = {"programs/queue_best": self.queue.rewards[:, 0], "programs/queue_worst": self.queue.rewards[:, -1],
                 "charts/elitist_phase": self._masks(self.elitist).float()}
        if proposal is not None:
            members = proposal.members
            hashes = members.take(feedback.hashes)
            outcome = self.island_search.learn(proposal, members.take(feedback.rewards),
                                               members.take(feedback.features), hashes,
                                               members.take(feedback.program_status))
            stats.update({key: members.spread(value, s) for key, value in outcome.stats.items()})
        if any(self.elitist):
            self.search.breed()
        self.step_count += 1
        self.generations = [count + stepped for count, stepped in zip(self.generations, self.stepping)]
        if proposal is not None:
            if self.learner is not None:  # each member learns every update_every of its generations
                stats.update(self.learner.learn(proposal, outcome, hashes, self.generations, self._members,
                                                self._masks))
            if members.index is not None:
                self.islands.put_members(members.index, proposal.islands)
        if any(self.elitist) and self.step_count % HANDOVER_CHECK_EVERY == 0:
            self._hand_over_stalled()
        return stats

    def _keep_best_known(self, feedback: Feedback) -> Feedback:
        """The first generation's ``feedback`` with only the ``library_kept`` best of the library's programs (and any
        that solved) offered to the queue: the others' rewards are ``EMPTY``."""
        n, kept = self.library_slots, self.config.library_kept
        known = feedback.rewards[:, :n]
        keep = feedback.solved[:, :n].clone()
        if kept:
            keep.scatter_(1, known.topk(kept, dim=1).indices, True)
        rewards = torch.cat([torch.where(keep, known, EMPTY), feedback.rewards[:, n:]], dim=1)
        return dataclasses.replace(feedback, rewards=rewards)

    def _members(self, ids: tuple[int, ...]) -> Members:
        """The members ``ids`` (all of them: no index)."""
        if len(ids) == len(self.seeds):
            return Members(self.generators)
        return Members([self.generators[m] for m in ids], self._masks.index(ids), ids)

    def _hand_over_stalled(self) -> None:
        """Hand the running members whose queue has stalled for ``elitist_patience`` generations, and that have
        not solved the task, over to their islands."""
        with sync_point("elitist_handover"):
            stalled = ((self.search.stale >= self.config.elitist_patience) & ~self.solved).tolist()
        for member, (elitist, stall, stepping) in enumerate(zip(self.elitist, stalled, self.stepping)):
            if elitist and stall and stepping:
                self._hand_over(member)

    def _hand_over(self, member: int) -> None:
        """Start ``member``'s islands: ``seeded_islands`` of them from its queue, the others fresh.

        What the member's islands, edit policy and generator did while it was in its elitist phase
        (other members' islands ran beside it) is dropped: its generator is reseeded from its seed
        and its generation, its islands and rollout start anew, and its policy has not learned yet
        (nothing of its own was offered). So its run depends on its seed alone."""
        config, device = self.config, self.device
        g, m = config.islands, config.island_size
        generator = self.generators[member]
        seed = np.random.SeedSequence([self.seeds[member], self.generations[member]]).generate_state(1)[0]
        generator.manual_seed(int(seed))
        tokens = self.fresh([generator], (g, m), self.max_len, config.initial_length, device)[0]  # [G, M, L]
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
            self.queue.empty_member(member)  # the islands' programs fill it anew
        if self.learner is not None:
            self.learner.rollout.forget(member)
        self.elitist[member] = False

    def policy_updates(self) -> list[int]:
        """Updates each member's edit policy has had (its fine-tuning). # sync point (read once, at the end)"""
        if self.learner is None:
            return [0] * len(self.seeds)
        return [steps // self.config.update_epochs for steps in self.learner.optimizer.steps.tolist()]

    def save_policy(self, path: str, member: int, card: dict) -> None:
        """Member ``member``'s fine-tuned edit policy to the policy file ``path`` (``agents.policy.files``)."""
        save_policy(path, self.learner.policy, member, {"start": self.config.policy, **card})

    def save_run_data(self, path: str, task: Task, member: int, solution: str | None) -> None:
        """Member ``member``'s improving edits (none without an edit policy) and ``solution``, for ``synthenv pretrain
        --from-runs`` and ``synthenv library --from-runs``."""
        save_run_data(path, task, self.learner.imitation if self.learner is not None else None, member, solution)

    def state_dict(self) -> dict:
        state = {"search": self.search.state_dict(), "islands": self.islands.state_dict(),
                 "solved": self.solved.clone(), "elitist": list(self.elitist), "generations": list(self.generations),
                 "step_count": self.step_count, "stepping": list(self.stepping),
                 "generators": generator_states(self.generators), "config": dataclasses.asdict(self.config)}
        if self.learner is not None:
            state["learner"] = self.learner.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        if len(state["elitist"]) != len(self.elitist):
            raise ValueError(f"checkpoint has {len(state['elitist'])} members, this run has {len(self.elitist)}; "
                             "resume with the same seeds")
        self.search.load_state_dict(state["search"])
        self.islands.load_state_dict(state["islands"])
        if self.learner is not None:
            self.learner.load_state_dict(state["learner"])
        self.solved = state["solved"].to(self.device).clone()
        self.elitist = [bool(flag) for flag in state["elitist"]]
        self.generations, self.step_count = list(state["generations"]), int(state["step_count"])
        self.stepping = [bool(flag) for flag in state["stepping"]]
        load_generator_states(self.generators, state["generators"])
