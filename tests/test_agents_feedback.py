"""The edit policy's feedback features: hand-checked values, and the C path (CPU) equal to the torch path (GPU)."""

from __future__ import annotations

import pytest
import torch

from native import require_native
from synthenv import tasks
from synthenv.agents.run.feedback import FEATURES, feedback_features
from synthenv.env import SynthVecEnv
from synthenv.language import encode_batch


def observe(task_name: str, programs: torch.Tensor | list[str], max_len: int = 24) -> tuple[dict, tuple]:
    """One program-mode step of ``programs``: the observation the trainer reads, and the expected outputs."""
    task = tasks.get(task_name)
    tokens = encode_batch(programs, length=max_len) if isinstance(programs, list) else programs
    env = SynthVecEnv(task, tokens.shape[0], mode="program", max_len=max_len)
    env.reset(seed=0)
    _, _, _, _, info = env.step(tokens)
    cases = task.tensors(torch.device("cpu"))
    return info["final_obs"], (cases.expected, cases.expected_lengths)


def test_features_of_known_programs():
    obs, expected = observe("reverse", [",[>,]+[,<.]", "+[]", ",.", ""])
    features = feedback_features(obs, *expected, max_len=24, impl="torch")
    named = [dict(zip(FEATURES, row)) for row in features.tolist()]
    solved, hangs, echo, empty = named
    assert solved["reward"] == 1.0 and solved["passed"] == 1.0 and solved["positions_right"] == 1.0
    assert hangs["failed"] == 1.0 and hangs["passed"] == 0.0 and hangs["too_short"] == 0.0  # failed: no output
    assert echo["failed"] == 0.0 and echo["too_short"] > 0 and echo["length"] == pytest.approx(2 / 24)
    assert empty["too_short"] == 1.0 and empty["positions_right"] == 0.0 and empty["length"] == 0.0


@pytest.mark.parametrize("task", ["reverse", "count-char", "bool-logic", "print-hello", "echo-half"])
def test_the_c_features_equal_the_torch_ones(task):
    require_native()
    generator = torch.Generator().manual_seed(len(task))
    tokens = torch.randint(1, 9, (2000, 24), generator=generator)
    lengths = torch.randint(0, 25, (2000, 1), generator=generator)
    tokens = torch.where(torch.arange(24) < lengths, tokens, 0)  # programs of 0..24 tokens
    tokens[:3] = encode_batch([",[.,]", ",.", ">,[>,]<[.<]"], length=24)  # some print, some print right
    obs, expected = observe(task, tokens)
    native = feedback_features(obs, *expected, max_len=24, impl="native")
    reference = feedback_features(obs, *expected, max_len=24, impl="torch")
    assert native.shape == reference.shape == (2000, len(FEATURES))
    assert torch.allclose(native, reference, atol=1e-6), (native - reference).abs().max(0)
    assert feedback_features(obs, *expected, max_len=24).equal(native)  # "auto" takes the C path on the CPU
    for name in ("reward", "failed", "case_reward", "length"):  # the comparison is not of constant columns
        assert reference[:, FEATURES.index(name)].unique().numel() > 1, name


def test_a_bad_impl_is_refused():
    obs, expected = observe("reverse", [",."])
    with pytest.raises(ValueError, match="impl must be one of"):
        feedback_features(obs, *expected, max_len=24, impl="cuda")
