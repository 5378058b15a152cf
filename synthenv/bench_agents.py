"""How fast each agent writes programs, beside the env alone at the same batch size (``synthenv bench-agents``).

An agent's training step proposes S x B programs, runs them through the program-mode env and
learns from the results; the env alone runs the same programs. Their ratio says how much of the
env's speed an agent keeps: 1.0 means the policy and the bookkeeping cost nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from synthenv.agents.run.trainer import TrainConfig, Trainer
from synthenv.language import DEFAULT_MAX_LEN


@dataclass(frozen=True)
class Throughput:
    """One algorithm's measured rates (programs per second, warm-up excluded)."""

    algo: str
    batch: int
    """Programs per step (all members)."""
    agent_programs_per_s: float
    """Training steps: propose, run and score, learn."""
    env_programs_per_s: float
    """The env alone on the same programs."""

    @property
    def ratio(self) -> float:
        return self.agent_programs_per_s / self.env_programs_per_s


def measure(algo: str, config: object, task: str = "reverse", seeds: tuple[int, ...] = (0, 1, 2),
            max_len: int = DEFAULT_MAX_LEN, warmup: int = 5, steps: int = 20, replay: int = 8, device: str = "cpu") -> Throughput:
    """Time ``steps`` training steps of ``algo`` after ``warmup`` ones; then record the programs
    of ``replay`` more steps and time the env alone on them. # sync point: timing."""
    trainer = Trainer(TrainConfig(task=task, algo=algo, algo_config=config, seeds=seeds, max_len=max_len,
                                  log_dir=None, progress=False, device=device, npe=None))
    n = trainer.num_members * trainer.batch
    for _ in range(warmup):
        trainer.step()
    _synchronize(trainer.device)
    start, executed = time.perf_counter(), trainer.env_programs
    for _ in range(steps):
        trainer.step()
    _synchronize(trainer.device)
    agent = time.perf_counter() - start
    executed = trainer.env_programs - executed  # a member that waited wrote no programs
    batches, propose = [], trainer.algorithm.propose
    trainer.algorithm.propose = lambda: _recorded(propose(), batches, n)
    for _ in range(replay):
        trainer.step()
    start = time.perf_counter()
    for tokens in batches:
        trainer.env.step(tokens)
    _synchronize(trainer.device)
    env = time.perf_counter() - start
    return Throughput(algo, n, executed / agent, n * len(batches) / env)


def _recorded(tokens: torch.Tensor, batches: list[torch.Tensor], n: int) -> torch.Tensor:
    batches.append(tokens.reshape(n, -1).clone())  # algorithms may refill their buffers in place
    return tokens


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
