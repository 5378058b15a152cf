"""Argument checks shared by configs and constructors, with the error messages users see.

>>> require_positive_int("steps", 3)
>>> require_positive_int("steps", 0)
Traceback (most recent call last):
    ...
ValueError: steps must be a positive int, got 0
"""

from __future__ import annotations


def require_positive_int(name: str, value: object, prefix: str = "") -> None:
    """Raise ``ValueError`` naming ``prefix + name`` unless ``value`` is an int >= 1."""
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{prefix}{name} must be a positive int, got {value!r}")


def require_positive_int_fields(owner: object, *names: str, prefix: str = "") -> None:
    """``require_positive_int`` for each attribute ``names`` of ``owner`` (a config), in order."""
    for name in names:
        require_positive_int(name, getattr(owner, name), prefix)
