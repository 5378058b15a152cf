"""The algorithms, by name: one registry, the only list of their names.

Each algorithm takes its config, the seeds of the S members it trains at once, ``max_len`` and the
device. ``names()`` is what the command line, the table and the docs offer.

>>> names()
['islands', 'ppo', 'mutation', 'pqt', 'pg-pqt', 'reinforce', 'ga', 'random']
>>> default_config("pqt").queue_weight
200.0
"""

from __future__ import annotations

import dataclasses

from synthenv.registry import Registry

from .island_agent import IslandAgent
from .island_config import IslandsConfig, PPOConfig
from .mutation import MutationConfig, MutationSearch
from .pg import PRESETS, PolicyGradient
from .search import GAConfig, GeneticAlgorithm, RandomConfig, RandomSearch

_registry: Registry[tuple] = Registry("algorithm")
_registry.register("islands", lambda: (IslandsConfig(), IslandAgent))
_registry.register("ppo", lambda: (PPOConfig(), IslandAgent))
_registry.register("mutation", lambda: (MutationConfig(), MutationSearch))
for _name in ("pqt", "pg-pqt", "reinforce"):
    _registry.register(_name, lambda _name=_name: (PRESETS[_name], PolicyGradient))
_registry.register("ga", lambda: (GAConfig(), GeneticAlgorithm))
_registry.register("random", lambda: (RandomConfig(), RandomSearch))


def names() -> list[str]:
    """Registered algorithm names."""
    return _registry.names()


def with_field(field: str) -> list[str]:
    """The algorithms whose config has a field named ``field`` (what an error says when another algorithm lacks it).

    >>> with_field("policy_fraction"), with_field("library")
    (['ppo'], ['islands', 'ppo'])
    """
    return [algo for algo in names() if field in {f.name for f in dataclasses.fields(default_config(algo))}]


def default_config(algo: str):
    """The default config of ``algo`` (PQT's hyperparameters for the baselines); an unknown name raises an
    error listing the valid ones."""
    return _registry.get(algo)[0]


def make(algo: str, config, seeds: tuple[int, ...], max_len: int, device):
    """Build ``algo`` for the members ``seeds`` (``config=None``: its defaults)."""
    default, factory = _registry.get(algo)
    config = default if config is None else config
    if type(config) is not type(default):
        raise TypeError(f"algorithm {algo!r} takes a {type(default).__name__}, got {type(config).__name__}")
    return factory(config, tuple(seeds), max_len, device)
