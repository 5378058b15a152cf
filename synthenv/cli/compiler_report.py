"""``synthenv compiler-report``: how often the neural compiler is wrong, measured.

Prints exact-IR accuracy and reward-level mismatches against the oracle on held-out
programs, with Clopper–Pearson upper bounds; see ``synthenv.compilers.neural_report`` for
the method.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from synthenv import storage


@dataclass(frozen=True)
class CompilerReportCommand:
    """Measure the neural compiler's IR accuracy and reward-level mismatch rate."""

    uniform: int = 20000
    """Held-out uniform random programs (the headline number)."""
    loop_heavy: int = 5000
    """Held-out loop-heavy programs."""
    near: int = 5000
    """Held-out near-solution programs."""
    length: int = 100
    """Tokens per program."""
    tasks: tuple[str, ...] = field(default_factory=tuple)
    """Tasks for the reward-level check (default: the 26 paper tasks)."""
    engine: str = "auto"
    """Engine that runs the neural IR of programs checked against the oracle."""
    oracle_sample: int = 20
    """Per task and workload, IR-exact programs also checked against the oracle end to end."""
    delta: float = 0.05
    """Bounds hold at confidence 1 - delta."""
    weights: str | None = None
    """A weights file (default: the shipped one)."""
    json: str | None = None
    """Also write the results to this JSON file."""

    def __post_init__(self) -> None:
        from synthenv.checks import require_finite_fields

        require_finite_fields(self, "delta", low=0, high=1, low_open=True, high_open=True)

    def run(self) -> int:
        from synthenv import tasks as task_registry
        from synthenv.compilers import neural, neural_report

        compiler = neural.NeuralCompiler(self.weights)
        meta = neural.load_metadata(compiler.weights)
        params = sum(p.numel() for p in compiler.model("cpu").parameters())
        print(f"neural compiler: {compiler.weights} ({params} parameters, trained with {meta.get('train_config')})")
        names = list(self.tasks) or task_registry.names("paper")
        reports = []
        for workload, num in (("uniform", self.uniform), ("loop_heavy", self.loop_heavy), ("near", self.near)):
            if num > 0:
                reports.append(neural_report.measure(compiler, workload, num, self.length, names, self.engine,
                                                     self.oracle_sample, delta=self.delta))
        confidence = f"{1 - self.delta:.0%}"
        print(f"\n{'workload':<11} {'L':>4} {'programs':>9} {'IR exact':>9} {'IR wrong':>9} "
              f"{'<= (' + confidence + ')':>10} {'flagged':>8} {'reward wrong':>13} {'<= (' + confidence + ')':>10}")
        for r in reports:
            print(f"{r.workload:<11} {r.length:>4} {r.programs:>9} {r.ir_accuracy:>9.3%} {r.ir_mismatches:>9} "
                  f"{r.ir_mismatch_bound:>10.4%} {r.flagged:>8} {r.any_task_mismatches:>13} "
                  f"{r.reward_mismatch_bound:>10.4%}")
        print("\nreward wrong: programs whose reward or solved flag on some task differs from the oracle's.")
        print("\nper task: programs whose reward differs from the oracle's, of all programs (oracle runs: every "
              "IR mismatch + a sample of IR-exact ones)")
        print(f"  {'task':<20} " + "  ".join(f"{r.workload:<26}" for r in reports))
        for name in names:
            cells = "  ".join(f"{f'{r.reward_mismatches[name]} of {r.programs} ({r.oracle_checked[name]} run)':<26}"
                              for r in reports)
            print(f"  {name:<20} {cells}")
        if self.json:
            rows = [dict(asdict(r), ir_accuracy=r.ir_accuracy, ir_mismatch_bound=r.ir_mismatch_bound,
                         reward_mismatch_rate=r.reward_mismatch_rate, reward_mismatch_bound=r.reward_mismatch_bound)
                    for r in reports]
            storage.write_json(self.json, {"weights": str(compiler.weights), "metadata": meta, "workloads": rows},
                               "--json")
            print(f"wrote {self.json}")
        return 0
