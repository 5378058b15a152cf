"""An evolutionary search on synthenv's program mode, steered by per-case feedback, in one file.

Program mode scores N whole programs per step and returns, per program, which test cases it
passed and each case's reward (``info["final_obs"]``: ``case_passed [N, K]``,
``case_rewards [N, K]``, ``outputs``...). This search keeps a population, mutates it, and picks
parents by a random weighting of the cases per pick (a batched stand-in for lexicase
selection): a program that is best on a few cases gets children even when its total is not the
best. Everything is batched tensors; swap in your own ``select`` or ``mutate`` and run.

    python examples/search_program_mode.py --task reverse --seconds 60
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import gymnasium
import torch
import tyro

import synthenv  # noqa: F401  registers the Gymnasium ids synthenv/<task>-v0
from synthenv.language import EOS, VOCAB_SIZE, decode_batch


@dataclass(frozen=True)
class Args:
    task: str = "reverse"
    """Task (``synthenv tasks`` lists them)."""
    seed: int = 0
    """Seed of the search and of the env."""
    seconds: float = 60.0
    """Wall-clock budget; the search also stops when a program solves the task."""
    max_generations: int | None = None
    """Optional cap on generations (for tiny test runs)."""
    population: int = 1024
    """N, programs per generation (one env each)."""
    max_len: int = 100
    """L, most tokens per program (PQT: 100)."""
    edits: int = 2
    """Most random edits (replace, insert or delete one token) per child."""
    focus: float = 4.0
    """How sharply a pick favours one case: weights softmax(focus * noise) over the K cases."""
    device: str = "cpu"
    """Torch device of the env and the search."""
    json_out: str | None = None
    """Write the result (task, seed, solved, best_reward, best_program, programs, seconds) here."""


def lengths_of(programs: torch.Tensor) -> torch.Tensor:
    """``[N]`` tokens before the first EOS."""
    return (programs != EOS).long().cumprod(1).sum(1)


def mutate(programs: torch.Tensor, edits: int, generator: torch.Generator) -> torch.Tensor:
    """Each program gets 1..edits random edits: replace, insert or delete one token (all batched)."""
    (n, width), device = programs.shape, programs.device
    columns = torch.arange(width, device=device)[None, :]  # [1, L]
    num_edits = torch.randint(1, edits + 1, (n, 1), generator=generator, device=device)
    for k in range(edits):
        active = num_edits > k  # [N, 1]
        length = lengths_of(programs)[:, None]  # [N, 1]
        at = (torch.rand((n, 1), generator=generator, device=device) * (length + 1)).long().clamp(max=width - 1)
        token = torch.randint(1, VOCAB_SIZE, (n, 1), generator=generator, device=device)  # a command, never EOS
        kind = torch.randint(0, 3, (n, 1), generator=generator, device=device)  # replace, insert, delete
        replaced = torch.where(columns == at, token, programs)
        inserted = torch.where(columns == at, token, programs.gather(1, (columns - (columns > at).long())))
        deleted = programs.gather(1, (columns + (columns >= at).long()).clamp(max=width - 1))
        deleted = torch.where(columns == width - 1, EOS, deleted)
        edited = torch.where(kind == 0, replaced, torch.where(kind == 1, inserted, deleted))
        programs = torch.where(active, edited, programs)
    return programs


def select(case_rewards: torch.Tensor, num: int, focus: float, generator: torch.Generator) -> torch.Tensor:
    """``[num]`` indices into the pool: each pick maximises a random weighting of the K cases."""
    k = case_rewards.shape[1]
    noise = torch.randn((num, k), generator=generator, device=case_rewards.device)
    weights = torch.softmax(focus * noise, dim=1)  # [num, K], mostly on one or two cases
    return (weights @ case_rewards.T).argmax(1)  # [num] over the pool


def main(args: Args) -> dict:
    device = torch.device(args.device)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    env = gymnasium.make_vec(f"synthenv/{args.task}-v0", num_envs=args.population, max_len=args.max_len,
                             device=args.device)
    env.reset(seed=args.seed)
    n, width = args.population, args.max_len
    population = torch.zeros((n, width), dtype=torch.long, device=device)  # start from empty programs
    case_rewards = torch.full((n, env.unwrapped.task.num_cases), -1e9, device=device)  # not yet scored
    rewards = torch.full((n,), -1e9, device=device)
    start, generation, programs, solved = time.time(), 0, 0, False
    while not solved and time.time() - start < args.seconds:
        if args.max_generations is not None and generation >= args.max_generations:
            break
        children = mutate(population, args.edits, generator)
        _, child_rewards, terminated, _, info = env.step(children)
        feedback = info["final_obs"]  # every episode is one round: the feedback of every child is here
        pool = torch.cat([population, feedback["program"]])  # parents and children compete (mu + lambda)
        pool_cases = torch.cat([case_rewards, feedback["case_rewards"]])
        pool_rewards = torch.cat([rewards, child_rewards])
        chosen = select(pool_cases, n, args.focus, generator)
        chosen[0] = pool_rewards.argmax()  # elitism: the best program so far always stays
        population, case_rewards, rewards = pool[chosen], pool_cases[chosen], pool_rewards[chosen]
        generation, programs = generation + 1, programs + n
        solved = bool(terminated.any())  # sync point: the stop check (terminated = solved in program mode)
        if generation % 50 == 0 or solved:
            passed = feedback["case_passed"].sum(1).max().item()
            print(f"generation={generation} best_reward={rewards[0].item():.4f} most_cases_passed={passed}")
    seconds = time.time() - start
    best = population[0] if not solved else feedback["program"][terminated.long().argmax()]
    result = {"task": args.task, "seed": args.seed, "solved": solved,
              "best_reward": 1.0 if solved else float(rewards[0]), "best_program": decode_batch(best[None])[0],
              "programs": programs, "seconds": seconds, "programs_per_s": programs / seconds}
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=2)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main(tyro.cli(Args))
