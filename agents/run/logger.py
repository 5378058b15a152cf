"""TensorBoard logs (one run directory per seed) and the progress bar of a training job.

Tags follow CleanRL's scheme: ``charts/`` (episodic_return, success_rate, programs_per_s, best_reward,
learning_rate), ``losses/`` (policy_loss, value_loss, entropy, approx_kl, old_approx_kl,
clipfrac, explained_variance, queue_loss, grad_norm), ``programs/`` (step_limit_rate,
mean_length, queue_best, queue_worst, best_program and, once solved, minimal_program as text), ``verify/`` (the hybrid backend's
audit). The x axis is the seed's NPE. The run's settings go to TensorBoard's HPARAMS dashboard
(with the final ``hparams/solved``, ``hparams/npe``, ``hparams/seconds`` and
``hparams/best_reward``) and, as a markdown table, to the text tab.
"""

from __future__ import annotations

import dataclasses
import time

import torch

from synthenv.language import Status, decode_batch

from ..registry import default_config
from ..search.rows import program_lengths


def run_dir_name(task: str, algo: str, seed: int, unix_time: int) -> str:
    """``{task}__{algo}__{seed}__{unix_time}`` (CleanRL's scheme).

    >>> run_dir_name("reverse", "ppo", 1, 1700000000)
    'reverse__ppo__1__1700000000'
    """
    return f"{task}__{algo}__{seed}__{unix_time}"


def hyperparameters(config) -> dict[str, object]:
    """The run's settings, the algorithm's fields flattened in (``policy.hidden`` etc.)."""
    rows = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name != "algo_config"}
    rows["seeds"] = ",".join(str(s) for s in config.seeds)
    algo_config = config.algo_config
    if algo_config is None:
        algo_config = default_config(config.algo)
    for key, value in dataclasses.asdict(algo_config).items():
        if isinstance(value, dict):
            rows.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            rows[key] = value
    return rows


def hyperparameter_table(config) -> str:
    """A markdown table of ``hyperparameters(config)``."""
    rows = hyperparameters(config)
    return "|param|value|\n|-|-|\n" + "\n".join(f"|{key}|{value}|" for key, value in rows.items())


FINAL_METRICS = ("hparams/solved", "hparams/npe", "hparams/seconds", "hparams/best_reward")


def _hparam_value(value: object) -> object:
    """What the HPARAMS plugin accepts: numbers, strings and bools (None and tuples as text)."""
    return value if isinstance(value, (int, float, str, bool)) else str(value)


class RunLogger:
    """Accumulates per-member statistics on the device; writes them out at sync points."""

    def __init__(self, config, task_name: str, run_dirs: list[str | None], trainer):
        self.config = config
        self.writers = []
        self.sums: dict[str, torch.Tensor] = {}
        self.counts: dict[str, torch.Tensor] = {}
        self.logging = [True] * len(run_dirs)  # members whose runs are still being logged
        if config.log_dir is not None:
            from torch.utils.tensorboard import SummaryWriter
            from torch.utils.tensorboard.summary import hparams

            params = {key: _hparam_value(value) for key, value in hyperparameters(config).items()}
            experiment, start, _ = hparams(params, {name: 0.0 for name in FINAL_METRICS})
            table = hyperparameter_table(config)
            for run_dir in run_dirs:
                writer = SummaryWriter(run_dir)
                writer.add_text("hyperparameters", table)
                for summary in (experiment, start):
                    writer.file_writer.add_summary(summary)
                self.writers.append(writer)
        self.bar = None
        if config.progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=100, unit="%", dynamic_ncols=True, desc=f"{task_name} {config.algo}",
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix}")
        self._last = (time.perf_counter(), trainer.env_programs)

    def accumulate(self, stats: dict[str, torch.Tensor], running: torch.Tensor) -> None:
        """Add one step's ``[S]`` statistics for the members that were running during it (device only).

        A statistic that is not finite for a member (NaN: the member did not take part, as a member whose
        policy did not update has no losses) does not count in its mean.
        """
        weight = running.float()
        for key, value in stats.items():
            value = value.float()
            finite = torch.isfinite(value)
            self.sums[key] = self.sums.get(key, 0.0) + torch.where(finite, value, 0.0) * weight
            self.counts[key] = self.counts.get(key, 0.0) + weight * finite

    def log(self, trainer, active: list[bool], final: bool) -> None:
        """Write the means since the last call; update the progress bar. # sync point."""
        now, executed = time.perf_counter(), trainer.env_programs
        window = now - self._last[0]
        rate = (executed - self._last[1]) / window if window > 0 else 0.0  # programs/s since the last log
        self._last = (now, executed)
        npe = trainer.record.npe.tolist()  # sync point
        best = trainer.record.best_rewards.tolist()
        if self.writers and self.counts:
            self._write(trainer, npe, best, rate, active, final)
        if self.writers and final:
            self._write_final(trainer, npe, best)
        self.sums, self.counts = {}, {}
        if self.bar is not None:
            self._show(trainer, best, rate)

    def _write(self, trainer, npe: list[int], best: list[float], rate: float, active: list[bool],
               final: bool) -> None:
        counts = {key: value.tolist() for key, value in self.counts.items()}
        means = {key: (value / self.counts[key].clamp(min=1.0)).tolist() for key, value in self.sums.items()}
        programs = decode_batch(trainer.record.best_tokens)
        audit = trainer.env.audit_stats()  # the hybrid backend's audit (verify/*), else None; host numbers
        for i, writer in enumerate(self.writers):
            if not self.logging[i]:
                continue
            for key, values in means.items():
                if counts[key][i] > 0:
                    writer.add_scalar(key, values[i], npe[i])
            writer.add_scalar("charts/programs_per_s", rate, npe[i])
            writer.add_scalar("charts/best_reward", best[i], npe[i])
            writer.add_text("programs/best_program", f"`{programs[i]}` (reward {best[i]:.4f})", npe[i])
            if audit is not None:
                audit.write(writer, npe[i])
            writer.flush()
            self.logging[i] = active[i] and not final

    def _write_final(self, trainer, npe: list[int], best: list[float]) -> None:
        """The run's outcome under ``hparams/`` (the HPARAMS dashboard's metrics) and the session end."""
        from torch.utils.tensorboard.summary import hparams

        seconds, solved = trainer.record.solve_seconds(), trainer.record.solved_npe.tolist()  # sync point: the end
        end = hparams({}, {})[2]
        minimal = trainer.record.minimal_programs(trainer.task)
        for i, writer in enumerate(self.writers):
            if minimal[i] is not None:
                writer.add_text("programs/minimal_program", f"`{minimal[i]}` (solves every case)", npe[i])
            finals = (float(solved[i] >= 0), float(npe[i]), seconds[i] if seconds[i] is not None else trainer.elapsed,
                      best[i])
            for name, value in zip(FINAL_METRICS, finals):
                writer.add_scalar(name, value, npe[i])
            writer.file_writer.add_summary(end)
            writer.flush()

    def _show(self, trainer, best: list[float], rate: float) -> None:
        """The bar shows the budget that binds: the larger of the NPE and time fractions."""
        config = self.config
        done = trainer.schedule.done_programs
        npe_part = min(1.0, done / config.npe) if config.npe is not None else 0.0
        time_part = min(1.0, trainer.elapsed / config.seconds) if config.seconds else 0.0
        if config.seconds and time_part >= npe_part:
            budget = f"time {trainer.elapsed:.0f}/{config.seconds:.0f} s"
        else:
            budget = f"NPE {_short(done)}/{_short(config.npe) if config.npe is not None else 'no budget'}"
        solved = sum(1 for n in trainer.record.solved_npe.tolist() if n >= 0)
        self.bar.n = round(100 * max(npe_part, time_part), 1)
        self.bar.set_postfix_str(f"{budget}, {rate:,.0f} prog/s, best {max(best):.3f}, solved {solved}/{len(best)}",
                                 refresh=True)

    def close(self) -> None:
        for writer in self.writers:
            writer.close()
        if self.bar is not None:
            self.bar.close()


def _short(count: int) -> str:
    """``12_345_678 -> '12.3M'``.

    >>> _short(950), _short(12_345), _short(20_000_000)
    ('950', '12.3k', '20M')
    """
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if count >= size:
            return f"{count / size:.3g}{unit}"
    return str(count)


def batch_statistics(tokens: torch.Tensor, rewards: torch.Tensor, solved: torch.Tensor,
                     status: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-member means over one batch: ``[S, B, ...]`` inputs -> ``[S]`` statistics."""
    lengths = program_lengths(tokens).float()  # [S, B]
    return {
        "charts/episodic_return": rewards.float().mean(1),
        "charts/success_rate": solved.float().mean(1),
        "programs/step_limit_rate": (status == Status.STEP_LIMIT).float().mean(1),
        "programs/mean_length": lengths.mean(1),
    }
