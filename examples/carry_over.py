"""Carry what the edit policy learned on one task over to the next: fine-tune it, save it, start from it.

The agent ``ppo`` fine-tunes its edit policy by PPO on the task at hand. ``TrainConfig(policy_out=PATH)``
saves the fine-tuned policy and ``PPOConfig(policy=PATH)`` starts the next run from it (at the command line:
``synthenv train --policy-out PATH``, then ``--policy PATH``). This script fine-tunes a policy on one task
(by default: add 5 to a value) for a fixed budget, and then solves a related task (add 7) on the same seeds
from three starts: the policy fine-tuned on the first task, one fine-tuned alike on an unrelated task
(subtract 5), and the policy both started from. It prints the programs each run executed until it solved.

    python examples/carry_over.py                      # from random weights: the carried policy needs about 0.6x
    python examples/carry_over.py --start pretrained   # from the shipped policy, which already adds and subtracts

Every task is given by the program that defines it (its outputs on 10 drawn inputs are the expected outputs).
The generations are small (256 programs in 4 islands of 8) so that the programs needed resolve the difference.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import tyro

from synthenv import agents, tasks


@dataclass(frozen=True)
class Args:
    first: str = ",+++++."
    """The program that defines the task the policy is fine-tuned on."""
    then: str = ",+++++++."
    """The program that defines the related task solved afterwards."""
    unrelated: str = ",-----."
    """The program that defines the task of the comparison policy (fine-tuned alike, on another task)."""
    start: str = "scratch"
    """Where the policies start: scratch (random weights), pretrained (the shipped policy) or a policy file."""
    tune_npe: int = 30_000
    """Programs the policy is fine-tuned for on the first task (it searches on after solving it)."""
    npe: int = 30_000
    """Budget of each run on the related task (a run that does not solve within it counts it all)."""
    seeds: int = 8
    """Runs on the related task from each start (seeds seed .. seed + seeds - 1, the same for every start)."""
    seed: int = 10
    """First seed of those runs (the fine-tuning runs use seed 0)."""
    json_out: str | None = None
    """Write the result (programs each run executed until it solved, None if it did not) here."""


def make_task(name: str, program: str) -> tasks.Task:
    """A task of one input value in [6, 120), whose expected output is what ``program`` prints."""
    return tasks.Task.from_program(name, program, lambda r: [r.randrange(6, 120)], num_cases=10,
                                   description=f"print what {program} prints")


def main(args: Args) -> dict:
    names = {"first": "carry-first", "unrelated": "carry-unrelated", "then": "carry-then"}
    for role, name in names.items():
        tasks.register(make_task(name, getattr(args, role)), overwrite=True)
    config = agents.PPOConfig(batch_size=256, islands=4, island_size=8, queue_size=16, elitist=False,
                              update_every=2, policy=args.start)
    job = {"algo": "ppo", "log_dir": None, "progress": False}
    npe = {}
    with tempfile.TemporaryDirectory() as folder:
        starts = {}
        for role in ("first", "unrelated"):
            starts[f"fine-tuned on {getattr(args, role)}"] = path = str(Path(folder) / f"{role}.pt")
            agents.train(agents.TrainConfig(task=names[role], algo_config=config, npe=args.tune_npe, seeds=(0,),
                                            stop_on_success=False, policy_out=path, **job))
        starts[args.start] = args.start
        for label, policy in starts.items():
            runs = agents.train(agents.TrainConfig(
                task=names["then"], algo_config=dataclasses.replace(config, policy=policy), npe=args.npe,
                seeds=tuple(range(args.seed, args.seed + args.seeds)), **job))
            npe[label] = [run.npe if run.solved else None for run in runs]
    print(f"programs executed until {args.then} was solved ({args.seeds} seeds, budget {args.npe}):")
    for label, counts in npe.items():
        total = sum(args.npe if n is None else n for n in counts)
        print(f"  {label:>28}: total {total:>7}  {counts}")
    result = {"then": args.then, "start": args.start, "npe": npe}
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main(tyro.cli(Args))
