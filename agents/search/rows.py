"""Program rows on the device: lengths, the canonical form, hashes, and the best unique rows of a group.

Programs are canonical token rows ``[..., L]``: commands 1..8 up to the program's length, EOS (0)
after it. Every agent compares programs by a 64-bit hash of their row (``row_hashes``) and keeps the
best unique ones of a group by ``top_unique`` (the selection of ``agents.search.queue``). Each
function has a torch path (any device) and, for CPU tensors, a C fast path (``agents/search/variation.c``)
with identical results; ``impl`` picks one. None loops over programs in Python or syncs with the host.
"""

from __future__ import annotations

import ctypes
import functools
from types import SimpleNamespace

import torch

from synthenv import native_build
from synthenv.language import EOS

IMPLEMENTATIONS = ("auto", "torch", "native")
"""``impl`` values: ``auto`` (the C path on the CPU when it builds), ``torch`` or ``native``."""

_HASH_SEED = 0x5EED5
"""Seed of the fixed per-position multipliers of ``row_hashes`` (any fixed value works)."""


def check_impl(impl: str) -> None:
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"impl must be one of {IMPLEMENTATIONS}, got {impl!r}")


def program_lengths(tokens: torch.Tensor, impl: str = "auto") -> torch.Tensor:
    """``[...]`` int64: tokens before the first EOS of each row of ``tokens [..., L]``.

    ``impl``: as in ``apply_edits``. The C path (CPU int64 tensors) is one short loop per row;
    the torch path finds the first EOS by ``argmax`` (two vectorised reductions; a cumulative
    product over the row is a sequential scan, several times slower).

    >>> program_lengths(torch.tensor([[3, 0, 5], [1, 2, 3]])).tolist()
    [1, 3]
    """
    if tokens.shape[-1] == 0:
        return torch.zeros(tokens.shape[:-1], dtype=torch.int64, device=tokens.device)
    check_impl(impl)
    lib = native(tokens) if impl != "torch" and tokens.dtype == torch.int64 else None
    if impl == "native" and lib is None:
        raise RuntimeError("impl='native' needs int64 CPU tensors and a working C compiler; use impl='torch'")
    if lib is not None:
        rows = tokens.reshape(-1, tokens.shape[-1]).contiguous()
        out = torch.empty(rows.shape[0], dtype=torch.int64)
        lib.program_lengths(rows.data_ptr(), rows.shape[0], rows.shape[1], out.data_ptr(), 0)
        return out.view(tokens.shape[:-1])
    ends = tokens == EOS
    return torch.where(ends.any(-1), ends.to(torch.uint8).argmax(-1), tokens.shape[-1])


def canonical(tokens: torch.Tensor) -> torch.Tensor:
    """Rows with everything from the first EOS on set to EOS (the form every agent pushes)."""
    return torch.where(torch.arange(tokens.shape[-1], device=tokens.device) < program_lengths(tokens)[..., None],
                       tokens, EOS)


@functools.lru_cache(maxsize=16)
def _hash_multipliers(length: int, device: torch.device) -> torch.Tensor:
    """Fixed random odd multipliers, built once per (width, device): no host-to-device copy per call."""
    generator = torch.Generator().manual_seed(_HASH_SEED)
    odd = torch.randint(-(2**62), 2**62, (length,), generator=generator, dtype=torch.int64) | 1
    return odd.to(device)


def row_hashes(tokens: torch.Tensor, impl: str = "auto") -> torch.Tensor:
    """``[...]`` int64 hash of each row of ``tokens [..., L]``: sum of token x fixed random odd
    multiplier per position, wrapping modulo 2^64. Equal rows hash equal; two distinct rows
    collide with probability about 2^-64."""
    check_impl(impl)
    multipliers = _hash_multipliers(tokens.shape[-1], tokens.device)
    lib = native(tokens) if impl != "torch" else None
    if lib is not None:
        rows = tokens.reshape(-1, tokens.shape[-1]).to(torch.int64).contiguous()
        out = torch.empty(rows.shape[0], dtype=torch.int64)
        lib.row_hashes(rows.data_ptr(), rows.shape[0], rows.shape[1], multipliers.data_ptr(),
                                out.data_ptr(), 0)
        return out.view(tokens.shape[:-1])
    return (tokens.long() * multipliers).sum(-1)


def first_occurrences(tokens: torch.Tensor | None = None, valid: torch.Tensor | None = None,
                      hashes: torch.Tensor | None = None) -> torch.Tensor:
    """``[S, M]`` bool: row m of ``tokens [S, M, L]`` is the first valid copy of itself in its group.

    Rows are compared by their 64-bit ``row_hashes`` (pass ``hashes [S, M]`` if known), sorted
    stably so that the earlier copy stays first: O(M log M) per group, memory linear in M.
    Invalid rows (``valid`` False) are never first and never hide a valid row. Equals the
    quadratic pairwise comparison unless two distinct rows collide (probability ~2^-64 a pair).

    >>> first_occurrences(torch.tensor([[[1, 2], [3, 0], [1, 2], [3, 0]]])).tolist()
    [[True, True, False, False]]
    """
    hashes = row_hashes(tokens) if hashes is None else hashes  # [S, M]
    if valid is not None:  # invalid rows sort after every valid one and never match one
        hashes = torch.where(valid, hashes, torch.iinfo(torch.int64).max)
    ordered, order = torch.sort(hashes, dim=1, stable=True)  # [S, M]
    first_sorted = torch.nn.functional.pad(ordered[:, 1:] != ordered[:, :-1], (1, 0), value=True)
    if valid is not None:
        first_sorted = first_sorted & valid.gather(1, order)
    return torch.zeros_like(first_sorted).scatter(1, order, first_sorted)


def top_unique(scores: torch.Tensor, hashes: torch.Tensor, k: int, shuffle: torch.Tensor | None = None,
               impl: str = "auto") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``k`` best unique candidates of each group: the selection of the queue and the islands.

    ``scores [G, N]`` float32 (``-inf``: no program), ``hashes [G, N]`` (``row_hashes``). A
    candidate ranks at its score if it is valid and the first valid copy of its program
    (``first_occurrences``), else at ``-inf``; candidates are sorted by rank, best first, equal
    ranks in index order, or in the order ``shuffle [G, N]`` (a permutation per group) visits them.

    ``impl``: as in ``apply_edits`` (``variation.c``'s hash table and sort per group on the CPU);
    the results are identical.

    Returns ``(order [G, k], ranks [G, k], hashes [G, k])``: indices into N, their ranks and hashes.

    >>> order, ranks, _ = top_unique(torch.tensor([[0.5, 0.9, 0.9]]), torch.tensor([[1, 2, 2]]), k=2)
    >>> order.tolist(), ranks.tolist()
    ([[1, 0]], [[0.8999999761581421, 0.5]])
    """
    check_impl(impl)
    groups, n = scores.shape
    if not 0 < k <= n:
        raise ValueError(f"top_unique keeps k of {n} candidates per group, got k={k}")
    lib = native(scores, hashes) if impl != "torch" else None
    if impl == "native" and lib is None:
        raise RuntimeError("impl='native' needs CPU tensors and a working C compiler; use impl='torch'")
    if lib is not None:
        score_rows, hash_rows = scores.float().contiguous(), hashes.to(torch.int64).contiguous()
        visit = shuffle.to(torch.int64).contiguous() if shuffle is not None else None
        if visit is not None and (visit.shape != scores.shape or visit.min() < 0 or visit.max() >= n):
            raise ValueError(f"shuffle must be [G, N] = {tuple(scores.shape)} indices in 0 .. {n - 1} (a permutation "
                             f"per group, e.g. keys.argsort(dim=1)), got shape {tuple(shuffle.shape)}")
        order = torch.empty((groups, k), dtype=torch.int64)
        ranks = torch.empty((groups, k), dtype=torch.float32)
        kept = torch.empty((groups, k), dtype=torch.int64)
        status = lib.top_unique(score_rows.data_ptr(), hash_rows.data_ptr(), visit.data_ptr() if visit is not None
                                else None, groups, n, k, order.data_ptr(), ranks.data_ptr(), kept.data_ptr(), 0)
        if status != 0:
            raise MemoryError(f"top_unique: out of memory for {groups} groups of {n} candidates")
        return order, ranks, kept
    first = first_occurrences(valid=scores > float("-inf"), hashes=hashes)
    ranked = torch.where(first, scores.float(), float("-inf"))
    if shuffle is None:
        order = torch.sort(ranked, dim=1, descending=True, stable=True).indices[:, :k]
    else:  # sort the visiting order stably: equal ranks keep it
        kept = torch.sort(ranked.gather(1, shuffle), dim=1, descending=True, stable=True).indices[:, :k]
        order = shuffle.gather(1, kept)
    return order, ranked.gather(1, order), hashes.gather(1, order)


# ---- the CPU fast path: the same operators in C, one row per loop ----

MAX_NATIVE_EDITS = 64
"""``variation.c`` handles at most this many edits per program (more fall back to torch)."""

LIBRARY = native_build.register(__name__, ["variation.c"], beside=__file__, exports=(
    "synthenv_apply_edits", "synthenv_splice", "synthenv_row_hashes", "synthenv_program_lengths",
    "synthenv_top_unique"))
"""The C operators of this module and of ``agents.search.variation`` (``agents/search/variation.c``)."""


@functools.lru_cache(maxsize=1)
def _library() -> SimpleNamespace:
    """The C operators of this module's native library (``LIBRARY``), bound once."""
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    return SimpleNamespace(
        apply_edits=LIBRARY.bind("synthenv_apply_edits", [p, i64, i64, p, p, p, p, i64, p, i32]),
        splice=LIBRARY.bind("synthenv_splice", [p, p, p, i64, i64, p, i32], None),
        row_hashes=LIBRARY.bind("synthenv_row_hashes", [p, i64, i64, p, p, i32], None),
        program_lengths=LIBRARY.bind("synthenv_program_lengths", [p, i64, i64, p, i32], None),
        top_unique=LIBRARY.bind("synthenv_top_unique", [p, p, p, i64, i64, i64, p, p, p, i32]))


def native(*tensors: torch.Tensor) -> SimpleNamespace | None:
    """The C operators when every tensor is on the CPU and the native library is available, else None."""
    if any(t.device.type != "cpu" for t in tensors) or not LIBRARY.is_available():
        return None
    return _library()
