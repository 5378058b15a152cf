"""Synthesis agents: synthenv's default agent and the PQT paper's baselines.

Algorithms register by name (``agents.registry``); each takes its config, the seeds of the S
members it trains at once, ``max_len`` and the device:

- ``islands``: the default agent, an island search with an elitist warm start, a library of known programs and a
  learned program prior (``agents.island_agent``, built from ``library``, ``mutation``, ``island_search``,
  ``operators``, ``program_prior``).
- ``ppo``: the same search with a PPO-trained edit operator, an edit policy pretrained across generated tasks and
  fine-tuned on the task at hand (``learner``, ``editor``).
- ``mutation``: elitist mutation search, the plain baseline a learning agent must clear
  (``agents.mutation``).
- ``pqt``, ``pg-pqt``, ``reinforce``: the PQT paper's policy-gradient family (``agents.pg``).
- ``ga``, ``random``: the PQT paper's search baselines (``agents.search``).

Train with ``agents.train(TrainConfig(...))`` or ``synthenv train``; adapt the token-mode env to
Stable-Baselines3 with ``agents.sb3``.

>>> from synthenv import agents
>>> agents.names()
['islands', 'ppo', 'mutation', 'pqt', 'pg-pqt', 'reinforce', 'ga', 'random']
"""

from __future__ import annotations

from .island_agent import IslandAgent
from .island_config import IslandsConfig, PPOConfig
from .job import DEFAULT_NPE, RunResult, TrainConfig
from .mutation import MutationConfig, MutationSearch
from .pg import PRESETS, PGConfig, PolicyGradient
from .policies import PolicyConfig
from .registry import default_config, make, names
from .search import GAConfig, GeneticAlgorithm, RandomConfig, RandomSearch
from .trainer import Trainer, train

__all__ = ["names", "default_config", "make", "train", "TrainConfig", "Trainer", "RunResult", "DEFAULT_NPE",
           "IslandAgent", "IslandsConfig", "PPOConfig", "PGConfig", "GAConfig", "RandomConfig", "MutationConfig",
           "PolicyConfig", "PRESETS", "MutationSearch", "PolicyGradient", "GeneticAlgorithm", "RandomSearch"]
