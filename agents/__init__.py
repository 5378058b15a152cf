"""Synthesis agents: synthenv's default agent, its learned variant and the PQT paper's baselines.

A folder per role, each with a map of its own in its docstring:

- ``search/``: the search the default agent, ``islands``, runs: an elitist warm start (``mutation``, also
  registered as the plain baseline), a library of known programs, a learned program prior, and island
  populations whose children come from operators (random edits, crossover, idioms).
- ``policy/``: the edit policy, the learned operator that ``ppo`` adds to the search, and its learner.
- ``pretraining/``: what ``synthenv pretrain`` runs and ships (the policy fitted to repairs across tasks).
- ``pqt/``: the PQT paper's agents, ``pqt``, ``pg-pqt``, ``reinforce`` (a token policy), ``ga`` and ``random``.
- ``run/``: one training job: its config and results, the loop, the schedule, tracking, logs, what a run
  leaves behind.

``registry.py`` names the algorithms and parses specs (``ppo:policy_fraction=0``). Train with
``agents.train(TrainConfig(...))`` or ``synthenv train``. The Stable-Baselines3 adapter of the token-mode env
is ``synthenv.env.sb3``.

>>> from synthenv import agents
>>> agents.names()
['islands', 'ppo', 'mutation', 'pqt', 'pg-pqt', 'reinforce', 'ga', 'random']
"""

from __future__ import annotations

from .pqt.ga import GAConfig, GeneticAlgorithm
from .pqt.pg import PRESETS, PGConfig, PolicyGradient
from .pqt.policies import PolicyConfig
from .pqt.random_search import RandomConfig, RandomSearch
from .registry import default_config, make, names
from .run.job import DEFAULT_NPE, RunResult, TrainConfig
from .run.trainer import Trainer, train
from .search.agent import IslandAgent
from .search.config import IslandsConfig, PPOConfig
from .search.mutation import MutationConfig, MutationSearch

__all__ = ["names", "default_config", "make", "train", "TrainConfig", "Trainer", "RunResult", "DEFAULT_NPE",
           "IslandAgent", "IslandsConfig", "PPOConfig", "PGConfig", "GAConfig", "RandomConfig", "MutationConfig",
           "PolicyConfig", "PRESETS", "MutationSearch", "PolicyGradient", "GeneticAlgorithm", "RandomSearch"]
