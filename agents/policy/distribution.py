"""The edit policy's distribution over edits: its logits (``EditLogits``), the log-probability of edits under
them and their entropy. ``EditPolicy`` (``agents.policy.editor``) writes the logits and samples from them; the
learner (``agents.policy.learner``) and pretraining score edits by them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..pqt.sampling import MASKED_LOGIT
from ..search.variation import DELETE, NUM_COMMANDS, NUM_KINDS, Edits


@dataclass(frozen=True)
class EditLogits:
    """The policy's output for N programs per member; kind and command logits are computed only
    at the positions asked for (``at``), which is all an edit needs.

    Attributes:
        position: ``[S, N, P]`` logits of where to edit (invalid positions masked).
        count: ``[S, N, E]`` logits of the number of edits (1 .. E).
        hidden: ``[S, N, P, H]`` the features of every position.
        lengths: ``[S, N]`` the parents' lengths.
        heads: ``[S, H, 11]`` the kind (3) and command (8) heads, divided by the sampling temperature.
    """

    position: torch.Tensor
    count: torch.Tensor
    hidden: torch.Tensor
    lengths: torch.Tensor
    heads: torch.Tensor

    def at(self, where: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Kind logits ``[S, N', E, 3]`` (masked: at the end only insertion) and command logits
        ``[S, N', E, 8]`` at positions ``where [S, N', E]``; ``N' = K N`` for K variants of each
        program (parent i's variants are rows ``i K .. i K + K - 1``)."""
        s, rows, e = where.shape
        n, h = self.hidden.shape[1], self.hidden.shape[-1]
        grouped = where.reshape(s, n, -1)  # [S, N, K * E]: each program's positions, read from its hidden once
        picked = self.hidden.gather(2, grouped[..., None].expand(-1, -1, -1, h))  # [S, N, K * E, H]
        out = torch.bmm(picked.reshape(s, rows * e, h), self.heads).view(s, rows, e, -1)
        at_end = (grouped == self.lengths[..., None]).view(s, rows, e, 1)
        kind_ok = torch.cat([~at_end, torch.ones_like(at_end), ~at_end], dim=-1)
        return torch.where(kind_ok, out[..., :NUM_KINDS], MASKED_LOGIT), out[..., NUM_KINDS:]

    def select(self, part: slice) -> EditLogits:
        """The logits of programs ``part`` (along N)."""
        return EditLogits(self.position[:, part], self.count[:, part], self.hidden[:, part], self.lengths[:, part],
                          self.heads)


def edit_log_probs(logits: EditLogits, edits: Edits,
                   at: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """``[S, N']`` log-probability of ``edits`` (with grad): the count, then each active edit's
    position, kind and, unless it deletes, its command. ``N' = K N``: K variants of each of the
    N programs of ``logits`` (``EditPolicy.sample``'s order). ``at``: ``logits.at(edits.positions)``
    if the caller has it already."""
    s, n, _ = logits.position.shape
    rows, e = edits.positions.shape[1:]
    counts = (edits.count - 1).clamp(min=0).view(s, n, -1)  # [S, N, K]
    count_lp = torch.log_softmax(logits.count, -1).gather(-1, counts).view(s, rows)
    position_lp = torch.log_softmax(logits.position, -1).gather(-1, edits.positions.reshape(s, n, -1)).view(s, rows, e)
    kind_logits, token_logits = logits.at(edits.positions) if at is None else at
    kind_lp = torch.log_softmax(kind_logits, -1).gather(-1, edits.kinds[..., None])[..., 0]
    token_lp = torch.log_softmax(token_logits, -1).gather(-1, (edits.tokens - 1).clamp(0, NUM_COMMANDS - 1)[..., None])
    per_edit = position_lp + kind_lp + torch.where(edits.kinds == DELETE, 0.0, token_lp[..., 0])
    return count_lp + (per_edit * edits.active).sum(-1)


def edit_entropy(logits: EditLogits, edits: Edits) -> torch.Tensor:
    """``[S, N']`` entropy of the position distribution plus, at the edited positions, of the kind
    and command distributions (a cheap stand-in for the entropy of the whole edit; ``N'`` as in
    ``edit_log_probs``)."""
    def entropy(values: torch.Tensor) -> torch.Tensor:
        log_p = torch.log_softmax(values, -1)
        return -(log_p.exp() * log_p).sum(-1)

    s, n, _ = logits.position.shape
    rows = edits.positions.shape[1]
    kind_logits, token_logits = logits.at(edits.positions)
    inner = entropy(kind_logits) + entropy(token_logits)  # [S, N', E]
    where = entropy(logits.position)[..., None].expand(s, n, rows // n).reshape(s, rows)
    return where + (inner * edits.active).sum(-1) / edits.count.clamp(min=1)
