"""Algorithm specs: ``NAME`` or ``NAME:field=value,...``, an algorithm with changes to its default config.

What ``synthenv table --algos`` and ``synthenv bench-agents --algos`` take: each spec is a column of its
own, so ``ppo:policy_fraction=0,restarts=False`` sets an ablation beside ``ppo``.

>>> parse_algo("mutation:elite=3")[1].elite
3
"""

from __future__ import annotations

import dataclasses
import typing

from synthenv import agents
from synthenv.registry import UnknownNameError, unknown_name_message

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
    if name not in agents.names():
        raise UnknownNameError(unknown_name_message("algorithm", name, agents.names()))
    config = agents.default_config(name)
    if not changes:
        return name, config
    fields = {f.name for f in dataclasses.fields(config)}
    hints = typing.get_type_hints(type(config))
    updates = {}
    for item in changes.split(","):
        key, sep, text = item.partition("=")
        if not sep or key not in fields:
            takers = agents.registry.with_field(key) if sep else []
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
