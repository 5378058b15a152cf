"""The algorithms, by name: one registry, the only list of their names, and the specs that name them.

Each algorithm takes its config, the seeds of the S members it trains at once, ``max_len`` and the
device. ``names()`` is what the command line, the table and the docs offer. A *spec* is ``NAME`` or
``NAME:field=value,...``, an algorithm with changes to its default config (``parse_algo``): what
``synthenv table --algos`` and ``synthenv bench-agents --algos`` take, each spec a column of its own, so
``ppo:policy_fraction=0,restarts=False`` sets an ablation beside ``ppo``.

>>> names()
['islands', 'ppo', 'mutation', 'pqt', 'pg-pqt', 'reinforce', 'ga', 'random']
>>> default_config("pqt").queue_weight, parse_algo("mutation:elite=3")[1].elite
(200.0, 3)
"""

from __future__ import annotations

import dataclasses
import inspect
import typing

from synthenv.registry import Registry, UnknownNameError, unknown_name_message

from .pqt.ga import GAConfig, GeneticAlgorithm
from .pqt.pg import PRESETS, PolicyGradient
from .pqt.random_search import RandomConfig, RandomSearch
from .search.agent import IslandAgent
from .search.config import IslandsConfig, PPOConfig
from .search.mutation import MutationConfig, MutationSearch

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


def make(algo: str, config, seeds: tuple[int, ...], max_len: int, device, task=None):
    """Build ``algo`` for the members ``seeds`` (``config=None``: its defaults); an algorithm that reads the task it
    runs on (the default agent: its domain, its outputs' constants) is given ``task``."""
    default, factory = _registry.get(algo)
    config = default if config is None else config
    if type(config) is not type(default):
        raise TypeError(f"algorithm {algo!r} takes a {type(default).__name__}, got {type(config).__name__}")
    reads_task = "task" in inspect.signature(factory).parameters
    return factory(config, tuple(seeds), max_len, device, **({"task": task} if reads_task else {}))


def check_files(config) -> None:
    """Read the files ``config`` names (an edit policy, a library) now, so that a missing or bad one is refused
    before any work is done (``synthenv table`` checks every column before its first cell)."""
    from .policy.files import load_policy, policy_path
    from .search.library import load_library

    if isinstance(getattr(config, "policy", None), str) and (path := policy_path(config.policy)) is not None:
        load_policy(path)
    if isinstance(getattr(config, "library", None), str) and config.library not in ("shipped", "none"):
        load_library(config.library)


TRUE_WORDS = ("True", "true", "1")
FALSE_WORDS = ("False", "false", "0")


def parse_algo(spec: str) -> tuple[str, object]:
    """``NAME`` or ``NAME:field=value,...`` -> (algorithm name, its default config with those changes).

    Values take the field's type: bools are True/False (or true/false, 1/0), ints and floats are
    parsed as such, other fields keep the text.

    Raises:
        UnknownNameError: NAME is not a registered algorithm (the message lists them, with a hint).
        ValueError: a change is not ``field=value`` with a field of the config, or its value does not
            parse as the field's type (or the config refuses it).

    >>> parse_algo("ppo:policy_fraction=0,restarts=False")[1].policy_fraction
    0.0
    """
    name, _, changes = spec.partition(":")
    if name not in names():
        raise UnknownNameError(unknown_name_message("algorithm", name, names()))
    config = default_config(name)
    if not changes:
        return name, config
    fields = {f.name for f in dataclasses.fields(config)}
    hints = typing.get_type_hints(type(config))
    updates = {}
    for item in changes.split(","):
        key, sep, text = item.partition("=")
        if not sep or key not in fields:
            takers = with_field(key) if sep else []
            raise ValueError(f"algorithm spec {spec!r}: {item!r} must be field=value with a field of "
                             f"{type(config).__name__}: {sorted(fields)}"
                             + (f"; {key} is a field of {', '.join(takers)}" if takers else ""))
        updates[key] = _parse_value(spec, key, text, hints[key])
    return name, dataclasses.replace(config, **updates)


def _parse_value(spec: str, key: str, text: str, kind: object) -> object:
    """``text`` as a value of the field ``key`` whose type is ``kind``."""
    if kind is bool:
        if text not in TRUE_WORDS + FALSE_WORDS:
            raise ValueError(f"algorithm spec {spec!r}: {key} takes True or False, got {text!r}")
        return text in TRUE_WORDS
    for candidate in (int, float):
        if kind is candidate or candidate in typing.get_args(kind):
            try:
                return candidate(text)
            except ValueError:
                kind_name = "an int" if candidate is int else "a float"
                raise ValueError(f"algorithm spec {spec!r}: {key} takes {kind_name}, got {text!r}") from None
    return text
