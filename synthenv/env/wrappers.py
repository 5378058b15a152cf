"""Wrappers for ``SynthVecEnv``: numpy conversion and on-device episode statistics.

Gymnasium's own conversion wrapper (``gymnasium.wrappers.vector.ArrayConversion``) needs the
``array-api-compat`` package (``gymnasium[array-api]``), which synthenv does not depend on;
``NumpyVecEnv`` is the small torch -> numpy equivalent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from synthenv.syncpoints import sync_point


def to_numpy(value: Any) -> Any:
    """Tensors (also inside dicts) -> numpy arrays. # sync point: copies to the host."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {key: to_numpy(item) for key, item in value.items()}
    return value


class NumpyVecEnv(VectorWrapper):
    """Steps a tensor vector env with numpy actions and returns numpy arrays.

    For tools that need numpy (SB3-style loops, plotting, Gymnasium's numpy vector wrappers
    such as ``gymnasium.wrappers.vector.RecordEpisodeStatistics``); every step copies to the
    host (a sync point by design). Observations, rewards, flags and info entries are
    converted; ``action_masks()`` too. ``reset(options={"reset_mask": numpy bool [N]})``
    passes the mask through. ``metadata["autoreset_mode"]`` is the wrapped env's.

    >>> from synthenv.env import SynthVecEnv
    >>> env = NumpyVecEnv(SynthVecEnv("print-hello", num_envs=2, mode="token", engine="torch", max_len=4))
    >>> obs, info = env.reset(seed=0)
    >>> type(obs["program"]).__name__, info["action_mask"].shape
    ('ndarray', (2, 9))
    """

    def __init__(self, env: VectorEnv):
        super().__init__(env)
        self.device = env.unwrapped.device

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        return to_numpy(obs), to_numpy(info)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        if isinstance(actions, np.ndarray | list | tuple):
            actions = torch.as_tensor(np.asarray(actions), device=self.device)
        return tuple(to_numpy(part) for part in self.env.step(actions))  # type: ignore[return-value]

    def action_masks(self) -> np.ndarray:
        return to_numpy(self.env.action_masks())


class EpisodeStatistics(VectorWrapper):
    """Accumulates episode return, length and solved flag on the device, with no per-step sync.

    Each step adds ``info["episode"] = {"r": [N] float32, "l": [N] int64, "solved": [N] bool}``
    (the totals of episodes that ended this step, valid where ``info["_episode"]`` [N] bool) and
    updates running sums over all ended episodes. ``stats()`` reads them: an explicit sync point.
    Follows the env's ``metadata["autoreset_mode"]``: under ``NextStep`` and ``Disabled`` the
    step after an episode's end (a reset step, or an ended env stepped again) counts for no
    episode; ``reset(options={"reset_mask": mask})`` restarts the masked envs' running sums.

    >>> from synthenv.env import SynthVecEnv
    >>> from synthenv.language import encode_batch
    >>> env = EpisodeStatistics(SynthVecEnv("reverse", num_envs=2, engine="torch", max_len=11))
    >>> _ = env.reset(seed=0)
    >>> _ = env.step(encode_batch([",[>,]+[,<.]", ""], 11))
    >>> env.stats()["episodes"], env.stats()["success_rate"]
    (2, 0.5)
    """

    def __init__(self, env: VectorEnv):
        super().__init__(env)
        device, n = env.unwrapped.device, env.num_envs
        self._same_step = env.metadata.get("autoreset_mode") is AutoresetMode.SAME_STEP
        self._return = torch.zeros(n, dtype=torch.float32, device=device)  # [N] running episode return
        self._length = torch.zeros(n, dtype=torch.int64, device=device)  # [N]
        self._solved = torch.zeros(n, dtype=torch.bool, device=device)  # [N]
        self._ended = torch.zeros(n, dtype=torch.bool, device=device)  # [N] ended on the last step
        self._totals = torch.zeros(4, dtype=torch.float64, device=device)  # episodes, return, length, solved

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        mask = (options or {}).get("reset_mask")
        if mask is None:
            fresh = torch.ones_like(self._ended)
        else:
            fresh = torch.as_tensor(mask, device=self._ended.device)  # the env has checked it
        self._return = torch.where(fresh, 0.0, self._return)
        self._length = torch.where(fresh, 0, self._length)
        self._solved = self._solved & ~fresh
        self._ended = self._ended & ~fresh
        return obs, info

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        idle = torch.zeros_like(self._ended) if self._same_step else self._ended  # [N] this step is no episode's
        episode_return = torch.where(idle, 0.0, self._return + rewards)  # [N]
        length = torch.where(idle, 0, self._length + 1)
        solved = ~idle & (self._solved | info["solved"])
        done = (terminated | truncated) & ~idle  # [N] Disabled: an ended env stepped again ends nothing new
        self._totals += torch.stack([done.sum(), torch.where(done, episode_return, 0).sum(),
                                     torch.where(done, length, 0).sum(), (done & solved).sum()]).double()
        info = {**info, "episode": {"r": episode_return, "l": length, "solved": solved}, "_episode": done}
        self._return = torch.where(done, 0.0, episode_return)
        self._length = torch.where(done, 0, length)
        self._solved = solved & ~done
        self._ended = terminated | truncated
        return obs, rewards, terminated, truncated, info
    def stats(self) -> dict[str, float]:
        """Episodes ended so far and their mean return, length and success rate.

        # sync point: logging (synthenv.syncpoints): reads the on-device sums back to the host.
        """
        with sync_point("logging"):
            episodes, total_return, total_length, num_solved = self._totals.tolist()
        mean = (lambda total: total / episodes) if episodes else (lambda total: float("nan"))
        return {"episodes": int(episodes), "mean_return": mean(total_return), "mean_length": mean(total_length),
                "success_rate": mean(num_solved)}

    def reset_stats(self) -> None:
        """Forget the ended episodes counted so far (the running ones continue)."""
        self._totals.zero_()
