"""TensorBoard logs (one run directory per seed) and the tqdm progress bar of a training job.

Tags follow STYLE §18: ``charts/`` (episodic_return, success_rate, programs_per_s), ``losses/``
(policy_loss, value_loss, entropy, approx_kl, clipfrac, queue_loss), ``programs/``
(step_limit_rate, mean_length, best_program as text); the hyperparameters are a markdown
table under ``hyperparameters``. The x axis is the seed's NPE.
"""

from __future__ import annotations

import dataclasses

import torch


def run_dir_name(task: str, algo: str, seed: int, unix_time: int) -> str:
    """``{task}__{algo}__{seed}__{unix_time}`` (CleanRL's scheme).

    >>> run_dir_name("reverse", "ppo", 1, 1700000000)
    'reverse__ppo__1__1700000000'
    """
    return f"{task}__{algo}__{seed}__{unix_time}"


def hyperparameter_table(config) -> str:
    """A markdown table of the run's settings, the algorithm's fields flattened in."""
    rows = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name != "algo_config"}
    algo_config = config.algo_config
    if algo_config is None:
        from . import default_config

        algo_config = default_config(config.algo)
    for key, value in dataclasses.asdict(algo_config).items():
        if isinstance(value, dict):
            rows.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            rows[key] = value
    return "|param|value|\n|-|-|\n" + "\n".join(f"|{key}|{value}|" for key, value in rows.items())


class RunLogger:
    """Accumulates per-member statistics on the device; writes them out at sync points."""

    def __init__(self, config, run_dirs: list[str | None], npe_start: int):
        self.config = config
        self.writers = []
        self.sums: dict[str, torch.Tensor] = {}
        self.counts: dict[str, torch.Tensor] = {}
        self.logging = [True] * len(run_dirs)  # members whose runs are still being logged
        if config.log_dir is not None:
            from torch.utils.tensorboard import SummaryWriter

            table = hyperparameter_table(config)
            for run_dir in run_dirs:
                writer = SummaryWriter(run_dir)
                writer.add_text("hyperparameters", table)
                self.writers.append(writer)
        self.bar = None
        if config.progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=config.npe, initial=npe_start, unit="prog", dynamic_ncols=True,
                            desc=f"{config.task} {config.algo}")
        self.shown = npe_start

    def accumulate(self, stats: dict[str, torch.Tensor], active: torch.Tensor) -> None:
        """Add one step's ``[S]`` statistics for the members that were running (device only).

        ``losses/`` entries count only where ``stats["_learned"]`` (``[S]``, optional) is nonzero:
        a step whose programs held no policy decisions (all seeded) has no losses to average.
        """
        stats = dict(stats)
        weight = active.float()
        learned = weight * stats.pop("_learned", torch.ones_like(weight)).float()
        for key, value in stats.items():
            w = learned if key.startswith("losses/") else weight
            self.sums[key] = self.sums.get(key, 0.0) + value.float() * w
            self.counts[key] = self.counts.get(key, 0.0) + w

    def log(self, trainer, active: list[bool], final: bool) -> None:
        """Write the means since the last call. # sync point (reads statistics back)."""
        npe = trainer.npe.tolist()  # sync point
        speed = trainer.programs_executed / trainer.elapsed if trainer.elapsed else 0.0
        best = trainer.best_rewards.tolist()
        if self.writers and self.counts:
            counts = {key: value.tolist() for key, value in self.counts.items()}
            means = {key: (value / self.counts[key].clamp(min=1.0)).tolist() for key, value in self.sums.items()}
            programs = None
            for i, writer in enumerate(self.writers):
                if not self.logging[i]:
                    continue
                for key, values in means.items():
                    if counts[key][i] > 0:
                        writer.add_scalar(key, values[i], npe[i])
                if counts["charts/episodic_return"][i] > 0:
                    writer.add_scalar("charts/programs_per_s", speed, npe[i])
                    writer.add_scalar("charts/best_reward", best[i], npe[i])
                if programs is None:
                    from synthenv.language import decode_batch

                    programs = decode_batch(trainer.best_tokens)
                writer.add_text("programs/best_program", f"`{programs[i]}` (reward {best[i]:.4f})", npe[i])
                writer.flush()
                self.logging[i] = active[i] and not final
        self.sums, self.counts = {}, {}
        if self.bar is not None:
            done = trainer.npe_done
            self.bar.update(max(0, min(done, self.config.npe) - self.shown))
            self.shown = max(self.shown, min(done, self.config.npe))
            solved = sum(1 for n in trainer.solved_npe.tolist() if n >= 0)
            self.bar.set_postfix({"prog/s": f"{speed:.0f}", "best": f"{max(best):.3f}",
                                  "solved": f"{solved}/{len(best)}"}, refresh=True)

    def close(self) -> None:
        for writer in self.writers:
            writer.close()
        if self.bar is not None:
            self.bar.close()
