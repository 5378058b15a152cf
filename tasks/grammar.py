"""The program grammar behind ``synthenv.tasks.generated``: short BF programs built from idioms.

A *family* is one rule of the grammar: a sampler ``(rng, shape) -> program`` and the input shapes it
reads. The idioms are the ones PQT's reference programs are made of (docs/semantics.md §3): reads into cells,
constant adds, moves, prints, clears (``[-]``), counted loops that add a multiple of a cell to others
(``[->+++<]``, ``[->+>+<<]``), copies through a temporary cell (``[->+>+<<]>>[-<<+>>]<<``), counted loops
that print as they count (``[.-]``), nested counted loops (multiply), loops over a 0-terminated list
(``,[ ... ,]``), storing a list and walking it (``>,[>,]<[.<]``), and scans to a zero cell (``[<]``).

Families:

- ``straight``: reads, adds, moves, clears and prints, no other loop (``,>,<+.>.``).
- ``counted``: the inputs read into cells, then counted loops that copy, add or multiply them into other
  cells, then prints (``,>,[-<+>]<.``, ``,[->+++<]>.``).
- ``print-loop``: a counted loop that prints as it counts down (``,[->+<.]>.``).
- ``nested``: counted loops inside counted loops (``,>,<[->[->+>+<<]>>[-<<+>>]<<<]>>>.``: multiply).
- ``list-map``: a loop over the input list, ``,[ body ,]``, then prints of what it accumulated
  (``,[->+<,]>.``: the sum).
- ``list-store``: the list stored on the tape, then walked back or forth (``>,[>,]<[+.<]``).
- ``random``: uniformly random commands, brackets balanced (``>,+[.<-]``).

Every draw comes from one ``Py2Random`` (its values depend only on ``random()``, which is the same on
every Python version), so a program is a function of the generator's seed alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from .py2random import Py2Random

T = TypeVar("T")

SHAPES = ("one", "pair", "triple", "list", "seq")
"""Input shapes: one value, two, three, a 0-terminated list of nonzero values (1 to ``max_length``
of them), or a list of values that may be 0, with no terminator (PQT's ``dflt``)."""

ARITY = {"one": 1, "pair": 2, "triple": 3}
WIDTH = 5
"""Cells the straight-line idioms use (0 to 4): enough for three inputs and two work cells."""


def choice(rng: Py2Random, items: Sequence[T]) -> T:
    """One of ``items``, uniformly."""
    return items[rng.randrange(len(items))]


def weighted(rng: Py2Random, weights: Mapping[T, float]) -> T:
    """A key of ``weights``, with probability proportional to its weight."""
    point, total = rng.random() * sum(weights.values()), 0.0
    for key, weight in weights.items():
        total += weight
        if point < total:
            return key
    return key


def moves(k: int) -> str:
    return ">" * k if k > 0 else "<" * -k


def adds(k: int) -> str:
    return "+" * k if k > 0 else "-" * -k


class Writer:
    """Emits code and tracks the data pointer, for idioms that address cells 0..WIDTH-1."""

    def __init__(self, rng: Py2Random, pos: int = 0):
        self.rng, self.pos, self.parts = rng, pos, []
        self.touched = set()  # cells that may hold something other than 0

    def emit(self, code: str) -> None:
        self.parts.append(code)
        if "," in code or "+" in code or "-" in code:
            self.touched.add(self.pos)

    def goto(self, cell: int) -> None:
        self.emit(moves(cell - self.pos))
        self.pos = cell

    def other_cell(self, exclude: Sequence[int] = ()) -> int:
        """A cell other than the current one and ``exclude``, at most 2 away."""
        cells = [c for c in range(WIDTH) if c != self.pos and c not in exclude and abs(c - self.pos) <= 2]
        return choice(self.rng, cells)

    def code(self) -> str:
        return "".join(self.parts)

    # The idioms, each at the current cell; the pointer ends where it started unless said.
    def constant(self) -> None:
        self.emit(adds(choice(self.rng, (1, 1, 2, 3, 5, -1, -1, -2, -3))))

    def transfer(self) -> None:
        """``[->+++<]``: add a multiple of this cell to one or two others, clearing it."""
        start, body = self.pos, ""
        targets = [self.other_cell()]
        if self.rng.random() < 0.3:
            targets.append(self.other_cell(exclude=targets))
        at = start
        for target in targets:
            body += moves(target - at) + adds(choice(self.rng, (1, 1, 1, 2, 3, -1)))
            at = target
            self.touched.add(target)
        body += moves(start - at)
        self.emit("[-" + body + "]" if self.rng.random() < 0.75 else "[" + body + "-]")

    def copy(self) -> None:
        """``[->+>+<<]>>[-<<+>>]<<``: add this cell to another through a temporary, keeping it."""
        start = self.pos
        target = self.other_cell()
        temp = self.other_cell(exclude=[target])
        self.touched.add(target)
        first = moves(target - start) + "+" + moves(temp - target) + "+" + moves(start - temp)
        self.emit("[-" + first + "]" + moves(temp - start) + "[-" + moves(start - temp) + "+" + moves(temp - start)
                  + "]" + moves(start - temp))

    def print_loop(self) -> None:
        """``[.-]``, ``[->+<.]``: count this cell down to 0, printing on the way."""
        pieces = ["-", "."]
        if self.rng.random() < 0.5:
            target = self.other_cell()
            self.touched.add(target)
            pieces.append(moves(target - self.pos) + adds(choice(self.rng, (1, 1, 2, -1)))
                          + ("." if self.rng.random() < 0.3 else "") + moves(self.pos - target))
        self.rng.shuffle(pieces)
        self.emit("[" + "".join(pieces) + "]")

    def nested(self) -> None:
        """``[->[->+<]<]``-like: a counted loop whose body moves to another cell and runs an idiom there."""
        start = self.pos
        self.emit("[-")
        self.goto(self.other_cell())
        choice(self.rng, (self.transfer, self.copy, self.copy, self.constant))()
        if self.rng.random() < 0.3:
            self.emit(".")
        self.goto(start)
        self.emit("]")


def read_inputs(w: Writer, shape: str) -> None:
    """Read the inputs into cells 0, 1, 2 (or with a gap), ending on the last one read."""
    count = ARITY.get(shape, choice(w.rng, (2, 3)))
    step = 2 if count < 3 and w.rng.random() < 0.25 else 1
    for i in range(count):
        w.goto(i * step)
        w.emit(",")


def prints(w: Writer, low: int = 1, high: int = 3) -> None:
    """Print ``low`` to ``high`` cells, mostly ones that were written (each maybe after a constant add)."""
    for _ in range(low + w.rng.randrange(high - low + 1)):
        w.goto(choice(w.rng, sorted(w.touched) if w.touched and w.rng.random() < 0.85 else range(WIDTH)))
        if w.rng.random() < 0.2:
            w.constant()
        w.emit(".")


def statements(w: Writer, kinds: Mapping[str, float], count: int) -> None:
    """``count`` idioms drawn by weight (``read``, ``print``, ``add``, ``move`` and the Writer's loops)."""
    for _ in range(count):
        kind = weighted(w.rng, kinds)
        if kind == "read":
            w.emit(",")
        elif kind == "print":
            w.emit(".")
        elif kind == "add":
            w.constant()
        elif kind == "move":
            w.goto(w.other_cell())
        elif kind == "clear":
            w.emit("[-]")
        else:
            getattr(w, kind)()


def straight(rng: Py2Random, shape: str) -> str:
    w = Writer(rng)
    w.emit(",")
    statements(w, {"read": 2, "print": 3, "add": 3, "move": 2, "clear": 0.5}, 2 + rng.randrange(7))
    return w.code() + ("" if "." in w.code() else ".")


def counted(rng: Py2Random, shape: str) -> str:
    w = Writer(rng)
    read_inputs(w, shape)
    for i in range(1 + rng.randrange(3)):
        if i or rng.random() < 0.5:
            w.goto(choice(rng, range(3)))
        statements(w, {"transfer": 4, "copy": 1.5, "add": 1, "clear": 0.3}, 1)
    prints(w)
    return w.code()


def print_loop(rng: Py2Random, shape: str) -> str:
    w = Writer(rng)
    read_inputs(w, shape)
    if rng.random() < 0.4:
        w.goto(choice(rng, range(3)))
        statements(w, {"add": 1, "transfer": 1, "copy": 1}, 1)
    w.goto(choice(rng, range(ARITY.get(shape, 2))))
    w.print_loop()
    if rng.random() < 0.5:
        prints(w, 1, 2)
    return w.code()


def nested(rng: Py2Random, shape: str) -> str:
    w = Writer(rng)
    read_inputs(w, shape)
    w.goto(choice(rng, range(ARITY.get(shape, 2))))
    w.nested()
    if rng.random() < 0.3:
        w.goto(choice(rng, range(3)))
        statements(w, {"transfer": 1, "add": 1}, 1)
    prints(w, 1, 2)
    return w.code()


def list_map(rng: Py2Random, shape: str) -> str:
    w = Writer(rng)
    if rng.random() < 0.3:
        w.goto(1)
        if rng.random() < 0.5:
            w.goto(2)
            w.constant()
            w.goto(1)
    start = w.pos
    w.emit(",[")
    statements(w, {"print": 3, "add": 2, "transfer": 2, "copy": 1, "print_loop": 0.5, "move": 2, "clear": 0.3},
               1 + rng.randrange(3))
    if rng.random() < 0.5:  # accumulate in another cell
        w.goto(w.other_cell())
        w.constant()
    w.goto(start)
    w.emit(",]")
    if rng.random() < 0.6 or "." not in w.code():
        prints(w, 1, 2)
    return w.code()


def list_store(rng: Py2Random, shape: str) -> str:
    head = ">" if rng.random() < 0.8 else ""  # a zero cell 0 ends the walk back
    store = choice(rng, (",[>,]", ",[>,]", ",[.>,]", ",[+>,]", ",[->,]", ",[>+>,]"))
    walk_back = "<[" + walk_body(rng) + "<]"
    walk_forward = "[<]>[" + walk_body(rng) + ">]"
    walks = choice(rng, ((walk_back,), ("<" + walk_forward,), (walk_back, ">[" + walk_body(rng) + ">]")))
    tail = choice(rng, ("", "", ".", "<.", "<[<]>."))
    return head + store + "".join(walks) + tail


def walk_body(rng: Py2Random) -> str:
    """What a walk over a stored list does at each cell: print, change or clear it."""
    return "".join(choice(rng, (".", ".", "+", "-", "..", "[-]")) for _ in range(1 + rng.randrange(2)))


def uniform(rng: Py2Random, shape: str) -> str:
    """Uniformly random commands; unmatched brackets dropped, so every program is balanced."""
    code = [choice(rng, "><+-[].,") for _ in range(5 + rng.randrange(16))]
    return balance("".join(code))


def balance(code: str) -> str:
    """``code`` without its unmatched brackets."""
    keep, stack = [True] * len(code), []
    for i, c in enumerate(code):
        if c == "[":
            stack.append(i)
        elif c == "]":
            if stack:
                stack.pop()
            else:
                keep[i] = False
    for i in stack:
        keep[i] = False
    return "".join(c for c, k in zip(code, keep) if k)


def loops(code: str) -> list[tuple[str, int]]:
    """Each matched loop's body and nesting depth (1 = top level), in order of its ``[``.

    >>> loops(",[->[-]<]")
    [('->[-]<', 1), ('-', 2)]
    """
    found, stack = [], []
    for i, c in enumerate(code):
        if c == "[":
            stack.append(i)
        elif c == "]" and stack:
            start = stack.pop()
            found.append((start, code[start + 1: i], len(stack) + 1))
    return [(body, depth) for _, body, depth in sorted(found)]


def any_program(code: str) -> bool:
    return True


def has_loop(code: str) -> bool:
    """A loop other than a clear (``[-]``)."""
    return any(body not in ("-", "+") for body, _ in loops(code))


def has_printing_loop(code: str) -> bool:
    return any("." in body for body, _ in loops(code))


def has_nested_loop(code: str) -> bool:
    return any(depth >= 2 and body not in ("-", "+") for body, depth in loops(code))


def has_reading_loop(code: str) -> bool:
    return any("," in body for body, _ in loops(code))


def has_walk(code: str) -> bool:
    return has_reading_loop(code) and any("," not in body and depth == 1 for body, depth in loops(code))


@dataclass(frozen=True)
class Family:
    """One grammar rule: its sampler, the shapes it reads, whether it wants small input values, and the
    structure a program of the family keeps after ``generated.minimize`` (else it was not this family's)."""

    name: str
    sample: Callable[[Py2Random, str], str]
    shapes: tuple[str, ...]
    weight: float
    small_values: bool = False
    keeps: Callable[[str], bool] = any_program


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("straight", straight, ("one", "pair", "triple", "seq"), 0.12),
    Family("counted", counted, ("one", "pair", "triple"), 0.2, keeps=has_loop),
    Family("print-loop", print_loop, ("one", "pair", "triple"), 0.1, small_values=True, keeps=has_printing_loop),
    Family("nested", nested, ("one", "pair", "triple"), 0.12, small_values=True, keeps=has_nested_loop),
    Family("list-map", list_map, ("list", "seq"), 0.2, keeps=has_reading_loop),
    Family("list-store", list_store, ("list", "seq"), 0.16, keeps=has_walk),
    Family("random", uniform, SHAPES, 0.1),
)}
"""The grammar's families by name, each with its share of the stream (weights sum to 1)."""
