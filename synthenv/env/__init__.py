"""Gymnasium environments: ``SynthVecEnv`` (program and token modes, device tensors) and the
single token-mode ``SynthEnv``, registered as ``synthenv/<task>-v0``.

>>> import gymnasium, synthenv
>>> env = gymnasium.make_vec("synthenv/reverse-v0", num_envs=4, mode="token", engine="torch")
>>> obs, info = env.reset(seed=0)
>>> obs["program"].shape, info["action_mask"].shape
(torch.Size([4, 100]), torch.Size([4, 9]))
"""

from .config import MODES, EnvConfig, Mode
from .registration import env_id, register_envs, registered_ids
from .single import SynthEnv
from .token_mode import syntax_masks
from .vector import SynthVecEnv
from .wrappers import EpisodeStatistics, NumpyVecEnv, to_numpy

__all__ = [
    "SynthVecEnv", "SynthEnv", "EnvConfig", "Mode", "MODES", "EpisodeStatistics", "NumpyVecEnv", "to_numpy",
    "syntax_masks", "env_id", "register_envs", "registered_ids",
]

register_envs()
