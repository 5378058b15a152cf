"""Hypothesis strategies for BF programs, weighted towards loops and nesting (where compilers and engines
go wrong: bracket matching, counted loops, step counts)."""

from __future__ import annotations

from hypothesis import strategies as st

SIMPLE = st.sampled_from(list("><+-.,"))


def _block(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    loop = children.map(lambda body: "[" + body + "]")
    stray = st.sampled_from(["[", "]"])  # unmatched brackets: PQT no-ops
    return st.lists(st.one_of(SIMPLE, SIMPLE, loop, loop, stray), max_size=8).map("".join)


loop_heavy_programs = st.recursive(st.lists(SIMPLE, max_size=6).map("".join), _block, max_leaves=40).map(
    lambda p: p[:100]
)
"""Programs of up to 100 commands with nested loops, idioms and stray brackets."""

uniform_programs = st.text(alphabet="><+-[].,", min_size=0, max_size=100)
"""Uniform programs over the 8 commands."""

idiom_programs = st.lists(
    st.sampled_from(["[-]", "[+]", "[->+<]", "[-<+>]", "[>]", "[<]", "[->++<]", "[--]", "[]", "[.]", "[<>]",
                     "[-,]", ",", ".", "+", "-", ">", "<", "+++", "[>+<-]", "[->>+<<]", "]", "["]),
    max_size=20,
).map(lambda parts: "".join(parts)[:100])
"""Programs stitched from loop idioms (clear, move, scan, hang) and stray brackets."""
