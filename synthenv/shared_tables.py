"""``tables.h``: the enums and lookup tables that synthenv's C and CUDA code shares with Python.

They are defined once, in Python, and generated into ``synthenv/tables.h`` here, never retyped
by hand: op codes (``synthenv.ir.Op``), statuses (``synthenv.language.Status``), token ids, the
dialect codes (``synthenv.dialect``) and the traditional compiler's lexing tables. tests/test_native_build.py fails when the file and the
Python sources differ; ``write_tables_header()`` rewrites it.

>>> "enum { OP_" in tables_header()
True
"""

from __future__ import annotations

from pathlib import Path

TABLES_HEADER = Path(__file__).resolve().with_name("tables.h")
"""The generated header (``#include "tables.h"``, through ``common.h``)."""


def tables_header() -> str:
    """The text of ``tables.h``, generated from the Python enums and tables.

    Op codes (``synthenv.ir.Op``), statuses (``synthenv.language.Status``), token ids
    (``synthenv.language``), and the traditional compiler's token classes and lexing tables
    (``compilers/traditional.py``). ``write_tables_header()`` rewrites the file.
    """
    from synthenv import dialect, language
    from synthenv.compilers import traditional
    from synthenv.ir import Op

    def enum(prefix: str, items) -> str:
        return "enum { " + ", ".join(f"{prefix}{name} = {int(value)}" for name, value in items) + " };"

    def table(name: str, values) -> str:
        return f"static const signed char {name}[{len(values)}] = {{{', '.join(str(int(v)) for v in values)}}};"

    tokens = [("EOS", language.EOS), ("RIGHT", language.RIGHT), ("LEFT", language.LEFT), ("INC", language.INC),
              ("DEC", language.DEC), ("OPEN", language.OPEN), ("CLOSE", language.CLOSE), ("OUT", language.OUTPUT),
              ("IN", language.INPUT)]
    classes = [(name, getattr(traditional, name)) for name in traditional.CLASS_NAMES]
    io = [int(c in (traditional.OUT, traditional.IN)) for c in traditional.TOKEN_CLASS]
    lines = [
        "/* Generated from the Python sources by synthenv.shared_tables.tables_header(); do not edit.",
        " * Regenerate with synthenv.shared_tables.write_tables_header(); tests/test_native_build.py fails when",
        " * this file and the Python enums or tables differ. */",
        "#ifndef SYNTHENV_TABLES_H",
        "#define SYNTHENV_TABLES_H",
        "/* synthenv.ir.Op */",
        enum("OP_", [(op.name, op.value) for op in Op]),
        "/* synthenv.language.Status */",
        enum("ST_", [(status.name, status.value) for status in language.Status]),
        "/* synthenv.language token ids */",
        enum("T_", tokens),
        "/* synthenv.dialect: Dialect.codes (left edge, end of input, output comparison) and its WHITESPACE */",
        enum("EDGE_", [(name.upper(), i) for i, name in enumerate(dialect.LEFT_EDGES)]),
        enum("EOF_", [(name.upper(), i) for i, name in enumerate(dialect.END_OF_INPUT)]),
        enum("CMP_", [(name.upper(), i) for i, name in enumerate(dialect.OUTPUTS)]),
        "#define SYN_IS_SPACE(v) (" + " || ".join(f"(v) == {v}" for v in dialect.WHITESPACE) + ")",
        "#ifdef SYNTHENV_LEX_TABLES",
        "/* compilers/traditional.py: token classes and the lexing tables (indexed by token id) */",
        enum("C_", classes),
        table("syn_token_class", traditional.TOKEN_CLASS),
        table("syn_move_delta", traditional.MOVE_DELTA),
        table("syn_add_delta", traditional.ADD_DELTA),
        table("syn_token_io", io),
        table("syn_class_op", [int(traditional.CLASS_TO_OP[c]) for c in range(len(classes))]),
        "#endif /* SYNTHENV_LEX_TABLES */",
        "#endif /* SYNTHENV_TABLES_H */",
        "",
    ]
    return "\n".join(lines)


def write_tables_header() -> None:
    """Rewrite ``tables.h`` from the Python sources (after changing an enum or lexing table)."""
    TABLES_HEADER.write_text(tables_header())
