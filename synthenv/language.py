"""The BF language as PQT defines it: vocabulary, text <-> token conversion, statuses.

PQT_SPEC §1: agents write programs over a 9-token vocabulary, id 0 = EOS (printed ``_``),
then ``> < + - [ ] . ,`` = 1..8. A program ends at its first EOS; characters outside the
eight commands are ignored when text is converted to tokens.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

import torch

COMMANDS = "><+-[].,"
"""The eight BF commands in token order (token id = index + 1)."""

EOS = 0
"""Token id that ends a program."""

EOS_CHAR = "_"
"""How EOS is printed."""

VOCAB = EOS_CHAR + COMMANDS
"""Printable form of every token id: ``VOCAB[token] -> character``."""

VOCAB_SIZE = len(VOCAB)  # V = 9

# Token ids by name, for code that builds or inspects token tensors.
RIGHT, LEFT, INC, DEC, OPEN, CLOSE, OUTPUT, INPUT = range(1, 9)

_CHAR_TO_TOKEN = {c: i + 1 for i, c in enumerate(COMMANDS)}

MAX_LEN = 4096
"""The longest program (in tokens) that the envs and ``synthenv.score`` accept.

PQT writes 100-token programs; 4096 leaves room for hand-written ones while keeping memory
bounded: the neural compiler attends between bracket slots, quadratic in the length (one
4096-token program takes about 50 MB there, 64 of them about 3 GB), and every env holds its
``[N, L]`` state. A larger value is refused rather than left to exhaust memory."""

DEFAULT_MAX_STEPS = 5000
"""PQT's execution step limit (``MAX_EXECUTION_STEPS`` in the original)."""


class Status(enum.IntEnum):
    """Outcome of running one program on one test case (a bad program is data, not an error).

    ``ABORTED`` marks a case that an engine stopped because another case of the same program
    had already failed: PQT scores such a program as failed whatever the other cases do
    (PQT_SPEC §1, "first failing case fails the program").
    """

    OK = 0
    STEP_LIMIT = 1
    SYNTAX_ERROR = 2
    ABORTED = 3


def text_to_tokens(text: str) -> list[int]:
    """Convert BF source to token ids, dropping characters that are not commands.

    ``_`` (EOS) ends the program: nothing after it is kept.

    >>> text_to_tokens(",[>,]x+_.")
    [8, 5, 1, 8, 6, 3]
    """
    tokens = []
    for char in text:
        if char == EOS_CHAR:
            break
        token = _CHAR_TO_TOKEN.get(char)
        if token is not None:
            tokens.append(token)
    return tokens


def tokens_to_text(tokens: Iterable[int]) -> str:
    """Convert token ids to BF source, stopping at the first EOS.

    >>> tokens_to_text([8, 5, 1, 8, 6, 0, 3])
    ',[>,]'
    """
    chars = []
    for token in tokens:
        token = int(token)
        if token == EOS:
            break
        if not 0 < token < VOCAB_SIZE:
            raise ValueError(f"token ids must be in [0, {VOCAB_SIZE}), got {token!r}")
        chars.append(VOCAB[token])
    return "".join(chars)


def encode_batch(
    programs: Sequence[str], length: int | None = None, device: torch.device | str | None = None
) -> torch.Tensor:
    """Encode BF strings as an EOS-padded ``[N, L]`` int64 token tensor.

    Args:
        programs: BF source strings.
        length: L; defaults to the longest program. Longer programs raise an error.
        device: where the tensor is created.

    >>> encode_batch(["+.", ","]).tolist()
    [[3, 7], [8, 0]]
    """
    if isinstance(programs, str):
        raise TypeError("programs must be a sequence of BF strings, got a single str; wrap it in a list")
    rows = [text_to_tokens(p) for p in programs]
    longest = max((len(r) for r in rows), default=0)
    if length is None:
        length = max(longest, 1)
    elif longest > length:
        raise ValueError(f"a program has {longest} tokens, more than length={length}; raise length")
    out = torch.zeros((len(rows), length), dtype=torch.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.int64)
    return out.to(device) if device is not None else out


def decode_batch(tokens: torch.Tensor) -> list[str]:
    """Decode an ``[N, L]`` token tensor to BF strings (each ends at its first EOS).

    # sync point: copies tokens to the host; for logging and display, not the step path.
    """
    return [tokens_to_text(row) for row in tokens.detach().cpu().tolist()]
