"""The text grammar behind ``synthenv.tasks.generated``'s text splits: short BF programs that read and write text.

What text tasks need and PQT's grammar (``tasks.grammar``) never has: constants in the printable range, character
classes and conditionals (is it a space, a newline, this letter), line handling, separators, and decimal digits in
and out. Every program runs in the standard dialect (strict brackets, no move left of cell 0, ``,`` past the input
reads 0) on text input (bytes), and starts with its pointer on cell 0. Families:

- ``text-wrap``: constant text before and after the input, echoed, reversed or shifted (``Hi, ``+name+``!``).
- ``text-map``: each character mapped as it is read: shifted by a constant, one character replaced by another,
  one character dropped, or the case of letters flipped.
- ``text-select``: some characters of the input: the first, the last, both around a separator, every other one,
  the input reversed, or the first word.
- ``text-count``: how many characters, or how many of one character, as a decimal digit or number.
- ``text-lines``: two lines: the second, or both joined by a separator.
- ``text-number``: a decimal number read from its digits, printed after arithmetic as decimal digits.

Constants and the characters a program tests are drawn from the printable range (weighted towards letters,
spaces and punctuation); inputs are drawn per family (``sample_text``). Every draw comes from one ``Py2Random``.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass

from .grammar import adds, choice, weighted
from .py2random import Py2Random

SHAPES = ("word", "line", "chars", "lines", "digits", "number-pair")
"""Text input shapes: one word, words separated by spaces, printable characters, two lines, a decimal number, two
numbers separated by a space."""

LETTERS = string.ascii_letters
PUNCTUATION = ".,!?:;-_*#=/()'\""
DIGITS = string.digits


def char(rng: Py2Random) -> str:
    """A character a program prints or tests: letters mostly, then spaces, punctuation, digits, a newline."""
    kind = weighted(rng, {"lower": 4, "upper": 2, "space": 2, "punctuation": 2, "digit": 1, "newline": 0.5})
    return {"lower": lambda: choice(rng, string.ascii_lowercase), "upper": lambda: choice(rng, string.ascii_uppercase),
            "space": lambda: " ", "punctuation": lambda: choice(rng, PUNCTUATION),
            "digit": lambda: choice(rng, DIGITS), "newline": lambda: "\n"}[kind]()


def constant_text(rng: Py2Random, low: int = 1, high: int = 4) -> str:
    return "".join(char(rng) for _ in range(low + rng.randrange(high - low + 1)))


def word(rng: Py2Random, low: int = 1, high: int = 7) -> str:
    letters = LETTERS if rng.random() < 0.3 else string.ascii_lowercase
    return "".join(choice(rng, letters) for _ in range(low + rng.randrange(high - low + 1)))


def sample_text(rng: Py2Random, shape: str) -> str:
    """One input of ``shape`` (``SHAPES``)."""
    if shape == "word":
        return word(rng)
    if shape == "line":
        return " ".join(word(rng, 1, 5) for _ in range(1 + rng.randrange(4)))
    if shape == "chars":
        return "".join(choice(rng, LETTERS + DIGITS + PUNCTUATION + "  ") for _ in range(1 + rng.randrange(9)))
    if shape == "lines":
        return word(rng, 1, 6) + "\n" + word(rng, 1, 6)
    if shape == "digits":
        return str(rng.randrange(90) if rng.random() < 0.7 else rng.randrange(10))
    if shape == "number-pair":
        return f"{rng.randrange(10)} {rng.randrange(10)}"
    raise ValueError(f"unknown text shape {shape!r}")


# ---- code pieces: each at a zero cell p (and zero cells to its right), the pointer back on p ----


def set_value(rng: Py2Random, value: int) -> str:
    """Cell p from 0 to ``value`` (0..255): adds for small values, else a loop counting down p+1."""
    value %= 256
    if value <= 12:
        return "+" * value
    best = None
    for a in range(2, 17):
        b, r = divmod(value, a)
        if r > a // 2:
            b, r = b + 1, r - a
        cost = a + b + abs(r)
        if best is None or cost < best[0] or (cost == best[0] and rng.random() < 0.5):
            best = (cost, a, b, r)
    _, a, b, r = best
    return ">" + "+" * a + "[<" + "+" * b + ">-]<" + adds(r)


def shift_value(rng: Py2Random, delta: int) -> str:
    """Cell p changed by ``delta`` (mod 256), with p+1 zero as a counter for large changes."""
    delta = (delta + 128) % 256 - 128
    if abs(delta) <= 12:
        return adds(delta)
    sign, size = (1 if delta > 0 else -1), abs(delta)
    a = choice(rng, (4, 5, 6, 8))
    b, r = divmod(size, a)
    return ">" + "+" * a + "[<" + adds(sign * b) + ">-]<" + adds(sign * r)


def print_text(rng: Py2Random, text: str) -> str:
    """Print ``text`` from the zero cell p (p+1 zero); p is zero again after."""
    code, value = [], 0
    for c in text.encode():
        code.append(set_value(rng, c) if value == 0 else shift_value(rng, c - value))
        code.append(".")
        value = c
    return "".join(code) + ("[-]" if value else "")


def if_equal(rng: Py2Random, target: str, then: str, otherwise: str) -> str:
    """At cell p holding a character, p+1 and p+2 zero: run ``then`` if it is ``target``, else ``otherwise``. The
    character is compared by subtracting ``target`` from it (p+1 the counter, p+2 a flag): ``then`` runs at p with
    p, p+1 and p+2 zero; ``otherwise`` at p with the character back in p and p+1, p+2 zero. Each must leave p+1 and
    p+2 zero; p is 0 after."""
    x = ord(target)
    return (">>+<<" + shift_value(rng, -x) + "[" + shift_value(rng, x) + ">>-<<" + otherwise + "[-]]"
            + ">>[-<<" + then + ">>]<<")


# ---- families ----


def text_wrap(rng: Py2Random, shape: str) -> str:
    prefix, suffix = constant_text(rng, 0, 4), constant_text(rng, 0, 3)
    if not prefix and not suffix:
        prefix = constant_text(rng)
    body = choice(rng, (",[.,]", ",[.,]", ">,[>,]<[.<]", ",[" + shift_value(rng, choice(rng, (1, -1, 2, 32, -32))) + ".,]"))
    head, tail = print_text(rng, prefix), print_text(rng, suffix)
    if body.startswith(">"):  # the reversal keeps cell 0 as its left end; the suffix goes past the stored text
        return ">" + head + body + ">[>]" + tail
    return head + body + ">" + tail


def text_map(rng: Py2Random, shape: str) -> str:
    kind = weighted(rng, {"shift": 1, "replace": 2, "drop": 1.5, "flip": 0.5})
    x, y = char(rng), char(rng)
    if kind == "shift":
        body = shift_value(rng, choice(rng, (1, 2, 3, -1, -2, 13, -13))) + "."
    elif kind == "replace":
        body = if_equal(rng, x, print_text(rng, y), ".")
    elif kind == "drop":
        body = if_equal(rng, x, "", ".")
    else:
        body = if_equal(rng, " ", print_text(rng, " "), shift_value(rng, -32) + ".")  # lower case to upper
    return ",[" + body + ",]"


def text_select(rng: Py2Random, shape: str) -> str:
    kind = weighted(rng, {"first": 0.5, "last": 1, "ends": 2, "alternate": 1, "reverse": 0.7, "first-word": 1.5})
    if kind == "first":
        return ",." + choice(rng, ("", ">" + print_text(rng, constant_text(rng, 1, 2))))
    if kind == "last":
        return ",[>,]<."
    if kind == "ends":  # the first, a separator, the last: cell 0 keeps the last character read
        sep = constant_text(rng, 1, 2)
        return ",.>>" + print_text(rng, sep) + "<,[<[-]>[-<+>],]<."
    if kind == "alternate":
        return choice(rng, (",[.,,]", ",,[.,,]"))
    if kind == "reverse":
        return ">,[>,]<[.<]" + choice(rng, ("", ">[>]" + print_text(rng, constant_text(rng, 1, 1))))
    stop = choice(rng, (" ", " ", ","))  # the first word: at the stop, the rest of the input is read and dropped
    return ",[" + if_equal(rng, stop, ",[[-],]", ".") + ",]"


def text_count(rng: Py2Random, shape: str) -> str:
    """Count into cell 1 while reading into cell 0, then print cell 1 as a digit (or as a number)."""
    if rng.random() < 0.5:
        count = ",[>+<[-],]"
    else:
        count = ",[" + if_equal(rng, char(rng) if rng.random() < 0.5 else " ", ">>>+<<<", "") + ",]>>>[-<<+>>]<<<"
    digit = ">" + shift_value(rng, 48) + "."
    return count + (digit if rng.random() < 0.7 else ">" + print_decimal())


def print_decimal() -> str:
    """At cell p holding 0..99, with p+1.. zero: print it as decimal digits (p and the cells after are cleared)."""
    divide = ">++++++++++<[->-[>+>>]>[+[-<+>]>+>>]<<<<<]"  # p+1 = 10 - n%10, p+2 = n%10, p+3 = n/10
    tens = ">>>[>++++++[-<++++++++>]<.[-]]"  # at p+3: print it as a digit if not zero (p+4 the counter)
    ones = ">++++++[-<++++++++>]<.[-]"  # at p+2: n%10 as a digit (p+3 the counter)
    return divide + tens + "<" + ones + "<[-]<"


def text_lines(rng: Py2Random, shape: str) -> str:
    if rng.random() < 0.5:  # the second line: skip to the newline
        return ",----------[[-],----------],[.,]"
    sep = choice(rng, (" ", " ", ",", ", ", "-", "+"))
    joined = if_equal(rng, "\n", print_text(rng, sep), ".")
    return ",[" + joined + ",]"


def text_number(rng: Py2Random, shape: str) -> str:
    """A number read from its digits into cell 0 (value * 10 + digit, digits up to a space or the end), then
    arithmetic, then printed as decimal."""
    read = ">,[" + shift_value(rng, -48) + "<[->++++++++++<]>[-<+>],]<"  # cell 0 = the number (mod 256)
    if shape == "number-pair":  # two digits around a space: their sum
        read = ",>,[-]>,<<" + shift_value(rng, -48) + ">>" + shift_value(rng, -48) + "[-<<+>>]<<"
    change = choice(rng, ("", "+", "++", "+++"))
    return read + change + print_decimal()


@dataclass(frozen=True)
class TextFamily:
    """One rule of the text grammar: its sampler and the shapes of text it reads."""

    name: str
    sample: Callable[[Py2Random, str], str]
    shapes: tuple[str, ...]
    weight: float

    @staticmethod
    def keeps(code: str) -> bool:
        """Every program of a text family is kept as it minimizes (``tasks.grammar.Family.keeps``)."""
        return True


FAMILIES: dict[str, TextFamily] = {f.name: f for f in (
    TextFamily("text-wrap", text_wrap, ("word", "line"), 0.18),
    TextFamily("text-map", text_map, ("word", "line", "chars"), 0.24),
    TextFamily("text-select", text_select, ("word", "line", "chars"), 0.22),
    TextFamily("text-count", text_count, ("word", "line", "chars"), 0.14),
    TextFamily("text-lines", text_lines, ("lines",), 0.1),
    TextFamily("text-number", text_number, ("digits", "number-pair"), 0.12),
)}
"""The text grammar's families by name, each with its share of the text stream (weights sum to 1)."""
