"""Shorter programs that still solve a task: ``simplify`` (rewrites that cannot change what a program prints),
``minimize`` (deletions while it still solves the task) and ``minimal_equivalent`` (what a person reads beside an
agent's program).

>>> minimize(",>,<>[<+>-]<.", Task("t", (((1, 2), (3,)), ((4, 1), (5,))), dialect="pqt"))
',>,[<+>-]<.'
"""

from __future__ import annotations

import re

from synthenv import reference
from synthenv.reference import match_brackets

from .runner import runner, solved
from .task import Task


def simplify(code: str) -> str:
    """``code`` without what cannot change its output: ``+-``, ``-+``, ``><``, ``<`` at the start (``<``
    clamps at cell 0), adds just before ``[-]``, loops that start where the cell is 0 (at the start, or
    right after a loop), and trailing code that prints nothing. It prints what ``code`` prints, in fewer
    steps; only a trailing loop that never ends is lost (the generator checks the simplified program).

    >>> simplify("<[.]+-,>.<[-][>]+")
    ',>.'
    """
    previous = None
    while code != previous:
        previous = code
        code = re.sub(r"\+-|-\+|><", "", code).lstrip("<")
        code = re.sub(r"[+-]+(?=\[[-+]\])", "", code)
        code = _drop_dead_loops(code)
        code = _drop_silent_tail(code)
    return code


def _drop_dead_loops(code: str) -> str:
    partner = _partners(code)
    for i, c in enumerate(code):
        if c == "[" and i in partner and (i == 0 or (code[i - 1] == "]" and i - 1 in partner)):
            return code[:i] + code[partner[i] + 1:]
    return code


def _drop_silent_tail(code: str) -> str:
    """Drop top-level commands and loops without a ``.`` from the end."""
    partner = _partners(code)
    while code:
        start = partner.get(len(code) - 1, len(code) - 1) if code[-1] == "]" else len(code) - 1
        if "." in code[start:] or code[-1] == "[":
            return code
        code = code[:start]
    return code


def _partners(code: str) -> dict[int, int]:
    return match_brackets(code)[0]


def minimize(program: str, task: Task) -> str:
    """``program`` with commands, loops and bracket pairs deleted while it still solves ``task``: each round
    keeps the shortest variant that solves it (the first such of equal length), until none does.

    >>> task = Task("t", (((1, 2), (3,)), ((4, 1), (5,))), dialect="pqt")
    >>> minimize(",>,<>[<+>-]<.", task)
    ',>,[<+>-]<.'
    """
    run = runner()
    while True:
        variants = deletions(program)
        if not variants:
            return program
        found = solved(run.run(run.compile(variants), task, None, early_abort=True), task)  # [N]
        kept = [v for v, ok in zip(variants, found) if ok]
        if not kept:
            return program
        program = min(kept, key=len)


def minimal_equivalent(program: str, task: Task) -> str:
    """``minimize(program, task)`` without its unmatched brackets (no-ops that agents' programs are full of),
    confirmed case by case by the reference interpreter (``synthenv.reference``): a shortest-by-deletion
    program a person can read beside the one an agent wrote. ``program`` itself when it does not solve
    ``task`` or the shorter one does not pass the reference check.

    >>> task = Task("t", (((1, 2), (3,)), ((4, 1), (5,))), dialect="pqt")
    >>> minimal_equivalent(",>,<>[<+>-]<.>[-]", task)
    ',>,[<+>-]<.'
    >>> minimal_equivalent("]],>,][<+>-]<.[", task)
    ',>,[<+>-]<.'
    """
    def solves(code: str) -> bool:
        return reference.solves(code, task)

    if not solves(program):
        return program
    shorter = minimize(program, task)
    matched = _partners(shorter)
    bare = "".join(c for i, c in enumerate(shorter) if c not in "[]" or i in matched)
    if bare != shorter and solves(bare):
        shorter = minimize(bare, task)
    return shorter if solves(shorter) else program


def deletions(code: str) -> list[str]:
    """``code`` less one command, one loop, or one loop's brackets; each variant once, in position order."""
    partner, variants = _partners(code), {}
    for i, c in enumerate(code):
        if c == "[" and i in partner:
            j = partner[i]
            variants[code[:i] + code[j + 1:]] = None
            variants[code[:i] + code[i + 1: j] + code[j + 1:]] = None
        elif c not in "[]":
            variants[code[:i] + code[i + 1:]] = None
            if code[i + 1: i + 2] not in ("", "[", "]"):  # two neighbours, e.g. `<>`
                variants[code[:i] + code[i + 2:]] = None
    return list(variants)
