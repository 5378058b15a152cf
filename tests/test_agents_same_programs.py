"""Every algorithm writes, with the same seeds, the very programs it was recorded writing: a change of an
agent's behaviour shows here, and a refactoring that changes none leaves this test passing.

``tests/fixtures/agent_programs.json`` holds, for each short fixed-seed run, a digest of the programs each step
proposed and each seed's result. The runs cover every registered algorithm at its defaults (the default agent
with its library, program prior and idioms), and small configurations of the search with its edit policy:
the elitist phase, hand-over (members at different generations), time sharing, islands, crossover, policy
variants and updates, every ablation switch, sharing between members, finished members and budgets. One torch
thread: the edit policy's floating point then adds in one order. When a change of behaviour is meant,
re-record it (``python tests/test_agents_same_programs.py tests/fixtures/agent_programs.json``) and say so in
the commit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import pytest
import torch

from synthenv.agents import (PRESETS, GAConfig, IslandsConfig, MutationConfig, PPOConfig, RandomConfig, TrainConfig,
                             Trainer)
from synthenv.agents.pqt.policies import PolicyConfig

FIXTURE = Path(__file__).parent / "fixtures" / "agent_programs.json"
STEPS = 60
# small configurations of the search with its edit policy, without the prior, idioms and the library
SMALL = PPOConfig(batch_size=64, islands=4, island_size=4, queue_size=8, update_every=2, update_batch=16,
                  policy_fraction=0.25, splice_fraction=0.25, patience=3, elitist_patience=2, islands_every=2,
                  policy="scratch", fresh="uniform", idiom_fraction=0.0, library="none")
PG = dict(batch_size=16, policy=PolicyConfig(hidden=8, embedding=4, layers=1))
DEFAULTS = {f"{algo}-defaults-{task}": (algo, config, task, {"max_len": 24})
            for algo, config in (("islands", IslandsConfig()), ("ppo", PPOConfig()), ("mutation", MutationConfig()),
                                 ("pqt", PRESETS["pqt"]), ("pg-pqt", PRESETS["pg-pqt"]),
                                 ("reinforce", PRESETS["reinforce"]), ("ga", GAConfig()), ("random", RandomConfig()))
            for task in ("remove-char-tune", "gen-test-1")}
DEFAULTS.update({f"{algo}-defaults-early-handover": (algo, config, "gen-test-1", {"max_len": 24})
                 for algo, config in (("islands", IslandsConfig(elitist_patience=2)),
                                      ("ppo", PPOConfig(elitist_patience=2)))})
"""Every registered algorithm at its defaults, on a tuning task and a held-out generated task; and the default
agent, with and without its edit policy, at its defaults but for an early hand-over (its islands run within the
recorded steps: the library, the prior, idioms, crossover and, for ppo, the pretrained policy's variants)."""
RUNS = {
    **DEFAULTS,
    "ppo": ("ppo", SMALL, "reverse-tune", {}),
    "ppo-seeded-elite-mates-off": ("ppo", dataclasses.replace(SMALL, seeded_islands=0.5, elite_mates=False),
                                   "remove-char-tune", {}),
    "ppo-no-elitist-elite-fraction-risk": ("ppo", dataclasses.replace(SMALL, elitist=False, elite_fraction=0.25,
                                                                     batch_size=80, risk_quantile=0.5),
                                           "reverse-tune", {}),
    "ppo-no-feedback-drift-restarts-one-variant": ("ppo", dataclasses.replace(
        SMALL, feedback=False, drift=False, restarts=False, variants_per_parent=1, elitist=False), "reverse-tune", {}),
    "ppo-imitation-only-share": ("ppo", dataclasses.replace(SMALL, pg_weight=0.0), "reverse-tune", {"share_every": 5}),
    "ppo-no-policy": ("ppo", dataclasses.replace(SMALL, policy_fraction=0.0), "reverse-tune", {}),
    "ppo-solves-echo": ("ppo", dataclasses.replace(SMALL, elitist_patience=1), "echo", {"seeds": (0, 1, 2)}),
    "ppo-budget": ("ppo", SMALL, "reverse-tune", {"npe": 64 * 25}),
    "mutation": ("mutation", MutationConfig(batch_size=64, elite=8), "reverse-tune", {}),
    "mutation-solves-echo": ("mutation", MutationConfig(batch_size=64, elite=8), "echo", {"seeds": (0, 1, 2)}),
    "pqt": ("pqt", dataclasses.replace(PRESETS["pqt"], **PG), "reverse-tune", {"share_every": 5}),
    "pg-pqt": ("pg-pqt", dataclasses.replace(PRESETS["pg-pqt"], **PG), "reverse-tune", {}),
    "reinforce": ("reinforce", dataclasses.replace(PRESETS["reinforce"], **PG, allow_eos=True), "reverse-tune", {}),
    "ga": ("ga", GAConfig(batch_size=20), "reverse-tune", {}),
    "random": ("random", RandomConfig(batch_size=64), "reverse-tune", {}),
}


def record(name: str) -> dict:
    """One run: a digest of each step's proposed programs ``[S, B, L]``, and each seed's result."""
    algo, config, task, extra = RUNS[name]
    options = {"seeds": (0, 1), "npe": 10**9, "max_len": 12, **extra}
    trainer = Trainer(TrainConfig(task=task, algo=algo, algo_config=config, log_dir=None,
                                  progress=False, max_train_steps=STEPS, log_every=5, **options))
    digests, propose = [], trainer.algorithm.propose

    def recorded() -> torch.Tensor:
        tokens = propose()
        digests.append(hashlib.sha256(tokens.contiguous().numpy().tobytes()).hexdigest()[:16])
        return tokens

    trainer.algorithm.propose = recorded
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        results = trainer.run()
    finally:
        torch.set_num_threads(threads)
    return {"steps": digests, "results": [[r.seed, r.solved, r.npe, r.best_program, round(r.best_reward, 6)]
                                          for r in results]}


@pytest.mark.parametrize("name", list(RUNS))
def test_the_programs_are_those_recorded(name: str):
    expected = json.loads(FIXTURE.read_text())[name]
    got = record(name)
    assert got["results"] == expected["results"]
    first = next((i for i, (a, b) in enumerate(zip(got["steps"], expected["steps"])) if a != b), None)
    assert first is None and len(got["steps"]) == len(expected["steps"]), f"programs differ from step {first} on"


if __name__ == "__main__":  # re-record (only when a change of algorithm is meant)
    Path(sys.argv[1]).write_text(json.dumps({name: record(name) for name in RUNS}, indent=1))
