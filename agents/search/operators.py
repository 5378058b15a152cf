"""Child operators: parents and their feedback in, children out.

The default agent's island search breeds each generation's children with a mix of operators, all
with one signature, ``operator(parents, members) -> children``:

- ``RandomEdits``: 1 .. ``max_edits`` uniform point edits of each parent (``variation.random_edits``);
- ``Crossover``: a piece of each parent's mate spliced into it (``variation.splice``);
- ``Idioms``: a short fresh program (a sample of the program prior: an idiom) put whole into each parent
  (``variation.insert_pieces``);
- ``PolicyEdits``: the edit policy reads each parent and its per-case feedback in one pass and
  writes ``variants`` edits of it (``agents.policy.editor``).

The edit operators write their edits in one format (``variation.Edits``), which is what lets the
policy imitate edits that random mutation found. Nothing here loops over programs or syncs with
the host. Dimensions: S' members (of the job's S), N parents, L tokens, F features, E edits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..policy.editor import EditPolicy
from .variation import Edits, apply_edits, insert_pieces, random_edits, splice

EDIT_FIELDS = tuple(f.name for f in dataclasses.fields(Edits))
"""The tensors of an ``Edits``, by name: ``positions``, ``kinds``, ``tokens``, ``active``."""


def cat_edits(parts: list[Edits], dim: int) -> Edits:
    """``parts`` concatenated along ``dim``."""
    return Edits(*(torch.cat([getattr(part, name) for part in parts], dim=dim) for name in EDIT_FIELDS))


def reshape_edits(edits: Edits, *shape: int) -> Edits:
    """Each tensor of ``edits`` as ``[*shape, E]``."""
    return Edits(*(getattr(edits, name).reshape(*shape, -1) for name in EDIT_FIELDS))


@dataclass(frozen=True)
class Members:
    """Which of the job's S members a batch of rows belongs to: S' of them, each with its generator."""

    generators: list[torch.Generator]
    """One per member, in row order: everything random about a member's rows comes from its own."""
    index: torch.Tensor | None = None
    """``[S']`` their positions among the job's members (for the policy's per-member parameters); None: all."""
    ids: tuple[int, ...] = ()
    """The same positions on the host (all members: ``0 .. S - 1``)."""

    def __post_init__(self) -> None:
        if not self.ids:
            object.__setattr__(self, "ids", tuple(range(len(self.generators))))

    def take(self, values: torch.Tensor) -> torch.Tensor:
        """These members' rows of ``values [S, ...]``."""
        return values if self.index is None else values.index_select(0, self.index)

    def spread(self, values: torch.Tensor, num_members: int) -> torch.Tensor:
        """``values [S']`` as ``[S]`` float, NaN for the members not among these."""
        values = values.float()
        if self.index is None:
            return values
        return values.new_full((num_members,), float("nan")).index_copy(0, self.index, values)


@dataclass(frozen=True)
class Parents:
    """The parents of N children per member, one row per child.

    Attributes:
        tokens: ``[S', N, L]`` int64 programs.
        features: ``[S', N, F]`` float32 their feedback features (``agents.run.feedback``).
        rewards: ``[S', N]`` float32 their rewards (``EMPTY``: not run yet).
        mates: ``[S', N, L]`` second parents (crossover only).
    """

    tokens: torch.Tensor
    features: torch.Tensor
    rewards: torch.Tensor
    mates: torch.Tensor | None = None


@dataclass(frozen=True)
class Children:
    """What an operator wrote: ``tokens [S', N, L]``; the ``edits`` that made them from their parents
    (edit operators); the policy's ``log_probs [S', N]`` of those edits (``PolicyEdits``)."""

    tokens: torch.Tensor
    edits: Edits | None = None
    log_probs: torch.Tensor | None = None


@dataclass(frozen=True)
class RandomEdits:
    """1 .. ``max_edits`` uniform point edits of each parent: substitutions, insertions, deletions."""

    max_edits: int

    def __call__(self, parents: Parents, members: Members) -> Children:
        edits = random_edits(members.generators, parents.tokens, self.max_edits)
        return Children(apply_edits(parents.tokens, edits), edits)


@dataclass(frozen=True)
class Crossover:
    """``parent[:i] + mate[j:j + w] + parent[m:]`` at uniform cut points: a deletion when ``w = 0``, an
    insertion of a piece of the mate when ``i = m`` (``variation.splice``)."""

    def __call__(self, parents: Parents, members: Members) -> Children:
        return Children(splice(members.generators, parents.tokens, parents.mates))


@dataclass(frozen=True)
class Idioms:
    """A fresh program of 1 .. ``longest`` commands put whole into each parent, in place of a window no longer
    than it (``variation.insert_pieces``). ``fresh`` draws them with ``variation.random_programs``' arguments: the
    program prior's samples (``program_prior.PriorPrograms``), BF's idioms with their loops balanced, or uniform
    random commands."""

    fresh: Callable
    longest: int

    def __call__(self, parents: Parents, members: Members) -> Children:
        tokens = parents.tokens
        pieces = self.fresh(members.generators, tokens.shape[1:2], tokens.shape[-1], self.longest, tokens.device)
        return Children(insert_pieces(members.generators, tokens, pieces))


@dataclass(frozen=True)
class PolicyEdits:
    """``variants`` (K) edits of each parent written by the edit policy, from one reading of it.

    The parents come as K consecutive rows each (rows ``i K .. i K + K - 1`` share parent i): the
    policy reads every K-th row and draws K variants of it, so its cost per variant falls about K times.
    """

    policy: EditPolicy
    variants: int

    def __call__(self, parents: Parents, members: Members) -> Children:
        k = self.variants
        read, features = parents.tokens[:, ::k].contiguous(), parents.features[:, ::k].contiguous()  # [S', N / K, ...]
        edits, log_probs = self.policy.sample(read, features, members.generators, members.index, k)
        return Children(apply_edits(parents.tokens, edits), edits, log_probs)
