"""The 26 tasks of the PQT paper and its 2 tuning tasks, with the original test sets.

docs/semantics.md §3: every seeded task draws from a fresh ``random.Random(6849275409234)`` with
Python 2's ``randrange``/``shuffle`` (``Py2Random``); ``dedup`` also uses numpy's
version-stable ``RandomState``. Known-code tasks take their expected outputs from a reference
BF program run under PQT's semantics.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from synthenv.dialect import PQT

from .py2random import Py2Random
from .task import Task

SEED = 6849275409234
NUM_CASES = 16


def _pairs(name: str, cases, base: int, **fields) -> Task:
    """A paper or tuning task: PQT's dialect (docs/semantics.md §1)."""
    return Task.from_pairs(name, cases, base, dialect=PQT, **fields)


def _rng() -> Py2Random:
    return Py2Random(SEED)


def reverse() -> Task:
    rand, cases = _rng(), []
    for _ in range(NUM_CASES):
        length = rand.randrange(1, 7)
        x = [rand.randrange(1, 256) for _ in range(length)]
        cases.append((x, x[::-1] + [0]))
    return _pairs("reverse", cases, 256, description="reverse the input, then print 0",
                           solution=",[>,]+[,<.]")  # docs/semantics.md §2 worked check


def remove_char() -> Task:
    rand, cases = _rng(), []
    for _ in range(NUM_CASES):
        length = rand.randrange(1, 7)
        position = rand.randrange(0, length)
        x = [rand.randrange(1, 256) for _ in range(length)]
        x[position] = 1
        cases.append((x, x[:position] + x[position + 1 :] + [0]))
    return _pairs("remove-char", cases, 256, description="echo the input without its 1s, then 0")


def count_char() -> Task:
    cases = [([10, 0], [0]), ([1, 0], [1]), ([1, 1, 0], [2]), ([9, 4, 19, 11, 5, 0], [0]), ([24, 11, 26, 1, 15, 0], [1])]
    rand, others = _rng(), list(range(2, 27))
    for _ in range(NUM_CASES - 5):
        length = rand.randrange(2, 7)
        count = rand.randrange(0, 7)
        x = [1] * count + [0] * (length - count)
        rand.shuffle(x)
        x = [v if v else others[rand.randrange(len(others))] for v in x]
        cases.append((x, [count]))
    return _pairs("count-char", cases, 27, description="count the 1s in the input")


def add() -> Task:
    pairs = [(4, 0), (0, 5), (1, 2), (67, 21), (55, 56), (128, 33), (221, 251), (130, 127), (255, 1)]
    cases = [([a, b], [(a + b) % 256, 0]) for a, b in pairs]
    return _pairs("add", cases, 256, description="add two numbers mod 256, then print 0",
                           solution=",>,[<+>-]<.>.")


def bool_logic() -> Task:
    def f(x: int, y: int, z: int) -> int:
        return int((x and not z) or (not y and not z) or (not x and y and z))

    cases = [([x, y, z], [f(x, y, z)]) for x, y, z in itertools.product(range(2), repeat=3)]
    return _pairs("bool-logic", cases, 2, description="a fixed boolean function of 3 bits")


def print_hello() -> Task:
    return _pairs("print-hello", [([], [8, 5, 12, 12, 15])], 27, description="print 'hello' (a=1)",
                           solution="++++++++.---.+++++++..+++.")


def reverse_tune() -> Task:
    cases = [
        ([7, 0], [7, 0]),
        ([6, 2, 0], [2, 6, 0]),
        ([5, 1, 10, 0], [10, 1, 5, 0]),
        ([8, 6, 5, 15, 0], [15, 5, 6, 8, 0]),
        ([10, 12, 5, 2, 7, 0], [7, 2, 5, 12, 10, 0]),
    ]
    return _pairs("reverse-tune", cases, 256, description="tuning task: reverse, 5 fixed cases")


def remove_char_tune() -> Task:
    cases = [
        ([1, 0], [0]),
        ([20, 1, 0], [20, 0]),
        ([1, 13, 0], [13, 0]),
        ([6, 1, 17, 0], [6, 17, 0]),
        ([1, 11, 24, 0], [11, 24, 0]),
        ([2, 16, 21, 1, 0], [2, 16, 21, 0]),
        ([18, 1, 12, 26, 7, 0], [18, 12, 26, 7, 0]),
        ([9, 10, 22, 1, 4, 0], [9, 10, 22, 4, 0]),
    ]
    return _pairs("remove-char-tune", cases, 27, description="tuning task: remove-char, 8 fixed cases")


def dflt(min_length: int = 1, max_length: int = 6, base: int = 256) -> Callable[[Py2Random], list[int]]:
    """PQT's default input generator: a list of ``randrange(base)`` of random length."""

    def make_input(rand: Py2Random) -> list[int]:
        length = rand.randrange(min_length, max_length + 1)
        return [rand.randrange(base) for _ in range(length)]

    return make_input


def echo_second_input(rand: Py2Random) -> list[int]:
    x = [rand.randrange(256) for _ in range(rand.randrange(1, 6))]
    y = [rand.randrange(256) for _ in range(rand.randrange(1, 6))]
    return x + [0] + y + [0]


def echo_nth_input(rand: Py2Random) -> list[int]:
    k = rand.randrange(1, 7)
    n = rand.randrange(1, k + 1)
    x: list[int] = []
    for _ in range(k):
        x += [rand.randrange(256) for _ in range(rand.randrange(0, 4))] + [0]
    return [n] + x


def substring_input(rand: Py2Random) -> list[int]:
    length = rand.randrange(2, 16)
    i, j = sorted([rand.randrange(length), rand.randrange(length)])
    return [i, j - i] + [rand.randrange(256) for _ in range(length)] + [0]


def divide_2_input(rand: Py2Random) -> list[int]:
    return [rand.randrange(256)]


def dedup_input(rand: Py2Random) -> list[int]:
    np_random = np.random.RandomState(rand.randrange(2147483647))
    num_unique = rand.randrange(1, 5)
    unique = np_random.choice(6, num_unique, replace=False) + 1
    return [int(v) for v in unique for _ in range(rand.randrange(1, 5))] + [0]


# name -> (reference program, input generator, description); docs/semantics.md §3, "known-code" tasks.
KNOWN_CODE: dict[str, tuple[str, Callable[[Py2Random], list[int]], str]] = {
    "echo-twice": (">,.[>,.]<[<]>[.>].", dflt(), "echo the input twice"),
    "echo-thrice": (">,.[>,.]<[<]>[.>].<[<]>[.>].", dflt(), "echo the input three times"),
    "copy-reverse": (">,.[>,.]<[.<].>[.>].", dflt(), "echo forwards, backwards, forwards"),
    "zero-cascade": (",[.>[->+>.<<]>+[-<+>]<<,]", dflt(), "print the k-th value with k zeros after it"),
    "cascade": (",>>+<<[>>[-<+>]<[->+<<.>]>+<<,].", dflt(base=20), "print the k-th value k times"),
    "shift-left": (",>,[.,]<.,.", dflt(), "rotate the input left"),
    "shift-right": (">,[>,]<.[-]<[<]>[.>].", dflt(), "rotate the input right"),
    "riffle": (">,[>,]<[.[-]<[<]>.[-]>[>]<]", dflt(max_length=8, base=20), "interleave from both ends"),
    "unriffle": (">,[>,[.[-]],]<[.<].", dflt(max_length=8, base=20), "inverse of riffle"),
    "middle-char": (">,[>,]<<[[>]<[,<[<]>,>[>]][>]<<]>.", dflt(max_length=10), "the middle value, or 0"),
    "remove-last": (",>,[[<.[-]>[-<+>]],].", dflt(base=20), "echo without the last value"),
    "remove-last-two": (",>,>,[[<<.[-]>[-<+>]>[-<+>]],].", dflt(base=10), "echo without the last two values"),
    "echo-alternating": (">,[.,>,]<<[<]>[.>].", dflt(max_length=8, base=20), "even-indexed values, then odd"),
    "echo-half": (
        ">>+>,[[<]>+[>],]<[<]>-[-[-<<+>]<[>]>]<<[->+<]>[[>]>.,<+[<]>-].",
        dflt(max_length=9, base=20),
        "echo the first half of the input",
    ),
    "length": (">+>,[[<]>+[>],]<[<]>-.", dflt(max_length=14), "print the input's length"),
    "echo-second-seq": (",[,],[.,].", echo_second_input, "echo the second 0-terminated sequence"),
    "echo-nth-seq": (",-[->,[,]<],[.,].", echo_nth_input, "echo the n-th 0-terminated sequence"),
    "substring": (">,<,>[->,<]>,<<[->>.,<<]", substring_input, "echo input[i:i+n]"),
    "divide-2": (",[-[->>+<]>[<]<]>>.", divide_2_input, "floor-divide by 2"),
    "dedup": (">>,.[[-<+<+>>],[-<->]<[[-<->]<.>]<[->>+<<]>>]", dedup_input, "remove adjacent duplicates"),
}


def known_code(name: str) -> Callable[[], Task]:
    solution, make_input, description = KNOWN_CODE[name]

    def build() -> Task:
        return Task.from_program(
            name, solution, make_input, NUM_CASES, 256, seed=SEED, description=description, rng=Py2Random,
            dialect=PQT)

    return build


HAND_DEFINED: dict[str, Callable[[], Task]] = {
    "reverse": reverse,
    "remove-char": remove_char,
    "count-char": count_char,
    "add": add,
    "bool-logic": bool_logic,
    "print-hello": print_hello,
}

PAPER_TASKS = (
    "reverse remove-char count-char add bool-logic print-hello echo-twice echo-thrice copy-reverse "
    "zero-cascade cascade shift-left shift-right riffle unriffle middle-char remove-last remove-last-two "
    "echo-alternating echo-half length echo-second-seq echo-nth-seq substring divide-2 dedup"
).split()
"""The 26 tasks of the PQT paper, in the paper's order."""

TUNING_TASKS = ("reverse-tune", "remove-char-tune")

BUILDERS: dict[str, Callable[[], Task]] = {
    **HAND_DEFINED,
    **{name: known_code(name) for name in KNOWN_CODE},
    "reverse-tune": reverse_tune,
    "remove-char-tune": remove_char_tune,
}
