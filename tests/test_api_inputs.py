"""``synthenv.score`` takes every documented program form exactly, refuses the rest clearly, and
``encode_batch`` (byte tables) equals the one-string-at-a-time ``text_to_tokens``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import synthenv
from synthenv.language import COMMANDS, MAX_LEN, encode_batch, text_to_tokens

PROGRAMS = [",[>,]+[,<.]", ",[>,]<[.<]", "+.", "", ",[.,]"]


def old_encode_batch(programs, length=None):
    """The previous implementation: ``text_to_tokens`` per program, padded with EOS."""
    rows = [text_to_tokens(p) for p in programs]
    length = length or max([len(r) for r in rows] + [1])
    out = torch.zeros((len(rows), length), dtype=torch.int64)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.tensor(row, dtype=torch.int64)
    return out


@pytest.fixture(scope="module")
def expected():
    return synthenv.score(PROGRAMS, "reverse").rewards.tolist()


def test_the_reference_rewards_are_not_all_zero(expected):
    assert expected[0] == 1.0 and len(set(expected)) >= 3


@pytest.mark.parametrize("form", ["tensor", "numpy", "numpy-int8", "id-lists", "id-tuples", "bytes", "mixed-text",
                                  "numpy-str", "tuple-of-str"])
def test_every_accepted_form_scores_like_the_strings(expected, form):
    tokens = encode_batch(PROGRAMS)
    rows = [text_to_tokens(p) for p in PROGRAMS]
    programs = {
        "tensor": tokens,
        "numpy": tokens.numpy(),
        "numpy-int8": tokens.numpy().astype(np.int8),
        "id-lists": rows,  # ragged: padded with EOS
        "id-tuples": [tuple(r) for r in rows],
        "bytes": [p.encode() for p in PROGRAMS],
        "mixed-text": [p.encode() if i % 2 else p for i, p in enumerate(PROGRAMS)],
        "numpy-str": np.array(PROGRAMS),
        "tuple-of-str": tuple(PROGRAMS),
    }[form]
    assert synthenv.score(programs, "reverse").rewards.tolist() == expected


def test_a_numpy_array_is_copied():
    array = encode_batch([",[>,]+[,<.]"]).numpy().copy()
    tokens = synthenv.api.as_tokens(array)
    array[:] = 0
    assert tokens[0, 0].item() == 8


@pytest.mark.parametrize(("programs", "error", "message"), [
    (None, TypeError, r"programs must be BF strings \(a list of str or bytes\) or token ids .*got NoneType"),
    (b"+.", TypeError, "got one bytes; wrap it"),
    (["+.", 5], TypeError, r"programs\[1\] = 5 \(int\) is not BF text"),
    (["+.", None], TypeError, r"programs\[1\] = None \(NoneType\) is not BF text"),
    ([1.5, 2.5], TypeError, r"programs\[0\] = 1.5 \(float\)"),
    ([[3, 7], "+."], TypeError, r"programs\[0\] = \[3, 7\] \(list\) is not BF text"),
    ([[3, None]], TypeError, r"token-id lists must hold ints, got None"),
    ([[3, 1.0]], TypeError, r"token-id lists must hold ints, got 1.0 \(float\)"),
    ([[True, 3]], TypeError, r"got True \(bool\)"),
    ([[3, 2**70]], ValueError, r"token ids must be in \[0, 9\), got 1180591620717411303424"),
    ([[3, 9]], ValueError, r"token ids must be in \[0, 9\), got 9"),
    (3, TypeError, "got int"),
    ({"+."}, TypeError, r"got set; pass a list"),
    ((p for p in ["+."]), TypeError, r"got generator; pass a list"),
    (np.zeros((2, 3)), TypeError, "numpy array of programs must hold integer token ids.*float64"),
    (np.array([3, 7]), ValueError, r"\[N, L\] token tensor, got shape \(2,\); a single program"),
    (torch.empty(2, 3, device="meta", dtype=torch.long), ValueError, "'meta' device.*create it on 'cpu'"),
    (torch.zeros((1, MAX_LEN + 1), dtype=torch.long), ValueError, "4097 tokens, more than the 4096"),
    (["+" * (MAX_LEN + 1)], ValueError, "4097 tokens, more than the 4096"),
])
def test_bad_programs_are_clear_errors(programs, error, message):
    with pytest.raises(error, match=message):
        synthenv.score(programs, "reverse")


def test_bad_devices_are_clear_errors():
    with pytest.raises(ValueError, match="holds no data"):
        synthenv.score(["+."], "reverse", device="meta")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="'cuda' needs CUDA"):
            synthenv.score(["+."], "reverse", device="cuda")


TEXT = st.text(alphabet=st.sampled_from(list(COMMANDS + "_ xé→\x00\n") + ["\U0001f600", "\ud800"]), max_size=40)


@given(st.lists(TEXT | st.text(max_size=20), max_size=8))
def test_encode_batch_equals_text_to_tokens(programs):
    assert torch.equal(encode_batch(programs), old_encode_batch(programs))
    as_bytes = [p.encode("utf-8", "surrogatepass") for p in programs]
    assert torch.equal(encode_batch(as_bytes), old_encode_batch(programs))  # non-ASCII bytes are ignored too


def test_encode_batch_edges():
    assert encode_batch([]).shape == (0, 1)
    assert encode_batch(["", "x"]).tolist() == [[0], [0]]
    assert encode_batch(["+_" + "+" * 500]).tolist() == [[3]]  # EOS ends the program; the length is 1
    assert encode_batch(["+."], 4).tolist() == [[3, 7, 0, 0]]
    with pytest.raises(ValueError, match="more than length=1"):
        encode_batch(["+."], 1)
    with pytest.raises(TypeError, match="single str; wrap it"):
        encode_batch("+.")
    with pytest.raises(TypeError, match=r"programs\[0\] = 3 \(int\)"):
        encode_batch([3])
    with pytest.raises(TypeError, match="got NoneType"):
        encode_batch(None)
