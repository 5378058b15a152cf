"""PQT's reward and solved flags, computed on the device for a whole batch (docs/semantics.md §2)."""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

import torch

from synthenv import native_build
from synthenv.execution import Execution
from synthenv.language import Status
from synthenv.tasks.task import Task

CORRECT_BONUS = 2.0
LENGTH_BONUS = 1.0  # success-rate setting: always the full bonus
FAILURE_REWARD = -2.0
LIBRARY = native_build.register(__name__, ["scoring.c"], beside=__file__, exports=("synthenv_score",))
"""The reward in C (``scoring.c``), for CPU tensors."""
SCORERS = ("auto", "torch", "native")
"""Implementations of ``score_outputs`` (its ``impl``)."""


@dataclass(frozen=True)
class Scores:
    """Rewards of N programs on a task's K cases.

    Attributes:
        rewards: ``[N]`` float64, PQT's normalised program reward (1.0 = solved). Double
            precision keeps large negative rewards (many extra outputs) exact to 1e-12.
        solved: ``[N]`` bool, every case printed exactly its expected output.
        case_rewards: ``[N, K]`` float64, each case's reward incl. bonuses (4.0 = correct);
            0 in failed programs.
        case_correct: ``[N, K]`` bool, the case ran ok and printed exactly its expected output.
        program_status: ``[N]`` int8 ``Status``: OK, or the status of the first failing case.
    """

    rewards: torch.Tensor
    solved: torch.Tensor
    case_rewards: torch.Tensor
    case_correct: torch.Tensor
    program_status: torch.Tensor


def score_outputs(execution: Execution, task: Task, impl: str = "auto") -> Scores:
    """Score an execution against ``task``'s expected outputs, all on the execution's device.

    Per case: distance d = sum of |p_t - y_t| over produced positions, + base per missing
    position, + base per extra output; r = (U - d) / U with U = base * m (base when m = 0);
    an exact match adds the correct bonus 2 and the length bonus 1. Program reward = sum of
    r / (4 K); any failure gives -2 / (4 K).

    ``impl``: ``"torch"`` (batched tensor ops, any device), ``"native"`` (the same arithmetic
    in C, one program per thread, CPU tensors) or ``"auto"`` (native on the CPU when the C
    kernel builds). On a CPU, a dozen float64 passes over ``[N, K, O]`` cost as much as
    running the programs (``scoring.c``); tests/test_scoring.py checks the two agree.
    """
    if impl not in SCORERS:
        raise ValueError(f"impl must be 'auto', 'torch' or 'native', got {impl!r}")
    on_cpu = execution.outputs.device.type == "cpu"
    if impl == "native" or (impl == "auto" and on_cpu and LIBRARY.is_available()):
        return _score_native(execution, task)
    return _score_torch(execution, task)


def _score_torch(execution: Execution, task: Task) -> Scores:
    cases = task.tensors(execution.outputs.device)
    expected = cases.expected.long()  # [K, M]
    width = expected.shape[1]
    if execution.outputs.shape[2] < width:
        raise ValueError(f"execution keeps {execution.outputs.shape[2]} outputs per case, the task needs {width}")
    produced = execution.outputs[..., :width].long()  # [N, K, M]
    lengths = execution.output_lengths.long()[..., None]  # [N, K, 1]
    wanted = cases.expected_lengths.long()  # [K]
    t = torch.arange(width, device=expected.device)  # [M]
    in_target = (t[None, :] < wanted[:, None])[None]  # [1, K, M]
    has_value = t < lengths  # [N, K, M]
    base = float(task.base)
    per_slot = torch.where(has_value, (produced - expected).abs().double(), base)
    distance = torch.where(in_target, per_slot, 0.0).sum(-1)  # [N, K]
    distance = distance + base * (lengths[..., 0] - wanted).clamp(min=0).double()
    unit = torch.where(wanted > 0, base * wanted.double(), base)  # [K]
    exact = (lengths[..., 0] == wanted) & torch.where(in_target, produced == expected, True).all(-1)
    reward = (unit - distance) / unit + (CORRECT_BONUS + LENGTH_BONUS) * exact.double()  # [N, K]
    ok = execution.status == Status.OK  # [N, K]
    program_ok = ok.all(1)
    scale = 4.0 * cases.num_cases
    rewards = torch.where(program_ok, reward.sum(1) / scale, FAILURE_REWARD / scale)
    return Scores(
        rewards,
        program_ok & exact.all(1),
        torch.where(program_ok[:, None], reward, 0.0),
        ok & exact,
        execution.program_status,
    )


def _score_native(execution: Execution, task: Task, num_threads: int = 0) -> Scores:
    """The reward in C (``scoring.c``), one program per thread, for CPU tensors."""
    if execution.outputs.device.type != "cpu":
        raise ValueError(f"impl='native' scores CPU tensors, got an execution on {execution.outputs.device}; "
                         "use impl='torch' or 'auto'")
    cases = task.tensors("cpu")
    # Named locals keep converted copies alive while the C code reads them.
    outputs = execution.outputs.to(torch.int32).contiguous()  # [N, K, O]
    lengths = execution.output_lengths.to(torch.int32).contiguous()  # [N, K]
    status = execution.status.to(torch.int8).contiguous()  # [N, K]
    num_programs, num_cases, num_outputs = outputs.shape
    if num_outputs < cases.expected.shape[1]:
        raise ValueError(f"execution keeps {num_outputs} outputs per case, the task needs {cases.expected.shape[1]}")
    scores = Scores(torch.empty(num_programs, dtype=torch.float64), torch.empty(num_programs, dtype=torch.bool),
                    torch.empty((num_programs, num_cases), dtype=torch.float64),
                    torch.empty((num_programs, num_cases), dtype=torch.bool),
                    torch.empty(num_programs, dtype=torch.int8))
    _native_score()(
        outputs.data_ptr(), lengths.data_ptr(), status.data_ptr(), num_programs, num_cases, num_outputs,
        cases.expected.data_ptr(), cases.expected_lengths.data_ptr(), cases.expected.shape[1], task.base,
        *(t.data_ptr() for t in (scores.rewards, scores.solved, scores.case_rewards, scores.case_correct,
                                 scores.program_status)), num_threads)
    return scores


@functools.lru_cache(maxsize=1)
def _native_score():
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    return LIBRARY.bind("synthenv_score", [p, p, p, i64, i64, i64, p, p, i64, i32, p, p, p, p, p, i32], None)
