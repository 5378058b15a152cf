"""Python 2's ``random.randrange`` and ``random.shuffle`` on top of Python 3's generator.

PQT generated its test sets on Python 2. The Mersenne Twister seeding and ``random()`` are
identical across versions, but Python 3 rewrote ``randrange`` and ``shuffle`` to draw
integers by rejection sampling, which gives different values. docs/semantics.md §3 restates the
Python 2 formulas; this module applies them to a Python 3 ``random.Random``.
"""

from __future__ import annotations

import random
from collections.abc import MutableSequence
from typing import Any


class Py2Random:
    """A seeded generator whose ``randrange`` and ``shuffle`` give Python 2's values.

    >>> rng = Py2Random(6849275409234)
    >>> r = random.Random(6849275409234).random()
    >>> rng.randrange(1, 7) == 1 + int(r * 6)
    True
    """

    def __init__(self, seed: int):
        self._random = random.Random(seed)

    def random(self) -> float:
        """The next float in [0, 1), identical to Python 2's."""
        return self._random.random()

    def randrange(self, start: int, stop: int | None = None) -> int:
        """Python 2's ``randrange(start, stop)``: ``start + int(random() * (stop - start))``."""
        if stop is None:
            start, stop = 0, start
        width = stop - start
        if width <= 0:
            raise ValueError(f"empty range for randrange({start}, {stop})")
        return start + int(self.random() * width)

    def shuffle(self, items: MutableSequence[Any]) -> None:
        """Python 2's in-place Fisher-Yates shuffle (``j = int(random() * (i + 1))``)."""
        for i in reversed(range(1, len(items))):
            j = int(self.random() * (i + 1))
            items[i], items[j] = items[j], items[i]
