"""Stable-Baselines3 adapter: token mode of ``SynthVecEnv`` as an SB3 ``VecEnv``.

SB3 steps with numpy arrays and expects per-env info dicts, ``terminal_observation`` on episode
ends and ``action_masks`` for sb3-contrib's ``MaskablePPO``; this adapter converts at the
boundary (one host copy per step, by design: SB3 lives on numpy).

>>> from stable_baselines3 import PPO
>>> env = SB3VecEnv("print-hello", num_envs=4, max_len=8)
>>> model = PPO("MultiInputPolicy", env, n_steps=8, batch_size=32, n_epochs=1, seed=0).learn(32)
>>> env.action_masks().shape
(4, 9)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices

from synthenv.env import SynthVecEnv
from synthenv.env.wrappers import to_numpy
from synthenv.tasks import Task


class SB3VecEnv(VecEnv):
    """N token-mode synthenv environments behind SB3's ``VecEnv`` interface (CPU, numpy).

    Args:
        task: task name or ``Task``.
        num_envs: N.
        **options: any other ``EnvConfig`` option (``max_len``, ``allow_eos``, ``engine``, ...);
            ``mode`` is always ``token``.

    Observations are dicts of numpy arrays (``program [N, L]``, ``position [N]``): use
    ``"MultiInputPolicy"``. Infos carry ``solved`` and ``program_status`` of programs that ended,
    ``terminal_observation`` and ``TimeLimit.truncated`` (always False: programs end by EOS or
    length) as SB3 expects. ``action_masks()`` returns ``[N, 9]`` bool syntax masks.
    """

    def __init__(self, task: str | Task = "print-hello", num_envs: int = 8, **options: Any):
        if options.get("mode", "token") != "token":
            raise ValueError(f"SB3VecEnv wraps token mode; got mode={options['mode']!r}. Drop the mode option "
                             "(program mode is for synthenv's own agents: synthenv.agents.train)")
        options.pop("mode", None)
        self.env = SynthVecEnv(task, num_envs, mode="token", **options)
        self._actions: torch.Tensor | None = None
        self._masks = np.ones((num_envs, self.env.single_action_space.n), dtype=bool)
        self.render_mode = None
        super().__init__(num_envs, self.env.single_observation_space, self.env.single_action_space)

    def reset(self) -> dict[str, np.ndarray]:
        seed = self._seeds[0]
        obs, info = self.env.reset(seed=seed)
        self._reset_seeds()
        self._masks = to_numpy(info["action_mask"])
        return to_numpy(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = torch.as_tensor(np.asarray(actions).reshape(self.num_envs), dtype=torch.int64,
                                        device=self.env.device)

    def step_wait(self):
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async(): call step(actions)")
        obs, rewards, terminated, truncated, info = self.env.step(self._actions)
        self._actions = None
        obs, info = to_numpy(obs), to_numpy(info)  # sync point: SB3 works on host arrays
        terminated, truncated = to_numpy(terminated), to_numpy(truncated)
        dones = terminated | truncated
        self._masks = info["action_mask"]
        infos = []
        for i in range(self.num_envs):
            entry = {"solved": bool(info["solved"][i]), "program_status": int(info["program_status"][i])}
            if dones[i]:
                entry["terminal_observation"] = {key: value[i] for key, value in info["final_obs"].items()}
                entry["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            infos.append(entry)
        return obs, to_numpy(rewards).astype(np.float32), dones, infos

    def action_masks(self) -> np.ndarray:
        """``[N, 9]`` bool: the tokens that keep each program's brackets balanced."""
        return self._masks.astype(bool)

    def close(self) -> None:
        self.env.close()

    def _indices(self, indices: VecEnvIndices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, int):
            return [indices]
        return list(indices)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        if attr_name == "action_masks":
            return [self._env_method_masks] * len(self._indices(indices))
        value = getattr(self.env, attr_name)
        return [value] * len(self._indices(indices))

    def _env_method_masks(self) -> None:  # marker so that has_attr("action_masks") is True
        return None

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise AttributeError(f"SB3VecEnv environments share one SynthVecEnv; cannot set {attr_name!r} per env. "
                             "Create the env with the option instead")

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> list:
        if method_name == "action_masks":
            masks = self.action_masks()
            return [masks[i] for i in self._indices(indices)]
        raise AttributeError(f"SB3VecEnv supports env_method('action_masks') only, got {method_name!r}")

    def env_is_wrapped(self, wrapper_class, indices: VecEnvIndices = None) -> list[bool]:
        return [False] * len(self._indices(indices))
