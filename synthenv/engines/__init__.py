"""Engines run an IR batch on a task's cases: ``torch`` (lockstep reference), ``native``
(fused C kernel, OpenMP), ``cuda`` (the same kernel through NVRTC), ``auto``.

>>> from synthenv import engines
>>> "torch" in engines.names()
True
>>> engines.select("torch", torch.device("cpu")).name
'torch'
"""

from __future__ import annotations

import warnings
from typing import Protocol

import torch

from synthenv import native_build
from synthenv.execution import Execution
from synthenv.ir import Program
from synthenv.registry import Registry
from synthenv.tasks.task import Task

from .cuda import CudaEngine
from .native import NativeEngine
from .torch_engine import TorchEngine


class Engine(Protocol):
    """Runs compiled programs on every case of a task (see ``Execution`` for the contract)."""

    name: str

    def run(self, program: Program, task: Task, num_outputs: int | None = None, early_abort: bool = False) -> Execution:
        ...


_registry: Registry[Engine] = Registry("engine", cache=True)
_registry.register("torch", TorchEngine)
_registry.register("native", NativeEngine)
_registry.register("cuda", CudaEngine)


def get(name: str) -> Engine:
    """The engine registered as ``name``."""
    return _registry.get(name)


def names() -> list[str]:
    """Registered engine names."""
    return _registry.names()


def select(name: str, device: torch.device) -> Engine:
    """The engine to use for ``name`` on ``device``; ``"auto"`` picks the fastest available.

    ``auto``: ``cuda`` for CUDA devices when CuPy is installed, ``native`` on the CPU when a C
    compiler is found, else ``torch`` with a one-line warning naming what to install.
    """
    device = torch.device(device)
    if name != "auto":
        engine = get(name)
        check = getattr(engine, "check_device", None)
        if check is not None:
            check(device)
        return engine
    for candidate in _AUTO_ORDER:
        if candidate in _registry:
            engine = get(candidate)
            available = getattr(engine, "available", None)
            if available is None or available(device):
                return engine
    _warn_fallback(device)
    return get("torch")


_AUTO_ORDER = ("cuda", "native")
_warned: set[str] = set()


def _warn_fallback(device: torch.device) -> None:
    """One line, once per device type: auto fell back to the slow torch engine, and the fix."""
    if device.type in _warned:
        return
    _warned.add(device.type)
    if device.type == "cpu" and native_build.warned():
        return  # native_build warned already, naming the cause (the cache directory, a full disk, a failed build)
    fixes = {"cuda": 'pip install "synthenv[cuda]" (CuPy) for the cuda engine',
             "cpu": "install a C compiler with OpenMP (e.g. gcc) or set $CC for the native engine"}
    fix = fixes.get(device.type, "the fused engines run on cpu and cuda devices only")
    warnings.warn(f"synthenv: engine='auto' on {device.type} falls back to the slow 'torch' engine; {fix}",
                  RuntimeWarning, stacklevel=3)


def register(name: str, factory, overwrite: bool = False) -> None:
    """Register an engine factory under ``name``."""
    _registry.register(name, factory, overwrite=overwrite)
