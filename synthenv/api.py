"""``synthenv.score``: compile, run and score a batch of programs in one call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from synthenv import tasks as task_registry
from synthenv.execution import Execution
from synthenv.language import VOCAB_SIZE, encode_batch
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


def as_tokens(programs: Sequence[str] | torch.Tensor, device: torch.device | str | None = None) -> torch.Tensor:
    """Validate programs (BF strings or an ``[N, L]`` token tensor) and return int64 tokens.

    # sync point: checks token ranges on the host; the envs validate cheaper, per step.
    """
    if isinstance(programs, torch.Tensor):
        if programs.dim() != 2:
            raise ValueError(f"programs must be an [N, L] token tensor, got shape {tuple(programs.shape)}")
        if programs.dtype.is_floating_point or programs.dtype.is_complex or programs.dtype == torch.bool:
            raise TypeError(f"programs must hold integer token ids, got dtype {programs.dtype}; use .long()")
        if programs.numel() and (int(programs.min()) < 0 or int(programs.max()) >= VOCAB_SIZE):
            bad = programs[(programs < 0) | (programs >= VOCAB_SIZE)][0].item()
            raise ValueError(f"token ids must be in [0, {VOCAB_SIZE}), got {bad}; 0 = EOS, 1..8 = '><+-[].,'")
        tokens = programs.long()
        return tokens.to(device) if device is not None else tokens
    if isinstance(programs, str):
        raise TypeError("programs must be a list of BF strings or a token tensor, got one str; wrap it: [program]")
    return encode_batch(list(programs), device=device)


def score(
    programs: Sequence[str] | torch.Tensor,
    task: Task | str,
    backend: str = "traditional",
    engine: str = "auto",
    device: torch.device | str | None = None,
    num_outputs: int | None = None,
) -> ScoreResult:
    """Compile, run and score programs on a task, batched, on one device.

    Args:
        programs: BF strings, or an ``[N, L]`` integer tensor of token ids (0 = EOS, then
            ``><+-[].,`` = 1..8).
        task: a ``Task`` or a registered task name (``synthenv.tasks.names()``).
        backend: a compiler backend (``synthenv.compilers.names()``).
        engine: ``"auto"``, ``"torch"``, ``"native"`` or ``"cuda"`` (``"reference"`` for the
            ``cpu`` backend).
        device: where to compute; defaults to the token tensor's device, else the CPU.
        num_outputs: output values kept per case (default: the longest expected output).

    Returns:
        A ``ScoreResult`` with ``rewards``, ``solved``, per-case ``status`` and outputs.

    >>> result = score([",[>,]+[,<.]", ",[>,]<[.<]"], "reverse", engine="torch")
    >>> result.rewards.tolist(), result.solved.tolist()
    ([1.0, -0.03125], [True, False])
    """
    task = task_registry.resolve(task)
    if device is None:
        device = programs.device if isinstance(programs, torch.Tensor) else torch.device("cpu")
    device = torch.device(device)
    if num_outputs is not None and (not isinstance(num_outputs, int) or num_outputs < task.max_output_length):
        raise ValueError(f"num_outputs must be an int >= {task.max_output_length} (the task's longest output), "
                         f"got {num_outputs!r}")
    evaluator = Evaluator.create(backend, engine, device)
    tokens = as_tokens(programs, device)
    execution, scores = evaluator(tokens, task, num_outputs)
    return ScoreResult.build(execution, scores, task)
