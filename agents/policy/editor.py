"""The edit policy: reads a whole program and its test feedback in one parallel pass, writes edits.

A policy that ``ppo`` trains with PPO to propose *variants* of its programs. Given a
parent ``[L]`` and its feedback features ``[F]`` (``agents.run.feedback``: which cases pass, fail,
print too little or too much...), one pass of a small convolutional network over the program
gives, at every position, logits for "edit here", for the kind of edit (substitute, insert,
delete) and for the command written; a pooled head gives the number of edits (1 .. E). The
policy samples up to E point edits in ``agents.search.variation``'s format, so random mutation and the
policy share one action space and the policy can imitate edits that random mutation found.

Unlike an autoregressive writer it costs one batched pass per generation, whatever the program
length, and one reading of a parent serves any number of variants of it (``sample``'s
``variants``): the env, not the policy, sets the pace. Every parameter has a leading member dimension S
(seeds train as independent members of one job, as in ``agents.pqt.policies``); the convolution runs
all members at once as a grouped convolution.

Dimensions: S members, N programs per member, L tokens, P = L + 1 edit positions (the extra one
appends), H hidden, F features, E edits.
"""

from __future__ import annotations

import ctypes
import functools
import math
from dataclasses import dataclass

import torch
from torch import nn

from synthenv import native_build
from synthenv.checks import require_positive_int_fields
from synthenv.language import CLOSE, EOS, OPEN, VOCAB_SIZE
from synthenv.syncpoints import sync_point

from ..pqt.sampling import MASKED_LOGIT
from ..search.rows import check_impl, program_lengths
from ..search.variation import NUM_COMMANDS, NUM_KINDS, Edits, member_uniform
from .distribution import EditLogits, edit_log_probs

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
                 device: torch.device, temperature: float = 1.0):
        super().__init__()
        s, e, h = num_members, config.embedding, config.hidden
        self.config, self.num_members = config, s
        # every logit is divided by it: sampling, log-probabilities and updates see one tempered distribution
        self.temperature = float(temperature)
        self.tokens = _param((VOCAB_SIZE, e), 1.0, generators, device)  # [S, V, E]
        self.depths = _param((MAX_DEPTH + 1, e), 1.0, generators, device)  # [S, D, E]
        bound = 1.0 / math.sqrt(e * config.kernel)
        self.conv = _param((h, e, config.kernel), bound, generators, device)  # [S, H, E, k]
        self.conv_bias = _zeros((h,), s, device)
        self.film = _param((num_features, h), 1.0 / math.sqrt(num_features), generators, device)  # [S, F, H]
        self.mix = _param((h, h), 1.0 / math.sqrt(h), generators, device)  # [S, H, H]
        self.mix_bias = _zeros((h,), s, device)
        self.where_head = _param((h, 1), 0.1 / math.sqrt(h), generators, device)  # [S, H, 1]
        self.heads = _param((h, NUM_KINDS + NUM_COMMANDS), 0.1 / math.sqrt(h), generators, device)  # [S, H, 11]
        self.count_head = _param((h, config.max_edits), 0.1 / math.sqrt(h), generators, device)  # [S, H, E]

    def forward(self, parents: torch.Tensor, features: torch.Tensor) -> EditLogits:
        """Logits for ``parents [S, N, L]`` with feedback ``features [S, N, F]``."""
        s, n, length = parents.shape
        lengths = program_lengths(parents)  # [S, N]
        width = self._width(lengths, length)  # P' <= P positions: every edit position and what it reads
        padded = nn.functional.pad(parents, (0, 1), value=EOS)[..., :width]  # [S, N, P']: slot L appends
        opens = (padded == OPEN).long()
        depth = ((opens - (padded == CLOSE).long()).cumsum(-1) - opens).clamp(0, MAX_DEPTH)  # depth before each token
        # token and depth embeddings summed, looked up in one [S * V * D, E] table
        table = (self.tokens[:, :, None, :] + self.depths[:, None, :, :]).reshape(-1, self.tokens.shape[-1])
        combos = VOCAB_SIZE * (MAX_DEPTH + 1)
        index = padded * (MAX_DEPTH + 1) + depth + combos * torch.arange(s, device=parents.device)[:, None, None]
        x = _Lookup.apply(table, index)  # [S, N, P', E]
        x = x.permute(1, 0, 3, 2).reshape(n, -1, width)  # [N, S*E, P']
        weight = self.conv.reshape(-1, *self.conv.shape[2:])  # [S*H, E, k]
        hidden = nn.functional.conv1d(x, weight, self.conv_bias.reshape(-1), padding=self.config.kernel // 2,
                                      groups=s)  # [N, S*H, P']
        hidden = hidden.view(n, s, -1, width).permute(1, 0, 3, 2)  # [S, N, P', H]
        hidden = hidden + torch.bmm(features, self.film)[:, :, None, :]  # the feedback shifts every position
        hidden = torch.relu(hidden).reshape(s, n * width, -1)
        hidden = hidden + torch.relu(torch.baddbmm(self.mix_bias[:, None, :], hidden, self.mix))
        where = torch.bmm(hidden, self.where_head).view(s, n, width)  # [S, N, P']
        hidden = hidden.view(s, n, width, -1)
        p = torch.arange(width, device=parents.device)
        inside = p <= lengths[..., None]  # [S, N, P']: the program's tokens and the slot after it
        position_ok = inside & (p < length + (lengths < length).long()[..., None])  # full: no append
        pooled = (hidden * inside[..., None]).sum(2) / (lengths + 1)[..., None]  # [S, N, H], padding-free
        count, heads = torch.bmm(pooled, self.count_head), self.heads
        if self.temperature != 1.0:
            where, count, heads = where / self.temperature, count / self.temperature, heads / self.temperature
        return EditLogits(torch.where(position_ok, where, MASKED_LOGIT), count, hidden, lengths, heads)

    def _width(self, lengths: torch.Tensor, length: int) -> int:
        """Positions the pass needs: up to the longest program's append slot plus the convolution's
        reach, so every edit position reads exactly what it would in the full ``L + 1`` width.
        Read on the host on the CPU only (free there); on a GPU the full width (no sync)."""
        if not _width_on_host(lengths.device) or lengths.numel() == 0:
            return length + 1
        with sync_point("editor_width"):
            return min(length + 1, int(lengths.max()) + 1 + self.config.kernel // 2)

    def logits(self, parents: torch.Tensor, features: torch.Tensor, members: torch.Tensor | None = None) -> EditLogits:
        """``forward`` for all members, or with the parameters of members ``members [S']`` only
        (``parents [S', N, L]``): the others' rows are neither computed nor, by the gradient, touched."""
        if members is None:
            return self(parents, features)
        weights = {name: value.index_select(0, members) for name, value in self.named_parameters()}
        return torch.func.functional_call(self, weights, (parents, features))

    @torch.no_grad()
    def sample(self, parents: torch.Tensor, features: torch.Tensor, generators: list[torch.Generator],
               members: torch.Tensor | None = None, variants: int = 1,
               impl: str = "auto") -> tuple[Edits, torch.Tensor]:
        """``variants`` (K) edits of each of ``parents [S, N, L]`` and their log-probabilities under
        the policy (of members ``members [S']`` only: ``logits``), as ``[S, K N, ...]`` rows, parent
        i's at ``i K .. i K + K - 1``. One pass reads each parent once, whatever K; each edit is drawn
        by inversion of its distribution's CDF, member s's from ``generators[s]`` (a fixed number of
        draws per variant: a member's edits never depend on the other members' programs).

        ``impl``: ``"torch"`` (batched tensor ops, any device), ``"native"`` (``editor.c``: one loop per
        parent, CPU tensors) or ``"auto"`` (native on the CPU when it builds); the same edits and
        log-probabilities up to float rounding (a draw within rounding of a boundary of its
        distribution can fall on the other side)."""
        check_impl(impl)
        e = self.config.max_edits
        s, n = parents.shape[:2]
        uniform = member_uniform(generators, (n, variants, 1 + 3 * e), parents.device)  # [S, N, K, 1 + 3E]
        lib = _native(parents) if impl != "torch" else None
        if impl == "native" and lib is None:
            raise RuntimeError("impl='native' needs CPU tensors and a working C compiler; use impl='torch'")
        if lib is not None:
            return self._sample_native(lib, parents, features, members, variants, uniform)
        logits = self.logits(parents, features, members)
        count = 1 + _inverse_cdf(logits.count, uniform[..., 0]).view(s, n * variants)  # [S, K N]
        where = _inverse_cdf(logits.position, uniform[..., 1: 1 + e].reshape(s, n, -1)).view(s, n * variants, e)
        kind_logits, token_logits = logits.at(where)  # [S, K N, E, 3 / 8]
        draws = uniform[..., 1 + e:].reshape(s, n * variants, e, 2)
        kinds = _inverse_cdf(kind_logits, draws[..., :1])[..., 0]
        tokens = 1 + _inverse_cdf(token_logits, draws[..., 1:])[..., 0]
        active = torch.arange(e, device=parents.device) < count[..., None]
        edits = Edits(where, kinds, tokens, active)
        return edits, edit_log_probs(logits, edits, at=(kind_logits, token_logits))

    def _sample_native(self, lib, parents: torch.Tensor, features: torch.Tensor, members: torch.Tensor | None,
                       variants: int, uniform: torch.Tensor) -> tuple[Edits, torch.Tensor]:
        """``sample`` by ``editor.c`` (the same draws ``uniform [S, N, K, 1 + 3E]``)."""
        s, n, length = parents.shape
        e, config = self.config.max_edits, self.config
        rows = s * n * variants
        member_of = (torch.arange(s) if members is None else members).to(torch.int64).contiguous()
        weights = [getattr(self, name).detach().float().contiguous() for name in _NATIVE_PARAMETERS]
        parents = parents.to(torch.int64).contiguous()
        features = features.float().contiguous()
        uniform = uniform.contiguous()
        positions, kinds, tokens = (torch.empty((rows, e), dtype=torch.int64) for _ in range(3))
        active = torch.empty((rows, e), dtype=torch.uint8)
        log_probs = torch.empty(rows, dtype=torch.float32)
        status = lib(s, n, length, variants, e, features.shape[-1], member_of.data_ptr(), parents.data_ptr(),
                     features.data_ptr(), uniform.data_ptr(), *(w.data_ptr() for w in weights), VOCAB_SIZE,
                     MAX_DEPTH + 1, config.embedding, config.hidden, config.kernel, OPEN, CLOSE,
                     1.0 / self.temperature, positions.data_ptr(), kinds.data_ptr(), tokens.data_ptr(),
                     active.data_ptr(), log_probs.data_ptr(), 0)
        if status != 0:
            raise RuntimeError(f"synthenv_edit_sample failed with status {status} (a bug in synthenv)")
        shape = (s, n * variants, e)
        edits = Edits(positions.view(shape), kinds.view(shape), tokens.view(shape), active.view(shape).bool())
        return edits, log_probs.view(s, n * variants)


_NATIVE_PARAMETERS = ("tokens", "depths", "conv", "conv_bias", "film", "mix", "mix_bias", "where_head", "heads",
                      "count_head")
"""The policy's parameters in the order ``synthenv_edit_sample`` takes them."""

LIBRARY = native_build.register(__name__, ["editor.c"], beside=__file__, exports=("synthenv_edit_sample",))
"""``EditPolicy.sample`` in C (``agents/policy/editor.c``)."""


@functools.lru_cache(maxsize=1)
def _library():
    p, i64, i32, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_float
    return LIBRARY.bind("synthenv_edit_sample", [i64, i64, i64, i64, i64, i64, p, p, p, p, *[p] * 10,
                                                 i64, i64, i64, i64, i64, i64, i64, f32, p, p, p, p, p, i32])


def _native(parents: torch.Tensor):
    """The C function when ``parents`` is a CPU tensor and the library builds, else None."""
    if parents.device.type != "cpu" or not LIBRARY.is_available():
        return None
    return _library()


def _inverse_cdf(logits: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """Indices ``[..., D]`` drawn from ``softmax(logits [..., M])`` by ``uniform [..., D]`` in [0, 1)
    (D draws from each distribution). A masked (zero-probability) index is never drawn: where float
    rounding at the top of the CDF would pick one, the most likely index is taken instead."""
    probs = torch.softmax(logits, -1)
    cdf = probs.cumsum(-1)
    index = torch.searchsorted(cdf, (uniform * cdf[..., -1:]).contiguous(), right=True).clamp_(max=logits.shape[-1] - 1)
    return torch.where(probs.gather(-1, index) > 0, index, logits.argmax(-1, keepdim=True))


def _width_on_host(device: torch.device) -> bool:
    """Whether reading a batch's longest program on the host is free: on the CPU only (the sync
    tests turn it off to run the GPU path on the CPU)."""
    return device.type == "cpu"


class _Lookup(torch.autograd.Function):
    """``table[index]`` for ``table [R, E]``, with a backward by ``index_add_`` (several times
    faster on a CPU than the accumulating ``index_put`` of advanced indexing; same values up to
    the order of float additions)."""

    @staticmethod
    def forward(ctx, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(index)
        ctx.rows = table.shape[0]
        return table.index_select(0, index.reshape(-1)).view(*index.shape, table.shape[1])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (index,) = ctx.saved_tensors
        flat = grad.reshape(-1, grad.shape[-1])
        return flat.new_zeros(ctx.rows, flat.shape[1]).index_add_(0, index.reshape(-1), flat), None
