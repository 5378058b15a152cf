"""Prove "no host sync on the step path" on the CPU: a guard that fails on any op that would make
the host wait for a GPU.

On a CPU nothing waits, so the guard watches for the ops that *would* wait on a GPU: every aten
op passes through a ``TorchDispatchMode`` that flags

- ``_local_scalar_dense`` (``.item()``, ``bool()``, ``int()``, ``float()``, ``if tensor:``),
  ``equal``, ``is_nonzero``, ``allclose`` (a Python value from a tensor);
- ``nonzero``, ``masked_select``, the ``unique`` family, ``bincount`` (output size from the data);
- indexing with a boolean mask (``x[mask]``, ``x[mask] = y``: a ``nonzero`` inside);
- ``repeat_interleave`` with tensor repeats and no ``output_size``;
- ``lift_fresh``: a tensor built from Python data (``torch.tensor(list)``), on a GPU a blocking
  host-to-device copy;
- copies between the CPU and a GPU (visible when tensors live on a GPU);

and, as Python calls, ``Tensor.tolist``, ``Tensor.numpy`` and ``Tensor.cpu`` (no aten op on the CPU).
The documented exceptions are the blocks marked ``synthenv.syncpoints.sync_point(name)``; a check
allows them by name (``allow=``), and they are counted apart. On a machine with a GPU,
``cuda_debug=True`` also turns on ``torch.cuda.set_sync_debug_mode("error")`` for the block
(switched off inside allowed sync points), the driver-level check of the same property.

>>> import torch
>>> with forbid_host_sync(raise_on_hit=False) as guard:
...     x = torch.arange(4)
...     _ = x[x > 1]
...     _ = torch.where(x > 1, x, 0)
>>> guard.count, guard.hits[0].op
(1, 'aten.index.Tensor (boolean mask)')
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from synthenv import syncpoints
from synthenv.syncpoints import SYNC_POINTS

_ALWAYS = {
    "aten._local_scalar_dense": "a Python value read from a tensor (.item(), bool(), int(), if tensor)",
    "aten.equal": "torch.equal returns a Python bool",
    "aten.is_nonzero": "a Python bool read from a tensor",
    "aten.allclose": "torch.allclose returns a Python bool",
    "aten.nonzero": "output size depends on the data",
    "aten.masked_select": "output size depends on the data",
    "aten.unique": "output size depends on the data",
    "aten._unique": "output size depends on the data",
    "aten._unique2": "output size depends on the data",
    "aten.unique_dim": "output size depends on the data",
    "aten.unique_consecutive": "output size depends on the data",
    "aten.unique_dim_consecutive": "output size depends on the data",
    "aten.bincount": "output size depends on the data",
    "aten.lift_fresh": "a tensor built from Python data: a blocking host-to-device copy on a GPU",
}
_HERE = os.path.dirname(os.path.abspath(__file__))
_TORCH = os.path.dirname(os.path.abspath(torch.__file__))


class HostSyncError(AssertionError):
    """An op that would make the host wait for a device ran outside the allowed sync points."""


@dataclass(frozen=True)
class SyncHit:
    """One host-synchronising op: what it was, where (the innermost frame outside torch), and
    the documented sync point it ran in (None: none; ``allowed``: that point was allowed)."""

    op: str
    why: str
    where: str
    sync_point: str | None
    allowed: bool


def _where() -> str:
    for frame in reversed(traceback.extract_stack()[:-3]):
        path = os.path.abspath(frame.filename)
        if not path.startswith((_HERE, _TORCH)) and "contextlib" not in path:
            return f"{frame.filename}:{frame.lineno} in {frame.name}: {(frame.line or '').strip()}"
    return "<unknown>"


def _has_bool_index(indices) -> bool:
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ())


def _device_copy(func, args, kwargs) -> bool:
    name = str(func.overloadpacket)
    if name == "aten._to_copy" and args and isinstance(args[0], torch.Tensor):
        target = kwargs.get("device")
        return target is not None and torch.device(target).type != args[0].device.type
    if name == "aten.copy_" and len(args) >= 2 and all(isinstance(a, torch.Tensor) for a in args[:2]):
        return args[0].device.type != args[1].device.type
    return False


def classify(func, args, kwargs) -> str | None:
    """Why ``func(*args, **kwargs)`` would make the host wait for a device, or None."""
    name = str(func.overloadpacket)
    if name in _ALWAYS:
        return _ALWAYS[name]
    if name in ("aten.index", "aten.index_put", "aten.index_put_", "aten._index_put_impl_") and len(args) > 1 \
            and _has_bool_index(args[1]):
        return "indexing with a boolean mask (a nonzero inside)"
    if name == "aten.repeat_interleave" and args and isinstance(args[0], torch.Tensor) \
            and kwargs.get("output_size") is None and (len(args) < 2 or isinstance(args[1], torch.Tensor)) \
            and str(func).split(".")[-1] in ("Tensor", "self_Tensor"):
        return "repeat_interleave with tensor repeats and no output_size"
    if _device_copy(func, args, kwargs):
        return "a copy between the host and a device"
    return None


class HostSyncGuard(TorchDispatchMode):
    """The dispatch mode behind ``forbid_host_sync`` (see the module docstring)."""

    def __init__(self, allow: Iterable[str] = (), raise_on_hit: bool = True, cuda_debug: bool = False):
        super().__init__()
        self.allow = frozenset(allow)
        unknown = sorted(self.allow - set(SYNC_POINTS))
        if unknown:
            raise ValueError(f"unknown sync points {unknown}; valid: {sorted(SYNC_POINTS)} "
                             "(synthenv.syncpoints.SYNC_POINTS)")
        self.raise_on_hit = raise_on_hit
        self.cuda_debug = cuda_debug and torch.cuda.is_available()
        self.hits: list[SyncHit] = []
        self._saved_methods: dict[str, object] = {}
        self._saved_debug = None

    @property
    def count(self) -> int:
        """Host-synchronising ops outside the allowed sync points."""
        return sum(not h.allowed for h in self.hits)

    @property
    def allowed_count(self) -> int:
        """Host-synchronising ops inside allowed sync points."""
        return sum(h.allowed for h in self.hits)

    def report(self) -> str:
        """One line per forbidden hit."""
        return "\n".join(f"{h.op} ({h.why}) at {h.where}" for h in self.hits if not h.allowed)

    def _record(self, op: str, why: str) -> None:
        points = syncpoints.active()
        point = points[-1] if points else None
        allowed = any(p in self.allow for p in points)
        hit = SyncHit(op, why, _where(), point, allowed)
        self.hits.append(hit)
        if not allowed and self.raise_on_hit:
            inside = f" inside sync point {point!r}, which this check does not allow" if point else ""
            raise HostSyncError(f"host sync on the step path: {op} ({why}){inside} at {hit.where}. Use masks and "
                                "torch.where, tables built once per device, or mark a documented sync point "
                                "(synthenv.syncpoints)")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        why = classify(func, args, kwargs)
        if why is not None:
            self._record(str(func) + (" (boolean mask)" if why.startswith("indexing") else ""), why)
        return func(*args, **kwargs)

    def __enter__(self):
        for name in ("tolist", "numpy", "cpu"):
            original = getattr(torch.Tensor, name)
            self._saved_methods[name] = original

            def watched(tensor, *args, _name=name, _original=original, **kwargs):
                self._record(f"Tensor.{_name}", "copies a tensor to the host")
                return _original(tensor, *args, **kwargs)

            setattr(torch.Tensor, name, watched)
        if self.cuda_debug:
            self._saved_debug = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode("error")
        syncpoints._hooks.append(self._on_sync_point)
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            syncpoints._hooks.remove(self._on_sync_point)
            for name, original in self._saved_methods.items():
                setattr(torch.Tensor, name, original)
            if self._saved_debug is not None:
                torch.cuda.set_sync_debug_mode(self._saved_debug)

    def _on_sync_point(self, name: str):
        """Inside an allowed sync point, let CUDA's own sync check pass too."""
        if not self.cuda_debug or name not in self.allow:
            return None
        saved = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode(0)
        return lambda: torch.cuda.set_sync_debug_mode(saved)


def forbid_host_sync(allow: Iterable[str] = (), raise_on_hit: bool = True, cuda_debug: bool = False) -> HostSyncGuard:
    """A context manager that fails on any op that would make the host wait for a device.

    Args:
        allow: names of documented sync points (``synthenv.syncpoints.SYNC_POINTS``) whose
            blocks may sync, e.g. ``("validate_actions",)``.
        raise_on_hit: raise ``HostSyncError`` at the first forbidden op (default), or record
            every op in ``guard.hits`` and carry on (``guard.count`` counts the forbidden ones).
        cuda_debug: on a machine with CUDA, also run the block under
            ``torch.cuda.set_sync_debug_mode("error")`` (off inside allowed sync points).

    >>> import torch
    >>> with forbid_host_sync():
    ...     torch.arange(3).sum().item()
    Traceback (most recent call last):
    ...
    synthenv.testing.syncguard.HostSyncError: host sync on the step path: aten._local_scalar_dense.default ...
    """
    return HostSyncGuard(allow, raise_on_hit, cuda_debug)


def count_host_syncs(fn, *args, allow: Iterable[str] = (), **kwargs) -> HostSyncGuard:
    """Run ``fn(*args, **kwargs)`` and return the guard with every host-synchronising op it recorded."""
    with forbid_host_sync(allow, raise_on_hit=False) as guard:
        fn(*args, **kwargs)
    return guard
