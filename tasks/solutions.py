"""A known BF solution of each of the 26 paper tasks and the 2 tuning tasks.

The known-code tasks' solutions are their reference programs (``pqt.KNOWN_CODE``, docs/semantics.md §3).
The hand-defined tasks have none in PQT; the programs below are written for them here, and
tests/test_tasks_generated.py checks each against its task with the reference interpreter. They
exist so that ``synthenv.tasks.generated`` can drop generated tasks that a paper or tuning task's
test set cannot tell apart from it (and as a check that every such task is solvable at all).

>>> from synthenv import reference, tasks
>>> task = tasks.get("count-char")
>>> reference.score_program(KNOWN_SOLUTIONS["count-char"], task.cases, task.base).solved
True
"""

from __future__ import annotations

from .pqt import KNOWN_CODE, PAPER_TASKS, TUNING_TASKS

HAND_WRITTEN: dict[str, str] = {
    # docs/semantics.md §2's worked check: read to the terminating 0, set it to 1, then walk back printing; at cell 0
    # `,` reads 0 (input exhausted) and `<` stays put (clamp), so the last print is the 0.
    "reverse": ",[>,]+[,<.]",
    # Per value v: v-1; if that is nonzero, restore, print and clear. Then read on; print the final 0.
    "remove-char": ",[-[+.[-]],].",
    # Per value v: if v-1 is nonzero, clear it and take one off the counter; then add one to the counter.
    "count-char": ",[-[[-]>-<]>+<,]>.",
    "add": ",>,[<+>-]<.>.",
    # Base 2 (`+` and `-` both flip a bit): f(x, y, z) = 1 xor z xor (not x and y), read off the truth table
    # (z = 0: x or not y; z = 1: not x and y). Cells x, y, z, out: out = 1; out ^= z; if x: y = 0; out ^= y.
    "bool-logic": ",>,>,>+<[->+<]<<[->[-]<]>[->>+<<]>>.",
    "print-hello": "++++++++.---.+++++++..+++.",
    "reverse-tune": ",[>,]+[,<.]",
    "remove-char-tune": ",[-[+.[-]],].",
}
"""Solutions of the hand-defined tasks, which PQT gives no reference program."""

KNOWN_SOLUTIONS: dict[str, str] = {
    name: HAND_WRITTEN[name] if name in HAND_WRITTEN else KNOWN_CODE[name][0]
    for name in (*PAPER_TASKS, *TUNING_TASKS)
}
"""Task name -> a program that solves it, for every paper and tuning task, in ``names()`` order."""
