"""A wall-clock deadline that the engines honour inside one batch of programs.

A training job's ``--seconds`` is checked between generations; one generation of thousands of programs, each
allowed up to ``max_steps`` steps per case, can itself take minutes. Inside ``within(at)`` the engines look at the
clock as they go (the native VM every 16 programs of a thread, the torch engine every lockstep iteration, the
reference pipeline every case) and raise ``DeadlineExceeded`` once ``time.monotonic()`` passes ``at``: the batch's
results are then incomplete and the caller drops them (the trainer ends the run there, out of time). Reading the
host clock is not a device synchronisation. The ``cuda`` engine checks before it launches, not during a kernel:
a kernel's programs are bounded by ``max_steps`` (docs/limits.md).

>>> import time
>>> with within(time.monotonic() - 1):
...     check()
Traceback (most recent call last):
    ...
synthenv.deadline.DeadlineExceeded: the time budget ran out during a batch of programs
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

_AT: contextvars.ContextVar[float | None] = contextvars.ContextVar("synthenv_deadline", default=None)


class DeadlineExceeded(Exception):
    """The deadline of ``within`` passed while a batch of programs ran; its results are incomplete."""

    def __init__(self, message: str = "the time budget ran out during a batch of programs"):
        super().__init__(message)


@contextlib.contextmanager
def within(at: float | None) -> Iterator[None]:
    """Run the body with the deadline ``at`` (a ``time.monotonic()`` time; None: none)."""
    token = _AT.set(at)
    try:
        yield
    finally:
        _AT.reset(token)


def current() -> float | None:
    """The deadline in force (a ``time.monotonic()`` time), or None."""
    return _AT.get()


def check() -> None:
    """Raise ``DeadlineExceeded`` if a deadline is in force and has passed."""
    at = _AT.get()
    if at is not None and time.monotonic() > at:
        raise DeadlineExceeded()
