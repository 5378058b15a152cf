"""The edit policy: reads a whole program and its test feedback in one parallel pass, writes edits.

A policy that the default agent trains with PPO to propose *variants* of its programs. Given a
parent ``[L]`` and its feedback features ``[F]`` (``agents.feedback``: which cases pass, fail,
print too little or too much...), one pass of a small convolutional network over the program
gives, at every position, logits for "edit here", for the kind of edit (substitute, insert,
delete) and for the command written; a pooled head gives the number of edits (1 .. E). The
policy samples up to E point edits in ``agents.variation``'s format, so random mutation and the
policy share one action space and the policy can imitate edits that random mutation found.

Unlike an autoregressive writer it costs one batched pass per generation, whatever the program
length: the env, not the policy, sets the pace. Every parameter has a leading member dimension S
(seeds train as independent members of one job, as in ``agents.policies``); the convolution runs
all members at once as a grouped convolution.

Dimensions: S members, N programs per member, L tokens, P = L + 1 edit positions (the extra one
appends), H hidden, F features, E edits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from synthenv.checks import require_positive_int_fields
from synthenv.language import CLOSE, EOS, OPEN, VOCAB_SIZE

from .buffers import MASKED_LOGIT
from .variation import DELETE, NUM_COMMANDS, NUM_KINDS, Edits, member_uniform, program_lengths

MAX_DEPTH = 3
"""Bracket depths beyond this share one embedding."""


@dataclass(frozen=True)
class EditorConfig:
    """Architecture of the edit policy."""

    embedding: int = 8
    """Token (and bracket-depth) embedding size."""
    hidden: int = 16
    """Channels of the convolution and the pointwise layer."""
    kernel: int = 5
    """Convolution width: how many neighbouring tokens each position reads."""
    max_edits: int = 3
    """E, the most point edits in one variant."""

    def __post_init__(self) -> None:
        require_positive_int_fields(self, "embedding", "hidden", "kernel", "max_edits", prefix="editor ")
        if self.kernel % 2 == 0:
            raise ValueError(f"editor kernel must be odd (centred on each position), got {self.kernel}")


def _param(shape: tuple[int, ...], bound: float, generators: list[torch.Generator], device) -> nn.Parameter:
    rows = [(torch.rand(shape, generator=g, device=g.device) * 2 - 1) * bound for g in generators]
    return nn.Parameter(torch.stack(rows).to(device))


def _zeros(shape: tuple[int, ...], num_members: int, device) -> nn.Parameter:
    return nn.Parameter(torch.zeros((num_members, *shape), dtype=torch.float32, device=device))


@dataclass(frozen=True)
class EditLogits:
    """The policy's output for N programs per member.

    Attributes:
        position: ``[S, N, P]`` logits of where to edit (invalid positions masked).
        kind: ``[S, N, P, 3]`` logits of substitute / insert / delete at each position (masked).
        token: ``[S, N, P, 8]`` logits of the command written at each position.
        count: ``[S, N, E]`` logits of the number of edits (1 .. E).
    """

    position: torch.Tensor
    kind: torch.Tensor
    token: torch.Tensor
    count: torch.Tensor


class EditPolicy(nn.Module):
    """One-pass convolutional edit policy with S independent members.

    >>> gens = [torch.Generator().manual_seed(0)]
    >>> policy = EditPolicy(EditorConfig(), 1, num_features=9, generators=gens, device=torch.device("cpu"))
    >>> parents = torch.tensor([[[8, 5, 1, 8, 6, 0]]])
    >>> edits, log_p = policy.sample(parents, torch.zeros(1, 1, 9), gens)
    >>> tuple(edits.positions.shape), tuple(log_p.shape)
    ((1, 1, 3), (1, 1))
    """

    def __init__(self, config: EditorConfig, num_members: int, num_features: int, generators: list[torch.Generator],
                 device: torch.device):
        super().__init__()
        s, e, h = num_members, config.embedding, config.hidden
        self.config, self.num_members = config, s
        self.tokens = _param((VOCAB_SIZE, e), 1.0, generators, device)  # [S, V, E]
        self.depths = _param((MAX_DEPTH + 1, e), 1.0, generators, device)  # [S, D, E]
        bound = 1.0 / math.sqrt(e * config.kernel)
        self.conv = _param((h, e, config.kernel), bound, generators, device)  # [S, H, E, k]
        self.conv_bias = _zeros((h,), s, device)
        self.film = _param((num_features, h), 1.0 / math.sqrt(num_features), generators, device)  # [S, F, H]
        self.mix = _param((h, h), 1.0 / math.sqrt(h), generators, device)  # [S, H, H]
        self.mix_bias = _zeros((h,), s, device)
        self.heads = _param((h, 1 + NUM_KINDS + NUM_COMMANDS), 0.1 / math.sqrt(h), generators, device)  # [S, H, 12]
        self.count_head = _param((h, config.max_edits), 0.1 / math.sqrt(h), generators, device)  # [S, H, E]

    def forward(self, parents: torch.Tensor, features: torch.Tensor) -> EditLogits:
        """Logits for ``parents [S, N, L]`` with feedback ``features [S, N, F]``."""
        s, n, length = parents.shape
        padded = nn.functional.pad(parents, (0, 1), value=EOS)  # [S, N, P]: slot L is the append position
        steps = (padded == OPEN).long() - (padded == CLOSE).long()
        depth = (steps.cumsum(-1) - (padded == OPEN).long()).clamp(0, MAX_DEPTH)  # depth before each token
        members = torch.arange(s, device=parents.device)[:, None, None]
        x = self.tokens[members, padded] + self.depths[members, depth]  # [S, N, P, E]
        x = x.permute(1, 0, 3, 2).reshape(n, -1, length + 1)  # [N, S*E, P]
        weight = self.conv.reshape(-1, *self.conv.shape[2:])  # [S*H, E, k]
        hidden = nn.functional.conv1d(x, weight, self.conv_bias.reshape(-1), padding=self.config.kernel // 2,
                                      groups=s)  # [N, S*H, P]
        hidden = hidden.view(n, s, -1, length + 1).permute(1, 0, 3, 2)  # [S, N, P, H]
        hidden = hidden + torch.bmm(features, self.film)[:, :, None, :]  # the feedback shifts every position
        hidden = nn.functional.gelu(hidden).reshape(s, n * (length + 1), -1)
        hidden = hidden + nn.functional.gelu(torch.baddbmm(self.mix_bias[:, None, :], hidden, self.mix))
        out = torch.bmm(hidden, self.heads).view(s, n, length + 1, -1)  # [S, N, P, 12]
        pooled = hidden.view(s, n, length + 1, -1).mean(2)  # [S, N, H]
        lengths = program_lengths(parents)[..., None]  # [S, N, 1]
        p = torch.arange(length + 1, device=parents.device)
        at_end = p == lengths  # [S, N, P]: only insertion (appending) makes sense there
        position_ok = (p <= lengths) & (p < length + (lengths < length).long())  # a full program has no append slot
        kind_ok = torch.stack([~at_end, torch.ones_like(at_end), ~at_end], dim=-1)  # [S, N, P, 3]
        return EditLogits(
            torch.where(position_ok, out[..., 0], MASKED_LOGIT),
            torch.where(kind_ok, out[..., 1: 1 + NUM_KINDS], MASKED_LOGIT),
            out[..., 1 + NUM_KINDS:],
            torch.bmm(pooled, self.count_head),
        )

    @torch.no_grad()
    def sample(self, parents: torch.Tensor, features: torch.Tensor,
               generators: list[torch.Generator]) -> tuple[Edits, torch.Tensor]:
        """Edits for ``parents [S, N, L]`` (Gumbel-max, member s from ``generators[s]``) and their
        log-probabilities ``[S, N]`` under the policy."""
        logits = self(parents, features)
        s, n, positions = logits.position.shape
        e = self.config.max_edits
        noise = _gumbel(member_uniform(generators, (n, e + 1, positions + NUM_KINDS + NUM_COMMANDS),
                                       parents.device))  # [S, N, E + 1, P + 11]; row E draws the count
        count = 1 + (logits.count + noise[..., e, :e]).argmax(-1)  # [S, N]
        noise = noise[..., :e, :]
        where = (logits.position[:, :, None, :] + noise[..., :positions]).argmax(-1)  # [S, N, E]
        kind_logits, token_logits = _at(logits.kind, where), _at(logits.token, where)  # [S, N, E, 3 / 8]
        kinds = (kind_logits + noise[..., positions: positions + NUM_KINDS]).argmax(-1)
        tokens = 1 + (token_logits + noise[..., positions + NUM_KINDS: positions + NUM_KINDS + NUM_COMMANDS]).argmax(-1)
        active = torch.arange(e, device=parents.device) < count[..., None]
        edits = Edits(where, kinds, tokens, active)
        return edits, edit_log_probs(logits, edits)


def _gumbel(uniform: torch.Tensor) -> torch.Tensor:
    return -torch.log(-torch.log(uniform.clamp(min=1e-20, max=1 - 1e-7)))


def _at(values: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """``values [S, N, P, X]`` at positions ``where [S, N, E]``: ``[S, N, E, X]``."""
    return values.gather(2, where[..., None].expand(-1, -1, -1, values.shape[-1]))


def edit_log_probs(logits: EditLogits, edits: Edits) -> torch.Tensor:
    """``[S, N]`` log-probability of ``edits`` (with grad): the count, then each active edit's
    position, kind and, unless it deletes, its command."""
    count_lp = torch.log_softmax(logits.count, -1).gather(-1, (edits.count - 1).clamp(min=0)[..., None])[..., 0]
    position_lp = torch.log_softmax(logits.position, -1).gather(-1, edits.positions)  # [S, N, E]
    kind_lp = torch.log_softmax(_at(logits.kind, edits.positions), -1).gather(-1, edits.kinds[..., None])[..., 0]
    token_lp = torch.log_softmax(_at(logits.token, edits.positions), -1).gather(
        -1, (edits.tokens - 1).clamp(0, NUM_COMMANDS - 1)[..., None])[..., 0]
    per_edit = position_lp + kind_lp + torch.where(edits.kinds == DELETE, 0.0, token_lp)
    return count_lp + (per_edit * edits.active).sum(-1)


def edit_entropy(logits: EditLogits, edits: Edits) -> torch.Tensor:
    """``[S, N]`` entropy of the position distribution plus, at the edited positions, of the kind
    and command distributions (a cheap stand-in for the entropy of the whole edit)."""
    def entropy(values: torch.Tensor) -> torch.Tensor:
        log_p = torch.log_softmax(values, -1)
        return -(log_p.exp() * log_p).sum(-1)

    inner = entropy(_at(logits.kind, edits.positions)) + entropy(_at(logits.token, edits.positions))  # [S, N, E]
    return entropy(logits.position) + (inner * edits.active).sum(-1) / edits.count.clamp(min=1)
