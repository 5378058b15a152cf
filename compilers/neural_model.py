"""The network of the neural compiler: a one-layer transformer that tags tokens and points
each bracket at its partner, in one non-autoregressive pass over a ``[N, L]`` batch.

Architecture (``PointerTagger``):

- Input: token embeddings (dead tokens, from the first EOS on, read as EOS) plus one
  parameter-free scan, the raw bracket depth ``depth = cumsum([ - ])`` (like a positional
  encoding, but along the bracket structure instead of the sequence).
- One attention block with two heads, one looking backwards (keys ``j < i``) and one
  forwards (keys ``j > i``), each with a learned *sink* key (attend to nothing). Attention
  runs among the live bracket tokens only (a structural mask from the lexer, like the EOS
  mask: other tokens neither attend nor are attended, and read the sinks' values), which
  are gathered into B slots (``forward(width=B)``), so the cost is ``N * B^2``, not
  ``N * L^2`` (B is about L / 4 for uniform programs). Their
  logits are ``q_i . k_j / sqrt(d)`` minus two learned relative penalties:
  ``|w| * |depth_j - depth_i - c|`` (each head learns the depth difference ``c`` it looks for
  and how sharply) and ``s * (1 - 1 / sqrt(1 + |j - i|))`` (a learned recency penalty, like ALiBi's
  but bounded, so that neither a partner far away nor a long program can make it outweigh
  the depth penalty or the sink). Both are elementwise, cheap, and defined for any depth
  and any length.
- The two heads' logits are also the **pointer**: each head is trained to put its argmax on
  the bracket's partner when it lies in its direction, else on the sink.
- A residual MLP over the attention output and a linear **class head** tag each token
  (``NONE ADD MOVE OUT IN OPEN CLOSE UNMATCHED``, the traditional compiler's classes after
  bracket matching).

Why this can be exact: a ``]`` matches the latest ``[`` before it whose depth is its own
plus one, a ``[`` the first ``]`` after it whose depth is its own minus one, and a bracket
with no such partner is unmatched (docs/semantics.md §1). Token types (q.k), depth difference (the
centred penalty) and recency (the slope) are all the network needs to express that rule; it has to
learn it from examples. Dimensions: N programs, L tokens, H = 2 heads, D model width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from synthenv import language as lang
from synthenv.checks import require_positive_int_fields

NUM_CLASSES = 8  # traditional.NONE ... traditional.UNMATCHED
BACKWARD, FORWARD = 0, 1  # the two heads


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the ``PointerTagger`` (stored with the weights)."""

    dim: int = 32
    """Model width D."""
    head_dim: int = 16
    """Query/key/value width per head."""
    hidden: int = 64
    """Width of the MLP's hidden layer."""

    def __post_init__(self):
        require_positive_int_fields(self, "dim", "head_dim", "hidden")


@dataclass(frozen=True)
class Tagging:
    """What the network predicts for a batch (B = bracket slots, see ``PointerTagger``).

    Attributes:
        class_logits: ``[N, L, 8]`` token-class logits.
        pointer: ``[N, 2, L]`` each head's choice per token: a token position, or ``L`` for
            the sink (argmax over keys and sink; a key wins a tie). Always ``L`` at tokens
            that are not live brackets.
        pointer_logits: ``[N, 2, B, B]`` per head, logits of bracket slot queries over bracket
            slot keys (``-inf`` outside the head's direction and at empty slots).
        sink_logits: ``[N, 2, B]`` per head and bracket slot: the logit of "no partner this way".
        slots: ``[N, B]`` the token position of each bracket slot.
        filled: ``[N, B]`` bool, slots that hold a live bracket.
        alive: ``[N, L]`` bool, tokens before the first EOS.
    """

    class_logits: torch.Tensor
    pointer: torch.Tensor
    pointer_logits: torch.Tensor
    sink_logits: torch.Tensor
    slots: torch.Tensor
    filled: torch.Tensor
    alive: torch.Tensor

    def full_pointer_logits(self) -> torch.Tensor:
        """``[N, 2, B, B + 1]``: bracket slots then the sink (for the training loss)."""
        return torch.cat([self.pointer_logits, self.sink_logits[..., None]], dim=-1)


def scan_features(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The parameter-free inputs: ``(tokens, alive, depth)``, each ``[N, L]``.

    Tokens from the first EOS on become EOS; ``depth`` is the running count of ``[`` minus
    ``]`` up to and including each token (PQT's unmatched brackets included: the network
    learns what to make of a negative depth).
    """
    tok = tokens.long()
    alive = torch.cumprod(tok != lang.EOS, dim=1).bool()  # [N, L]
    tok = torch.where(alive, tok, lang.EOS)
    depth = ((tok == lang.OPEN).long() - (tok == lang.CLOSE).long()).cumsum(1)  # [N, L]
    return tok, alive, depth


def bracket_counts(tokens: torch.Tensor) -> torch.Tensor:
    """``[N]`` live brackets per program."""
    tok, alive, _ = scan_features(tokens)
    return (alive & ((tok == lang.OPEN) | (tok == lang.CLOSE))).sum(1)


def bracket_width(tokens: torch.Tensor) -> int:
    """The largest number of live brackets in a program of the batch (at least 1).

    # sync point on CUDA (a host read); free on the CPU, where the neural compiler uses it
    # to attend over exactly as many bracket slots as needed.
    """
    count = bracket_counts(tokens)
    return max(1, int(count.max())) if count.numel() else 1


class PointerTagger(nn.Module):
    """Token tagger + bracket pointer (see the module docstring).

    >>> model = PointerTagger(ModelConfig())
    >>> out = model(torch.tensor([[5, 3, 6, 0]]))
    >>> tuple(out.class_logits.shape), tuple(out.pointer.shape)
    ((1, 4, 8), (1, 2, 4))
    >>> int(out.pointer[0, BACKWARD, 0])  # nothing lies before the first token: the sink (L = 4)
    4
    """

    def __init__(self, config: ModelConfig = ModelConfig()):
        super().__init__()
        self.config = config
        d, hd = config.dim, config.head_dim
        self.embed = nn.Embedding(lang.VOCAB_SIZE, d)
        self.query = nn.Linear(d, 2 * hd)
        self.key = nn.Linear(d, 2 * hd)
        self.value = nn.Linear(d, 2 * hd)
        self.sink_key = nn.Parameter(torch.zeros(2, hd))  # per head
        self.sink_value = nn.Parameter(torch.zeros(2, hd))
        self.depth_center = nn.Parameter(torch.zeros(2))  # per head: the depth difference it looks for
        self.depth_weight = nn.Parameter(torch.full((2,), 0.5))  # per head: |penalty| per unit off centre
        self.distance_slope = nn.Parameter(torch.zeros(2))  # per head: recency penalty scale
        self.out = nn.Linear(2 * hd, d)
        self.mlp = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, config.hidden), nn.GELU(), nn.Linear(config.hidden, d))
        self.classify = nn.Linear(d, NUM_CLASSES)

    def attend(self, h: torch.Tensor, depth: torch.Tensor, positions: torch.Tensor, filled: torch.Tensor):
        """Both heads over B bracket slots: ``(logits [N, 2, B, B], sink [N, 2, B], context [N, B, 2 hd])``."""
        num, width, _ = h.shape
        hd = self.config.head_dim
        heads = lambda x: x.view(num, width, 2, hd).transpose(1, 2)  # noqa: E731 -- [N, B, 2 hd] -> [N, 2, B, hd]
        q, k, v = heads(self.query(h) / math.sqrt(hd)), heads(self.key(h)), heads(self.value(h))
        rel = (depth[:, None, :] - depth[:, :, None])[:, None]  # [N, 1, B, B] key minus query
        weight = self.depth_weight[None, :, None, None]
        off_depth = torch.addcmul(-weight * self.depth_center[None, :, None, None], rel, weight).abs()  # [N, 2, B, B]
        positions = positions.to(h.dtype)
        distance = 1.0 - torch.rsqrt(1.0 + (positions[:, None, :] - positions[:, :, None]).abs())  # [N, B, B]
        penalty = torch.addcmul(off_depth, distance[:, None], self.distance_slope[None, :, None, None])
        logits = q @ k.transpose(-1, -2) - penalty  # [N, 2, B, B]
        slot = torch.arange(width, device=h.device)
        direction = torch.stack([slot[None, :] < slot[:, None], slot[None, :] > slot[:, None]])  # [2, B, B]
        logits = logits.masked_fill(~(direction[None] & filled[:, None, None, :]), float("-inf"))
        sink = (q @ self.sink_key[None, :, :, None]).squeeze(-1)  # [N, 2, B]
        # Softmax over keys and sink, without materialising their concatenation.
        top = torch.maximum(logits.amax(-1), sink).detach()[..., None]  # [N, 2, B, 1]; shift-invariant
        weights = (logits - top).exp()  # [N, 2, B, B]
        sink_weight = (sink[..., None] - top).exp()  # [N, 2, B, 1]
        context = (weights @ v + sink_weight * self.sink_value[None, :, None, :]) / (weights.sum(-1, keepdim=True)
                                                                                     + sink_weight)
        return logits, sink, context.transpose(1, 2).reshape(num, width, 2 * hd)

    def forward(self, tokens: torch.Tensor, width: int | None = None) -> Tagging:
        """Tag ``tokens [N, L]``; ``width`` = bracket slots B (default L; any value >= the
        largest number of live brackets in a program gives the same result)."""
        tok, alive, depth = scan_features(tokens)
        num, length = tok.shape
        width = length if width is None else max(1, min(width, length))
        bracket = alive & ((tok == lang.OPEN) | (tok == lang.CLOSE))  # [N, L]
        slots = torch.argsort((~bracket).to(torch.int8), dim=1, stable=True)[:, :width]  # [N, B] brackets first
        filled = bracket.gather(1, slots)  # [N, B]
        hb = self.embed(tok.gather(1, slots))  # [N, B, D]
        logits, sink, context = self.attend(hb, depth.gather(1, slots).to(hb.dtype), slots, filled)
        # Tokens that are not live brackets attend to nothing: their context is the sinks'
        # values, so their class logits depend on the token id alone (a V-row table).
        idle = self.tag_tokens(self.embed.weight, self.sink_value.reshape(1, -1))  # [V, 8]
        busy = self.tag_tokens(hb, context)  # [N, B, 8]
        idle_at_slots = idle[tok.gather(1, slots)]  # [N, B, 8]
        busy = torch.where(filled[..., None], busy, idle_at_slots)
        class_logits = idle[tok].scatter(1, slots[..., None].expand_as(busy), busy)  # [N, L, 8]
        best, choice = logits.max(-1)  # [N, 2, B]
        chosen = torch.where(sink > best, length, slots[:, None, :].expand_as(choice).gather(2, choice))
        chosen = torch.where(filled[:, None, :], chosen, length)
        pointer = torch.full((num, 2, length), length, dtype=torch.int64, device=tokens.device).scatter(
            2, slots[:, None, :].expand_as(chosen), chosen)  # [N, 2, L]
        return Tagging(class_logits, pointer, logits, sink, slots, filled, alive)

    def tag_tokens(self, h: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """Class logits ``[..., 8]`` from embeddings ``[..., D]`` and attention context ``[..., 2 hd]``."""
        h = h + self.out(context)
        return self.classify(h + self.mlp(h))
