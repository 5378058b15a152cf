"""Small constant lookup tensors, built once per (values, dtype, device) and cached.

``torch.tensor(list, device=...)`` on the step path is a blocking host-to-device copy on a GPU
every time it runs (tests/test_sync.py counts it as a host sync); a table built here is copied
once per device and reused.

>>> lookup_table((0, 1, -1), "cpu").tolist()
[0, 1, -1]
>>> lookup_table((0, 1, -1), "cpu") is lookup_table((0, 1, -1), "cpu")
True
"""

from __future__ import annotations

import functools

import torch


def lookup_table(values: tuple[int, ...], device: torch.device | str, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """``torch.tensor(values, dtype=dtype, device=device)``, built on the first call for that device.

    The result is shared: index it, never write into it.
    """
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return _build(tuple(values), device, dtype)


@functools.lru_cache(maxsize=256)
def _build(values: tuple[int, ...], device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype).to(device)
