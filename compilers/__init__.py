"""Compiler backends: turn token batches ``[N, L]`` into Program IR.

- ``traditional``: data-parallel compiler in torch (lexing, bracket matching, folding,
  counted loops) on the tokens' device.
- ``cpu``: the CPU-centric baseline pipeline (host, one program at a time, reference
  interpreter); it runs programs itself instead of producing IR.
- ``neural``: a learned model predicts token classes and bracket partners; the IR is
  assembled deterministically from them (weights shipped in the package).
- ``hybrid``: neural compilation, audited by the traditional compiler (every solved or
  high-reward program and a random sample), with an online bound on the miscompile rate.

>>> from synthenv import compilers
>>> compilers.names()[:2]
['traditional', 'cpu']
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from synthenv.execution import Execution
from synthenv.ir import Program
from synthenv.registry import Registry
from synthenv.tasks import Task

from .cpu import CPUPipeline
from .hybrid import HybridCompiler
from .neural import NeuralCompiler
from .traditional import TraditionalCompiler

DEFAULT_BACKEND = "traditional"
"""The backend envs, ``synthenv.score`` and the agents use unless told otherwise."""


@runtime_checkable
class Compiler(Protocol):
    """A backend that compiles a token batch to IR for the engines."""

    name: str

    def compile(self, tokens: torch.Tensor) -> Program:
        ...


@runtime_checkable
class Pipeline(Protocol):
    """A backend that runs token batches itself (``engines`` lists the engines it accepts)."""

    name: str
    engines: tuple[str, ...]

    def execute(self, tokens: torch.Tensor, task: Task, num_outputs: int | None = None,
                early_abort: bool = True) -> Execution:
        ...


# Not cached: every user (an env, a bench run) gets its own instance, so a stateful backend such as
# the hybrid keeps its own audit statistics.
_registry: Registry[Compiler | Pipeline] = Registry("backend", cache=False)
_registry.register("traditional", TraditionalCompiler)
_registry.register("cpu", CPUPipeline)
_registry.register("neural", NeuralCompiler)
_registry.register("hybrid", HybridCompiler)


def get(name: str) -> Compiler | Pipeline:
    """The backend registered as ``name``."""
    return _registry.get(name)


def names() -> list[str]:
    """Registered backend names."""
    return _registry.names()


def register(name: str, factory, overwrite: bool = False) -> None:
    """Register a backend factory under ``name``."""
    _registry.register(name, factory, overwrite=overwrite)
