"""The network of the neural compiler: a one-layer transformer that tags tokens and points
each bracket at its partner, in one non-autoregressive pass over a ``[N, L]`` batch.

Architecture (``PointerTagger``):

- Input: token embeddings (dead tokens, from the first EOS on, read as EOS) plus one
  parameter-free scan, the raw bracket depth ``depth = cumsum([ - ])`` (like a positional
  encoding, but along the bracket structure instead of the sequence).
- One attention block with two heads, one looking backwards (keys ``j < i``) and one
  forwards (keys ``j > i``), each with a learned *sink* key (attend to nothing). Their
  logits are ``q_i . k_j / sqrt(d)`` minus two learned relative penalties:
  ``w * |depth_j - depth_i - c|`` (each head learns the depth difference ``c`` it looks for
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
with no such partner is unmatched (PQT_SPEC §1). Token types (q.k), depth difference (the
centred penalty) and recency (the slope) are all the network needs to express that rule; it has to
learn it from examples. Dimensions: N programs, L tokens, H = 2 heads, D model width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from synthenv import language as lang

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
        for name in ("dim", "head_dim", "hidden"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")


@dataclass(frozen=True)
class Tagging:
    """What the network predicts for a batch.

    Attributes:
        class_logits: ``[N, L, 8]`` token-class logits.
        pointer_logits: ``[N, 2, L, L + 1]`` per head (backward, forward) and query, logits
            over key positions; the last column is the sink ("no partner this way").
        alive: ``[N, L]`` bool, tokens before the first EOS.
    """

    class_logits: torch.Tensor
    pointer_logits: torch.Tensor
    alive: torch.Tensor


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


class PointerTagger(nn.Module):
    """Token tagger + bracket pointer (see the module docstring).

    >>> model = PointerTagger(ModelConfig())
    >>> out = model(torch.tensor([[5, 3, 6, 0]]))
    >>> tuple(out.class_logits.shape), tuple(out.pointer_logits.shape)
    ((1, 4, 8), (1, 2, 4, 5))
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
        self.depth_weight = nn.Parameter(torch.full((2,), 0.5))  # per head: penalty per unit off centre
        self.distance_slope = nn.Parameter(torch.zeros(2))  # per head: recency penalty scale
        self.out = nn.Linear(2 * hd, d)
        self.mlp = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, config.hidden), nn.GELU(), nn.Linear(config.hidden, d))
        self.classify = nn.Linear(d, NUM_CLASSES)

    def attention_logits(self, h: torch.Tensor, alive: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
        """``[N, 2, L, L + 1]`` logits of both heads over the keys and the sink (last column)."""
        num, length, _ = h.shape
        hd = self.config.head_dim
        q = self.query(h).view(num, length, 2, hd).transpose(1, 2)  # [N, 2, L, hd]
        k = self.key(h).view(num, length, 2, hd).transpose(1, 2)
        k = torch.cat([k, self.sink_key[None, :, None, :].expand(num, 2, 1, hd)], dim=2)  # [N, 2, L + 1, hd]
        logits = q @ k.transpose(-1, -2) / math.sqrt(hd)  # [N, 2, L, L + 1]
        is_key = torch.ones(length + 1, device=h.device)
        is_key[length] = 0.0  # the sink has no depth and no distance
        depth = depth.to(h.dtype)
        rel = nn.functional.pad(depth, (0, 1))[:, None, None, :] - depth[:, None, :, None]  # [N, 1, L, L + 1]
        center = self.depth_center[None, :, None, None]
        logits = logits - self.depth_weight[None, :, None, None] * (rel - center).abs() * is_key
        pos = torch.arange(length + 1, device=h.device)
        offset = pos[None, :] - pos[:length, None]  # [L, L + 1] key minus query
        distance = (1.0 - torch.rsqrt(1.0 + offset.abs().to(h.dtype))) * is_key  # [L, L + 1], in [0, 1)
        logits = logits - self.distance_slope[:, None, None] * distance
        direction = torch.stack([offset < 0, offset > 0]) | (is_key == 0)  # [2, L, L + 1]
        allowed = direction[None] & nn.functional.pad(alive, (0, 1), value=True)[:, None, None, :]
        return logits.masked_fill(~allowed, float("-inf"))

    def forward(self, tokens: torch.Tensor) -> Tagging:
        tok, alive, depth = scan_features(tokens)
        h = self.embed(tok)  # [N, L, D]
        num, length, _ = h.shape
        hd = self.config.head_dim
        logits = self.attention_logits(h, alive, depth)  # [N, 2, L, L + 1]
        v = self.value(h).view(num, length, 2, hd).transpose(1, 2)  # [N, 2, L, hd]
        v = torch.cat([v, self.sink_value[None, :, None, :].expand(num, 2, 1, hd)], dim=2)  # [N, 2, L + 1, hd]
        context = (logits.softmax(-1) @ v).transpose(1, 2).reshape(num, length, 2 * hd)  # [N, L, 2 hd]
        h = h + self.out(context)
        h = h + self.mlp(h)
        return Tagging(self.classify(h), logits, alive)
