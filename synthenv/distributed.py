"""Several processes (ranks) launched by ``torchrun``: tables farmed over ranks, training split over ranks.

``torchrun --nproc-per-node K -m synthenv table ...`` (or ``train ...``) starts K copies of synthenv;
torchrun tells each its rank through environment variables (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``). ``start`` reads them, joins the process group and returns a ``Team``;
outside torchrun it returns None and synthenv runs as one process, exactly as before.

- Backend: ``gloo`` when the device is the CPU, ``nccl`` on CUDA (each rank takes ``cuda:LOCAL_RANK``,
  so give ``--device cuda``, not an index). Under nccl a second, gloo group carries the control
  traffic (flags, Python objects); programs travel on the device.
- Threads: torchrun sets ``OMP_NUM_THREADS=1`` for K > 1 processes; synthenv gives each rank
  ``cores // local ranks`` threads instead (torch and the native engine's OpenMP), or
  ``$SYNTHENV_NUM_THREADS`` if set.
- Failures: a rank that raises writes ``rank R failed: <error>`` to the job's store; every other rank
  watches the store (a thread with its own connection) and exits at once with code 1, rank 0 after
  printing that line, so the job ends even where torchrun cannot see the failure (another machine).
  A rank that hangs is named by the next sync point's ``monitored_barrier`` on rank 0 after
  ``$SYNTHENV_DIST_TIMEOUT`` seconds (default 600); collectives time out after the same time.

Pitfalls (the usual causes of hangs): every rank must make the same collectives in the same order
with tensors of the same shape. synthenv's training loop syncs every ``log_every`` steps on every
rank (all ranks run the same steps; the time budget is checked only there), and pads each rank's
queue of programs to the same shape before gathering it. Tables need no collectives: ranks take
cells from a counter in the store.

>>> launched() in (True, False)
True
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from synthenv.errors import USER_ERRORS, UserError, describe

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
"""What torchrun (``python -m torch.distributed.run``) sets in every rank's environment."""
TIMEOUT_VARIABLE = "SYNTHENV_DIST_TIMEOUT"
THREADS_VARIABLE = "SYNTHENV_NUM_THREADS"
DEFAULT_TIMEOUT_S = 600.0
"""Seconds a rank waits at a sync point for the others before the job fails (``$SYNTHENV_DIST_TIMEOUT``)."""
EXIT_RANK_FAILED = 1
"""Exit code of the ranks that stop because another rank failed."""
_FAILED = "failed"
_POLL_S = 0.2
_GRACE_S = 1.0


class RankFailed(RuntimeError):
    """Another rank of the job failed (or did not answer in time); the message says which and why."""


def launched() -> bool:
    """Whether this process was started by torchrun (its rank variables are set)."""
    return all(name in os.environ for name in TORCHRUN_VARIABLES)


def _env_int(name: str, low: int = 0) -> int:
    text = os.environ.get(name, "")
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < low:
        raise UserError(f"${name} must be an int >= {low}, got {text!r}; launch synthenv with torchrun "
                        "(torchrun --nproc-per-node K -m synthenv ...), which sets it")
    return value


def _env_float(name: str, default: float) -> float:
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise UserError(f"${name} must be a positive number of seconds, got {text!r}; unset it for "
                        f"{default:g} s")
    return value


def threads_per_rank(local_world_size: int) -> int:
    """CPU threads for each of ``local_world_size`` ranks on this machine (``$SYNTHENV_NUM_THREADS`` wins).

    >>> threads_per_rank(10**6)
    1
    """
    if THREADS_VARIABLE in os.environ:
        return _env_int(THREADS_VARIABLE, low=1)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, local_world_size))


def rank_device(device: str, local_rank: int) -> str:
    """The device a rank works on: ``cuda`` becomes ``cuda:LOCAL_RANK`` (one GPU per rank), the CPU stays.

    >>> rank_device("cpu", 3)
    'cpu'
    """
    kind, _, index = str(device).partition(":")
    if kind != "cuda":
        return str(device)
    if index:
        raise UserError(f"--device {device!r}: under torchrun each rank takes the GPU of its LOCAL_RANK; give "
                        "--device cuda (rank r of a machine uses cuda:r)")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if local_rank >= count:
        raise UserError(f"LOCAL_RANK {local_rank} has no GPU: this machine has {count}; start at most {count} "
                        f"processes per machine (torchrun --nproc-per-node {max(count, 1)})")
    return f"cuda:{local_rank}"


def start(device: str = "cpu", command: str = "") -> Team | None:
    """Join the job torchrun launched: set threads, pick the backend, init the process group.

    Args:
        device: the device option of the command (``cpu`` or ``cuda``).
        command: the command's name, for rank 0's message when another rank fails.

    Returns:
        The ``Team`` of this rank, or None when not launched by torchrun (one process).
    """
    if not launched():
        return None
    rank, world_size, local_rank = _env_int("RANK"), _env_int("WORLD_SIZE", low=1), _env_int("LOCAL_RANK")
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    timeout = _env_float(TIMEOUT_VARIABLE, DEFAULT_TIMEOUT_S)
    threads = threads_per_rank(local_world_size)
    os.environ["OMP_NUM_THREADS"] = str(threads)  # child processes; torch and the kernel share one libgomp
    torch.set_num_threads(threads)
    device = rank_device(device, local_rank)
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if device.startswith("cuda"):
        torch.cuda.set_device(local_rank)
    if dist.is_initialized():
        raise RuntimeError("torch.distributed is initialized already; let synthenv.distributed.start() do it")
    store, rank, world_size = next(dist.rendezvous("env://", timeout=timedelta(seconds=timeout)))
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timedelta(seconds=timeout),
                            device_id=torch.device(device) if backend == "nccl" else None)
    control = dist.new_group(backend="gloo") if backend == "nccl" else None
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")  # a restarted job starts on clean keys
    prefix = f"synthenv/{attempt}/"
    team = Team(rank, world_size, local_rank, device, backend, timeout, dist.PrefixStore(prefix, store), control,
                command)
    # the watcher's own connection to the same store (torchrun's agent, or rank 0, serves it at MASTER_ADDR)
    watch_store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                                timeout=timedelta(seconds=timeout))
    team.watch(dist.PrefixStore(prefix, watch_store))
    return team


@dataclass
class Team:
    """This rank's place in the job, and the collectives synthenv uses (see the module docstring)."""

    rank: int
    world_size: int
    local_rank: int
    device: str
    """This rank's device (``cpu`` or ``cuda:LOCAL_RANK``)."""
    backend: str
    timeout: float
    """Seconds to wait for the other ranks at a sync point."""
    store: dist.Store
    control: object = None
    """The process group for flags and objects (gloo); None: the default group."""
    command: str = ""
    _closing: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def is_main(self) -> bool:
        """Rank 0: prints, writes the outputs, shows the progress bar."""
        return self.rank == 0

    def split(self, items: Sequence) -> tuple:
        """This rank's share of ``items``: contiguous, sizes differing by at most one (the first ranks
        take one more). Raises ``UserError`` when there are fewer items than ranks.

        >>> team = Team(1, 2, 1, "cpu", "gloo", 1.0, None)
        >>> team.split((0, 1, 2, 3, 4))
        (3, 4)
        """
        items = tuple(items)
        if len(items) < self.world_size:
            raise UserError(f"{len(items)} seed(s) for {self.world_size} ranks: each rank trains at least one; "
                            f"use --num-seeds {self.world_size} or more, or fewer processes")
        size, extra = divmod(len(items), self.world_size)
        begin = self.rank * size + min(self.rank, extra)
        return items[begin: begin + size + (self.rank < extra)]

    # -- collectives (every rank calls them in the same order) ------------------------------------

    def all_done(self, done: bool) -> bool:
        """True when every rank is done. Names a rank that does not arrive within ``timeout``. # sync point."""
        self.barrier()
        flag = torch.tensor([int(bool(done))], dtype=torch.int64)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self.control)
        return bool(flag.item())

    def barrier(self) -> None:
        """Wait for every rank; after ``timeout`` rank 0 raises ``RankFailed`` naming the missing ranks."""
        try:
            dist.monitored_barrier(group=self.control, timeout=timedelta(seconds=self.timeout), wait_all_ranks=True)
        except RuntimeError as error:
            raise RankFailed(f"{' '.join(str(error).split())}: a rank hung, failed, or is running other work "
                             f"than the others (raise ${TIMEOUT_VARIABLE}={self.timeout:g} if it is only slow)"
                             ) from error

    def all_gather(self, tensor: torch.Tensor, rows: int | None = None, fill: float = 0) -> torch.Tensor:
        """Every rank's ``tensor [R, ...]`` stacked: ``[W, rows, ...]``, each padded with ``fill`` to ``rows``
        (default: the largest R of any rank) so that every rank sends the same shape."""
        if rows is None:
            size = torch.tensor([tensor.shape[0]], dtype=torch.int64)
            dist.all_reduce(size, op=dist.ReduceOp.MAX, group=self.control)
            rows = int(size.item())
        pad = torch.full((rows - tensor.shape[0], *tensor.shape[1:]), fill, dtype=tensor.dtype, device=tensor.device)
        local = torch.cat([tensor, pad]).contiguous()
        parts = [torch.empty_like(local) for _ in range(self.world_size)]
        dist.all_gather(parts, local)
        return torch.stack(parts)

    def gather_objects(self, value: object) -> list | None:
        """Every rank's ``value`` (picklable) on rank 0, in rank order; None on the other ranks."""
        out = [None] * self.world_size if self.is_main else None
        dist.gather_object(value, out, dst=0, group=self.control)
        return out

    def all_gather_objects(self, value: object) -> list:
        """Every rank's ``value`` (picklable) on every rank, in rank order."""
        values = [None] * self.world_size
        dist.all_gather_object(values, value, group=self.control)
        return values

    def broadcast(self, value: object) -> object:
        """Rank 0's ``value`` on every rank."""
        box = [value]
        dist.broadcast_object_list(box, src=0, group=self.control)
        return box[0]

    def require_same_command(self, command: object) -> None:
        """Raise ``UserError`` unless every rank runs the same command with the same options (else they would
        make different collectives, or write different results, and hang or mislead)."""
        self.require_equal("options", repr(command), "run the same synthenv command with the same options on every "
                           "machine (and the same synthenv version)")

    def require_equal(self, what: str, value: object, fix: str) -> None:
        """Raise ``UserError`` on every rank unless every rank has the same ``value`` of ``what``."""
        values = self.all_gather_objects(value)
        if any(v != values[0] for v in values):
            listed = ", ".join(f"rank {r}: {v}" for r, v in enumerate(values))
            raise UserError(f"the ranks have different {what} ({listed}); {fix}")

    # -- the store: a shared counter and posted results (no collective, no waiting for the others) ---

    def claim(self, name: str) -> int:
        """The next index of counter ``name`` (0, 1, 2... over all ranks together): greedy work sharing."""
        return self.store.add(f"counter/{name}", 1) - 1

    def post(self, key: str, value: object) -> None:
        """Publish ``value`` (JSON data) under ``key`` for rank 0 to ``collect``."""
        self.store.set(f"posted/{key}", json.dumps(value))

    def collect(self, key: str, wait: bool = False) -> object | None:
        """The value posted under ``key``; None if not yet there (``wait``: poll until it is)."""
        while not self.store.check([f"posted/{key}"]):
            if not wait:
                return None
            time.sleep(_POLL_S)
        return json.loads(self.store.get(f"posted/{key}"))

    # -- failures ------------------------------------------------------------------------------------

    def report_failure(self, message: str) -> None:
        """Tell every rank that this one failed (the first report wins)."""
        self._closing.set()  # this rank's own watcher must not exit before its error is printed
        try:
            self.store.compare_set(_FAILED, "", f"{self.rank}\n{message}")
        except Exception:  # noqa: BLE001 - the store may be gone already; the exit code still tells
            pass

    def failure(self) -> str | None:
        """Another rank's failure report (``rank R failed: ...``), if any."""
        return _failure(self.store, self.rank)

    def watch(self, store: dist.Store) -> None:
        """Exit at once (code 1) when another rank reports a failure; rank 0 prints it first.

        A daemon thread polls ``store`` (the job's store on a connection of its own: the main thread
        may be using the other), so it works while this rank computes or waits in a collective that
        will never complete.
        """

        def run() -> None:
            while not self._closing.wait(_POLL_S):
                message = _failure(store, self.rank)
                if message is not None and not self._closing.is_set():
                    if self.is_main:
                        name = " ".join(["synthenv", self.command] if self.command else ["synthenv"])
                        print(f"{name} (rank {self.rank}): error: {message}; stopping every rank", file=sys.stderr,
                              flush=True)
                    time.sleep(_GRACE_S)  # the failed rank exits first: torchrun's summary names it as the cause
                    os._exit(EXIT_RANK_FAILED)

        threading.Thread(target=run, name="synthenv-rank-watch", daemon=True).start()

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Run a rank's work: an exception is reported to the other ranks and re-raised; the group closes.

        Where another rank has failed first, the error (a broken collective, most likely) becomes
        ``RankFailed`` with that rank's message.
        """
        try:
            yield
        except KeyboardInterrupt:
            self._closing.set()
            raise
        except Exception as error:
            other = self.failure()  # a rank that failed first is the cause (a collective with it broke)
            if other is not None:
                raise RankFailed(other) from error
            kind = "" if isinstance(error, USER_ERRORS + (RankFailed,)) else f"{type(error).__name__}: "
            self.report_failure(f"rank {self.rank} failed: {kind}{describe(error)}")
            raise
        finally:
            self.close()

    def close(self) -> None:
        """Stop watching and leave the process group."""
        self._closing.set()
        if dist.is_initialized():
            dist.destroy_process_group()


def _failure(store: dist.Store, rank: int) -> str | None:
    """The failure report in ``store`` if another rank than ``rank`` wrote it."""
    try:
        if not store.check([_FAILED]):
            return None
        writer, _, message = store.get(_FAILED).decode().partition("\n")
    except Exception:  # noqa: BLE001 - the store is gone: the job is ending anyway
        return None
    return message if writer != str(rank) else None


# -- checkpoints: one file per rank ------------------------------------------------------------------

def rank_checkpoint(path: str, rank: int, world_size: int) -> str:
    """The file of rank ``rank`` in the checkpoint set ``path`` of a ``world_size``-rank job.

    >>> rank_checkpoint("runs/ppo.pt", 1, 4)
    'runs/ppo.rank1-of-4.pt'
    """
    name = Path(path)
    return str(name.with_name(f"{name.stem}.rank{rank}-of-{world_size}{name.suffix}"))


def checkpoint_set_sizes(path: str) -> list[int]:
    """The world sizes of the checkpoint sets found at ``path`` (``path.rank*-of-N`` files)."""
    name = Path(path)
    sizes = set()
    for file in name.parent.glob(f"{name.stem}.rank*-of-*{name.suffix}"):
        tail = file.name[len(name.stem) + len(".rank"): len(file.name) - len(name.suffix)]
        rank, _, size = tail.partition("-of-")
        if rank.isdigit() and size.isdigit():
            sizes.add(int(size))
    return sorted(sizes)


def resume_checkpoint(path: str, rank: int, world_size: int) -> str:
    """The file rank ``rank`` resumes from, after checking the set ``path`` fits this job.

    Raises:
        UserError: the set was written by a job with another number of ranks (or by one process),
            or this rank's file is missing; the message names the files and the fix.
    """
    mine = rank_checkpoint(path, rank, world_size)
    if Path(mine).is_file():
        return mine
    sizes = [size for size in checkpoint_set_sizes(path) if size != world_size]
    if sizes:
        raise UserError(f"checkpoint set {path!r} was written by a job of {sizes[0]} ranks "
                        f"({rank_checkpoint(path, 0, sizes[0])}, ...), this job has {world_size}; resume with "
                        f"{sizes[0]} processes in all (torchrun --nnodes x --nproc-per-node = {sizes[0]})")
    if Path(path).is_file():
        raise UserError(f"checkpoint {path!r} was written by one process, this job has {world_size} ranks; resume "
                        "it without torchrun (synthenv train --resume ...)")
    raise UserError(f"rank {rank} has no checkpoint to resume from: {mine!r} does not exist; resume from a set "
                    "written by synthenv train --checkpoint under torchrun with as many processes")


def single_process_resume(path: str) -> None:
    """Raise ``UserError`` if ``path`` is missing but names a checkpoint set written under torchrun."""
    sizes = checkpoint_set_sizes(path)
    if sizes and not Path(path).exists():
        raise UserError(f"{path!r} is a checkpoint set of {sizes[0]} ranks ({rank_checkpoint(path, 0, sizes[0])}, "
                        f"...); resume it under torchrun with {sizes[0]} processes in all")
