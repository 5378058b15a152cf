"""``synthenv train``: train a synthesis agent on a task, with TensorBoard logs and checkpoints.

The command line is generated from the configs (tyro): every field of ``agents.TrainConfig`` is an
option of its own name (``--task``, ``--npe``, ``--seconds``...), its seeds given as ``--seed`` and
``--num-seeds``, and every field of the chosen algorithm's config too (``--batch-size``,
``--learning-rate``, nested ones as ``--editor.hidden`` or ``--policy.kind``). ``--algo NAME`` picks
the algorithm, and so which options exist: ``synthenv train --algo ga --help`` lists the GA's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Annotated

import tyro

from synthenv import agents, distributed, reference, tasks
from synthenv import storage
from synthenv.agents import TrainConfig
from synthenv.checks import require_writable
from synthenv.language import Status

DEFAULT_ALGO = TrainConfig.algo


@dataclass(frozen=True)
class TrainCommand:
    """Train an agent to write BF programs for a task; stops when one of its programs solves it.

    Quick start: 'synthenv train' (the default agent on the starter task). Logs: 'tensorboard --logdir runs'.
    Options of another algorithm: 'synthenv train --algo ga --help'.
    """

    job: Annotated[TrainConfig, tyro.conf.arg(name="")] = field(default_factory=TrainConfig)
    """The training job (its fields are options of their own)."""
    seed: int = 0
    """First seed."""
    num_seeds: int = 1
    """Seeds seed .. seed+num_seeds-1, trained as one batched job (each an independent run)."""
    json_out: str | None = None
    """Also write the per-seed results as JSON here."""
    config: object = None
    """The algorithm's config (its fields are options of their own; see the module docstring)."""

    def train_config(self) -> TrainConfig:
        """The ``agents.TrainConfig`` this command runs."""
        if not isinstance(self.num_seeds, int) or self.num_seeds < 1:
            raise ValueError(f"num_seeds must be a positive int, got {self.num_seeds!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")
        return dataclasses.replace(self.job, seeds=tuple(range(self.seed, self.seed + self.num_seeds)),
                                   algo_config=self.config)

    def run(self) -> int:
        config = self.train_config()
        team = distributed.start(config.device, "train")  # None unless launched by torchrun
        if team is None:
            if config.resume:
                distributed.single_process_resume(config.resume)
            if self.json_out:
                require_writable(self.json_out, "--json-out")
            results = agents.train(config)
        else:
            with team.guard():
                team.require_same_command(self)
                if self.json_out and team.is_main:
                    require_writable(self.json_out, "--json-out")
                results = agents.train(config, team)  # the seeds split over the ranks; rank 0 gets all
            if results is None:
                return 0
        print(summary(results, tasks.from_spec(config.task)))
        if self.json_out:
            storage.write_json(self.json_out, [dataclasses.asdict(r) for r in results], "--json-out")
        return 0


def command_type(algo: str) -> type:
    """``TrainCommand`` with ``config`` typed as ``algo``'s config, its fields flattened into options."""
    flat = Annotated[type(agents.default_config(algo)), tyro.conf.arg(name="")]
    doc = f"{TrainCommand.__doc__.rstrip()} Algorithms: {', '.join(agents.names())}.\n"
    command = dataclasses.make_dataclass(
        "TrainCommand", [("config", flat, field(default_factory=lambda: agents.default_config(algo)))],
        bases=(TrainCommand,), frozen=True, namespace={"__doc__": doc})
    command.__module__ = __name__
    return command


def algo_from_argv(argv: list[str], default: str = DEFAULT_ALGO) -> str:
    """The ``--algo`` named on a command line (``--algo ga`` or ``--algo=ga``), else ``default``.

    >>> algo_from_argv(["--task", "add", "--algo", "ga"]), algo_from_argv(["--algo=pqt"]), algo_from_argv([])
    ('ga', 'pqt', 'islands')
    """
    for i, arg in enumerate(argv):
        value = argv[i + 1] if arg == "--algo" and i + 1 < len(argv) else arg.partition("=")[2] \
            if arg.startswith("--algo=") else None
        if value is not None:
            return value if value in agents.names() else default  # the config reports an unknown name
    return default


def other_algorithms_hint(argv: list[str], algo: str) -> str:
    """For the options on ``argv`` that ``algo`` lacks and other algorithms have, which ``--algo`` takes each (``''``
    when there are none): said after tyro's refusal of an unrecognized option.

    >>> other_algorithms_hint(["--task", "add", "--no-fine-tune", "--editor.hidden", "8"], "islands")
    '; --no-fine-tune and --editor.hidden are options of --algo ppo'
    >>> other_algorithms_hint(["--batch-size", "8"], "ga"), other_algorithms_hint(["--bogus"], "islands")
    ('', '')
    """
    own = {f.name for f in dataclasses.fields(agents.default_config(algo))}
    hints: dict[str, list[str]] = {}
    for arg in argv:
        if not arg.startswith("--"):
            continue
        name = arg[2:].partition("=")[0].split(".")[0].replace("-", "_")
        name = name.removeprefix("no_") if name.startswith("no_") and name not in own else name
        if name in own:
            continue
        takers = agents.registry.with_field(name)
        if takers:
            hints.setdefault(", ".join(takers), []).append(arg.partition("=")[0])
    return "".join(f"; {' and '.join(flags)} {'is an option' if len(flags) == 1 else 'are options'} of --algo {takers}"
                   for takers, flags in hints.items())


def summary(results, task=None) -> str:
    """The final report: per seed solved?, NPE, time, best program (for a text ``task``, what it prints on the
    first case, as text); then the success count and speed."""
    lines = []
    for r in results:
        outcome = (f"solved at NPE {r.npe:,} ({r.seconds:.1f} s)" if r.solved
                   else f"not solved in {r.npe:,} programs ({r.seconds:.1f} s)")
        minimal = f" (minimal: {r.minimal_program!r})" if r.minimal_program not in (None, r.best_program) else ""
        lines.append(f"seed {r.seed}: {outcome}; best reward {r.best_reward:.4f}: {r.best_program!r}{minimal}"
                     + (f"  [{r.run_dir}]" if r.run_dir else ""))
        if task is not None and task.text and r.best_program:
            lines.append("  " + first_case(task, r.best_program))
    solved = [r for r in results if r.solved]
    mean = f"{sum(r.npe for r in solved) / len(solved):,.0f}" if solved else "-"
    speed = results[0].programs_per_s if results else 0.0
    lines.append(f"{results[0].task} / {results[0].algo}: solved {len(solved)}/{len(results)}, mean NPE to solve "
                 f"{mean}; {speed:,.0f} programs/s (agent included)")
    return "\n".join(lines)


def first_case(task, program: str) -> str:
    """What ``program`` prints on ``task``'s first case beside what it should, as the task shows values.

    >>> from synthenv.tasks import Task
    >>> first_case(Task.from_pairs("up", [("ab", "AB")]), ",.,.")
    "case 0: input 'ab' -> printed 'ab', expected 'AB'"
    """
    inputs, expected = task.cases[0]
    run = reference.run(program, inputs, task.base, task.max_steps, task.dialect)
    printed = task.show(task.dialect.judged(run.output)) if run.status == Status.OK else run.status.name
    return f"case 0: input {task.show(inputs)} -> printed {printed}, expected {task.show(task.dialect.judged(expected))}"
