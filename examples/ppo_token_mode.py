"""PPO on synthenv's token mode in one file: a frozen Args, an Agent, one loop read top to bottom.

An LSTM reads the program one token per step and picks the next token under the env's syntax masks
(``info["action_mask"]``), so every program it writes has balanced brackets. Env and policy share a
device; the loop syncs once per iteration (logging, the stop checks). Run it, then watch it learn:
``python examples/ppo_token_mode.py --task print-hello --seconds 120; tensorboard --logdir runs``
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium
import torch
import torch.nn as nn
import tyro
from torch.distributions import Categorical
from torch.utils.tensorboard import SummaryWriter

import synthenv  # noqa: F401  registers the Gymnasium ids synthenv/<task>-v0
from synthenv.env import EpisodeStatistics
from synthenv.language import VOCAB_SIZE, decode_batch


@dataclass(frozen=True)
class Args:
    task: str = "print-hello"
    """Task (``synthenv tasks`` lists them); the env is ``synthenv/<task>-v0``."""
    seed: int = 0
    """Seed of torch and of the env."""
    seconds: float = 120.0
    """Wall-clock budget (checked once per iteration); the run also stops when a program solves the task."""
    total_timesteps: int | None = None
    """Optional cap on env steps (tokens written), for tiny test runs."""
    num_envs: int = 64
    """N, environments stepped together (one program each)."""
    num_steps: int = 128
    """Steps per env in each rollout."""
    max_len: int = 100
    """L, most tokens per program (PQT: 100)."""
    device: str = "cpu"
    """Torch device of the env and the policy."""
    hidden: int = 64
    """LSTM width."""
    learning_rate: float = 1e-3
    """Adam's step size."""
    gamma: float = 1.0
    """Discount: 1, the reward is for the whole program (it comes when the program ends)."""
    gae_lambda: float = 0.95
    """GAE's lambda."""
    num_minibatches: int = 4
    """Minibatches per epoch (split by env, so each keeps its whole sequences for the LSTM)."""
    update_epochs: int = 4
    """Epochs over each rollout."""
    clip_coef: float = 0.2
    """PPO's clipping of the probability ratio."""
    ent_coef: float = 0.01
    """Entropy bonus."""
    vf_coef: float = 0.5
    """Value-loss weight."""
    max_grad_norm: float = 0.5
    """Gradient clipping."""
    log_dir: str | None = "runs"
    """TensorBoard root: runs/{task}__ppo_token_mode__{seed}__{unix_time}; None: no logs."""
    json_out: str | None = None
    """Write the result (task, seed, solved, best_reward, best_program, env_steps, seconds, env_steps_per_s) here."""


class Agent(nn.Module):
    """An LSTM over the tokens written so far (one per step), with policy and value heads."""

    def __init__(self, max_len: int, hidden: int):
        super().__init__()
        self.max_len = max_len
        self.embed = nn.Embedding(VOCAB_SIZE + 1, hidden)  # the last token written; VOCAB_SIZE: none yet
        self.lstm = nn.LSTM(hidden + 1, hidden)
        self.actor, self.critic = nn.Linear(hidden, VOCAB_SIZE), nn.Linear(hidden, 1)
        nn.init.orthogonal_(self.actor.weight, 0.01)  # small logits: a near-uniform first policy
        nn.init.zeros_(self.actor.bias)

    def inputs(self, obs: dict) -> torch.Tensor:
        """``[N, 2]`` long: the last token written (``VOCAB_SIZE`` at the start) and the position."""
        position = obs["position"]  # [N]
        last = obs["program"].gather(1, (position - 1).clamp(min=0)[:, None])[:, 0]
        return torch.stack([torch.where(position > 0, last, VOCAB_SIZE), position], 1)

    def states(self, x: torch.Tensor, lstm_state: tuple, done: torch.Tensor):
        """Run the LSTM over ``x [T*B, 2]`` step by step, zeroing its state where an episode starts."""
        batch = lstm_state[0].shape[1]
        features = torch.cat([self.embed(x[:, 0]), (x[:, 1:] / self.max_len).float()], 1)
        features, done = features.reshape(-1, batch, features.shape[-1]), done.reshape(-1, batch)
        hidden = []
        for feature, starts in zip(features, done):
            keep = (1.0 - starts).view(1, -1, 1)
            out, lstm_state = self.lstm(feature[None], (keep * lstm_state[0], keep * lstm_state[1]))
            hidden.append(out)
        return torch.cat(hidden).flatten(0, 1), lstm_state

    def act(self, x, lstm_state, done, mask, action=None):
        hidden, lstm_state = self.states(x, lstm_state, done)
        logits = self.actor(hidden).masked_fill(~mask, -1e9)  # syntax masks: illegal tokens get no mass
        dist = Categorical(logits=logits, validate_args=False)  # validation would sync the host every step
        action = dist.sample() if action is None else action
        return action, dist.log_prob(action), dist.entropy(), self.critic(hidden).flatten(), lstm_state


def main(args: Args) -> dict:
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    envs = EpisodeStatistics(gymnasium.make_vec(  # the policy samples token ids only: no range check (a host sync)
        f"synthenv/{args.task}-v0", num_envs=args.num_envs, mode="token", max_len=args.max_len, device=args.device,
        validate_actions=False))
    run_name = f"{args.task}__ppo_token_mode__{args.seed}__{int(time.time())}"
    writer = SummaryWriter(f"{args.log_dir}/{run_name}") if args.log_dir else None
    agent = Agent(args.max_len, args.hidden).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    T, N = args.num_steps, args.num_envs
    inputs = torch.zeros((T, N, 2), dtype=torch.long, device=device)
    masks = torch.zeros((T, N, VOCAB_SIZE), dtype=torch.bool, device=device)
    actions, dones = torch.zeros((T, N), dtype=torch.long, device=device), torch.zeros((T, N), device=device)
    logprobs, rewards, values = (torch.zeros((T, N), device=device) for _ in range(3))
    best_key = torch.tensor(-float("inf"), device=device)  # reward, +1 if solved: a solver always wins
    best_reward, best_program = best_key.clone(), torch.zeros(args.max_len, dtype=torch.long, device=device)

    start, env_steps, solved = time.time(), 0, False
    obs, info = envs.reset(seed=args.seed)
    next_mask, next_done = info["action_mask"], torch.zeros(N, device=device)
    lstm_state = (torch.zeros(1, N, args.hidden, device=device), torch.zeros(1, N, args.hidden, device=device))
    while not solved and time.time() - start < args.seconds:
        if args.total_timesteps is not None and env_steps >= args.total_timesteps:
            break
        initial_lstm_state = (lstm_state[0].clone(), lstm_state[1].clone())
        for step in range(T):  # rollout: all on the device, no host sync
            inputs[step], masks[step], dones[step] = agent.inputs(obs), next_mask, next_done
            with torch.no_grad():
                action, logprob, _, value, lstm_state = agent.act(inputs[step], lstm_state, next_done, next_mask)
            obs, reward, terminated, truncated, info = envs.step(action)
            actions[step], logprobs[step], values[step], rewards[step] = action, logprob, value, reward
            done = terminated | truncated
            next_done, next_mask = done.float(), info["action_mask"]
            key = torch.where(done, reward + info["solved"].float(), -float("inf"))  # [N] programs that ended
            i, better = key.argmax()[None], key.max() > best_key  # [1]: x[i] with a 0-d i would sync
            best_key = torch.maximum(key.max(), best_key)
            best_reward = torch.where(better, reward.index_select(0, i)[0], best_reward)
            best_program = torch.where(better, info["final_obs"]["program"].index_select(0, i)[0], best_program)
        env_steps += T * N

        with torch.no_grad():  # GAE, bootstrapped from the value of the state after the rollout
            next_value = agent.act(agent.inputs(obs), lstm_state, next_done, next_mask)[3]
            advantages, last = torch.zeros_like(rewards), torch.zeros(N, device=device)
            for t in reversed(range(T)):
                nonterminal = 1.0 - (next_done if t == T - 1 else dones[t + 1])
                following = next_value if t == T - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * following * nonterminal - values[t]
                advantages[t] = last = delta + args.gamma * args.gae_lambda * nonterminal * last
            returns = advantages + values

        b_inputs, b_masks = inputs.reshape(T * N, 2), masks.reshape(T * N, VOCAB_SIZE)
        b_actions, b_logprobs, b_dones = actions.reshape(-1), logprobs.reshape(-1), dones.reshape(-1)
        b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)
        flat = torch.arange(T * N, device=device).reshape(T, N)
        per_batch = max(1, N // args.num_minibatches)
        clipfracs = []
        for _ in range(args.update_epochs):
            env_order = torch.randperm(N, device=device)
            for first in range(0, N, per_batch):
                envs_mb = env_order[first : first + per_batch]
                mb = flat[:, envs_mb].reshape(-1)  # whole sequences of these envs, time-major
                _, newlogprob, entropy, newvalue, _ = agent.act(
                    b_inputs[mb], (initial_lstm_state[0][:, envs_mb], initial_lstm_state[1][:, envs_mb]),
                    b_dones[mb], b_masks[mb], b_actions[mb])
                logratio = newlogprob - b_logprobs[mb]
                ratio = logratio.exp()
                with torch.no_grad():
                    old_approx_kl, approx_kl = (-logratio).mean(), ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean())
                adv = b_advantages[mb]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                v_loss = 0.5 * ((newvalue - b_returns[mb]) ** 2).mean()
                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

        stats = envs.stats()  # sync point: logging, once per iteration
        envs.reset_stats()
        solved = bool(best_key > 1.0)  # sync point: the stop check (a solver's key is its reward 1 + 1)
        if writer:
            scalars = {"charts/episodic_return": stats["mean_return"], "charts/episodic_length": stats["mean_length"],
                       "charts/success_rate": stats["success_rate"], "charts/best_reward": float(best_reward),
                       "charts/learning_rate": optimizer.param_groups[0]["lr"],
                       "charts/SPS": env_steps / (time.time() - start), "losses/value_loss": v_loss.item(),
                       "losses/policy_loss": pg_loss.item(), "losses/entropy": entropy_loss.item(),
                       "losses/old_approx_kl": old_approx_kl.item(), "losses/approx_kl": approx_kl.item(),
                       "losses/clipfrac": torch.stack(clipfracs).mean().item()}
            for tag, value in scalars.items():
                writer.add_scalar(tag, value, env_steps)
            writer.add_text("programs/best_program", decode_batch(best_program[None])[0], env_steps)
        print(f"env_steps={env_steps} episodic_return={stats['mean_return']:.3f} best_reward={float(best_reward):.3f}")

    seconds = time.time() - start
    best = float(best_reward) if best_key > -float("inf") else None  # None: no program ended yet
    result = {"task": args.task, "seed": args.seed, "solved": solved, "best_reward": best,
              "best_program": decode_batch(best_program[None])[0], "env_steps": env_steps, "seconds": seconds,
              "env_steps_per_s": env_steps / seconds}
    if writer:
        writer.close()
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main(tyro.cli(Args))
