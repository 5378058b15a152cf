"""An independent interpreter of the standard BF dialect, written for the tests and sharing no code with synthenv.

It is what a user's interpreter does (EsoLang-Bench's among them): a program with an unmatched bracket is
refused before it runs, moving left of cell 0 is an error, ``,`` past the input reads 0, cells wrap at 256, the
tape grows to the right. A run is stopped after ``max_steps`` commands. ``passes`` judges the output as text judges
do when asked to (trailing whitespace ignored) or exactly. The tests use it to check that a program synthenv
reports as solving a strict task is accepted by an interpreter that is not synthenv's.
"""

from __future__ import annotations


class Refused(Exception):
    """The program does not run: unmatched brackets, a move left of cell 0, or too many steps."""


def jump_table(code: str) -> dict[int, int]:
    table, opened = {}, []
    for i, c in enumerate(code):
        if c == "[":
            opened.append(i)
        elif c == "]":
            if not opened:
                raise Refused(f"']' at {i} closes nothing")
            j = opened.pop()
            table[i], table[j] = j, i
    if opened:
        raise Refused(f"'[' at {opened[-1]} is never closed")
    return table


def execute(code: str, data: bytes, max_steps: int = 100_000, cell_size: int = 256) -> bytes:
    code = "".join(c for c in code if c in "<>+-[].,")
    jumps = jump_table(code)
    tape, head, pc, pending, printed, count = [0], 0, 0, list(data), bytearray(), 0
    while pc < len(code):
        count += 1
        if count > max_steps:
            raise Refused("too many steps")
        c = code[pc]
        if c == ">":
            head += 1
            if head == len(tape):
                tape.append(0)
        elif c == "<":
            if head == 0:
                raise Refused("moved left of cell 0")
            head -= 1
        elif c in "+-":
            tape[head] = (tape[head] + (1 if c == "+" else cell_size - 1)) % cell_size
        elif c == ".":
            printed.append(tape[head] % 256)
        elif c == ",":
            tape[head] = pending.pop(0) if pending else 0
        elif (c == "[" and tape[head] == 0) or (c == "]" and tape[head] != 0):
            pc = jumps[pc]
        pc += 1
    return bytes(printed)


def passes(code: str, cases, ignore_trailing_whitespace: bool = False, max_steps: int = 100_000) -> bool:
    """Whether ``code`` prints every case's expected output (``cases``: pairs of byte-valued int sequences)."""
    for inputs, expected in cases:
        try:
            got = execute(code, bytes(inputs), max_steps)
        except Refused:
            return False
        want = bytes(expected)
        if ignore_trailing_whitespace:
            got, want = got.rstrip(b" \t\n\r\x0b\x0c"), want.rstrip(b" \t\n\r\x0b\x0c")
        if got != want:
            return False
    return True
