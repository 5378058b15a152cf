"""The public batch API ``synthenv.score`` and the registries' error messages."""

from __future__ import annotations

import pytest
import torch

import synthenv
from synthenv import compilers, engines
from synthenv.language import Status, encode_batch
from synthenv.registry import UnknownNameError


def test_score_strings_and_tokens_agree():
    programs = [",[>,]+[,<.]", ",[>,]<[.<]", "+.", ""]
    by_text = synthenv.score(programs, "reverse")
    by_tokens = synthenv.score(encode_batch(programs), synthenv.tasks.get("reverse"))
    assert by_text.rewards.tolist() == by_tokens.rewards.tolist()
    assert by_text.solved.tolist() == [True, False, False, False]
    assert by_text.rewards[1].item() == -2 / 64  # docs/semantics.md §2: a failed program on 16 cases
    assert by_text.program_status.tolist() == [Status.OK, Status.STEP_LIMIT, Status.OK, Status.OK]
    assert by_text.output(0, 0) == list(synthenv.tasks.get("reverse").cases[0][1])
    assert by_text.status.shape == (4, 16) and by_text.outputs.shape[:2] == (4, 16)


def test_every_backend_and_engine_give_the_same_rewards():
    programs = [",[>,]+[,<.]", ",[>,]<[.<]", "+[->+<]>.", ",[.,]"]
    results = [synthenv.score(programs, "reverse", backend="cpu").rewards.tolist()]
    for engine in ["torch"] + [e for e in engines.names() if e not in ("torch", "cuda")]:
        results.append(synthenv.score(programs, "reverse", engine=engine).rewards.tolist())
    assert all(r == results[0] for r in results)


def test_num_outputs_keeps_more_values():
    result = synthenv.score(["+.+.+.+.+.+.+.+."], "print-hello", num_outputs=8)
    assert result.output(0, 0) == [1, 2, 3, 4, 5, 6, 7, 8]
    with pytest.raises(ValueError, match="num_outputs must be an int >= 5"):
        synthenv.score(["+."], "print-hello", num_outputs=2)


@pytest.mark.parametrize(
    "programs, error, message",
    [
        ("+.", TypeError, "wrap it"),
        (torch.zeros(3, dtype=torch.long), ValueError, r"\[N, L\]"),
        (torch.zeros((2, 3)), TypeError, "integer token ids"),
        (torch.full((2, 3), 9), ValueError, r"token ids must be in \[0, 9\), got 9"),
        (torch.full((2, 3), -1), ValueError, "got -1"),
    ],
)
def test_bad_programs_argument(programs, error, message):
    with pytest.raises(error, match=message):
        synthenv.score(programs, "reverse")


def test_unknown_names_get_did_you_mean_hints():
    with pytest.raises(UnknownNameError, match="Did you mean 'reverse'"):
        synthenv.score(["+"], "reverce")
    with pytest.raises(UnknownNameError, match="Did you mean 'traditional'"):
        synthenv.score(["+"], "reverse", backend="tradtional")
    with pytest.raises(UnknownNameError, match="Valid engines"):
        synthenv.score(["+"], "reverse", engine="fast")
    with pytest.raises(ValueError, match="own interpreter"):
        synthenv.score(["+"], "reverse", backend="cpu", engine="torch")
    with pytest.raises(TypeError, match="Task or a task name"):
        synthenv.score(["+"], 42)
    assert "traditional" in compilers.names() and "cpu" in compilers.names()


def test_registries_refuse_silent_overwrites():
    with pytest.raises(ValueError, match="already registered"):
        compilers.register("traditional", compilers.TraditionalCompiler)
    with pytest.raises(ValueError, match="non-empty strings"):
        engines.register("", lambda: None)
