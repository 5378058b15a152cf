"""Families beyond the training grammar: held out whole, for ``synthenv.tasks.generated``'s ``beyond-tune`` and
``beyond-test`` splits.

The ``train`` split never samples these rules (``tasks.grammar.FAMILIES`` is its grammar), so an agent's results on
them measure how far what it knows carries past the programs it learned from. They are written from the same
idioms (``tasks.grammar.Writer``) into structures the training grammar has not:

- ``flag``: a loop that runs at most once sets a flag cell (is the input zero, or equal to a constant), then the
  flag or a value chosen by it is printed (``,---[>+<[-]]>.``);
- ``step``: a counted loop whose step is not 1 (``,[-->+<]>.``, ``,[--->++<]>.``);
- ``compose``: two programs of the training grammar, one after the other on the same tape;
- ``list-arith``: a loop over a 0-terminated list with arithmetic inside (doubling, adding a constant, a running
  sum of differences) and prints inside or after;
- ``toggle``: a cell flipped between 0 and 1 by each value of a list, printed as it goes or at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import grammar
from .grammar import adds, choice, moves
from .py2random import Py2Random


def flag(rng: Py2Random, shape: str) -> str:
    w = grammar.Writer(rng)
    grammar.read_inputs(w, shape)
    w.goto(choice(rng, range(grammar.ARITY.get(shape, 2))))
    test = adds(-choice(rng, (1, 2, 3, 5))) if rng.random() < 0.5 else ""  # is it k, or is it 0
    if rng.random() < 0.5:  # the flag is set where the cell is not 0 (after the test)
        w.emit(test + ">>+<<[>>-<<[-]]" if rng.random() < 0.5 else test + "[>>+<<[-]]")
    else:
        w.emit(test + ">>+<<[>>[-]<<[-]]")
    w.touched.add(w.pos + 2)  # the loop leaves the pointer where it started
    w.goto(w.pos + 2)
    if rng.random() < 0.4:  # print a constant chosen by the flag
        w.emit("[-" + moves(1) + adds(choice(rng, (2, 3, 5))) + moves(-1) + "]" + moves(1))
        w.pos += 1
    w.emit(adds(choice(rng, (0, 0, 1))) + ".")
    return w.code()


def step(rng: Py2Random, shape: str) -> str:
    w = grammar.Writer(rng)
    grammar.read_inputs(w, shape)
    w.goto(choice(rng, range(grammar.ARITY.get(shape, 2))))
    start, target = w.pos, w.other_cell()
    down = choice(rng, (2, 2, 3))
    body = "-" * down + moves(target - start) + adds(choice(rng, (1, 1, 2, 3))) + moves(start - target)
    w.emit("[" + body + "]")
    w.touched.add(target)
    grammar.prints(w, 1, 2)
    return w.code()


def compose(rng: Py2Random, shape: str) -> str:
    first, second = (grammar.FAMILIES[name] for name in
                     (choice(rng, ("straight", "counted", "print-loop")), choice(rng, ("counted", "nested", "print-loop"))))
    return first.sample(rng, shape) + ">>>" + second.sample(rng, shape)


def list_arith(rng: Py2Random, shape: str) -> str:
    body = choice(rng, ("[->++<]", "[->+>+<<]>>[-<<+>>]<<", "++", "---", "[->+<]>[-<+>>+<]<", ">+<[->-<]"))
    inside = choice(rng, ("", ".", ">.<"))
    tail = choice(rng, (">.", ">.>.", ">>.", ">[.-]"))
    return ",[" + body + inside + ",]" + tail


def toggle(rng: Py2Random, shape: str) -> str:
    flip = ">>+<[->-<]>[-<+>]<<"  # cell 1 = 1 - cell 1 (through cell 2)
    inside = choice(rng, ("", ">.<", ".", ">+.-<"))
    tail = choice(rng, (">.", ">+.", ">[<+>-]<."))
    return ",[" + flip + inside + ",]" + tail


@dataclass(frozen=True)
class BeyondFamily:
    """One held-out rule: its sampler, the input shapes it reads, and whether it wants small input values (the
    same fields as ``tasks.grammar.Family``; every program of it is kept as it minimizes)."""

    name: str
    sample: Callable[[Py2Random, str], str]
    shapes: tuple[str, ...]
    weight: float
    small_values: bool = False

    @staticmethod
    def keeps(code: str) -> bool:
        return True


FAMILIES: dict[str, BeyondFamily] = {f.name: f for f in (
    BeyondFamily("flag", flag, ("one", "pair", "triple"), 0.22),
    BeyondFamily("step", step, ("one", "pair"), 0.2, small_values=True),
    BeyondFamily("compose", compose, ("one", "pair", "triple"), 0.2, small_values=True),
    BeyondFamily("list-arith", list_arith, ("list",), 0.2),
    BeyondFamily("toggle", toggle, ("list", "seq"), 0.18),
)}
"""The held-out families by name, each with its share of the beyond splits (weights sum to 1)."""
