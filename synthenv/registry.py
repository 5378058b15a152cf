"""One registry shape for every plug-in point (tasks, compilers, engines, agents).

Names map to factories; ``get`` on an unknown name raises an error that lists the valid
names with a "did you mean" hint (docs/contributing.md, "Style").
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Generic, TypeVar

from synthenv.errors import UserError

T = TypeVar("T")


class UnknownNameError(UserError):
    """A name that no registry entry has (a ``UserError``, so a ``ValueError``)."""


def unknown_name_message(kind: str, name: object, valid: list[str]) -> str:
    """The error text for an unknown ``name`` of some ``kind``, with a "did you mean" hint."""
    hint = ""
    if isinstance(name, str):
        close = difflib.get_close_matches(name, valid, n=3)
        if close:
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?"
    return f"unknown {kind} {name!r}.{hint} Valid {kind}s: {', '.join(valid)}."


class Registry(Generic[T]):
    """Name -> factory map; factories run on each ``get`` unless ``cache=True``."""

    def __init__(self, kind: str, cache: bool = False):
        self.kind = kind
        self._factories: dict[str, Callable[[], T]] = {}
        self._cache: dict[str, T] | None = {} if cache else None

    def register(self, name: str, factory: Callable[[], T], overwrite: bool = False) -> None:
        """Register ``factory`` under ``name``; re-registering needs ``overwrite=True``."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.kind} names must be non-empty strings, got {name!r}")
        if name in self._factories and not overwrite:
            raise ValueError(f"{self.kind} {name!r} is already registered; pass overwrite=True to replace it")
        self._factories[name] = factory
        if self._cache is not None:
            self._cache.pop(name, None)

    def _require(self, name: str) -> None:
        if name not in self._factories:
            raise UnknownNameError(unknown_name_message(self.kind, name, self.names()))

    def unregister(self, name: str) -> None:
        """Remove ``name``; an unknown name raises ``UnknownNameError``."""
        self._require(name)
        del self._factories[name]
        if self._cache is not None:
            self._cache.pop(name, None)

    def get(self, name: str) -> T:
        """The entry registered as ``name``; an unknown name raises ``UnknownNameError``."""
        self._require(name)
        if self._cache is None:
            return self._factories[name]()
        if name not in self._cache:
            self._cache[name] = self._factories[name]()
        return self._cache[name]

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories
