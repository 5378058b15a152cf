"""The Stable-Baselines3 adapter: SB3 PPO and sb3-contrib MaskablePPO train on token mode."""

from __future__ import annotations

import numpy as np
import pytest
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecMonitor

from synthenv.agents.sb3 import SB3VecEnv
from synthenv.language import Status


def test_sb3_ppo_trains_a_few_thousand_steps():
    env = VecMonitor(SB3VecEnv("print-hello", num_envs=8, max_len=12, seed=0))
    model = PPO("MultiInputPolicy", env, n_steps=64, batch_size=128, n_epochs=2, seed=0, device="cpu")
    model.learn(total_timesteps=2048)
    assert model.num_timesteps >= 2048
    assert len(model.ep_info_buffer) > 0  # programs ended and were scored


def test_maskable_ppo_trains_and_its_programs_always_parse():
    env = SB3VecEnv("print-hello", num_envs=8, max_len=12, seed=0, strict_syntax=True)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=128, n_epochs=2, seed=0, device="cpu")
    model.learn(total_timesteps=2048)
    assert model.num_timesteps >= 2048
    obs = env.reset()
    ended = 0
    for _ in range(60):
        actions, _ = model.predict(obs, action_masks=env.action_masks())
        obs, rewards, dones, infos = env.step(actions)
        for done, info in zip(dones, infos):
            if done:
                ended += 1
                assert info["program_status"] != Status.SYNTAX_ERROR  # masks keep brackets balanced
                assert set(info["terminal_observation"]) == {"program", "position"}
    assert ended > 0


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
