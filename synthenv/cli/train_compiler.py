"""``synthenv train-compiler``: train the neural compiler and save its weights.

With the defaults it reproduces the shipped ``neural_weights.pt`` (seeded, deterministic on
the CPU, a few minutes on 2 cores).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass



@dataclass(frozen=True)
class TrainCompilerCommand:
    """Train the neural compiler (labels from the traditional compiler) and save the weights."""

    steps: int = 1500
    """Optimiser steps."""
    batch_size: int = 64
    """Programs per step."""
    length: int = 64
    """Tokens per training program."""
    lr: float = 1e-2
    """Peak learning rate."""
    seed: int = 0
    """Seed of the initialisation and the training data."""
    threads: int = 1
    """CPU threads (fixed so that the weights are reproducible)."""
    out: str | None = None
    """Where to write the weights (default: the package's shipped neural_weights.pt)."""
    tiny: bool = False
    """A smoke run: 3 steps on 8 programs of 16 tokens (for tests)."""

    def run(self) -> int:
        import torch

        from synthenv.compilers import neural, neural_train

        if self.tiny:
            config = neural_train.TrainConfig(steps=3, batch_size=8, length=16, warmup=1, lr=self.lr,
                                              seed=self.seed, threads=self.threads)
        else:
            config = neural_train.TrainConfig(steps=self.steps, batch_size=self.batch_size, length=self.length,
                                              lr=self.lr, seed=self.seed, threads=self.threads)
        start = time.perf_counter()
        last = {}

        def log(step: int, loss: float, exact: float) -> None:
            last.update(loss=loss, exact=exact)
            print(f"step {step:5d}  loss {loss:.4f}  exact programs in batch {exact:6.1%}  "
                  f"{time.perf_counter() - start:6.1f}s", flush=True)

        model = neural_train.train(config, log=log)
        out = self.out or str(neural.WEIGHTS_PATH)
        metadata = {"train_config": asdict(config), "final_loss": last.get("loss", float("nan")),
                    "torch": str(torch.__version__), "train_seconds": round(time.perf_counter() - start, 1)}
        neural.save_weights(model, out, metadata)
        params = sum(p.numel() for p in model.parameters())
        print(f"saved {params} parameters to {out}")
        return 0
