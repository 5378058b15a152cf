"""GRPO on BF program synthesis with TRL, synthenv as the reward: any causal LM, any synthenv suite.

Each row of the dataset is a task's prompt (``synthenv.llm.prompt``: description, examples, dialect); TRL samples
``--num-generations`` completions per prompt and ``synthenv.llm.Reward`` scores them all on the task's every case,
batched per task. TensorBoard (``--log-dir``) gets TRL's charts, among them the reward (``train/reward``,
``train/rewards/synthenv_pqt/mean``) and the solve rate (``train/rewards/synthenv_solved/mean``: a second reward
function with weight 0, logged but not trained on). Needs ``pip install 'synthenv[llm]'``.

    python examples/grpo_trl.py --model Qwen/Qwen2.5-0.5B-Instruct --suite generated-text-train:200 --chat
    python examples/grpo_trl.py --model ./my-model --suite esolang:esolang_benchmark.json#easy --max-steps 100
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

import torch
import tyro

from synthenv import llm


@dataclass(frozen=True)
class Args:
    model: str
    """A causal LM: a hub name or a local folder (``AutoModelForCausalLM``)."""
    suite: tuple[str, ...] = ("paper",)
    """The tasks, as ``synthenv table --tasks`` takes them: suites, task names, ``*.json`` files, ``esolang:PATH``."""
    kind: str = "pqt"
    """What the reward is (``synthenv.llm.KINDS``): ``pqt``, ``solved`` or ``cases`` (share of cases passed)."""
    examples: int = 3
    """Cases shown in each prompt (every case is scored)."""
    chat: bool = False
    """Chat prompts (system and user messages; the model's tokenizer needs a chat template)."""
    repeat: int = 1
    """Rows per task in the dataset."""
    num_generations: int = 8
    """Completions per prompt (GRPO's group)."""
    batch_size: int = 8
    """Completions per device per step (a multiple of ``num_generations``' divisor; see TRL's GRPOConfig)."""
    max_completion_length: int = 256
    """Tokens per completion."""
    learning_rate: float = 1e-6
    max_steps: int = 200
    """Optimiser steps."""
    seed: int = 0
    log_dir: str = "runs/grpo"
    """Checkpoints and TensorBoard events (``tensorboard --logdir runs``)."""
    json_out: str | None = None
    """Write the run's summary (steps, seconds, reward seconds, last logged reward and solve rate) here."""


class Timed:
    """A reward function that adds the seconds it spends to ``seconds`` (how much of a step the reward takes)."""

    def __init__(self, reward: llm.Reward):
        self.reward, self.seconds, self.calls = reward, 0.0, 0
        self.__name__ = reward.__name__

    def __call__(self, *args, **kwargs) -> list[float]:
        started = time.perf_counter()
        try:
            return self.reward(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls += 1


def main(args: Args) -> dict:
    from trl import GRPOConfig, GRPOTrainer  # the llm extra

    train = llm.dataset(args.suite, examples=args.examples, chat=args.chat, repeat=args.repeat)
    tasks = llm.suite(args.suite)
    reward = Timed(llm.Reward(tasks, kind=args.kind))
    solved = llm.Reward(tasks, kind="solved")
    os.environ.setdefault("TENSORBOARD_LOGGING_DIR", os.path.join(args.log_dir, "tensorboard"))
    config = GRPOConfig(
        output_dir=args.log_dir, per_device_train_batch_size=args.batch_size, num_generations=args.num_generations,
        max_completion_length=args.max_completion_length, learning_rate=args.learning_rate, max_steps=args.max_steps,
        seed=args.seed, logging_steps=1, report_to=["tensorboard"], save_strategy="no",
        reward_weights=[1.0, 0.0],  # the solve rate is logged, not trained on
        use_cpu=not torch.cuda.is_available(), bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
    )
    trainer = GRPOTrainer(model=args.model, reward_funcs=[reward, solved], args=config, train_dataset=train)
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    logged = [entry for entry in trainer.state.log_history if "reward" in entry]
    last = logged[-1] if logged else {}
    summary = {"model": args.model, "suite": list(args.suite), "tasks": len(tasks), "steps": trainer.state.global_step,
               "seconds": round(seconds, 2), "reward_seconds": round(reward.seconds, 4), "reward_calls": reward.calls,
               "reward": last.get("reward"), "solve_rate": last.get(f"rewards/{solved.__name__}/mean")}
    print(json.dumps(summary))
    if args.json_out:
        with open(args.json_out, "w") as file:
            json.dump(summary, file)
    return summary


if __name__ == "__main__":
    main(tyro.cli(Args))
