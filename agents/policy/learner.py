"""The learner of ``ppo``: the edit policy, its rollout buffer, its imitation queue and its update.

The edit policy (``agents.policy.editor``) writes a share of each island's children (``operators.PolicyEdits``).
Every generation the learner keeps what it needs to learn from them:

- the *rollout*: the policy's own variants of the last ``update_every`` generations, with the
  parents it read, their feedback, the edits it drew, their log-probabilities and their *gains*
  (how much the child beat its parent: PPO's advantage before normalisation), one slot of
  generations per member (``EditRollout``);
- the *imitation queue*: the best improving edits found so far by any edit operator (random or its
  own), ranked by the child's reward (PQT's queue, in edit space).

Every ``update_every`` generations of a member its policy takes ``update_epochs`` Adam steps on PPO's
clipped surrogate over a sample of its rollout (advantages normalised per member, or risk-seeking on
the top ``risk_quantile``), plus the imitation of its queue, minus an entropy bonus. Members share no
parameters: each has its own slice of every tensor, its own optimizer state and its own clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..run.feedback import NUM_FEATURES
from ..search.config import PPOConfig
from ..search.generation import IslandOutcome, IslandProposal
from ..search.members import MemberMasks, masked_mean, member_index
from ..search.operators import EDIT_FIELDS, Members
from ..search.queue import ProgramQueue
from ..search.variation import Edits, member_uniform
from .editor import EditPolicy
from .files import load_policy, policy_path, start_policy
from .distribution import edit_entropy, edit_log_probs
from .losses import clipped_policy_loss, normalize_advantages, risk_seeking_advantages
from .optim import MemberAdam, clip_grad_norm_per_member

ADAM_EPS = 1e-5
"""Adam's epsilon for the edit policy (CleanRL's PPO value)."""


@dataclass
class EditRollout:
    """The policy's variants of the last ``update_every`` generations of each member, slot by slot.

    Generation t of a member fills slot ``t % update_every`` of its rows. R parents read per slot
    (``G x policy_reads``), V variants of each (N = R V policy variants per slot).

    Attributes:
        parents: ``[S, slots R, L]`` the parents the policy read.
        features: ``[S, slots R, F]`` their feedback features, as the policy read them.
        edits: ``Edits`` of ``[S, slots N, E]``, the edits it drew.
        log_probs: ``[S, slots N]`` their log-probabilities when drawn.
        gains: ``[S, slots N]`` the child's reward minus its parent's.
        valid: ``[S, slots N]`` the parent had been run (a gain is defined).
    """

    parents: torch.Tensor
    features: torch.Tensor
    edits: Edits
    log_probs: torch.Tensor
    gains: torch.Tensor
    valid: torch.Tensor

    @classmethod
    def allocate(cls, num_members: int, reads: int, variants: int, max_len: int, max_edits: int,
                 device: torch.device) -> EditRollout:
        """Empty storage for ``reads`` parents read and ``reads x variants`` variants per member."""
        s, n, e = num_members, reads * variants, max_edits
        zeros = lambda *shape, dtype=torch.int64: torch.zeros(shape, dtype=dtype, device=device)  # noqa: E731
        edits = Edits(zeros(s, n, e), zeros(s, n, e), torch.ones((s, n, e), dtype=torch.int64, device=device),
                      zeros(s, n, e, dtype=torch.bool))
        return cls(zeros(s, reads, max_len), zeros(s, reads, NUM_FEATURES, dtype=torch.float32), edits,
                   zeros(s, n, dtype=torch.float32), zeros(s, n, dtype=torch.float32), zeros(s, n, dtype=torch.bool))

    def fields(self) -> dict[str, torch.Tensor]:
        """Every tensor by name (the edits' as ``positions``, ``kinds``...), each ``[S, ...]``."""
        return {"parents": self.parents, "features": self.features, "log_probs": self.log_probs,
                "gains": self.gains, "valid": self.valid,
                **{name: getattr(self.edits, name) for name in EDIT_FIELDS}}

    def store(self, slots: list[int], members: Members, values: dict[str, torch.Tensor]) -> None:
        """Write ``values`` (``fields()``'s names, ``[S', width, ...]`` rows for ``members``) into slot
        ``slots[i]`` of member i's rows, in place."""
        for position in sorted(set(slots)):
            rows = [i for i, other in enumerate(slots) if other == position]
            index, take = members.index, None  # the buffer's rows, and which of the members' rows go there
            if len(rows) < len(slots):
                index = member_index([members.ids[i] for i in rows], self.valid.device)
                take = member_index(rows, self.valid.device)
            for name, target in self.fields().items():
                value = values[name]
                slot = slice(position * value.shape[1], (position + 1) * value.shape[1])
                value = value if take is None else value.index_select(0, take)
                if index is None:
                    target[:, slot] = value
                else:
                    target[:, slot].index_copy_(0, index, value)  # in place, through the view

    def forget(self, member: int) -> None:
        """Mark member ``member``'s variants unusable (in place: no tensor from Python data)."""
        self.valid[member].fill_(False)

    def sample(self, members: Members, count: int, variants: int) -> EditRollout:
        """A uniform sample without replacement of ``count`` parents read, with their V variants each."""
        size = self.parents.shape[1]
        device = self.valid.device
        keys = member_uniform(members.generators, (size,), device)
        chosen = keys.argsort(dim=1)[:, :count]  # [S', count]
        picked = (chosen[..., None] * variants + torch.arange(variants, device=device)).view(chosen.shape[0], -1)

        def gather(name: str, value: torch.Tensor) -> torch.Tensor:
            index = chosen if name in ("parents", "features") else picked  # per parent read, or per variant
            return members.take(value).gather(1, index.view(*index.shape, *([1] * (value.dim() - 2))).expand(
                -1, -1, *value.shape[2:]))

        rows = {name: gather(name, value) for name, value in self.fields().items()}
        return EditRollout(rows["parents"], rows["features"], Edits(*(rows[name] for name in EDIT_FIELDS)),
                           rows["log_probs"], rows["gains"], rows["valid"])

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {name: value.clone() for name, value in self.fields().items()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        device = self.valid.device
        rows = {name: state[name].to(device).clone() for name in self.fields()}
        self.parents, self.features = rows["parents"], rows["features"]
        self.log_probs, self.gains, self.valid = rows["log_probs"], rows["gains"], rows["valid"]
        self.edits = Edits(*(rows[name] for name in EDIT_FIELDS))


class EditLearner:
    """The edit policy of S members and everything it learns from (see the module docstring)."""

    def __init__(self, config: PPOConfig, generators: list[torch.Generator], max_len: int, device: torch.device):
        self.config = config
        s, e = len(generators), config.max_edits
        # drawn whatever the start
        self.policy = EditPolicy(config.editor, s, NUM_FEATURES, generators, device, config.temperature)
        path = policy_path(config.policy)
        if path is not None:
            start_policy(self.policy, load_policy(path), path)
        self.optimizer = MemberAdam(list(self.policy.parameters()), lr=config.learning_rate, eps=ADAM_EPS)
        reads = config.islands * config.policy_reads * config.update_every
        self.rollout = EditRollout.allocate(s, reads, config.variants_per_parent, max_len, e, device)
        self.imitation = ProgramQueue(s, config.queue_size, max_len, device, extras={
            "parents": ((max_len,), torch.int64), "features": ((NUM_FEATURES,), torch.float32),
            **{f"edit_{name}": ((e,), torch.bool if name == "active" else torch.int64) for name in EDIT_FIELDS}})

    def learn(self, proposal: IslandProposal, outcome: IslandOutcome, hashes: torch.Tensor, generations: list[int],
              members_of, masks: MemberMasks) -> dict[str, torch.Tensor]:
        """One generation of the islands, learned from (the agent calls it after counting the generation):
        ``proposal``'s members queue the edits that beat their parent (``outcome.improving``); when the policy is
        fine-tuned, its variants go into the rollout and each member whose count of ``generations`` (host, all S
        members) reached a multiple of ``update_every`` takes its update. ``members_of(ids)`` gives the
        ``Members`` of ``ids``. Statistics ``[S]``."""
        config, members, s = self.config, proposal.members, len(generations)
        imitation = self.imitation if members.index is None else self.imitation.members(members.index)
        improving = outcome.improving
        self.remember(imitation, improving.children, improving.rewards, hashes, improving.parents, improving.features,
                      improving.edits)
        stats = {}
        if config.fine_tune:
            slots = [(generations[m] - 1) % config.update_every for m in members.ids]  # the generation just run
            self.rollout.store(slots, members, self._variants(proposal, outcome))
            due = [i for i, member in enumerate(members.ids) if generations[member] % config.update_every == 0]
            if due:
                updating, rows = members, imitation
                if len(due) != len(members.generators):
                    updating = members_of(tuple(members.ids[i] for i in due))
                    rows = imitation.members(masks.index(tuple(due)))
                mask = masks([m in updating.ids for m in range(s)])
                stats = {key: updating.spread(value, s) for key, value in self.update(updating, rows, mask).items()}
        if members.index is not None:
            self.imitation.put_members(members.index, imitation)
        return stats

    def _variants(self, proposal: IslandProposal, outcome: IslandOutcome) -> dict[str, torch.Tensor]:
        """The generation's policy variants as the rollout stores them: the parents read, their features, the
        edits, their log-probabilities and gains."""
        config, members, policy = self.config, proposal.members, proposal.policy
        s, v, n_pol = len(members.generators), config.variants_per_parent, config.policy_children
        length = proposal.parents.tokens.shape[-1]
        parents = proposal.parents.tokens.view(s, config.islands, -1, length)[:, :, :n_pol:v]
        features = proposal.parents.features.view(s, config.islands, -1, NUM_FEATURES)[:, :, :n_pol:v]
        return {"parents": parents.reshape(s, -1, length), "features": features.reshape(s, -1, NUM_FEATURES),
                "log_probs": policy.log_probs, "gains": outcome.gains, "valid": outcome.known,
                **{name: getattr(policy.edits, name) for name in EDIT_FIELDS}}

    @staticmethod
    def remember(imitation: ProgramQueue, children: torch.Tensor, rewards: torch.Tensor, hashes: torch.Tensor,
                 parents: torch.Tensor, features: torch.Tensor, edits: Edits) -> None:
        """Queue the edits that beat their parent in ``imitation`` (a members' view of the queue), ranked by the
        child's reward: ``children [S', N, L]``, ``rewards [S', N]`` (``EMPTY`` where the child did not beat its
        parent by an edit), their ``hashes``, ``parents``, ``features`` (as an edit operator read them) and
        ``edits``."""
        imitation.push(children, rewards, hashes, parents=parents, features=features,
                       **{f"edit_{name}": getattr(edits, name) for name in EDIT_FIELDS})

    def update(self, members: Members, imitation: ProgramQueue, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """PPO + imitation for ``members`` (``mask``: the same as ``[S]`` bool; the others' parameters and
        optimizer state stay as they are) on a sample of their rollout and their ``imitation`` queue (a view
        of their rows); statistics ``[S']``."""
        config, v = self.config, self.config.variants_per_parent
        n = min(config.update_batch // v, self.rollout.parents.shape[1])
        batch = self.rollout.sample(members, n, v)
        valid = batch.valid
        if config.risk_quantile:
            advantages, valid = risk_seeking_advantages(batch.gains, valid, config.risk_quantile)
            advantages = normalize_advantages(advantages, valid, center=False)
        else:
            advantages = normalize_advantages(batch.gains, valid)
        queued = Edits(*(imitation.extras[f"edit_{name}"] for name in EDIT_FIELDS))
        parents = torch.cat([batch.parents, imitation.extras["parents"]], dim=1)  # one pass for both
        features = torch.cat([batch.features, imitation.extras["features"]], dim=1)
        totals: dict[str, torch.Tensor] = {}
        for _ in range(config.update_epochs):
            logits = self.policy.logits(parents, features, members.index)
            own, imitated = logits.select(slice(0, n)), logits.select(slice(n, None))
            log_ratio = edit_log_probs(own, batch.edits) - batch.log_probs
            ratio = log_ratio.exp()
            policy_loss = clipped_policy_loss(advantages, ratio, valid, config.clip_coef)  # [S']
            entropy = masked_mean(edit_entropy(own, batch.edits), valid)
            queue_loss = masked_mean(-edit_log_probs(imitated, queued), imitation.valid)
            loss = config.pg_weight * policy_loss + config.queue_weight * queue_loss - config.entropy_coef * entropy
            self.optimizer.zero_grad()
            loss.sum().backward()  # members share no parameters: the sum keeps their gradients apart
            grad_norm = members.take(clip_grad_norm_per_member(list(self.policy.parameters()), config.max_grad_norm))
            self.optimizer.step(mask)
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
        return {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "rollout": self.rollout.state_dict(), "imitation": self.imitation.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.rollout.load_state_dict(state["rollout"])
        self.imitation.load_state_dict(state["imitation"])
