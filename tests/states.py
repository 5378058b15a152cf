"""Comparing saved states in tests: nested dicts, lists and tuples of tensors and plain values."""

from __future__ import annotations

import torch


def assert_same(a, b, where: str = "state") -> None:
    """``a`` and ``b`` are equal bit for bit; a failure names the first differing entry (``state.islands.tokens``)."""
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where
