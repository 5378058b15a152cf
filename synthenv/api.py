"""``synthenv.score``: compile, run and score a batch of programs in one call."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
import dataclasses
from dataclasses import dataclass
from typing import Union

import numpy as np
import torch

from synthenv import tasks as task_registry
from synthenv.compilers import DEFAULT_BACKEND
from synthenv.execution import Execution
from synthenv.checks import resolve_device
from synthenv.language import MAX_LEN, VOCAB_SIZE, encode_batch
from synthenv.pipeline import Evaluator
from synthenv.scoring import Scores
from synthenv.tasks import Task


@dataclass(frozen=True)
class ScoreResult:
    """Rewards and per-case results of N programs on a task's K cases (all on one device).

    Attributes:
        rewards: ``[N]`` float64 PQT reward (1.0 = solved; ``-2 / (4K)`` = failed).
        solved: ``[N]`` bool.
        status: ``[N, K]`` int8 ``Status`` per case (``ABORTED``: skipped after a failure).
        program_status: ``[N]`` int8 ``Status`` per program.
        outputs: ``[N, K, O]`` int32, the first O values each case printed.
        output_lengths: ``[N, K]`` int32, how many values each case printed.
        steps: ``[N, K]`` int32 raw BF steps.
        case_correct: ``[N, K]`` bool, the case printed exactly its expected output.
        task: the task scored against.
    """

    rewards: torch.Tensor
    solved: torch.Tensor
    status: torch.Tensor
    program_status: torch.Tensor
    outputs: torch.Tensor
    output_lengths: torch.Tensor
    steps: torch.Tensor
    case_correct: torch.Tensor
    task: Task

    @classmethod
    def build(cls, execution: Execution, scores: Scores, task: Task) -> ScoreResult:
        return cls(scores.rewards, scores.solved, execution.status, scores.program_status, execution.outputs,
                   execution.output_lengths, execution.steps, scores.case_correct, task)

    def __repr__(self) -> str:
        """A one-line summary. # sync point: reads back to the host; for display."""
        n, k = self.status.shape
        return (f"ScoreResult(task={self.task.name!r}, programs={n}, cases={k}, device={self.rewards.device}, "
                f"solved={self.solved.sum().item()}, rewards={self.rewards[:8].tolist()}{' ...' if n > 8 else ''})")

    def output(self, program: int, case: int) -> list[int]:
        """What ``program`` printed on ``case`` (the first O values).

        # sync point: reads back to the host; for display.
        """
        length = min(int(self.output_lengths[program, case]), self.outputs.shape[2])
        return self.outputs[program, case, :length].tolist()


SCORE_CHUNK_TOKENS = 2**24
"""``score`` evaluates a batch of more tokens than this (16 777 216: 167 772 programs of 100 tokens) in parts of at
most this many, so that the compiled code and the engine's state of one part fit in memory; each program's
result does not depend on the part it is in."""

PROGRAM_TYPES = ("BF strings (a list of str or bytes) or token ids (an [N, L] integer torch.Tensor or numpy "
                 "array, or a list of int lists; 0 = EOS, 1..8 = '><+-[].,')")
"""What ``score`` accepts as ``programs``, as its errors say."""

Programs = Union[Sequence[str], Sequence[bytes], Sequence[Sequence[int]], np.ndarray, torch.Tensor]


def as_tokens(programs: Programs, device: torch.device | str | None = None) -> torch.Tensor:
    """Validate programs and return them as an ``[N, L]`` int64 token tensor.

    Args:
        programs: BF strings (``str`` or ``bytes``), or token ids as an ``[N, L]`` integer
            tensor, numpy array or list of int lists (ragged lists are padded with EOS).
        device: where to put the tokens (default: the tensor's own device, else the CPU).

    Raises:
        TypeError: ``programs`` is none of the accepted types (the message lists them).
        ValueError: a token id out of range, a wrong shape, a meta tensor, or programs longer
            than ``MAX_LEN`` tokens.

    # sync point: checks token ranges on the host; the envs validate cheaper, per step.
    """
    if isinstance(programs, (str, bytes, bytearray)):
        raise TypeError(f"programs must be {PROGRAM_TYPES}, got one {type(programs).__name__}; wrap it: [program]")
    if isinstance(programs, np.ndarray):
        programs = _from_numpy(programs)
    elif isinstance(programs, Sequence) and len(programs) and all(
            isinstance(p, (list, tuple, np.ndarray)) for p in programs):
        programs = _from_id_lists(programs)
    if isinstance(programs, torch.Tensor):
        tokens = _checked_tensor(programs)
    elif isinstance(programs, Sequence):
        try:
            tokens = encode_batch(programs, max_length=MAX_LEN)
        except TypeError as error:
            raise TypeError(f"{error}; programs must be {PROGRAM_TYPES}") from None
    else:
        raise TypeError(f"programs must be {PROGRAM_TYPES}, got {type(programs).__name__}"
                        + ("; pass a list, e.g. list(programs)" if isinstance(programs, Iterable) else ""))
    if tokens.shape[1] > MAX_LEN:
        raise ValueError(_too_long(tokens.shape[1]))
    return tokens.to(device) if device is not None else tokens


def _too_long(length: int) -> str:
    return (f"programs have {length} tokens, more than the {MAX_LEN} that synthenv accepts (synthenv.language."
            "MAX_LEN, to bound memory); shorten them or drop trailing EOS padding")


def _checked_tensor(programs: torch.Tensor) -> torch.Tensor:
    if programs.device.type == "meta":
        raise ValueError("programs is a tensor on the 'meta' device, which holds a shape but no token ids; create "
                         "it on 'cpu' or 'cuda', e.g. torch.as_tensor(ids, device='cpu')")
    if programs.dim() != 2:
        raise ValueError(f"programs must be an [N, L] token tensor, got shape {tuple(programs.shape)}; a single "
                         "program of L tokens is programs[None] ([1, L])")
    if programs.dtype.is_floating_point or programs.dtype.is_complex or programs.dtype == torch.bool:
        raise TypeError(f"programs must hold integer token ids, got dtype {programs.dtype}; use .long()")
    low, high = torch.aminmax(programs) if programs.numel() else (0, 0)  # one pass over the tokens
    if int(low) < 0 or int(high) >= VOCAB_SIZE:
        bad = programs[(programs < 0) | (programs >= VOCAB_SIZE)][0].item()
        raise ValueError(f"token ids must be in [0, {VOCAB_SIZE}), got {bad}; 0 = EOS, 1..8 = '><+-[].,'")
    return programs.long()


def _from_numpy(array: np.ndarray) -> torch.Tensor | list:
    """An integer array -> its token tensor (copied); a 1-D array of strings -> a list of them."""
    if array.dtype.kind in "iu":
        return torch.from_numpy(np.array(array, dtype=np.int64))  # a copy: later edits of the array do not leak
    if array.dtype.kind in "USO" and array.ndim == 1:
        return array.tolist()
    raise TypeError(f"a numpy array of programs must hold integer token ids ([N, L]) or strings ([N]), got dtype "
                    f"{array.dtype} and shape {array.shape}; programs must be {PROGRAM_TYPES}")


def _from_id_lists(rows: Sequence) -> torch.Tensor:
    """A list of token-id lists -> an EOS-padded ``[N, L]`` tensor, converted exactly."""
    lengths = [len(row) for row in rows]
    if max(lengths) > MAX_LEN:  # before anything of [N, L] is built
        raise ValueError(_too_long(max(lengths)))
    flat = [token for row in rows for token in row]
    bad = [t for t in flat if not isinstance(t, (int, np.integer)) or isinstance(t, (bool, np.bool_))][:1]
    if bad:
        bad = bad[0]
        raise TypeError(f"a list of token-id lists must hold ints, got {bad!r} ({type(bad).__name__}); programs must "
                        f"be {PROGRAM_TYPES}")
    huge = [t for t in flat if not -2**63 <= t < 2**63][:1]
    if huge:
        raise ValueError(f"token ids must be in [0, {VOCAB_SIZE}), got {huge[0]}; 0 = EOS, 1..8 = '><+-[].,'")
    flat = np.array(flat, dtype=np.int64)
    out = np.zeros((len(rows), max(max(lengths), 1)), dtype=np.int64)  # [N, L], EOS-padded
    out[np.arange(out.shape[1]) < np.array(lengths)[:, None]] = flat
    return torch.from_numpy(out)


def score(
    programs: Programs,
    task: Task | str,
    backend: str = DEFAULT_BACKEND,
    engine: str = "auto",
    device: torch.device | str | None = None,
    num_outputs: int | None = None,
) -> ScoreResult:
    """Compile, run and score programs on a task, batched, on one device.

    Args:
        programs: BF strings (``str`` or ``bytes``; characters other than ``><+-[].,`` are
            ignored, ``_`` ends a program), or token ids (0 = EOS, then ``><+-[].,`` = 1..8) as an
            ``[N, L]`` integer tensor or numpy array, or a list of int lists (padded with EOS).
            At most ``synthenv.language.MAX_LEN`` (4096) tokens per program.
        task: a ``Task`` or a registered task name (``synthenv.tasks.names()``).
        backend: a compiler backend (``synthenv.compilers.names()``).
        engine: ``"auto"``, ``"torch"``, ``"native"`` or ``"cuda"`` (``"reference"`` for the
            ``cpu`` backend).
        device: where to compute; defaults to the token tensor's device, else the CPU
            (``synthenv.checks.resolve_device``: it must exist on this machine).
        num_outputs: output values kept per case (default: the longest expected output).

    Returns:
        A ``ScoreResult`` with ``rewards``, ``solved``, per-case ``status`` and outputs.

    >>> result = score([",[>,]+[,<.]", ",[>,]<[.<]"], "reverse", engine="torch")
    >>> result.rewards.tolist(), result.solved.tolist()
    ([1.0, -0.03125], [True, False])
    """
    task = task_registry.resolve(task)
    tokens = as_tokens(programs)
    device = resolve_device(tokens.device if device is None else device)
    if num_outputs is not None and (not isinstance(num_outputs, int) or num_outputs < task.max_output_length):
        raise ValueError(f"num_outputs must be an int >= {task.max_output_length} (the task's longest output), "
                         f"got {num_outputs!r}")
    evaluator = Evaluator.create(backend, engine, device)
    tokens = tokens.to(device)
    chunk = max(1, SCORE_CHUNK_TOKENS // max(1, tokens.shape[1]))
    if tokens.shape[0] <= chunk:
        return ScoreResult.build(*evaluator(tokens, task, num_outputs), task)
    num_outputs = max(1, task.max_output_length) if num_outputs is None else num_outputs  # one O for every part
    parts = [evaluator(tokens[first : first + chunk], task, num_outputs) for first in range(0, len(tokens), chunk)]
    execution = Execution(*(torch.cat([getattr(e, field.name) for e, _ in parts])
                            for field in dataclasses.fields(Execution)))
    scores = Scores(*(torch.cat([getattr(s, field.name) for _, s in parts]) for field in dataclasses.fields(Scores)))
    return ScoreResult.build(execution, scores, task)
