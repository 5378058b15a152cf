"""Gymnasium registration: an id per task, make_vec -> SynthVecEnv, make -> SynthEnv, user tasks."""

from __future__ import annotations

import gymnasium
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import synthenv  # noqa: F401  importing synthenv registers the ids
from synthenv import tasks
from synthenv.env import EnvConfig, SynthEnv, SynthVecEnv, env_id, register_envs, registered_ids
from synthenv.language import encode_batch


def test_every_task_has_exactly_one_id():
    assert sorted(registered_ids()) == sorted(env_id(name) for name in tasks.names())


@pytest.mark.parametrize("name", tasks.names(), ids=tasks.names())
def test_make_vec_builds_the_vector_env_of_the_task(name):
    spec = gymnasium.spec(env_id(name))
    assert (spec.namespace, spec.name, spec.version) == ("synthenv", name, 0)
    env = gymnasium.make_vec(env_id(name), num_envs=3, max_len=8)
    assert isinstance(env.unwrapped, SynthVecEnv) and env.num_envs == 3
    assert env.unwrapped.task.name == name and env.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    obs, _ = env.reset(seed=0)
    _, rewards, _, _, _ = env.step(env.unwrapped.sample_actions())
    assert obs["program"].shape == (3, 8) and rewards.shape == (3,)


def test_make_vec_passes_options_through():
    env = gymnasium.make_vec("synthenv/add-v0", num_envs=5, mode="token", max_len=9, max_steps=300, seed=4)
    config = env.unwrapped.config
    assert (config.mode.value, config.max_len, config.seed, env.unwrapped.task.max_steps) == ("token", 9, 4, 300)
    assert env.spec.id == "synthenv/add-v0" and env.spec.kwargs["num_envs"] == 5


def test_make_builds_the_single_token_env():
    env = gymnasium.make("synthenv/reverse-v0", max_len=11)
    assert isinstance(env.unwrapped, SynthEnv) and env.unwrapped.task.name == "reverse"
    assert env.observation_space["program"].shape == (11,) and env.action_space.n == 9


def test_sync_vectorization_of_the_single_env_works():
    env = gymnasium.make_vec("synthenv/print-hello-v0", num_envs=2, vectorization_mode="sync", max_len=4)
    assert isinstance(env, SyncVectorEnv)
    env.reset(seed=0)
    _, rewards, terminated, _, _ = env.step([0, 3])
    assert terminated.tolist() == [True, False] and rewards.tolist()[1] == 0.0


def test_register_envs_gives_a_user_task_an_id():
    task = tasks.Task.from_pairs("env-test-increment", [([1], [2]), ([5], [6])], base=10)
    tasks.register(task, overwrite=True)
    try:
        assert env_id("env-test-increment") in register_envs()
        env = gymnasium.make_vec("synthenv/env-test-increment-v0", num_envs=2, max_len=4)
        env.reset(seed=0)
        _, rewards, terminated, _, _ = env.step(encode_batch([",+.", ",."], 4))
        assert rewards[0].item() == 1.0 and terminated.tolist() == [True, False]
        assert register_envs().count(env_id("env-test-increment")) == 1  # idempotent
    finally:
        tasks.unregister("env-test-increment")
        gymnasium.registry.pop(env_id("env-test-increment"))


def test_vector_env_accepts_a_task_object():
    task = tasks.Task.from_pairs("unregistered-double", [([2], [4]), ([3], [6])], base=16)
    env = SynthVecEnv(task, num_envs=1, max_len=12)
    env.reset(seed=0)
    _, rewards, _, _, _ = env.step(encode_batch([",[->++<]>."], 12))
    assert rewards.tolist() == [1.0] and isinstance(rewards, torch.Tensor)


def test_from_config_builds_the_configured_env():
    config = EnvConfig(task="add", num_envs=3, mode="token", max_len=9, allow_eos=False)
    env = SynthVecEnv.from_config(config)
    assert env.config == config and env.num_envs == 3 and env.action_space.shape == (3,)


def test_env_config_parses_from_the_command_line():
    import tyro

    config = tyro.cli(EnvConfig, args=["--task", "add", "--mode", "token", "--num-envs", "4", "--max-steps", "99"])
    assert config == EnvConfig(task="add", mode="token", num_envs=4, max_steps=99)
