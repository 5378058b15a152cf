"""Autoregressive program policies, batched over S independent members (seeds).

Every parameter has a leading member dimension S, so that S seeds of one configuration train as
one batched job: member s sees only its own parameters, gradients and random numbers, and its
run is the run ``--seed`` would give alone. Dimensions: S members, B programs per member,
L tokens, V = 9 vocabulary, E embedding, H hidden.

A policy reads the previous token (the first input is EOS, PQT's start token) and returns
logits over the next token:

- ``step(prev [S, B], state, t)`` -> ``(logits [S, B, V], state)``: one token, for sampling;
- ``evaluate(inputs [S, B, L])`` -> ``logits [S, B, L, V]``: teacher forcing over whole
  programs, for learning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from synthenv.checks import require_positive_int_fields
from synthenv.language import VOCAB_SIZE
from synthenv.registry import unknown_name_message


@dataclass(frozen=True)
class PolicyConfig:
    """Architecture of the program policy."""

    kind: Literal["lstm", "transformer"] = "lstm"
    """lstm: the PQT paper's policy (2 x 35 units); transformer: a small causal transformer."""
    hidden: int = 35
    """LSTM units per layer (PQT: 35) or transformer width."""
    layers: int = 2
    """Recurrent or transformer layers (PQT: 2)."""
    embedding: int = 10
    """Token embedding size (PQT: 10); the transformer embeds to hidden instead."""
    heads: int = 4
    """Attention heads (transformer only; must divide hidden)."""

    def __post_init__(self) -> None:
        if self.kind not in ("lstm", "transformer"):
            raise ValueError(unknown_name_message("policy kind", self.kind, ["lstm", "transformer"]))
        require_positive_int_fields(self, "hidden", "layers", "embedding", "heads", prefix="policy ")
        if self.kind == "transformer" and self.hidden % self.heads:
            raise ValueError(f"transformer hidden={self.hidden} must be a multiple of heads={self.heads}")


def make_policy(config: PolicyConfig, num_members: int, max_len: int, generators: list[torch.Generator],
                device: torch.device) -> nn.Module:
    """Build a policy with ``num_members`` independent parameter sets, member s initialised from
    ``generators[s]``.

    >>> gens = [torch.Generator().manual_seed(s) for s in range(2)]
    >>> policy = make_policy(PolicyConfig(), 2, 100, gens, torch.device("cpu"))
    >>> tuple(policy.evaluate(torch.zeros((2, 3, 5), dtype=torch.int64)).shape)
    (2, 3, 5, 9)
    """
    if config.kind == "lstm":
        return LSTMPolicy(config, num_members, generators, device)
    return TransformerPolicy(config, num_members, max_len, generators, device)


def _uniform(shape: tuple[int, ...], bound: float, generators: list[torch.Generator],
             device: torch.device) -> nn.Parameter:
    """``[S, *shape]`` parameter, member s drawn U(-bound, bound) from ``generators[s]``."""
    rows = [(torch.rand(shape, generator=g, dtype=torch.float32, device=g.device) * 2 - 1) * bound
            for g in generators]
    return nn.Parameter(torch.stack(rows).to(device))


def _embed(table: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Row lookup per member: ``table [S, V, E]``, ``tokens [S, ...]`` -> ``[S, ..., E]``."""
    members = torch.arange(table.shape[0], device=tokens.device).view(-1, *([1] * (tokens.dim() - 1)))
    return table[members, tokens]


class LSTMPolicy(nn.Module):
    """PQT's policy: token embedding 10, 2-layer LSTM (35, 35), linear without bias to 9 logits.

    Weights use ``torch.nn.LSTM``'s layout and gate order (i, f, g, o) per member, so that
    teacher forcing runs the fused LSTM kernel (oneDNN on CPU, cuDNN on GPU) member by member,
    while sampling steps all members at once with batched matrix products. The first layer's
    input projection depends only on the previous token, so sampling reads it from a table of
    9 rows per member (``initial_state`` builds it) instead of multiplying every step.
    """

    def __init__(self, config: PolicyConfig, num_members: int, generators: list[torch.Generator],
                 device: torch.device):
        super().__init__()
        s, h, e = num_members, config.hidden, config.embedding
        self.num_members, self.hidden, self.num_layers = s, h, config.layers
        bound = 1.0 / math.sqrt(h)
        self.embed = _uniform((VOCAB_SIZE, e), 1.0, generators, device)  # [S, V, E]
        self.w_in = nn.ParameterList()
        self.w_rec = nn.ParameterList()
        self.bias = nn.ParameterList()
        for layer in range(config.layers):
            width = e if layer == 0 else h
            self.w_in.append(_uniform((4 * h, width), bound, generators, device))  # [S, 4H, in]
            self.w_rec.append(_uniform((4 * h, h), bound, generators, device))  # [S, 4H, H]
            bias = torch.zeros((s, 4 * h), dtype=torch.float32, device=device)
            bias[:, h : 2 * h] = 1.0  # forget-gate bias 1 (TF's LSTM cell default)
            self.bias.append(nn.Parameter(bias))  # [S, 4H]
        self.w_logits = _uniform((h, VOCAB_SIZE), bound, generators, device)  # [S, H, V], no bias
        self.register_buffer("no_bias", torch.zeros(4 * h, dtype=torch.float32, device=device), persistent=False)

    def initial_state(self, batch: int) -> list[torch.Tensor]:
        """Zero (h, c) per layer (``2 * layers`` tensors of ``[S, B, H]``), then the first layer's
        input table ``[S, V, 4H]``: embedding times input weights plus bias, per token."""
        zeros = torch.zeros((self.num_members, batch, self.hidden), dtype=torch.float32, device=self.embed.device)
        table = torch.baddbmm(self.bias[0][:, None, :], self.embed, self.w_in[0].transpose(1, 2))
        return [zeros] * (2 * self.num_layers) + [table]

    def step(self, prev: torch.Tensor, state: list[torch.Tensor], t: int):
        """One token for every program: ``prev [S, B]`` -> logits ``[S, B, V]``."""
        table = state[-1]
        h_size = self.hidden
        new_state = []
        x = None
        for w_in, w_rec, bias, layer in zip(self.w_in, self.w_rec, self.bias, range(self.num_layers)):
            h, c = state[2 * layer], state[2 * layer + 1]
            gates = _embed(table, prev) if layer == 0 else torch.baddbmm(bias[:, None, :], x, w_in.transpose(1, 2))
            gates = torch.baddbmm(gates, h, w_rec.transpose(1, 2))  # [S, B, 4H]
            squashed = torch.sigmoid(gates)
            c = squashed[..., h_size : 2 * h_size] * c + squashed[..., :h_size] * torch.tanh(
                gates[..., 2 * h_size : 3 * h_size])
            h = squashed[..., 3 * h_size :] * torch.tanh(c)
            new_state += [h, c]
            x = h
        return torch.bmm(x, self.w_logits), new_state + [table]

    def evaluate(self, inputs: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: ``inputs [S, B, L]`` -> logits ``[S, B, L, V]``."""
        s, b, length = inputs.shape
        x = _embed(self.embed, inputs)  # [S, B, L, E]
        zeros = torch.zeros((self.num_layers, b, self.hidden), dtype=x.dtype, device=x.device)
        outputs = []
        for member in range(s):  # the fused kernel runs one member (one weight set) at a time
            weights = []
            for w_in, w_rec, bias in zip(self.w_in, self.w_rec, self.bias):
                weights += [w_in[member], w_rec[member], bias[member], self.no_bias]
            top, _, _ = torch.lstm(x[member], (zeros, zeros), weights, True, self.num_layers, 0.0, self.training,
                                   False, True)
            outputs.append(top)  # [B, L, H]
        top = torch.stack(outputs).reshape(s, b * length, self.hidden)
        return torch.bmm(top, self.w_logits).view(s, b, length, VOCAB_SIZE)


class TransformerPolicy(nn.Module):
    """A small pre-norm causal transformer (learned positions), with a KV cache for sampling."""

    def __init__(self, config: PolicyConfig, num_members: int, max_len: int, generators: list[torch.Generator],
                 device: torch.device):
        super().__init__()
        s, d = num_members, config.hidden
        self.num_members, self.width, self.heads, self.max_len = s, d, config.heads, max_len
        bound = 1.0 / math.sqrt(d)
        self.embed = _uniform((VOCAB_SIZE, d), 1.0, generators, device)  # [S, V, D]
        self.position = _uniform((max_len, d), 0.1, generators, device)  # [S, L, D]
        self.blocks = nn.ModuleList()
        for _ in range(config.layers):
            block = nn.ParameterDict({
                "ln1": nn.Parameter(torch.ones((s, 1, d), device=device)),
                "qkv": _uniform((d, 3 * d), bound, generators, device),
                "out": _uniform((d, d), bound / math.sqrt(2 * config.layers), generators, device),
                "ln2": nn.Parameter(torch.ones((s, 1, d), device=device)),
                "up": _uniform((d, 4 * d), bound, generators, device),
                "down": _uniform((4 * d, d), bound / 2 / math.sqrt(2 * config.layers), generators, device),
            })
            self.blocks.append(block)
        self.ln_f = nn.Parameter(torch.ones((s, 1, d), device=device))
        self.w_logits = _uniform((d, VOCAB_SIZE), bound, generators, device)  # [S, D, V]

    @staticmethod
    def _norm(x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
        """RMS norm over the last dimension; ``x [S, B', D]``, ``gain [S, 1, D]``."""
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * gain

    def _split(self, x: torch.Tensor, b: int) -> torch.Tensor:
        """``[S, B*T, D]`` -> ``[S, B, heads, T, D/heads]``."""
        s = x.shape[0]
        return x.view(s, b, -1, self.heads, self.width // self.heads).transpose(2, 3)

    def _block(self, block, x: torch.Tensor, b: int, cache: list | None) -> torch.Tensor:
        """One block on ``x [S, B*T, D]``; with a cache (T = 1) keys and values are appended."""
        q, k, v = torch.bmm(self._norm(x, block["ln1"]), block["qkv"]).chunk(3, dim=-1)
        q, k, v = self._split(q, b), self._split(k, b), self._split(v, b)  # [S, B, h, T, d]
        if cache is not None:
            if cache:
                k, v = torch.cat([cache[0], k], dim=3), torch.cat([cache[1], v], dim=3)
            cache[:] = [k, v]
            attended = nn.functional.scaled_dot_product_attention(q, k, v)
        else:
            attended = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        s = x.shape[0]
        x = x + torch.bmm(attended.transpose(2, 3).reshape(s, x.shape[1], self.width), block["out"])
        hidden = nn.functional.gelu(torch.bmm(self._norm(x, block["ln2"]), block["up"]))
        return x + torch.bmm(hidden, block["down"])

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bmm(self._norm(x, self.ln_f), self.w_logits)

    def initial_state(self, batch: int) -> list[list]:
        """One empty (keys, values) cache per block."""
        return [[] for _ in self.blocks]

    def step(self, prev: torch.Tensor, state: list[list], t: int):
        """One token at position ``t``: ``prev [S, B]`` -> logits ``[S, B, V]``."""
        b = prev.shape[1]
        x = _embed(self.embed, prev) + self.position[:, t : t + 1]  # [S, B, D]
        for block, cache in zip(self.blocks, state):
            x = self._block(block, x, b, cache)
        return self._logits(x), state

    def evaluate(self, inputs: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: ``inputs [S, B, L]`` -> logits ``[S, B, L, V]``."""
        s, b, length = inputs.shape
        x = (_embed(self.embed, inputs) + self.position[:, None, :length]).reshape(s, b * length, self.width)
        for block in self.blocks:
            x = self._block(block, x, b, None)
        return self._logits(x).view(s, b, length, VOCAB_SIZE)
