"""``SynthEnv``: one token-mode environment with numpy observations, for ``gymnasium.make``."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import gymnasium as gym

from synthenv.tasks import Task

from .vector import SynthVecEnv


class SynthEnv(gym.Env):
    """Write a BF program token by token; the program is scored when it ends.

    ## Description

    One env of ``SynthVecEnv`` in token mode, on the CPU, with numpy observations: the shape
    Gymnasium's single-env tools and Stable-Baselines3 expect. For throughput use the vector
    env (``gymnasium.make_vec``) instead.

    ## Action Space

    ``Discrete(9)``: 0 = EOS (ends the program), then ``> < + - [ ] . ,`` = 1..8.

    ## Observation Space

    ``Dict(program=MultiDiscrete([9] * L), position=Discrete(L + 1))``: the tokens written so
    far (int64, EOS-padded) and how many.

    ## Rewards

    0 until the program ends; then PQT's program reward (1.0 = solved, docs/semantics.md §2).

    ## Episode End

    Terminated when the agent writes EOS or the program reaches ``max_len`` tokens; never
    truncated. ``info["action_mask"]`` (int8 ``[9]``, usable as
    ``action_space.sample(mask=...)``) marks the tokens that keep brackets balanced;
    ``info["solved"]`` and ``info["program_status"]`` describe the program that ended.

    ## Arguments

    ``task`` (name or ``Task``) and any ``EnvConfig`` option except ``num_envs``, ``mode``,
    ``device`` and ``autoreset_mode`` (one env, token mode, CPU; a single env never resets
    itself: call ``reset()``, or let Gymnasium's ``SyncVectorEnv`` do it, e.g.
    ``gymnasium.make_vec(id, num_envs=N, vectorization_mode="sync",
    vector_kwargs={"autoreset_mode": "NextStep"})``).

    ## Version History

    - v0: initial version.

    >>> env = SynthEnv("print-hello", max_len=4, engine="torch")
    >>> obs, info = env.reset(seed=0)
    >>> obs["program"].tolist(), int(obs["position"]), info["action_mask"].tolist()
    ([0, 0, 0, 0], 0, [1, 1, 1, 1, 1, 1, 0, 1, 1])
    """

    metadata = {"render_modes": []}

    def __init__(self, task: str | Task = "reverse", render_mode: str | None = None, **options: Any):
        if "autoreset_mode" in options:
            raise ValueError(f"SynthEnv is one env and never resets itself, got autoreset_mode="
                             f"{options['autoreset_mode']!r}; give it to the vector env instead: "
                             "gymnasium.make_vec(id, num_envs=N, autoreset_mode=...) (SynthVecEnv), or "
                             "vectorization_mode='sync', vector_kwargs={'autoreset_mode': ...} (SyncVectorEnv)")
        fixed = {"num_envs", "mode", "device"} & set(options)
        if fixed:
            raise ValueError(f"SynthEnv is one token-mode env on the CPU; drop {sorted(fixed)}, or use "
                             "SynthVecEnv / gymnasium.make_vec for other settings")
        if render_mode is not None:
            raise ValueError(f"SynthEnv has no render modes, got render_mode={render_mode!r}; pass None")
        options.setdefault("lazy_scoring", True)  # one env returning numpy syncs every step anyway
        self._vec = SynthVecEnv(task, num_envs=1, mode="token", device="cpu", **options)  # SameStep
        self.task = self._vec.task
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self._check_open()
        super().reset(seed=seed)
        obs, info = self._vec.reset(seed=seed, options=options)
        return _numpy_obs(obs), _numpy_info(info)

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        self._check_open()
        if isinstance(action, (bool, np.bool_)) or not self.action_space.contains(action):
            raise ValueError(f"action must be a token id in [0, 9) (an int; 0 = EOS, 1..8 = '><+-[].,'), "
                             f"got {action!r}")
        obs, rewards, terminated, truncated, info = self._vec.step(torch.tensor([int(action)], dtype=torch.int64))
        if bool(terminated[0] | truncated[0]):  # the vector env autoreset; Gymnasium wants the final obs here
            obs = info["final_obs"]
        info = {key: value for key, value in info.items() if key not in ("final_obs", "_final_obs")}
        return _numpy_obs(obs), float(rewards[0]), bool(terminated[0]), bool(truncated[0]), _numpy_info(info)

    def action_masks(self) -> np.ndarray:
        """``[9]`` bool syntax mask of the next token (sb3-contrib's ``MaskablePPO`` reads this)."""
        self._check_open()
        return self._vec.action_masks()[0].numpy()

    def close(self) -> None:
        """Release the env: its state is dropped and ``reset``/``step`` are refused afterwards."""
        self._vec.close()

    def _check_open(self) -> None:
        if self._vec.closed:
            raise RuntimeError("this SynthEnv is closed; create a new one (gymnasium.make)")


def _numpy_obs(obs: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    return {"program": obs["program"][0].numpy().copy(), "position": np.int64(obs["position"][0])}


def _numpy_info(info: dict[str, Any]) -> dict[str, Any]:
    """Batched tensors -> this env's numpy value; anything else (``info["audit"]``, the hybrid's
    ``AuditStats``, one for the batch) as it is."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if not isinstance(value, torch.Tensor):
            out[key] = value
            continue
        value = value[0].numpy().copy()
        out[key] = value.astype(np.int8) if key == "action_mask" else value
    return out
