"""Synthesis agents: synthenv's PPO with self-improvement and the PQT paper's baselines.

Algorithms register by name (one registry shape, STYLE §2); each takes its config, the seeds
of the S members it trains at once, ``max_len`` and the device:

- ``ppo``: the default agent, self-improving PPO that explores variants of its best programs
  (the mutation baseline's elitist search first, then neural-guided evolution, ``agents.ppo``).
- ``mutation``: elitist mutation search, the plain baseline a learning agent must clear
  (``agents.mutation``).
- ``pqt``, ``pg-pqt``, ``reinforce``: the PQT paper's policy-gradient family (``agents.pg``).
- ``ga``, ``random``: the PQT paper's search baselines (``agents.search``).

Train with ``agents.train(TrainConfig(...))`` or ``synthenv train``; adapt the token-mode env to
Stable-Baselines3 with ``agents.sb3``.

>>> from synthenv import agents
>>> agents.names()
['ppo', 'mutation', 'pqt', 'pg-pqt', 'reinforce', 'ga', 'random']
>>> agents.default_config("pqt").queue_weight
200.0
"""

from __future__ import annotations

from synthenv.registry import Registry

from .mutation import MutationConfig, MutationSearch
from .pg import PRESETS, PGConfig, PolicyGradient
from .policies import PolicyConfig
from .ppo import PPO, PPOConfig
from .search import GAConfig, GeneticAlgorithm, RandomConfig, RandomSearch

_registry: Registry[tuple] = Registry("algorithm")
_registry.register("ppo", lambda: (PPOConfig(), PPO))
_registry.register("mutation", lambda: (MutationConfig(), MutationSearch))
for _name in ("pqt", "pg-pqt", "reinforce"):
    _registry.register(_name, lambda _name=_name: (PRESETS[_name], PolicyGradient))
_registry.register("ga", lambda: (GAConfig(), GeneticAlgorithm))
_registry.register("random", lambda: (RandomConfig(), RandomSearch))


def names() -> list[str]:
    """Registered algorithm names."""
    return _registry.names()


def default_config(algo: str):
    """The default config of ``algo`` (PQT's hyperparameters for the baselines)."""
    return _registry.get(algo)[0]


def make(algo: str, config, seeds: tuple[int, ...], max_len: int, device):
    """Build ``algo`` for the members ``seeds`` (``config=None``: its defaults)."""
    default, factory = _registry.get(algo)
    config = default if config is None else config
    if type(config) is not type(default):
        raise TypeError(f"algorithm {algo!r} takes a {type(default).__name__}, got {type(config).__name__}")
    return factory(config, tuple(seeds), max_len, device)


from .trainer import RunResult, TrainConfig, Trainer, train  # noqa: E402  (needs the registry above)

__all__ = ["names", "default_config", "make", "train", "TrainConfig", "Trainer", "RunResult", "PPOConfig",
           "PGConfig", "GAConfig", "RandomConfig", "MutationConfig", "PolicyConfig", "PRESETS"]
