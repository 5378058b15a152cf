"""``synthenv bench-reward``: completions per second of the LLM reward beside a plain-Python interpreter."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from synthenv import storage


@dataclass(frozen=True)
class BenchRewardCommand:
    """Completions scored per second by synthenv.llm.Reward (one call per GRPO batch) beside a plain-Python
    reference interpreter on the same completions, at each batch size; both rewards are checked equal. Warm-up
    excluded; the median of --repeats calls, with their spread."""

    batches: tuple[int, ...] = (256, 1024, 4096)
    """Completions per batch."""
    suite: str = "paper"
    """Tasks the rows cycle over (a suite, as 'synthenv table --tasks')."""
    group: int = 16
    """Completions per prompt (GRPO's group)."""
    repeats: int = 5
    """Timed calls of synthenv's reward per batch."""
    python_repeats: int = 1
    """Timed calls of the plain-Python reward per batch (seconds each at 4 096)."""
    engine: str = "auto"
    """Engine of synthenv's reward."""
    device: str = "cpu"
    """Torch device of synthenv's reward."""
    json: Path | None = None
    """Write one JSON record per batch size here (checked before anything runs)."""

    def run(self) -> int:
        from synthenv.bench import hardware, hardware_caption
        from synthenv.bench_reward import measure
        from synthenv.checks import require_positive_int, require_writable
        from synthenv.llm import Reward

        for name in ("group", "repeats", "python_repeats"):
            require_positive_int(name, getattr(self, name))
        if not self.batches:
            raise ValueError("--batches needs at least one batch size, e.g. --batches 256 1024 4096")
        for batch in self.batches:
            require_positive_int("batches", batch)
            if batch > 2**20:
                raise ValueError(f"a batch of {batch} completions is more than this benchmark builds (2**20); "
                                 "pass smaller --batches")
        Reward(self.suite, engine=self.engine, device=self.device)  # the suite, engine and device, before the header
        if self.json:
            require_writable(self.json, "--json")
        machine = hardware()
        print(f"{hardware_caption(machine)}; suite {self.suite}, {self.group} completions per prompt")
        print(f"{'batch':>7} {'synthenv completions/s (min-max)':>34} {'plain Python /s':>16} {'ratio':>8}")
        records = []
        for batch in self.batches:
            rate = measure(batch, self.suite, self.group, self.repeats, self.python_repeats, self.engine, self.device)
            spread = f"{rate.synthenv_per_s:,.0f} ({rate.synthenv_min:,.0f}-{rate.synthenv_max:,.0f})"
            print(f"{batch:>7,} {spread:>34} {rate.python_per_s:>16,.0f} {rate.ratio:>7.0f}x", flush=True)
            records.append({**dataclasses.asdict(rate), "ratio": rate.ratio, "suite": self.suite,
                            "group": self.group, "hardware": machine})
        if self.json:
            storage.write_json(self.json, records, "--json")
        return 0
