"""Your own task from input/output pairs: define it, score programs on it, train an agent on it.

A task is a list of (input, expected output) pairs of integers in [0, base). Registering it gives
it a name that every part of synthenv knows: ``synthenv.score``, the Gymnasium id
``synthenv/<name>-v0`` (after ``register_envs()``), and ``synthenv.agents.train``.

    python examples/own_task.py --seconds 30
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import gymnasium
import tyro

import synthenv
from synthenv import agents, tasks
from synthenv.env import register_envs


@dataclass(frozen=True)
class Args:
    algo: str = "mutation"
    """Agent (``synthenv.agents.names()``): ``mutation`` is the plain elitist search."""
    seed: int = 0
    """Seed of the agent."""
    npe: int = 2_000_000
    """Budget: programs executed."""
    seconds: float = 60.0
    """Wall-clock budget; training stops earlier when a program solves the task."""
    max_len: int = 20
    """L, most tokens per program."""
    log_dir: str | None = None
    """TensorBoard root (``runs``: runs/{task}__{algo}__{seed}__{unix_time}); None: no logs."""
    json_out: str | None = None
    """Write the result (task, seed, solved, best_reward, best_program, npe, seconds) here."""


def make_task() -> synthenv.Task:
    """Add one to every value of a list (input ends at the first 0, as PQT's list tasks do)."""
    lists = [[3, 1, 4], [1, 5, 9, 2], [6], [2, 6, 5, 3, 5], [8, 9], [7, 9, 3, 2, 3, 8]]
    pairs = [(values, [v + 1 for v in values]) for values in lists]
    return tasks.Task.from_pairs("increment-each", pairs, base=256, description="add 1 to each value",
                                 solution=",[+.,]")


def main(args: Args) -> dict:
    task = make_task()
    tasks.register(task, overwrite=True)  # now a name: synthenv.score(..., "increment-each"), the CLI, agents
    register_envs()  # and a Gymnasium id: synthenv/increment-each-v0

    scores = synthenv.score([task.solution, ",[.,]", "+."], "increment-each")
    print("hand-written programs:", [round(r, 4) for r in scores.rewards.tolist()], scores.solved.tolist())

    env = gymnasium.make_vec("synthenv/increment-each-v0", num_envs=2, max_len=args.max_len)
    env.reset(seed=args.seed)
    _, rewards, _, _, info = env.step(synthenv.encode_batch([task.solution, ",."], args.max_len))
    print("one env step:", rewards.tolist(), info["final_obs"]["case_passed"].sum(1).tolist(), "cases passed")

    config = agents.TrainConfig(task="increment-each", algo=args.algo, npe=args.npe, seconds=args.seconds,
                                seeds=(args.seed,), max_len=args.max_len, log_dir=args.log_dir, progress=False)
    run = agents.train(config)[0]
    check = synthenv.score([run.best_program], "increment-each")  # the agent's program, scored again
    result = {"task": run.task, "seed": run.seed, "solved": run.solved, "best_reward": run.best_reward,
              "best_program": run.best_program, "npe": run.npe, "seconds": run.seconds,
              "rescored_solved": bool(check.solved[0])}
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=2)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main(tyro.cli(Args))
