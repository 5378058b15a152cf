"""``synthenv train-compiler``: train the neural compiler and save its weights.

With the defaults it reproduces the shipped ``neural_weights.pt`` (seeded, deterministic on
the CPU, a few minutes on 2 cores) and writes it to ``runs/neural_weights.pt``, never over the
package's own file unless that path is given.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass


DEFAULT_OUT = "runs/neural_weights.pt"


@dataclass(frozen=True)
class TrainCompilerCommand:
    """Train the neural compiler (labels from the traditional compiler) and save the weights.

    Use the weights: synthenv compiler-report --weights runs/neural_weights.pt measures them; in Python,
    synthenv.compilers.neural.NeuralCompiler("runs/neural_weights.pt") compiles with them, and
    synthenv.compilers.register("my-neural", lambda: NeuralCompiler("runs/neural_weights.pt")) makes them a
    backend (backend="my-neural") for synthenv.score, the envs and synthenv.agents.train in that Python
    process. The shipped weights are replaced only when --out names the package's file
    (synthenv.compilers.neural.WEIGHTS_PATH).
    """

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
    out: str = DEFAULT_OUT
    """Where to write the weights (folders are created; checked before training starts)."""
    tiny: bool = False
    """A smoke run: 3 steps on 8 programs of 16 tokens (for tests)."""

    def run(self) -> int:
        import torch

        from synthenv.checks import require_writable
        from synthenv.compilers import neural, neural_train

        out = str(require_writable(self.out, "--out"))  # fail now, not after training
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
        metadata = {"train_config": asdict(config), "final_loss": last.get("loss", float("nan")),
                    "torch": str(torch.__version__), "train_seconds": round(time.perf_counter() - start, 1)}
        neural.save_weights(model, out, metadata)
        params = sum(p.numel() for p in model.parameters())
        print(f"saved {params} parameters to {out}")
        return 0
