"""No host sync in one training step of any algorithm, on the GPU path, proven on the CPU.

Each algorithm's step (propose -> env step -> feedback -> learn) runs under the sync guard
(``synthenv.testing.syncguard``) with the env on its GPU path (the torch compile passes, the
torch engine, the torch scorer) and the agents' variation operators on their torch path (the C
fast path is what a CPU runs; a GPU runs the torch one). Only the torch engine's documented
periodic check is allowed (on a GPU the cuda engine has none), and the default agent's hand-over check,
every ``HANDOVER_CHECK_EVERY`` steps while a member is in its elitist phase.
"""

from __future__ import annotations

import dataclasses

import pytest

from synthenv import agents, engines
from synthenv.agents.policy import editor
from synthenv.agents.search import rows
from synthenv.agents.run.trainer import TrainConfig, Trainer
from synthenv.compilers.traditional import TraditionalCompiler
from synthenv.env import SynthVecEnv
from synthenv.pipeline import Evaluator
from synthenv.testing.syncguard import forbid_host_sync

SMALL = {
    "islands": dict(batch_size=32, islands=2, island_size=4, queue_size=4, elitist=False),
    "ppo": dict(batch_size=32, islands=2, island_size=4, queue_size=4, update_every=1, update_batch=8, elitist=False,
                variants_per_parent=1),
    "mutation": dict(batch_size=16, elite=4),
    "ga": dict(batch_size=16),
    "random": dict(batch_size=16),
    "pqt": dict(batch_size=8), "pg-pqt": dict(batch_size=8), "reinforce": dict(batch_size=8),
}

STEP_LIMIT = 100
"""The env's step limit on the GPU path here: several of the torch engine's periodic checks per evaluation."""


def gpu_path_trainer(algo: str, monkeypatch, seeds: tuple[int, ...] = (0,), **changes) -> Trainer:
    monkeypatch.setattr(rows, "native", lambda *tensors: None)  # the torch operators, as on a GPU
    monkeypatch.setattr(editor, "_width_on_host", lambda device: False)  # the edit policy's full width, as on a GPU
    config = dataclasses.replace(agents.default_config(algo), **{**SMALL[algo], **changes})
    trainer = Trainer(TrainConfig(task="reverse-tune", algo=algo, max_len=12, algo_config=config, log_dir=None,
                                  progress=False, npe=10**6, seeds=seeds))
    evaluator = Evaluator(TraditionalCompiler(impl="torch"), engines.get("torch"), scorer="torch")
    # a short step limit: every engine iteration makes the same ops, and the default agent's fresh programs (samples
    # of its prior: balanced loops) often never halt, so at the task's own limit a step would take seconds
    task = dataclasses.replace(trainer.task, max_steps=STEP_LIMIT)
    trainer.env = SynthVecEnv(task, trainer.num_members * trainer.batch, mode="program", max_len=12,
                              evaluator=evaluator, validate_actions=False)
    trainer.env.reset(seed=0)
    for _ in range(2):  # warm-up: tables built once per device, queues filled, a policy update done
        trainer.step()
    return trainer


@pytest.mark.parametrize("algo", agents.names())
def test_a_training_step_makes_no_host_sync(algo, monkeypatch):
    trainer = gpu_path_trainer(algo, monkeypatch)
    with forbid_host_sync(allow=("torch_engine_check",)) as guard:
        for _ in range(2):
            trainer.step()
    assert guard.count == 0, guard.report()


def test_the_default_agent_syncs_only_to_hand_over(monkeypatch):
    """Its elitist phase, the hand-over (generation 10) and the islands after it: no sync but the marked one."""
    trainer = gpu_path_trainer("ppo", monkeypatch, elitist=True, elitist_patience=1)
    with forbid_host_sync(allow=("torch_engine_check", "elitist_handover")) as guard:
        for _ in range(10):
            trainer.step()
    assert guard.count == 0, guard.report()
    assert trainer.algorithm.elitist == [False]


def test_the_default_agent_syncs_only_to_hand_over_with_members_in_both_phases(monkeypatch):
    """Seeds 0 and 1 hand over at different steps (from fresh programs alone): between them the islands run for one
    seed only."""
    trainer = gpu_path_trainer("ppo", monkeypatch, elitist=True, elitist_patience=1, seeds=(0, 1), library="none")
    phases = []
    with forbid_host_sync(allow=("torch_engine_check", "elitist_handover")) as guard:
        for _ in range(20):
            trainer.step()
            phases.append(tuple(trainer.algorithm.elitist))
    assert guard.count == 0, guard.report()
    assert len(set(phases)) == 3 and phases[-1] == (False, False)  # both, one, then neither in the elitist phase
