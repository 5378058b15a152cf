"""``synthenv bench-agents``: each agent's programs per second beside the env alone at the same batch size."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from synthenv import storage

from synthenv.language import DEFAULT_MAX_LEN, MAX_LEN


@dataclass(frozen=True)
class BenchAgentsCommand:
    """Programs per second of training steps (propose, run and score, learn), beside the env alone on
    the same programs: the share of the env's speed each agent keeps. Warm-up steps are excluded.
    Algorithms are NAME or NAME:field=value,... as in 'synthenv table' (e.g. ga:batch_size=4096).
    """

    algos: tuple[str, ...] = ("islands", "islands:elitist=False", "ppo:elitist=False", "mutation", "random",
                              "ga:batch_size=4096", "pqt", "reinforce")
    """Algorithms to measure, one after the other (never two at once). A few dozen steps of 'islands' are its
    elitist phase; 'islands:elitist=False' times its islands, what it runs after the hand-over, and
    'ppo:elitist=False' those islands with the edit policy."""
    task: str = "reverse"
    """Task the programs are scored on."""
    seeds: int = 3
    """Members per job (seeds batched, as 'synthenv train --num-seeds')."""
    max_len: int = DEFAULT_MAX_LEN
    """The most tokens a program may have."""
    warmup: int = 5
    """Steps run before timing."""
    steps: int = 20
    """Timed training steps."""
    replay: int = 8
    """Further steps whose programs the env alone then runs (timed)."""
    device: str = "cpu"
    """Torch device."""
    json: Path | None = None
    """Write one JSON record per algorithm here (checked before anything runs)."""

    def run(self) -> int:
        from synthenv.agents.registry import check_files, parse_algo
        from synthenv.bench_agents import measure
        from synthenv.bench import hardware, hardware_caption
        from synthenv.checks import require_positive_int, require_writable
        from synthenv.tasks import from_spec

        from_spec(self.task)
        specs = [(spec, *parse_algo(spec)) for spec in self.algos]
        for name in ("seeds", "steps", "replay", "max_len"):
            require_positive_int(name, getattr(self, name))
        if self.max_len > MAX_LEN:
            raise ValueError(f"max_len must be at most {MAX_LEN} tokens (synthenv.language.MAX_LEN, docs/limits.md), "
                             f"got {self.max_len}")
        for _, algo, config in specs:
            check_files(config)
        if self.json:
            require_writable(self.json, "--json")
        machine = hardware()
        print(f"{hardware_caption(machine)}; task {self.task}, {self.seeds} seeds per job")
        print(f"{'algorithm':>28} {'programs/step':>13} {'agent prog/s':>13} {'env alone':>12} {'ratio':>6}")
        records = []
        for spec, algo, config in specs:
            result = measure(algo, config, self.task, tuple(range(self.seeds)), self.max_len, self.warmup,
                             self.steps, self.replay, self.device)
            print(f"{spec:>28} {result.batch:>13,} {result.agent_programs_per_s:>13,.0f} "
                  f"{result.env_programs_per_s:>12,.0f} {result.ratio:>6.2f}", flush=True)
            records.append({"spec": spec, **dataclasses.asdict(result), "ratio": result.ratio, "hardware": machine})
        if self.json:
            storage.write_json(self.json, records, "--json")
        return 0
