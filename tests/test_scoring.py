"""PQT reward on device against the oracle's per-case formula and hand-worked values."""

from __future__ import annotations

import pytest
import torch

from synthenv import compilers, engines, reference, tasks, workloads
from synthenv.execution import Execution
from synthenv.language import Status
from synthenv.scoring import score_outputs
from synthenv.tasks import Task


def _execution(outputs: list[list[list[int]]], status: list[list[int]], width: int = 4) -> Execution:
    lengths = torch.tensor([[len(o) for o in row] for row in outputs], dtype=torch.int32)
    padded = torch.zeros((len(outputs), len(outputs[0]), width), dtype=torch.int32)
    for i, row in enumerate(outputs):
        for k, out in enumerate(row):
            kept = out[:width]
            padded[i, k, : len(kept)] = torch.tensor(kept, dtype=torch.int32)
    return Execution(padded, lengths, torch.tensor(status, dtype=torch.int8), torch.zeros_like(lengths))


TASK = Task.from_pairs("pair", [([1], [10, 20]), ([2], [])], base=256)
IMPLS = ["torch", "native"]


@pytest.mark.parametrize("impl", IMPLS)
def test_worked_rewards_by_hand(impl):
    outputs = [
        [[10, 20], []],  # both exact: (4 + 4) / 8 = 1.0
        [[12], [7]],  # case 0: d = 2 + 256, U = 512; case 1: one extra output, d = 256, U = 256 -> 0
        [[10, 20, 30, 40, 50], []],  # three extra outputs (beyond the 4 kept): d = 768
    ]
    scores = score_outputs(_execution(outputs, [[0, 0]] * 3), TASK, impl)
    assert scores.rewards.tolist() == pytest.approx([1.0, ((512 - 258) / 512 + 0.0) / 8, ((512 - 768) / 512 + 4) / 8])
    assert scores.solved.tolist() == [True, False, False]
    assert scores.case_correct.tolist() == [[True, True], [False, False], [False, True]]
    assert scores.rewards.dtype == torch.float64


@pytest.mark.parametrize("impl", IMPLS)
def test_any_failure_gives_the_failure_reward(impl):
    outputs = [[[10, 20], []], [[10, 20], []]]
    status = [[int(Status.OK), int(Status.STEP_LIMIT)], [int(Status.SYNTAX_ERROR), int(Status.SYNTAX_ERROR)]]
    scores = score_outputs(_execution(outputs, status), TASK, impl)
    assert scores.rewards.tolist() == [-2 / 8, -2 / 8]
    assert scores.solved.tolist() == [False, False]
    assert scores.program_status.tolist() == [Status.STEP_LIMIT, Status.SYNTAX_ERROR]
    assert scores.case_correct.tolist() == [[True, False], [False, False]]


@pytest.mark.parametrize("impl", IMPLS)
def test_aborted_cases_do_not_hide_the_failure_status(impl):
    outputs = [[[10, 20], []]]
    status = [[int(Status.STEP_LIMIT), int(Status.ABORTED)]]
    assert score_outputs(_execution(outputs, status), TASK, impl).program_status.tolist() == [Status.STEP_LIMIT]


@pytest.mark.parametrize("impl", IMPLS)
def test_matches_the_oracle_formula_on_random_outputs(impl):
    generator = torch.Generator().manual_seed(0)
    task = tasks.get("reverse")
    num = 200
    outputs = []
    for _ in range(num):
        row = []
        for _, expected in task.cases:
            length = int(torch.randint(0, len(expected) + 3, (1,), generator=generator))
            values = torch.randint(0, 256, (length,), generator=generator).tolist()
            if torch.rand(1, generator=generator) < 0.3:
                values = list(expected)  # some exact matches
            row.append(values)
        outputs.append(row)
    execution = _execution(outputs, [[0] * task.num_cases] * num, width=task.max_output_length)
    scores = score_outputs(execution, task, impl)
    for i, row in enumerate(outputs):
        want = sum(reference.case_reward(o, e, task.base) for o, (_, e) in zip(row, task.cases)) / (4 * task.num_cases)
        assert scores.rewards[i].item() == pytest.approx(want, abs=1e-12)
        assert scores.solved[i].item() == all(o == list(e) for o, (_, e) in zip(row, task.cases))


@pytest.mark.parametrize("impl", IMPLS)
def test_too_few_kept_outputs_is_an_error(impl):
    with pytest.raises(ValueError, match="keeps 1 outputs per case"):
        score_outputs(_execution([[[10], []]], [[0, 0]], width=1), TASK, impl)


def test_native_and_torch_scorers_agree_on_real_executions():
    task = tasks.get("reverse")
    tokens = workloads.make("uniform", 3000, seed=9)
    execution = engines.get("native").run(compilers.get("traditional").compile(tokens), task, early_abort=True)
    fast, slow = score_outputs(execution, task, "native"), score_outputs(execution, task, "torch")
    assert torch.allclose(fast.rewards, slow.rewards, rtol=0, atol=1e-12)
    assert torch.allclose(fast.case_rewards, slow.case_rewards, rtol=0, atol=1e-12)
    for name in ("solved", "case_correct", "program_status"):
        assert torch.equal(getattr(fast, name), getattr(slow, name)), name
    assert fast.rewards.dtype == slow.rewards.dtype and fast.program_status.dtype == slow.program_status.dtype
    with pytest.raises(ValueError, match="impl must be"):
        score_outputs(execution, task, "gpu")
