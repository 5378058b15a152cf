"""``Dialect``: the ways BF interpreters differ, which a task carries so that a program is judged where it will run.

docs/semantics.md §1 is PQT's dialect; users run their programs in other interpreters, which differ in a few
documented ways (docs/semantics.md §5):

- **brackets**: ``lenient`` (PQT: an unmatched ``[`` or ``]`` is a one-step no-op) or ``strict`` (a program with
  an unmatched bracket does not run: ``SYNTAX_ERROR``, the compile error of almost every interpreter);
- **left edge**: ``clamp`` (PQT: ``<`` on cell 0 stays there), ``error`` (the run fails, ``LEFT_EDGE``) or
  ``wrap`` (the tape is a ring of ``tape_cells`` cells: ``<`` on cell 0 goes to the last cell, ``>`` on the last
  cell to cell 0);
- **end of input**: what ``,`` writes once the input is exhausted: ``zero`` (PQT), ``max`` (``base - 1``: -1 as
  a byte, 255) or ``unchanged`` (the cell keeps its value);
- **output**: ``exact`` (PQT) or ``rstrip`` (trailing whitespace, the values 9-13 and 32, is ignored in both
  the program's output and the expected one, as judges of text output do).

The cell width (``Task.base``) and the step limit (``Task.max_steps``) are the task's. Under ``clamp`` and
``error`` the tape grows to the right without bound (every ``>`` costs a step, so ``max_steps`` cells suffice).

>>> PQT.brackets, STANDARD.brackets, STANDARD.left_edge
('lenient', 'strict', 'error')
>>> Dialect.parse({"left_edge": "wrap", "tape_cells": 300}).describe()
'strict brackets, left edge wraps (300 cells), end of input 0, exact output'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from synthenv.errors import UserError

BRACKETS = ("lenient", "strict")
LEFT_EDGES = ("clamp", "error", "wrap")
END_OF_INPUT = ("zero", "max", "unchanged")
OUTPUTS = ("exact", "rstrip")

WHITESPACE = (9, 10, 11, 12, 13, 32)
"""The values that ``output="rstrip"`` ignores at the end of an output: ASCII tab, newline, vertical tab, form
feed, carriage return and space (C's ``isspace``)."""

DEFAULT_TAPE_CELLS = 30000
"""The ring's size under ``left_edge="wrap"``: the classic interpreter's 30 000 cells."""
MAX_TAPE_CELLS = 2**20
"""The largest ring: engines allocate ``min(tape_cells, 2 * max_steps)`` cells per running program."""

_CHOICES = {"brackets": BRACKETS, "left_edge": LEFT_EDGES, "end_of_input": END_OF_INPUT, "output": OUTPUTS}


class DialectError(UserError):
    """A dialect that names a value outside its choices."""


@dataclass(frozen=True)
class Dialect:
    """How a task's programs run and are judged (module docstring).

    Attributes:
        brackets: ``"lenient"`` (PQT) or ``"strict"``.
        left_edge: ``"clamp"`` (PQT), ``"error"`` or ``"wrap"``.
        end_of_input: ``"zero"`` (PQT), ``"max"`` (``base - 1``) or ``"unchanged"``.
        output: ``"exact"`` (PQT) or ``"rstrip"`` (trailing whitespace ignored).
        tape_cells: the ring's size under ``left_edge="wrap"`` (1 .. ``MAX_TAPE_CELLS``; ignored otherwise).
    """

    brackets: str = "strict"
    left_edge: str = "error"
    end_of_input: str = "zero"
    output: str = "exact"
    tape_cells: int = DEFAULT_TAPE_CELLS

    def __post_init__(self) -> None:
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                raise DialectError(f"dialect {name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
        cells = self.tape_cells
        if not isinstance(cells, int) or isinstance(cells, bool) or not 1 <= cells <= MAX_TAPE_CELLS:
            raise DialectError(f"dialect tape_cells must be an int in [1, {MAX_TAPE_CELLS}] (the ring's size under "
                               f"left_edge='wrap'), got {cells!r}")

    @property
    def strict(self) -> bool:
        """Whether a program with an unmatched bracket fails (``SYNTAX_ERROR``)."""
        return self.brackets == "strict"

    @property
    def codes(self) -> tuple[int, int, int]:
        """``(left_edge, end_of_input, output)`` as the C enums of ``tables.h`` (indices into the choices)."""
        return (LEFT_EDGES.index(self.left_edge), END_OF_INPUT.index(self.end_of_input), OUTPUTS.index(self.output))

    def ring(self, max_steps: int) -> int:
        """The cells an engine keeps for one running program under ``wrap``: ``min(tape_cells, 2 * max_steps)``.

        A run moves the pointer at most ``max_steps - 1`` cells either way, and positions closer than
        ``2 * max_steps`` apart never meet modulo a larger ring, so a ring of that size behaves exactly as the
        full one (0 for the other left edges: their tape is not a ring)."""
        return min(self.tape_cells, 2 * max_steps) if self.left_edge == "wrap" else 0

    def end_of_input_value(self, base: int) -> int | None:
        """What ``,`` writes at the end of input, or None when the cell keeps its value."""
        return {"zero": 0, "max": base - 1, "unchanged": None}[self.end_of_input]

    def judged(self, output) -> tuple[int, ...]:
        """``output`` as it is compared with the expected one: without trailing whitespace under ``rstrip``.

        >>> Dialect(output="rstrip").judged((72, 105, 10, 32))
        (72, 105)
        """
        output = tuple(output)
        if self.output == "rstrip":
            end = len(output)
            while end and output[end - 1] in WHITESPACE:
                end -= 1
            output = output[:end]
        return output

    def describe(self) -> str:
        """One line for listings."""
        edge = {"clamp": "left edge clamps", "error": "left edge is an error",
                "wrap": f"left edge wraps ({self.tape_cells} cells)"}[self.left_edge]
        end = {"zero": "end of input 0", "max": "end of input base-1", "unchanged": "end of input leaves the cell"}
        out = {"exact": "exact output", "rstrip": "trailing whitespace ignored"}[self.output]
        return f"{self.brackets} brackets, {edge}, {end[self.end_of_input]}, {out}"

    def to_dict(self) -> dict:
        """The fields as a JSON object (``tape_cells`` only under ``wrap``); ``parse`` reads it back."""
        fields = dataclasses.asdict(self)
        if self.left_edge != "wrap":
            del fields["tape_cells"]
        return fields

    @classmethod
    def parse(cls, spec: Dialect | str | Mapping | None) -> Dialect:
        """A dialect from a ``Dialect``, a preset's name (``PRESETS``), or a mapping of fields over the standard
        dialect (None: the standard dialect).

        >>> Dialect.parse("pqt") == PQT, Dialect.parse({"end_of_input": "max"}).end_of_input
        (True, 'max')
        """
        if spec is None:
            return STANDARD
        if isinstance(spec, Dialect):
            return spec
        if isinstance(spec, str):
            if spec not in PRESETS:
                raise DialectError(f"unknown dialect {spec!r}; the presets are {', '.join(map(repr, PRESETS))}, or "
                                   f"give the fields as an object, e.g. {{\"left_edge\": \"clamp\"}}")
            return PRESETS[spec]
        if isinstance(spec, Mapping):
            unknown = sorted(set(spec) - {f.name for f in dataclasses.fields(cls)}, key=str)
            if unknown:
                raise DialectError(f"unknown dialect field(s) {unknown}; the fields are {', '.join(FIELDS)}")
            return cls(**{**dataclasses.asdict(STANDARD), **spec})
        raise DialectError(f"a dialect is a preset name ({', '.join(PRESETS)}) or an object of fields "
                           f"({', '.join(FIELDS)}), got {type(spec).__name__}")


FIELDS = tuple(f.name for f in dataclasses.fields(Dialect))

PQT = Dialect(brackets="lenient", left_edge="clamp", end_of_input="zero", output="exact")
"""PQT's dialect (docs/semantics.md §1): the paper tasks' and the generated PQT-world tasks'."""
STANDARD = Dialect()
"""A standard interpreter's dialect: strict brackets, ``<`` on cell 0 an error, ``,`` at end of input 0, output
compared exactly. Users' tasks (task files, ``Task.from_pairs``) get it unless they say otherwise."""
ESOLANG = Dialect(output="rstrip")
"""EsoLang-Bench's interpreter and judge: the standard dialect, with trailing whitespace ignored."""
PRESETS = {"pqt": PQT, "standard": STANDARD, "esolang": ESOLANG}
"""Named dialects, as task files and ``Dialect.parse`` accept them."""
