"""sb3-contrib's MaskablePPO on synthenv's token mode, through the SB3 adapter, in one file.

``synthenv.env.sb3.SB3VecEnv`` is token mode behind SB3's ``VecEnv`` interface (numpy at the
boundary) with ``action_masks()``, which MaskablePPO reads before every step: the syntax masks
let it write only bracket-balanced programs. A callback stops the run when a program solves the
task or the wall-clock budget is spent, and keeps the best program seen.

    python examples/sb3_maskable.py --task print-hello --seconds 120
    tensorboard --logdir runs
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np
import torch
import tyro
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecMonitor

from synthenv.env.sb3 import SB3VecEnv
from synthenv.language import decode_batch


@dataclass(frozen=True)
class Args:
    task: str = "print-hello"
    """Task (``synthenv tasks`` lists them)."""
    seed: int = 0
    """Seed of SB3 (torch, numpy) and of the env."""
    seconds: float = 120.0
    """Wall-clock budget (checked every step); the run also stops when a program solves the task."""
    total_timesteps: int | None = None
    """Optional cap on env steps (tokens written), for tiny test runs."""
    num_envs: int = 32
    """N, environments stepped together (one program each)."""
    max_len: int = 100
    """L, most tokens per program (PQT: 100)."""
    n_steps: int = 128
    """Steps per env in each rollout."""
    batch_size: int = 512
    """Minibatch size."""
    n_epochs: int = 4
    """Epochs over each rollout."""
    learning_rate: float = 3e-4
    """Adam's step size."""
    gamma: float = 1.0
    """Discount: 1, the reward is for the whole program (it comes when the program ends)."""
    ent_coef: float = 0.01
    """Entropy bonus."""
    log_dir: str | None = "runs"
    """TensorBoard root (SB3's tags under rollout/ and train/, ours under charts/); None: no logs."""
    json_out: str | None = None
    """Write the result (task, seed, solved, best_reward, best_program, env_steps, seconds, env_steps_per_s) here."""


class Budget(BaseCallback):
    """Stops when a program solves the task or ``seconds`` have passed; keeps the best program ended."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds, self.start = seconds, time.time()
        self.solved, self.best_reward, self.best_program = False, None, ""
        self.episodes = self.successes = 0

    def _on_step(self) -> bool:
        rewards, dones, infos = self.locals["rewards"], self.locals["dones"], self.locals["infos"]
        for i in np.flatnonzero(dones):  # SB3 lives on the host: per-env info dicts
            solved = bool(infos[i]["solved"])
            self.episodes, self.successes = self.episodes + 1, self.successes + solved
            if not self.solved and (solved or self.best_reward is None or rewards[i] > self.best_reward):
                program = torch.as_tensor(infos[i]["terminal_observation"]["program"])[None]
                self.best_reward, self.best_program = float(rewards[i]), decode_batch(program)[0]
            self.solved |= solved
        return not self.solved and time.time() - self.start < self.seconds

    def _on_rollout_end(self) -> None:
        if self.episodes:
            self.logger.record("charts/success_rate", self.successes / self.episodes)
            self.logger.record("charts/best_reward", self.best_reward)
            self.logger.record("programs/best_program", self.best_program, exclude=("stdout",))
        self.episodes = self.successes = 0


def main(args: Args) -> dict:
    env = VecMonitor(SB3VecEnv(args.task, num_envs=args.num_envs, max_len=args.max_len))  # rollout/ep_rew_mean
    model = MaskablePPO("MultiInputPolicy", env, n_steps=args.n_steps, batch_size=args.batch_size,
                        n_epochs=args.n_epochs, learning_rate=args.learning_rate, gamma=args.gamma,
                        ent_coef=args.ent_coef, seed=args.seed, device="cpu", tensorboard_log=args.log_dir)
    budget = Budget(args.seconds)
    run_name = f"{args.task}__sb3_maskable__{args.seed}__{int(time.time())}"
    model.learn(total_timesteps=args.total_timesteps or 10**12, callback=budget, tb_log_name=run_name)
    seconds = time.time() - budget.start
    result = {"task": args.task, "seed": args.seed, "solved": budget.solved, "best_reward": budget.best_reward,
              "best_program": budget.best_program, "env_steps": model.num_timesteps, "seconds": seconds,
              "env_steps_per_s": model.num_timesteps / seconds}
    env.close()
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=2)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main(tyro.cli(Args))
