"""The BF language as PQT defines it: vocabulary, text <-> token conversion, statuses.

docs/semantics.md §1: agents write programs over a 9-token vocabulary, id 0 = EOS (printed ``_``),
then ``> < + - [ ] . ,`` = 1..8. A program ends at its first EOS; characters outside the
eight commands are ignored when text is converted to tokens.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

import numpy as np
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

# encode_batch's byte tables: '_' -> 0 (EOS), the commands -> 1..8, every other byte deleted.
_TO_TOKEN_BYTES = bytes.maketrans(VOCAB.encode("ascii"), bytes(range(VOCAB_SIZE)))
_NOT_TOKENS = bytes(sorted(set(range(256)) - set(VOCAB.encode("ascii"))))

DEFAULT_MAX_LEN = 100
"""The default program length L of the envs and agents: PQT writes programs of 100 tokens."""

TEXT_MAX_LEN = 256
"""The agents' default program length on a text task: printing text takes a dozen commands a character."""

MAX_LEN = 4096
"""The longest program (in tokens) that the envs and ``synthenv.score`` accept.

PQT writes 100-token programs; 4096 leaves room for hand-written ones while keeping memory
bounded: the neural compiler attends between bracket slots, quadratic in the length (one
4096-token program takes about 50 MB there, 64 of them about 3 GB), and every env holds its
``[N, L]`` state. A larger value is refused rather than left to exhaust memory."""

DEFAULT_MAX_STEPS = 5000
"""PQT's execution step limit (``MAX_EXECUTION_STEPS`` in the original)."""


def canonical_programs(actions: torch.Tensor) -> torch.Tensor:
    """``[N, L]`` int64 programs as the engines read them: each row's tokens up to its first EOS, EOS after.

    A token id outside ``[0, VOCAB_SIZE)`` ends its program like EOS (the envs' unchecked actions).
    Each row's end is the ``argmax`` of its end marks (torch returns the first maximum). Tensor ops
    on any device; program mode's env reads int64 CPU actions with one C pass instead, with the same
    values (tests/test_env_errors.py).

    >>> canonical_programs(torch.tensor([[3, 0, 5], [1, 9, 2], [4, 4, 4]])).tolist()
    [[3, 0, 0], [1, 0, 0], [4, 4, 4]]
    """
    ends = (actions <= EOS) | (actions >= VOCAB_SIZE)  # [N, L]
    length = actions.shape[1]
    first = torch.where(ends.any(1), ends.to(torch.uint8).argmax(1), length)  # [N] tokens before the end
    alive = torch.arange(length, device=actions.device) < first[:, None]
    return torch.where(alive, actions.long(), EOS)


class Status(enum.IntEnum):
    """Outcome of running one program on one test case (a bad program is data, not an error).

    ``ABORTED`` marks a case that an engine stopped because another case of the same program
    had already failed: PQT scores such a program as failed whatever the other cases do
    (docs/semantics.md §1, "Outcomes": the first failing case fails the program). ``LEFT_EDGE``:
    ``<`` on cell 0 under a dialect whose left edge is an error (``synthenv.dialect``).
    """

    OK = 0
    STEP_LIMIT = 1
    SYNTAX_ERROR = 2
    ABORTED = 3
    LEFT_EDGE = 4


FAILURES = (Status.STEP_LIMIT, Status.SYNTAX_ERROR, Status.LEFT_EDGE)
"""The statuses that fail a program (``ABORTED`` only follows a failure)."""


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
    programs: Sequence[str | bytes], length: int | None = None, device: torch.device | str | None = None,
    max_length: int | None = None,
) -> torch.Tensor:
    """Encode BF strings as an EOS-padded ``[N, L]`` int64 token tensor.

    Exactly ``text_to_tokens`` per program (characters other than the eight commands are
    ignored, non-ASCII ones included; ``_`` ends a program), done with byte tables: each
    program is encoded to Latin-1 (a character outside it becomes ``?``, also ignored),
    translated to token ids by ``bytes.translate`` and laid into the batch by numpy.

    Args:
        programs: BF source, as ``str`` or ``bytes`` (one byte per character).
        length: L; defaults to the longest program. Longer programs raise an error.
        device: where the tensor is created.
        max_length: with ``length`` None, the most tokens a program may have (checked before the batch is
            allocated: ``synthenv.score`` passes ``MAX_LEN``).

    >>> encode_batch(["+.", ","]).tolist()
    [[3, 7], [8, 0]]
    >>> encode_batch([b",[.,]", "+ é _ +"]).tolist()
    [[8, 5, 7, 8, 6], [3, 0, 0, 0, 0]]
    """
    if isinstance(programs, (str, bytes, bytearray)):
        raise TypeError(f"programs must be a sequence of BF strings, got a single {type(programs).__name__}; "
                        "wrap it in a list")
    if not isinstance(programs, Iterable):
        raise TypeError(f"programs must be a sequence of BF strings (str or bytes), got {type(programs).__name__}")
    try:  # the common case: every program a str
        rows = [p.encode("latin-1", "replace").translate(_TO_TOKEN_BYTES, _NOT_TOKENS) for p in programs]
    except (AttributeError, TypeError):  # bytes, or something that is not a program at all
        rows = [_token_bytes(index, p) for index, p in enumerate(programs)]
    joined = b"".join(rows)
    if 0 in joined:  # an EOS ('_'): nothing after it is kept
        rows = [row.partition(b"\0")[0] for row in rows]
        joined = b"".join(rows)
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))  # [N]
    longest = int(lengths.max(initial=0))
    if length is None:
        if max_length is not None and longest > max_length:
            raise ValueError(f"programs have {longest} tokens, more than the {max_length} that synthenv accepts "
                             "(synthenv.language.MAX_LEN, to bound memory); shorten them")
        length = max(longest, 1)
    elif longest > length:
        raise ValueError(f"a program has {longest} tokens, more than length={length}; raise length")
    out = np.zeros((len(rows), length), dtype=np.int64)  # [N, L]
    out[np.arange(length) < lengths[:, None]] = np.frombuffer(joined, dtype=np.uint8)  # row-major = join order
    tokens = torch.from_numpy(out)
    return tokens.to(device) if device is not None else tokens


def _token_bytes(index: int, program: object) -> bytes:
    """One program's token ids as bytes (``encode_batch``'s general path)."""
    if isinstance(program, str):
        raw = program.encode("latin-1", "replace")
    elif isinstance(program, (bytes, bytearray)):
        raw = bytes(program)
    else:
        raise TypeError(f"programs[{index}] = {program!r:.40} ({type(program).__name__}) is not BF text; each "
                        "program must be a str or bytes")
    return raw.translate(_TO_TOKEN_BYTES, _NOT_TOKENS)


def decode_batch(tokens: torch.Tensor) -> list[str]:
    """Decode an ``[N, L]`` token tensor to BF strings (each ends at its first EOS).

    # sync point: copies tokens to the host; for logging and display, not the step path.
    """
    return [tokens_to_text(row) for row in tokens.detach().cpu().tolist()]
