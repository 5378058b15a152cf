"""A prior over programs, learned from the solutions of generated training tasks: where fresh programs come from.

The searches start from fresh programs, and a stalled island restarts from them. Uniform random commands
rarely hold a loop that does anything; the solutions of the generated training tasks are made of BF's idioms
(read a list, copy or add a cell into another, count down, clear). ``ProgramPrior`` is an order-k Markov model of
those solutions: the probability of each command (or of the program's end) given the k symbols before it. Its
samples are programs that look like solutions, balanced by construction: a ``]`` is written only inside an open
loop, the end only outside one, a ``[`` only where the program has room to close it, and a program that reaches
its longest closes its open loops.

>>> from synthenv.language import decode_batch
>>> prior = ProgramPrior.fit([",[.,]", ",[->+<]>."])
>>> generators = [torch.Generator().manual_seed(0)]
>>> programs = prior.sample(generators, (4,), max_len=12, longest=10, device=torch.device("cpu"))
>>> tuple(programs.shape), decode_batch(programs[0])
((1, 4, 12), [',[+<]>..+-', ',[><+[].<]', ',[-]+-,', ',.><>'])
"""

from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from synthenv.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from synthenv.checks import require_finite, require_finite_fields, require_positive_int_fields
from synthenv.language import COMMANDS, EOS
from synthenv.tasks import generated

from .variation import member_uniform, random_programs

END = EOS
"""The program's end, symbol 0 of the model (the commands are 1..8, their tokens)."""
START = len(COMMANDS) + 1
"""The context symbol before a program's first command."""
OPEN, CLOSE = 1 + COMMANDS.index("["), 1 + COMMANDS.index("]")
MAX_ORDER = 4
"""The longest context a prior may have (its table has 10 ** order rows)."""
FORMAT, VERSION = "synthenv-program-prior", 1
SHIPPED = Path(__file__).resolve().parent / "program_prior.pt"
"""The prior shipped in the package for tasks of ints (BENCHMARKS.md: the command that reproduces it)."""
SHIPPED_TEXT = Path(__file__).resolve().parent / "text_prior.pt"
"""The prior shipped for text tasks: of the solutions of text training tasks."""
DOMAIN_PRIORS = {"int": SHIPPED, "text": SHIPPED_TEXT}


def check_order(order: int) -> None:
    """Refuse a context length outside 1 .. ``MAX_ORDER``, naming the range."""
    if not isinstance(order, int) or isinstance(order, bool) or not 1 <= order <= MAX_ORDER:
        raise ValueError(f"order must be an int in 1..{MAX_ORDER} (commands of context), got {order!r}")


class ProgramPrior:
    """An order-``order`` Markov model over commands and the end: ``probs[context] -> [9]``."""

    def __init__(self, probs: torch.Tensor):
        if probs.dim() < 2 or any(n != START + 1 for n in probs.shape[:-1]) or probs.shape[-1] != START:
            raise ValueError(f"probs must have shape [{START + 1}] * order + [{START}], got {tuple(probs.shape)}")
        sums = probs.double().sum(-1)
        if not (torch.isfinite(probs).all() and (probs >= 0).all() and ((sums - 1).abs() < 1e-4).all()):
            raise ValueError("probs must be finite, non-negative and sum to 1 after every context")
        self.order = probs.dim() - 1
        self.probs = probs.to(torch.float32)

    @classmethod
    def fit(cls, programs: list[str], order: int = 2, smoothing: float = 0.1) -> ProgramPrior:
        """Counts of each symbol after each context in ``programs`` (each followed by its end), plus ``smoothing``,
        normalised: with ``smoothing > 0`` every command stays possible after every context; a context never seen
        without smoothing is uniform."""
        check_order(order)
        require_finite("smoothing", smoothing, low=0.0)
        counts = torch.full((START + 1,) * order + (START,), float(smoothing), dtype=torch.float64)
        for program in programs:
            symbols = [START] * order + [1 + COMMANDS.index(c) for c in program] + [END]
            for i in range(order, len(symbols)):
                counts[tuple(symbols[i - order:i + 1])] += 1
        counts[counts.sum(-1) == 0] = 1.0
        return cls((counts / counts.sum(-1, keepdim=True)).to(torch.float32))

    def sample(self, generators: list[torch.Generator], shape: tuple[int, ...], max_len: int, longest: int,
               device: torch.device) -> torch.Tensor:
        """``[S, *shape, L]`` programs of 1 .. ``longest`` commands drawn from the model, member s from
        ``generators[s]`` only (as ``variation.random_programs``), without a host sync."""
        longest = max(1, min(longest, max_len))
        s, n = len(generators), math.prod(shape)
        draws = member_uniform(generators, (*shape, longest), device).view(s * n, longest)
        probs = self.probs.to(device).view(-1, START)
        start = sum(START * (START + 1) ** k for k in range(self.order))  # the first context's row of probs
        context = torch.full((s * n,), start, dtype=torch.int64, device=device)
        depth = torch.zeros(s * n, dtype=torch.int64, device=device)
        ended = torch.zeros(s * n, dtype=torch.bool, device=device)
        tokens = torch.full((s * n, longest), EOS, dtype=torch.int64, device=device)
        allowed = torch.ones((s * n, START), dtype=torch.bool, device=device)
        for t in range(longest):
            room = longest - t  # positions left, this one included
            allowed[:, END] = (depth == 0) & (t > 0)
            allowed[:, CLOSE] = depth > 0
            allowed[:, OPEN] = depth + 1 < room
            p = probs[context] * allowed
            cdf = p.cumsum(-1)
            symbol = (draws[:, t, None] * cdf[:, -1:] >= cdf).sum(-1).clamp(max=START - 1)
            symbol = torch.where(depth >= room, CLOSE, symbol)  # as many positions as open loops: close them
            symbol = torch.where(ended, END, symbol)
            tokens[:, t] = symbol
            depth += (symbol == OPEN).long() - (symbol == CLOSE).long()
            ended |= symbol == END
            context = (context * (START + 1)) % (START + 1) ** self.order + symbol
        return torch.nn.functional.pad(tokens.view(s, *shape, longest), (0, max_len - longest), value=EOS)


class PriorPrograms:
    """Fresh programs drawn from a pool of the prior's samples, as ``variation.random_programs`` draws them.

    Sampling the model costs a pass per command; a search draws fresh programs every generation (for the islands
    that may restart). So the pool (``size`` samples of at most ``longest`` commands, from ``seed``) is drawn once,
    and each fresh program is a uniform pick from it, member s's picks from ``generators[s]`` only."""

    def __init__(self, prior: ProgramPrior, longest: int, size: int = 16384, seed: int = 0):
        generator = torch.Generator().manual_seed(seed)
        self.pool = prior.sample([generator], (size,), longest, longest, torch.device("cpu"))[0]
        self._on: dict[torch.device, torch.Tensor] = {}

    def __call__(self, generators: list[torch.Generator], shape: tuple[int, ...], max_len: int, longest: int,
                 device: torch.device) -> torch.Tensor:
        """``[S, *shape, L]`` programs of the pool (``longest`` is the pool's own, at most ``max_len``)."""
        pool = self._on.get(device)
        if pool is None:
            pool = self._on[device] = self.pool.to(device)
        picks = (member_uniform(generators, shape, device) * len(pool)).long().clamp(max=len(pool) - 1)
        return torch.nn.functional.pad(pool[picks], (0, max_len - pool.shape[1]), value=EOS)


def generated_prior(tasks: int, order: int = 2, smoothing: float = 0.1, split: str = "train") -> ProgramPrior:
    """The prior of the solutions of generated tasks 0 .. ``tasks`` - 1 of ``split``."""
    return ProgramPrior.fit([generated.generate(split, i).program for i in range(tasks)], order, smoothing)


def save_prior(path: str | os.PathLike, prior: ProgramPrior, card: dict) -> None:
    """Write ``prior`` to ``path`` (atomically), with ``card`` (plain data: what it was fitted on, the command)."""
    save_checkpoint(path, {"format": FORMAT, "version": VERSION, "probs": prior.probs.clone(), "card": dict(card)})


def load_prior(path: str | os.PathLike = SHIPPED) -> tuple[ProgramPrior, dict]:
    """Read a prior file (untrusted data, as a checkpoint): the prior and its card."""
    fix = "pass a file written by synthenv fit-prior"
    state = load_checkpoint(path, map_location="cpu", required_keys=("format", "probs"), fix=fix)
    if state.get("format") != FORMAT or state.get("version") != VERSION:
        raise CheckpointError(f"{str(path)!r} is not a synthenv program-prior file (version {VERSION}); {fix}")
    try:
        return ProgramPrior(state["probs"]), dict(state.get("card", {}))
    except (ValueError, AttributeError, TypeError) as error:
        raise CheckpointError(f"{str(path)!r} holds no prior this synthenv reads ({error}); {fix}") from None


@functools.lru_cache(maxsize=8)
def prior_programs(longest: int, domain: str = "int") -> PriorPrograms:
    """The pool of fresh programs of at most ``longest`` commands of the prior shipped for ``domain`` (drawn once per
    process)."""
    return PriorPrograms(load_prior(DOMAIN_PRIORS[domain])[0], longest)


def fresh_source(fresh: str, longest: int, domain: str = "int"):
    """What draws fresh programs of at most ``longest`` commands (``variation.random_programs``' arguments):
    the pool of the prior shipped for ``domain`` for ``fresh='prior'``, uniform random commands for ``'uniform'``."""
    return prior_programs(longest, domain) if fresh == "prior" else random_programs


@dataclass(frozen=True)
class PriorConfig:
    """Fitting a program prior on generated training tasks' solutions (``synthenv fit-prior``)."""

    tasks: int = 2000
    """Generated training tasks 0 .. tasks - 1 whose solutions are counted."""
    split: str = "train"
    """The generated split the tasks are from: train (the prior of tasks of ints) or text-train (of text tasks)."""
    order: int = 2
    """Commands of context (1 .. 4)."""
    smoothing: float = 0.1
    """Count added to every symbol after every context (> 0: every command stays possible)."""
    out: str = "runs/program_prior.pt"
    """Where the prior is written."""

    def __post_init__(self) -> None:
        require_positive_int_fields(self, "tasks")
        generated.check_task_count("tasks", self.tasks, "generated training tasks")
        check_order(self.order)
        require_finite_fields(self, "smoothing", low=0.0, low_open=True)
        if self.split not in ("train", "text-train"):
            raise ValueError(f"split must be 'train' or 'text-train' (the training splits), got {self.split!r}")


def fit_prior(config: PriorConfig, log=print) -> dict:
    """Fit the prior ``config`` names and write it to ``config.out`` with its card; returns the card."""
    started = time.perf_counter()
    prior = generated_prior(config.tasks, config.order, config.smoothing, config.split)
    split = f" --split {config.split}" if config.split != "train" else ""
    card = {"tasks": config.tasks, "split": config.split, "order": config.order, "smoothing": config.smoothing,
            "seconds": round(time.perf_counter() - started, 1),
            "command": f"synthenv fit-prior --tasks {config.tasks}{split} --order {config.order} "
                       f"--smoothing {config.smoothing} --out {config.out}"}
    save_prior(config.out, prior, card)
    log(f"wrote {config.out}: an order-{config.order} prior of the solutions of {config.tasks} generated {config.split} "
        f"tasks, in {card['seconds']} s")
    return card
