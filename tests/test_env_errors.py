"""Bad input: each error names the value and the fix, and leaves the env exactly as it was."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from synthenv.env import EnvConfig, SynthVecEnv
from synthenv.language import encode_batch
from synthenv.registry import UnknownNameError


def snapshot(env: SynthVecEnv) -> tuple[dict, torch.Tensor]:
    return {k: v.clone() for k, v in env._state.items()}, env._generator.get_state()


def assert_unchanged(env: SynthVecEnv, before: tuple[dict, torch.Tensor]) -> None:
    state, generator = before
    assert env._state.keys() == state.keys()
    assert all(torch.equal(env._state[k], v) for k, v in state.items())
    assert torch.equal(env._generator.get_state(), generator)


def stepped_env(mode: str) -> SynthVecEnv:
    """An env in the middle of an episode (so that "unchanged" is not just "all zero")."""
    env = SynthVecEnv("reverse", num_envs=3, mode=mode, max_len=6, iterations=3 if mode == "program" else 1)
    env.reset(seed=0)
    env.step(env.sample_actions(masked=False) if mode == "token" else encode_batch(["+.", ",.", ",[.,]"], 6))
    return env


BAD_ACTIONS = {
    "program": [
        (torch.zeros((3, 5), dtype=torch.int64), ValueError, r"shape \(3, 6\).*got \(3, 5\); pad programs with EOS"),
        (torch.zeros(3, dtype=torch.int64), ValueError, r"shape \(3, 6\).*got \(3,\)"),
        (torch.zeros((3, 6)), TypeError, r"integer token ids, got dtype torch.float32; use actions.long\(\)"),
        (torch.zeros((3, 6), dtype=torch.bool), TypeError, "dtype torch.bool"),
        (torch.zeros((3, 6), dtype=torch.int64, device="meta"), ValueError, r"on meta.*use actions.to\(env.device\)"),
        (torch.full((3, 6), 9), ValueError, r"token 9 at actions\[0, 0\] is out of range.*\[0, 9\)"),
        (torch.tensor([[1] * 6, [1] * 6, [1, 2, -1, 0, 0, 0]]), ValueError, r"token -1 at actions\[2, 2\]"),
        (np.zeros((3, 6), dtype=np.int64), TypeError, r"torch.Tensor.*got ndarray; use torch.as_tensor.*NumpyVecEnv"),
        ([[0] * 6] * 3, TypeError, "got list"),
    ],
    "token": [
        (torch.zeros((3, 1), dtype=torch.int64), ValueError, r"shape \(3,\).*got \(3, 1\); pass one token per env"),
        (torch.zeros(4, dtype=torch.int64), ValueError, r"got \(4,\)"),
        (torch.zeros(3, dtype=torch.float64), TypeError, "dtype torch.float64"),
        (torch.zeros(3, dtype=torch.int64, device="meta"), ValueError, "on meta"),
        (torch.tensor([1, 2, 12]), ValueError, r"token 12 at actions\[2\] is out of range"),
        (torch.tensor([-3, 2, 1]), ValueError, r"token -3 at actions\[0\]"),
        (3, TypeError, "got int"),
    ],
}


@pytest.mark.parametrize("mode", ["program", "token"])
def test_bad_actions_raise_and_leave_state_unchanged(mode):
    env = stepped_env(mode)
    for actions, error, message in BAD_ACTIONS[mode]:
        before = snapshot(env)
        with pytest.raises(error, match=message):
            env.step(actions)
        assert_unchanged(env, before)


def test_step_before_reset_and_after_close():
    env = SynthVecEnv("reverse", num_envs=2, max_len=4)
    with pytest.raises(RuntimeError, match=r"call reset\(\) before step\(\)"):
        env.step(torch.zeros((2, 4), dtype=torch.int64))
    with pytest.raises(RuntimeError, match=r"reset\(\)"):
        env.sample_actions()
    env.reset(seed=0)
    env.close()
    with pytest.raises(RuntimeError, match="closed; create a new one"):
        env.step(torch.zeros((2, 4), dtype=torch.int64))
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


def test_unvalidated_out_of_range_tokens_act_as_eos():
    checked = SynthVecEnv("reverse", num_envs=2, max_len=5)
    unchecked = SynthVecEnv("reverse", num_envs=2, max_len=5, validate_actions=False)
    checked.reset(seed=0)
    unchecked.reset(seed=0)
    wild = torch.tensor([[8, 7, 99, 3, 7], [8, -4, 7, 7, 7]])
    _, rewards, _, _, info = unchecked.step(wild)
    _, expected, _, _, _ = checked.step(torch.tensor([[8, 7, 0, 0, 0], [8, 0, 0, 0, 0]]))
    assert torch.equal(rewards, expected)
    assert info["final_obs"]["program"].tolist() == [[8, 7, 0, 0, 0], [8, 0, 0, 0, 0]]


def _canonical_oracle(rows: list[list[int]]) -> list[list[int]]:
    """Each row's tokens before its first id outside 1..8, then EOS (plain Python)."""
    out = []
    for row in rows:
        end = next((j for j, token in enumerate(row) if not 1 <= token <= 8), len(row))
        out.append(row[:end] + [0] * (len(row) - end))
    return out


def test_program_mode_reads_actions_up_to_their_first_eos_or_out_of_range_id(monkeypatch):
    """The env's canonical programs, in C (int64 CPU actions) and in torch (any other integer actions, a
    GPU), equal a plain-Python reading, row by row."""
    from synthenv import native_build
    from synthenv.env import program_mode
    from synthenv.language import canonical_programs

    generator = torch.Generator().manual_seed(5)
    actions = torch.randint(-3, 12, (300, 17), generator=generator)
    actions[:100] = torch.randint(1, 9, (100, 17), generator=generator)
    late = torch.randint(8, 17, (100,), generator=generator)
    actions[torch.arange(100), late] = torch.tensor([0, -1, 9, 12]).repeat(25)  # long programs, ending late
    actions[100:110, 0] = 0  # empty ones
    actions[110:120] = torch.randint(1, 9, (10, 17), generator=generator)  # no end at all
    expected = _canonical_oracle(actions.tolist())
    assert canonical_programs(actions).tolist() == expected
    assert canonical_programs(actions.to(torch.int32)).tolist() == expected
    assert canonical_programs(actions.to(torch.int32)).dtype == torch.int64
    if native_build.is_available():
        native = program_mode._canonical(actions)
        assert native.dtype == torch.int64 and native.tolist() == expected
        assert program_mode._canonical(actions.t().contiguous().t()).tolist() == expected  # not contiguous
    monkeypatch.setattr(native_build, "is_available", lambda: False)
    assert program_mode._canonical(actions).tolist() == expected


def test_action_masks_only_in_token_mode():
    env = SynthVecEnv("reverse", num_envs=2, max_len=4)
    env.reset(seed=0)
    with pytest.raises(RuntimeError, match="token mode only.*mode='token'"):
        env.action_masks()


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"task": "revers"}, UnknownNameError, "unknown task 'revers'. Did you mean 'reverse'"),
    ({"task": 3}, TypeError, "task must be a Task or a task name"),
    ({"mode": "tokens"}, ValueError, "unknown mode 'tokens'. Did you mean 'token'.*Valid modes: program, token"),
    ({"num_envs": 0}, ValueError, "num_envs must be an int >= 1, got 0"),
    ({"num_envs": 2.0}, ValueError, "num_envs must be an int >= 1, got 2.0"),
    ({"num_envs": True}, ValueError, "num_envs must be an int >= 1, got True"),
    ({"max_len": 0}, ValueError, "max_len must be an int >= 1, got 0"),
    ({"iterations": 0}, ValueError, "iterations must be an int >= 1, got 0"),
    ({"mode": "token", "iterations": 2}, ValueError, "iterations=2 applies to program mode only"),
    ({"lazy_scoring": True}, ValueError, "lazy_scoring=True applies to token mode only"),
    ({"max_len": 10**9}, ValueError, r"max_len must be an int in \[1, 4096\], got 1000000000"),
    ({"max_len": 4097}, ValueError, r"max_len must be an int in \[1, 4096\], got 4097"),
    ({"seed": -1}, ValueError, r"seed must be None or an int in \[0, 2\*\*64\), got -1"),
    ({"seed": 2**64}, ValueError, r"seed must be None or an int in \[0, 2\*\*64\), got 18446744073709551616"),
    ({"base": 1}, ValueError, "base must be an int >= 2, got 1"),
    ({"base": 100}, ValueError, r"values must lie in \[0, base=100\).*raise base"),
    ({"max_steps": 0}, ValueError, "max_steps must be an int >= 1, got 0"),
    ({"strict_syntax": "yes"}, TypeError, "strict_syntax must be None, True or False, got 'yes'"),
    ({"device": "banana"}, ValueError, "device must be a torch device string.*got 'banana'"),
    ({"device": "meta"}, ValueError, "device 'meta' holds no data.*use 'cpu' or 'cuda'"),
    ({"backend": "tradtional"}, UnknownNameError, "unknown backend 'tradtional'. Did you mean 'traditional'"),
    ({"engine": "nativ"}, UnknownNameError, "unknown engine 'nativ'. Did you mean 'native'"),
])
def test_bad_options_name_the_value(options, error, message):
    options = {"task": "reverse", **options}
    with pytest.raises(error, match=message):
        SynthVecEnv(**options)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised when CUDA is missing")
def test_cuda_device_without_cuda_says_so():
    for device in ("cuda", "cuda:1"):
        with pytest.raises(ValueError, match=f"device '{device}' needs CUDA.*use device 'cpu'"):
            SynthVecEnv("reverse", device=device)


def test_config_is_frozen():
    config = EnvConfig()
    with pytest.raises(AttributeError):
        config.num_envs = 3  # type: ignore[misc]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"seed": "7"}, r"seed must be None or an int in \[0, 2\*\*64\), got '7'"),
    ({"seed": -2}, "got -2"),
    ({"seed": 2**70}, r"seed must be None or an int in \[0, 2\*\*64\), got 1180591620717411303424; pass a smaller"),
    ({"options": {"mask": 1}}, r"takes only options\['reset_mask'\], got \['mask'\]"),
])
def test_bad_reset_arguments(kwargs, message):
    env = stepped_env("program")
    before = snapshot(env)
    with pytest.raises(ValueError, match=message):
        env.reset(**kwargs)
    assert_unchanged(env, before)
