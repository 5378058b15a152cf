"""``synthenv train``: train a synthesis agent on a task, with TensorBoard logs and checkpoints."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Literal

Algo = Literal["ppo", "pqt", "pg-pqt", "reinforce", "ga", "random"]

# command-line option -> the field it sets in each algorithm's config (absent: not applicable)
_OVERRIDES = {
    "batch_size": {"ppo": "batch_size", "pqt": "batch_size", "pg-pqt": "batch_size", "reinforce": "batch_size",
                   "random": "batch_size", "ga": "population"},
    "learning_rate": {a: "learning_rate" for a in ("ppo", "pqt", "pg-pqt", "reinforce")},
    "entropy_coef": {"ppo": "ent_coef", **{a: "entropy_coef" for a in ("pqt", "pg-pqt", "reinforce")}},
    "queue_size": {a: "queue_size" for a in ("ppo", "pqt", "pg-pqt", "reinforce")},
    "queue_weight": {"ppo": "queue_coef", **{a: "queue_weight" for a in ("pqt", "pg-pqt", "reinforce")}},
    "seed_prob": {"ppo": "seed_prob"},
    "update_epochs": {"ppo": "update_epochs"},
}


@dataclass(frozen=True)
class TrainCommand:
    """Train an agent to write BF programs for a task; stops when a sampled program solves it.

    Quick start: ``synthenv train`` (PPO on the starter task echo: solved in under a minute on a laptop CPU).
    Logs: ``tensorboard --logdir runs``.
    """

    task: str = "echo"
    """Task name (``synthenv tasks``)."""
    algo: Algo = "ppo"
    """ppo: ours (PPO + self-imitation queue); pqt, pg-pqt, reinforce, ga, random: PQT-paper baselines."""
    npe: int = 50_000
    """Budget per seed: programs executed (NPE, as PQT counts it)."""
    seed: int = 0
    """First seed."""
    num_seeds: int = 1
    """Seeds seed .. seed+num_seeds-1, trained as one batched job (each an independent run)."""
    backend: str = "traditional"
    """Compiler backend (``cpu`` = the host reference pipeline)."""
    engine: str = "auto"
    """Engine (``auto``: native C on the CPU, CUDA on a GPU, else torch)."""
    device: str = "cpu"
    """Torch device for the env, the policy and all training state."""
    max_len: int = 100
    """Tokens per program (PQT: 100)."""
    iterations: int | None = None
    """Program-mode rounds per episode; in round 2 PPO rewrites its best programs (--seed-prob).
    Default: 2 for ppo, 1 for the baselines."""
    suppress_eos: bool | None = None
    """Write exactly max_len tokens (PQT's fixed-length setting); default: on for the PQT baselines, off for ppo."""
    policy: Literal["lstm", "transformer"] | None = None
    """Policy network (default: PQT's 2x35 LSTM)."""
    batch_size: int | None = None
    """Programs per seed per step (GA: the population); default: the algorithm's (PQT: 64, GA: 100)."""
    learning_rate: float | None = None
    """Optimizer step size; default: the algorithm's."""
    entropy_coef: float | None = None
    """Entropy bonus weight; default: the algorithm's."""
    queue_size: int | None = None
    """Best-program queue capacity K; default: the algorithm's."""
    queue_weight: float | None = None
    """Weight of the queue imitation term; default: the algorithm's."""
    seed_prob: float | None = None
    """PPO: probability that a round-2 program is an edit of a queued program (default 0.5)."""
    update_epochs: int | None = None
    """PPO: passes over each batch."""
    log_dir: str | None = "runs"
    """TensorBoard root (``runs/{task}__{algo}__{seed}__{unix_time}``); pass None to disable logs."""
    log_every: int = 10
    """Steps between host syncs (logs, progress bar, stop check, checkpoints)."""
    checkpoint: str | None = None
    """Checkpoint file (written every --checkpoint-every steps and at the end)."""
    checkpoint_every: int = 100
    """Steps between checkpoints."""
    resume: str | None = None
    """Resume from this checkpoint (same settings; --npe may grow)."""
    json_out: str | None = None
    """Also write the per-seed results as JSON here."""
    progress: bool = True
    """Show a progress bar."""

    def train_config(self):
        """The ``agents.TrainConfig`` this command runs."""
        from synthenv import agents

        return agents.TrainConfig(
            task=self.task, algo=self.algo, npe=self.npe, seeds=tuple(range(self.seed, self.seed + self.num_seeds)),
            algo_config=algorithm_config(self.algo, self), backend=self.backend, engine=self.engine,
            device=self.device, max_len=self.max_len, iterations=self.iterations, log_dir=self.log_dir,
            log_every=self.log_every, checkpoint=self.checkpoint, checkpoint_every=self.checkpoint_every,
            resume=self.resume, progress=self.progress)

    def run(self) -> int:
        from synthenv import agents

        if self.num_seeds < 1:
            raise ValueError(f"num_seeds must be a positive int, got {self.num_seeds!r}")
        results = agents.train(self.train_config())
        print(summary(results))
        if self.json_out:
            with open(self.json_out, "w") as f:
                json.dump([dataclasses.asdict(r) for r in results], f, indent=2)
        return 0


def algorithm_config(algo: str, options) -> object:
    """The algorithm's default config with the options that were given (``None`` = default)."""
    from synthenv import agents
    from synthenv.agents import PolicyConfig

    config = agents.default_config(algo)
    changes = {}
    for option, targets in _OVERRIDES.items():
        value = getattr(options, option, None)
        if value is None:
            continue
        if algo not in targets:
            valid = sorted(a for a in agents.names() if a in targets)
            raise ValueError(f"--{option.replace('_', '-')} does not apply to algo {algo!r}; it applies to "
                             f"{', '.join(valid)}. Drop the option or pick one of those algorithms")
        changes[targets[algo]] = value
    if getattr(options, "policy", None) is not None:
        if not hasattr(config, "policy"):
            raise ValueError(f"--policy does not apply to algo {algo!r} (no policy network); drop it")
        hidden = 64 if options.policy == "transformer" else config.policy.hidden
        changes["policy"] = PolicyConfig(kind=options.policy, hidden=hidden)
    suppress = getattr(options, "suppress_eos", None)
    if suppress is not None:
        if not hasattr(config, "allow_eos"):
            if not suppress:
                raise ValueError(f"algo {algo!r} always writes fixed-length programs; drop --no-suppress-eos")
        else:
            changes["allow_eos"] = not suppress
    return dataclasses.replace(config, **changes)


def summary(results) -> str:
    """The final report: per seed solved?, NPE, best program; then the success count."""
    lines = []
    for r in results:
        outcome = f"solved at NPE {r.npe}" if r.solved else f"not solved in {r.npe} programs"
        lines.append(f"seed {r.seed}: {outcome}; best reward {r.best_reward:.4f}: {r.best_program!r}"
                     + (f"  [{r.run_dir}]" if r.run_dir else ""))
    solved = [r for r in results if r.solved]
    mean = sum(r.npe for r in solved) / len(solved) if solved else float("nan")
    speed = results[0].programs_per_s if results else 0.0
    lines.append(f"{results[0].task} / {results[0].algo}: solved {len(solved)}/{len(results)}, mean NPE to solve "
                 f"{mean:.0f}; {speed:.0f} programs/s (policy included)")
    return "\n".join(lines)
