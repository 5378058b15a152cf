"""SynthEnv (gymnasium.make, token mode, numpy): the env checker on every task, episodes, masks."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import synthenv
from synthenv import reference, tasks
from synthenv.env import SynthEnv, env_id
from synthenv.language import text_to_tokens


@pytest.mark.parametrize("name", tasks.names(), ids=tasks.names())
def test_check_env_passes_for_every_registered_task(name):
    env = gymnasium.make(env_id(name), max_len=20)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    complaints = [str(w.message) for w in caught if "WARN" in str(w.message)]
    assert complaints == []


def test_stable_baselines3_checker_accepts_the_single_env():
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    sb3_check_env(SynthEnv("reverse", max_len=12), warn=False)


def test_writing_the_solution_token_by_token_solves_the_task():
    env = SynthEnv("reverse", max_len=20)
    obs, info = env.reset(seed=0)
    assert isinstance(obs["program"], np.ndarray) and obs["program"].dtype == np.int64 and obs["program"].shape == (20,)
    assert isinstance(obs["position"], np.integer) and int(obs["position"]) == 0
    assert info["action_mask"].dtype == np.int8 and info["action_mask"].shape == (9,)
    tokens = text_to_tokens(",[>,]+[,<.]")
    for position, token in enumerate(tokens):
        obs, reward, terminated, truncated, info = env.step(token)
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert int(obs["position"]) == position + 1 and obs["program"][position] == token
    obs, reward, terminated, truncated, info = env.step(0)  # EOS
    assert (reward, terminated, truncated) == (1.0, True, False) and bool(info["solved"])
    assert obs["program"][: len(tokens)].tolist() == tokens  # the final observation, not the reset one
    assert isinstance(reward, float)


def test_wrong_program_reward_equals_the_oracle():
    task = tasks.get("add")
    env = SynthEnv("add", max_len=10)
    env.reset(seed=0)
    for token in text_to_tokens(",>,<."):
        env.step(token)
    _, reward, terminated, _, info = env.step(0)
    expected = reference.score_program(",>,<.", task.cases, task.base, task.max_steps).reward
    assert terminated and reward == pytest.approx(expected, rel=1e-6)
    assert int(info["program_status"]) == synthenv.Status.OK


def test_masked_sampling_writes_balanced_programs_of_full_length_without_eos():
    env = SynthEnv("reverse", max_len=7, allow_eos=False)
    _, info = env.reset(seed=0)
    env.action_space.seed(0)
    programs = []
    for _ in range(140):
        action = env.action_space.sample(mask=info["action_mask"])
        assert np.array_equal(env.action_masks(), info["action_mask"].astype(bool))
        obs, _, terminated, _, info = env.step(action)
        if terminated:
            programs.append("".join("_><+-[].,"[t] for t in obs["program"]))
            _, info = env.reset()
    assert len(programs) == 140 // 7
    assert all(len(p) == 7 and "_" not in p for p in programs)
    assert all(reference.match_brackets(p)[1] for p in programs)


@pytest.mark.parametrize("action", [9, -1, 1.5, "+", None])
def test_bad_action_names_the_value(action):
    env = SynthEnv("reverse", max_len=5)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"token id in \[0, 9\).*got"):
        env.step(action)


def test_options_fixed_by_the_single_env_are_refused():
    with pytest.raises(ValueError, match="num_envs.*SynthVecEnv"):
        SynthEnv("reverse", num_envs=2)
    with pytest.raises(ValueError, match="mode"):
        SynthEnv("reverse", mode="program")
    with pytest.raises(ValueError, match="render_mode='human'"):
        SynthEnv("reverse", render_mode="human")
