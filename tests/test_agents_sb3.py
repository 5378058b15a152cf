"""The Stable-Baselines3 adapter: SB3 PPO and sb3-contrib MaskablePPO learn on token mode.

A tiny task (add one to a digit: ``,+.``, 3 tokens) with fixed seeds, so that a few thousand
timesteps are enough to see learning: the trained policy writes the solving program and earns the
full reward, where the untrained one rarely does. Nothing is written outside each test's tmp_path:
SB3's default logger makes an ``SB3-<time>`` folder in the system temp directory, so every model
gets a logger configured into tmp_path, and the ``private_tempdir`` fixture checks it.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
import torch
import torch._dynamo  # noqa: F401  (see below)
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.logger import configure

from synthenv.env.sb3 import SB3VecEnv
from synthenv.language import OPEN, Status, text_to_tokens
from synthenv.tasks import Task

# torch makes its per-user compile cache (<temp>/torchinductor_<user>, shared by every torch program) when
# torch._dynamo is first imported, which the first optimizer does: imported above, at collection, so that the
# check below sees what the tests write, not what importing torch writes once per process.
INCREMENT = Task.from_pairs("increment", [([1], [2]), ([5], [6]), ([3], [4])], base=10, solution=",+.", dialect="pqt")
SOLUTION = list(text_to_tokens(INCREMENT.solution))
OPTIONS = dict(num_envs=32, max_len=len(SOLUTION))
PPO_OPTIONS = dict(n_steps=16, batch_size=64, n_epochs=4, learning_rate=3e-3, seed=0, device="cpu")
TIMESTEPS = 8192


@pytest.fixture(autouse=True)
def private_tempdir(tmp_path, monkeypatch):
    """The system temp directory, redirected to an empty folder that must still be empty afterwards
    (a listing before and after; a private folder, so other processes' files cannot interfere)."""
    temp = tmp_path / "system-temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    before = sorted(os.listdir(tempfile.gettempdir()))
    yield
    assert tempfile.gettempdir() == str(temp)
    assert sorted(os.listdir(tempfile.gettempdir())) == before == []


@pytest.fixture(autouse=True)
def one_thread():
    """A 2x64 MLP trains faster on one thread than on cores shared with other jobs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def quiet_logger(model, tmp_path):
    """SB3's logger with no outputs, in tmp_path (``configure(None, [])`` would still make a temp folder)."""
    model.set_logger(configure(str(tmp_path / "sb3"), []))
    return model


def solution_probability(model, env) -> float:
    """The policy's probability of writing ``,+.`` token by token (the observations along that path)."""
    env.seed(123)
    obs = env.reset()
    log_prob = 0.0
    for token in SOLUTION:
        with torch.no_grad():
            distribution = model.policy.get_distribution(model.policy.obs_to_tensor(obs)[0])
            log_prob += float(distribution.log_prob(torch.full((env.num_envs,), token))[0])
        obs, _, dones, _ = env.step(np.full(env.num_envs, token))
    assert dones.all()  # the program ends at max_len
    return float(np.exp(log_prob))


def sample_episodes(model, env, num: int = 256, masked: bool = False) -> list[dict]:
    """``num`` programs sampled from the policy: reward, status and tokens of each."""
    env.seed(7)
    obs = env.reset()
    episodes = []
    while len(episodes) < num:
        kwargs = {"action_masks": env.action_masks()} if masked else {}
        actions, _ = model.predict(obs, **kwargs)
        obs, rewards, dones, infos = env.step(actions)
        episodes += [{"reward": float(r), "status": info["program_status"],
                      "program": info["terminal_observation"]["program"]}
                     for r, done, info in zip(rewards, dones, infos) if done]
    return episodes


def mean_reward(episodes: list[dict]) -> float:
    return float(np.mean([e["reward"] for e in episodes]))


def test_sb3_ppo_learns_to_write_the_solving_program(tmp_path):
    env = SB3VecEnv(INCREMENT, seed=0, **OPTIONS)
    probe = SB3VecEnv(INCREMENT, seed=0, **OPTIONS)
    model = quiet_logger(PPO("MultiInputPolicy", env, **PPO_OPTIONS), tmp_path)
    untrained = solution_probability(model, probe), mean_reward(sample_episodes(model, probe))
    model.learn(total_timesteps=TIMESTEPS)
    trained = solution_probability(model, probe), mean_reward(sample_episodes(model, probe))
    assert untrained[0] < 0.01 and trained[0] > 0.5  # about 1/9^3 before
    assert untrained[1] < 0.1 and trained[1] > 0.9  # 1.0 = every sampled program solves


def test_maskable_ppo_learns_and_its_programs_always_parse(tmp_path):
    env = SB3VecEnv(INCREMENT, seed=0, strict_syntax=True, **OPTIONS)
    probe = SB3VecEnv(INCREMENT, seed=0, strict_syntax=True, **OPTIONS)
    model = quiet_logger(MaskablePPO("MultiInputPolicy", env, **PPO_OPTIONS), tmp_path)
    before = sample_episodes(model, probe, masked=True)
    model.learn(total_timesteps=TIMESTEPS)
    after = sample_episodes(model, probe, masked=True)
    assert any(OPEN in e["program"] for e in before)  # the untrained policy opens loops: masks close them
    for episode in before + after:
        assert episode["status"] != Status.SYNTAX_ERROR  # strict syntax: an unbalanced program would fail
        assert set(np.unique(episode["program"])) <= set(range(9))
    assert mean_reward(before) < 0.1 and mean_reward(after) > 0.9


def test_adapter_contract():
    env = SB3VecEnv("reverse", num_envs=3, max_len=4, engine="torch")
    env.seed(7)
    obs = env.reset()
    assert obs["program"].shape == (3, 4) and obs["position"].tolist() == [0, 0, 0]
    masks = env.action_masks()
    assert masks.shape == (3, 9) and masks.dtype == np.bool_
    assert not masks[:, 6].any()  # ']' cannot close anything at depth 0
    assert env.has_attr("action_masks") and len(env.env_method("action_masks")) == 3
    obs, rewards, dones, infos = env.step(np.zeros(3, dtype=np.int64))  # EOS ends every program
    assert dones.all() and rewards.dtype == np.float32 and all("terminal_observation" in i for i in infos)
    with pytest.raises(ValueError, match="token mode"):
        SB3VecEnv("reverse", num_envs=2, mode="program")
