"""A time budget holds inside a generation: the engines look at the clock while a batch runs (synthenv.deadline),
and the trainer drops a generation its budget ran out in."""

from __future__ import annotations

import time

import pytest
import torch

from native import require_native
from synthenv import agents, compilers, deadline, engines
from synthenv.agents.pqt.random_search import RandomSearch
from synthenv.language import encode_batch
from synthenv.tasks import Task

SLOW = "+[>,<+]"
"""Reads the end of input again and again while its counter climbs (base 2**31-1): 10**6 steps per case until the
step limit, with no state repeated (no engine proves it a hang early): about 2 ms a case on the native VM."""


def slow_task(cases: int = 16) -> Task:
    return Task.from_pairs("slow", [([i], [i]) for i in range(cases)], base=2**31 - 1, max_steps=10**6)


@pytest.mark.parametrize("engine", ["native", "torch"])
def test_an_engine_stops_a_batch_once_its_deadline_passed(engine):
    if engine == "native":
        require_native()
    task = slow_task()
    program = compilers.get("traditional").compile(encode_batch([SLOW] * 2048))  # 30 s or more on 2 cores
    started = time.monotonic()
    with pytest.raises(deadline.DeadlineExceeded), deadline.within(started + 0.2):
        engines.get(engine).run(program, task)
    assert time.monotonic() - started < 10  # the whole batch would take 30 s or more


def test_the_reference_pipeline_stops_at_its_deadline():
    evaluator = compilers.get("cpu")
    started = time.monotonic()
    with pytest.raises(deadline.DeadlineExceeded), deadline.within(started + 0.1):
        evaluator.execute(encode_batch([SLOW] * 64), slow_task())
    assert time.monotonic() - started < 10  # 64 x 16 cases of 10**6 Python steps: many minutes


def test_a_passed_deadline_outside_a_batch_changes_nothing():
    require_native()
    task = slow_task(2)
    program = compilers.get("traditional").compile(encode_batch(["+.", ",."]))
    with deadline.within(None):
        plain = engines.get("native").run(program, task)
    with deadline.within(time.monotonic() + 3600):
        timed = engines.get("native").run(program, task)
    assert torch.equal(plain.outputs, timed.outputs) and torch.equal(plain.steps, timed.steps)
    assert deadline.current() is None


def test_a_generation_past_the_time_budget_is_stopped_and_dropped(monkeypatch):
    """The first generation (4096 programs x 16 cases of 10**6 steps each) would take a minute or more; with a 1 s budget
    the run ends within seconds of it, and the unfinished generation counts no programs."""
    require_native()
    monkeypatch.setattr(RandomSearch, "propose", lambda self: encode_batch([SLOW], self.max_len).expand(
        len(self.generators), self.config.batch_size, -1).clone())
    started = time.monotonic()
    results = agents.train(agents.TrainConfig(task=slow_task(), algo="random", seconds=1.0, seeds=(0,),
                                              engine="native", log_dir=None, progress=False))
    assert time.monotonic() - started < 1.0 + 5.0
    assert [(r.solved, r.npe) for r in results] == [(False, 0)]
    assert results[0].seconds >= 1.0
