"""Pretraining the edit policy (repair examples and search experience on generated tasks), policy files, and what
runs leave for the next one: the examples are right by the reference interpreter, pretraining lowers the loss on
tasks it never saw, policy files are untrusted data."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from synthenv import reference
from synthenv.agents import PPOConfig, TrainConfig, Trainer, train
from synthenv.agents.policy.editor import EditorConfig, EditPolicy
from synthenv.agents.policy.distribution import edit_log_probs
from synthenv.agents.pretraining.probes import Probes, probe_rates, search_probes
from synthenv.agents.run.feedback import NUM_FEATURES
from synthenv.agents.policy.learner import EditLearner
from synthenv.agents.search.operators import EDIT_FIELDS, Members
from synthenv.agents.policy.files import SHIPPED, load_policy, save_policy, start_policy
from synthenv.agents.pretraining.pretrain import JUDGED_TEMPERATURES, PretrainConfig, fit, pretrain
from synthenv.agents.pretraining.repair import corrupt, evaluate, repair_loss, repair_rate, repair_set
from synthenv.agents.run.data import FILE_NAME, load_runs
from synthenv.agents.search.variation import (DELETE, INSERT, SUBSTITUTE, Edits, apply_edits, inverse_edits,
                                              random_edits, random_programs)
from synthenv.checkpoint import CheckpointError
from synthenv.cli import main
from synthenv.language import Status, decode_batch, encode_batch
from synthenv.pipeline import Evaluator
from synthenv.tasks import generated

CPU = torch.device("cpu")


@pytest.mark.parametrize("seed", range(3))
def test_inverse_edits_undo_every_kind_of_edit(seed):
    gens = [torch.Generator().manual_seed(seed)]
    parents = random_programs(gens, (3000,), 16, 12, CPU)  # room for 3 insertions: nothing is cut
    edits = random_edits(gens, parents, max_edits=3)
    assert {SUBSTITUTE, INSERT, DELETE} <= set(edits.kinds[edits.active].tolist())
    children = apply_edits(parents, edits)
    undo = inverse_edits(parents, edits)
    assert torch.equal(apply_edits(children, undo), parents)
    assert bool((undo.active.sum(-1) <= edits.active.sum(-1)).all())
    full = torch.full((1, 1, 4), 3)  # an insertion into a full program drops its last token: not undone
    insert = Edits(torch.tensor([[[0]]]), torch.tensor([[[INSERT]]]), torch.tensor([[[5]]]), torch.tensor([[[True]]]))
    assert not torch.equal(apply_edits(apply_edits(full, insert), inverse_edits(full, insert)), full)


def test_repair_examples_repair_their_task_by_the_reference_interpreter():
    pairs = generated.pairs("train", 0, 12)
    examples = repair_set(pairs, 8, 40, 3, torch.Generator().manual_seed(0), Evaluator.create())
    assert len(examples) > 40
    repaired = decode_batch(apply_edits(examples.parents[None], Edits(*(getattr(examples.edits, n)[None]
                                                                         for n in EDIT_FIELDS)))[0])
    corrupted = decode_batch(examples.parents)
    for row in range(len(examples)):
        task, _ = pairs[int(examples.groups[row])]
        result = lambda code: reference.score_program(code, task.cases, task.base, task.max_steps)  # noqa: E731
        assert result(repaired[row]).solved and not result(corrupted[row]).solved, row
    assert examples.features.shape == (len(examples), NUM_FEATURES) and examples.features.abs().sum() > 0


def test_corruptions_are_one_to_max_edits_random_edits_of_the_solution():
    solution = torch.tensor([[7, 8, 1, 0, 0, 0, 0, 0]])
    originals, corrupted, repair = corrupt(solution, 50, 2, torch.Generator().manual_seed(1))
    assert torch.equal(originals, solution.expand(50, -1)) and corrupted.shape == (50, 8)
    assert set(repair.active.sum(-1).tolist()) <= {1, 2} and (corrupted != originals).any()


def test_pretraining_lowers_the_repair_loss_on_tasks_it_never_saw():
    evaluator, generator = Evaluator.create(), torch.Generator().manual_seed(0)
    train_set = repair_set(generated.pairs("train", 0, 150), 16, 100, 3, generator, evaluator)
    # the train split, never trained on
    held_out = repair_set(generated.pairs("train", 10**6, 40), 8, 100, 3, generator, evaluator)
    policy = EditPolicy(EditorConfig(), 1, NUM_FEATURES, [torch.Generator().manual_seed(0)], CPU)
    with torch.no_grad():
        before = float(repair_loss(policy, held_out))
    log = fit(policy, train_set, held_out, steps=300, batch_size=256, learning_rate=3e-3, generator=generator,
              log_every=100)
    assert log.steps == [100, 200, 300] and log.validation_loss[-1] < log.validation_loss[0] < before
    assert log.validation_loss[-1] < before - 1.0


def test_pretrain_writes_a_policy_file_with_its_card_and_an_agent_starts_from_it(tmp_path):
    out = tmp_path / "policy.pt"
    config = PretrainConfig(tasks=12, validation_tasks=4, corruptions=4, steps=20, batch_size=64, out=str(out))
    lines = []
    card = pretrain(config, log=lines.append)
    assert out.exists() and any("repair rate with 16 variants" in line for line in lines)
    assert any(line.startswith("new-best rate on") for line in lines)
    loaded = load_policy(out)
    assert loaded.card["command"] == ("synthenv pretrain --tasks 12 --validation-tasks 4 --corruptions 4 "
                                      f"--steps 20 --batch-size 64 --out {out}")
    assert card["data"]["tasks"] == [0, 12] and card["validation"]["tasks"] == [12, 16]
    data = card["data"]
    assert data["repair_examples"] > 0 and data["examples"] == data["repair_examples"]
    for kind in ("new_best_rate", "step_limit_rate"):
        assert set(card["validation"][kind]) == {"random", *(f"policy at temperature {t}" for t in JUDGED_TEMPERATURES)}
    agent = Trainer(TrainConfig(task="reverse-tune", algo="ppo", algo_config=PPOConfig(policy=str(out)),
                                seeds=(0, 1), log_dir=None, progress=False, npe=10**5)).algorithm
    for name, value in agent.learner.policy.named_parameters():
        assert torch.equal(value[0], loaded.parameters[name]) and torch.equal(value[1], loaded.parameters[name])


def test_pretraining_needs_examples(tmp_path):
    with pytest.raises(ValueError, match="needs examples"):
        PretrainConfig(corruptions=0)
    with pytest.raises(ValueError, match="steps must be a positive int"):
        PretrainConfig(steps=0)
    with pytest.raises(ValueError, match="corruptions must be an int >= 0"):
        PretrainConfig(corruptions=-1)
    (tmp_path / "empty").mkdir()
    config = PretrainConfig(tasks=2, validation_tasks=1, corruptions=0, from_runs=str(tmp_path / "empty"),
                            out=str(tmp_path / "p.pt"))
    with pytest.raises(ValueError, match="found no examples"):
        pretrain(config, log=lambda line: None)


def test_policy_files_are_untrusted_data(tmp_path, capsys):
    policy = EditPolicy(EditorConfig(), 2, NUM_FEATURES, [torch.Generator().manual_seed(s) for s in (0, 1)], CPU)
    path = tmp_path / "p.pt"
    save_policy(path, policy, 1, {"note": "member 1"})
    loaded = load_policy(path)
    assert all(torch.equal(loaded.parameters[n], v[1]) for n, v in policy.named_parameters())
    assert loaded.card == {"note": "member 1"}
    bad = tmp_path / "bad.pt"
    bad.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(CheckpointError, match="bad.pt"):
        load_policy(bad)
    for broken in (bad, tmp_path / "missing.pt"):  # the fix a policy file needs, not a checkpoint's
        with pytest.raises(CheckpointError, match="written by synthenv pretrain or synthenv train --policy-out") as err:
            load_policy(broken)
        assert "resume" not in str(err.value)
    torch.save({"format": "something else"}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError):
        load_policy(tmp_path / "other.pt")
    wide = tmp_path / "wide.pt"
    save_policy(wide, EditPolicy(EditorConfig(hidden=8), 1, NUM_FEATURES, [torch.Generator()], CPU), 0, {})
    with pytest.raises(CheckpointError, match="architecture"):
        Trainer(TrainConfig(task="reverse-tune", algo="ppo", algo_config=PPOConfig(policy=str(wide)), log_dir=None,
                            progress=False))
    for file in (bad, wide):  # at the command line: one line, exit code 2
        assert main(["train", "--task", "reverse-tune", "--policy", str(file), "--npe", "64", "--log-dir", "None",
                     "--no-progress"]) == 2
        assert capsys.readouterr().err.count("\n") == 1


def test_the_shipped_policy_loads_with_weights_only_and_is_the_default_start():
    shipped = load_policy(SHIPPED)
    assert shipped.editor == EditorConfig() and shipped.card["command"].startswith("synthenv pretrain")
    assert PPOConfig().policy == "pretrained"


def test_the_ppo_update_raises_the_probability_of_an_edit_with_positive_advantage():
    """One parent, two variants of it in the rollout: the one that beat its parent gains probability."""
    config = PPOConfig(batch_size=64, islands=1, island_size=4, queue_size=4, update_every=1, update_batch=4,
                       policy_fraction=0.0625, variants_per_parent=4, queue_weight=0.0, entropy_coef=0.0,
                       update_epochs=4, learning_rate=1e-2, policy="scratch")
    gens = [torch.Generator().manual_seed(0)]
    learner = EditLearner(config, gens, 12, CPU)
    parent = torch.tensor([[[7, 8, 1, 7, 0, 0, 0, 0, 0, 0, 0, 0]]])
    features = torch.zeros(1, 1, NUM_FEATURES)
    edits, log_probs = learner.policy.sample(parent, features, gens, None, 4)
    gains = torch.tensor([[1.0, -1.0, -1.0, -1.0]])
    learner.rollout.store([0], Members(gens), {"parents": parent, "features": features, "log_probs": log_probs,
                                               "gains": gains, "valid": torch.ones(1, 4, dtype=torch.bool),
                                               **{n: getattr(edits, n) for n in EDIT_FIELDS}})
    learner.update(Members(gens), learner.imitation, torch.ones(1, dtype=torch.bool))
    with torch.no_grad():
        after = edit_log_probs(learner.policy(parent, features), edits)
    assert float(after[0, 0]) > float(log_probs[0, 0]) + 0.05
    assert float(after[0, 1:].mean()) < float(log_probs[0, 1:].mean())


def test_runs_leave_their_improving_edits_and_solution_for_pretrain(tmp_path):
    config = PPOConfig(batch_size=256, islands=4, island_size=8, queue_size=16, elitist=False, policy="scratch")
    (result,) = train(TrainConfig(task="reverse-tune", algo="ppo", algo_config=config, npe=256 * 30, seeds=(3,),
                                  log_dir=str(tmp_path / "runs"), progress=False))
    (data,) = list((tmp_path / "runs").rglob(FILE_NAME))
    examples, solved = load_runs(tmp_path / "runs", 100)
    assert examples is not None and 0 < len(examples) <= 16
    assert bool((examples.edits.active.sum(-1) >= 1).all())
    assert [pair[1] for pair in solved] == ([result.best_program] if result.solved else [])
    with pytest.raises(FileNotFoundError):
        load_runs(tmp_path / "nowhere", 100)
    card = pretrain(PretrainConfig(tasks=2, validation_tasks=2, corruptions=0, steps=5,
                                   batch_size=8, from_runs=str(tmp_path / "runs"), out=str(tmp_path / "p.pt")),
                    log=lambda line: None)
    assert card["data"]["from_runs_examples"] == card["data"]["examples"] >= len(examples)
    shipped = load_policy(SHIPPED)
    lines = []
    card = pretrain(PretrainConfig(tasks=2, validation_tasks=2, corruptions=0, steps=1,
                                   batch_size=8, learning_rate=1e-9, from_runs=str(tmp_path / "runs"),
                                   start="pretrained", out=str(tmp_path / "more.pt")), log=lines.append)
    more = load_policy(tmp_path / "more.pt")  # one step of a vanishing size: still the shipped policy
    assert card["start"] == "pretrained" and "--start pretrained" in card["command"]
    assert all(torch.allclose(more.parameters[n], value, atol=1e-6) for n, value in shipped.parameters.items())
    fresh = load_policy(tmp_path / "p.pt")  # from scratch: far from it
    assert not all(torch.allclose(fresh.parameters[n], value, atol=1e-2) for n, value in shipped.parameters.items())
    refused = []
    with pytest.raises(CheckpointError, match="architecture"):
        pretrain(PretrainConfig(tasks=2, validation_tasks=2, corruptions=0, from_runs=str(tmp_path / "runs"),
                                start="pretrained", editor=EditorConfig(hidden=8), out=str(tmp_path / "x.pt")),
                 log=refused.append)
    assert not (tmp_path / "x.pt").exists() and refused == []  # refused before any data were built
    assert any("examples" in line for line in lines)


def test_a_fine_tuned_policy_is_saved_and_starts_the_next_run(tmp_path):
    out = tmp_path / "tuned.pt"
    config = PPOConfig(batch_size=256, islands=4, island_size=8, queue_size=16, elitist=False, policy="scratch",
                       update_every=2)
    train(TrainConfig(task="reverse-tune", algo="ppo", algo_config=config, npe=256 * 12, seeds=(0, 1),
                      log_dir=None, progress=False, policy_out=str(out)))
    tuned = load_policy(out)
    assert tuned.card["fine_tuned_on"] == "reverse-tune" and tuned.card["start"] == "scratch"
    assert tuned.card["updates"] == 6  # 12 generations of islands, an update every 2
    fresh = EditPolicy(EditorConfig(), 1, NUM_FEATURES, [torch.Generator().manual_seed(0)], CPU)
    assert any(not torch.equal(tuned.parameters[n], v[0]) for n, v in fresh.named_parameters())  # it learned
    second = Trainer(TrainConfig(task="remove-char-tune", algo="ppo", algo_config=dataclasses.replace(
        config, policy=str(out)), seeds=(5,), log_dir=None, progress=False, npe=256))
    assert all(torch.equal(v[0], tuned.parameters[n]) for n, v in second.algorithm.learner.policy.named_parameters())
    with pytest.raises(ValueError, match="algorithm 'ga' has none"):
        Trainer(TrainConfig(task="reverse-tune", algo="ga", policy_out=str(out), log_dir=None, progress=False))
    for still in (dict(fine_tune=False), dict(policy_fraction=0.0)):
        with pytest.raises(ValueError, match="never updates it"):
            Trainer(TrainConfig(task="reverse-tune", algo="ppo", algo_config=dataclasses.replace(config, **still),
                                policy_out=str(tmp_path / "never.pt"), log_dir=None, progress=False))
    assert not (tmp_path / "never.pt").exists()


def test_policy_out_saves_the_seed_fine_tuned_most_and_warns_when_none_was(tmp_path):
    """A seed that solves in its elitist phase never updates its policy. On print-hello (uniform fresh programs)
    seed 0 solves first, in its elitist phase; seed 1 solves later, after its islands' policy learned: seed 1's
    policy is saved. On echo both seeds solve in their elitist phase: the file is the start policy, and a warning
    says so."""
    config = PPOConfig(batch_size=256, islands=4, island_size=8, queue_size=16, update_every=2, fresh="uniform",
                       idiom_fraction=0.0, library="none")
    job = dict(algo="ppo", algo_config=config, npe=256 * 400, seeds=(0, 1), log_dir=None, progress=False)
    trainer = Trainer(TrainConfig(task="print-hello", policy_out=str(tmp_path / "tuned.pt"), **job))
    first, second = trainer.run()
    assert first.solved and second.solved and first.npe < second.npe
    updates = trainer.algorithm.policy_updates()
    assert updates[0] == 0 < updates[1] == trainer.algorithm.learner.optimizer.steps[1] // config.update_epochs
    card = load_policy(tmp_path / "tuned.pt").card
    assert (card["seed"], card["updates"], card["npe"]) == (1, updates[1], second.npe)
    trainer = Trainer(TrainConfig(task="echo", policy_out=str(tmp_path / "start.pt"), **job))
    with pytest.warns(UserWarning, match="no seed's edit policy was updated"):
        trainer.run()
    assert load_policy(tmp_path / "start.pt").card["updates"] == 0


def test_the_shipped_policy_repairs_held_out_tasks_far_more_often_than_random_edits():
    """On tasks of the generated test split (never pretrained on), corrupted by 1-3 random edits, 16 variants
    sampled by the shipped policy restore a solution more than twice as often as 16 random 1-3 point variants."""
    generator, evaluator = torch.Generator().manual_seed(11), Evaluator.create()
    held_out = generated.pairs("test", 0, 40)
    examples = repair_set(held_out, 8, 100, 3, generator, evaluator)
    policy = EditPolicy(EditorConfig(), 1, NUM_FEATURES, [torch.Generator().manual_seed(0)], CPU)
    start_policy(policy, load_policy(SHIPPED), SHIPPED)
    sample = lambda parents, features, v: policy.sample(parents, features, [generator], None, v)[0]  # noqa: E731
    guess = lambda parents, features, v: random_edits([generator], parents.repeat_interleave(v, dim=1), 3)  # noqa: E731
    learned = repair_rate(sample, held_out, examples, 16, evaluator, 100)
    chance = repair_rate(guess, held_out, examples, 16, evaluator, 100)
    assert len(examples) > 100 and learned > 2 * chance and learned > 0.1


def test_probes_are_parents_their_island_search_drew_with_their_own_reward():
    """Every probe's reward is its own by the reference interpreter, at most its island's best; the probes are a
    function of the arguments."""
    pairs = generated.pairs("train", 0, 3)
    probes = search_probes(pairs, 12, 0, Evaluator.create(), 40)
    assert len(probes) == 3 * 11 * 16  # the first generation's parents have not run
    for row, code in enumerate(decode_batch(probes.parents)):
        task, _ = pairs[int(probes.groups[row])]
        result = reference.score_program(code, task.cases, task.base, task.max_steps, task.dialect)
        assert abs(result.reward - float(probes.rewards[row])) < 1e-5 and probes.rewards[row] <= probes.island_best[row]
    assert torch.equal(search_probes(pairs, 12, 0, Evaluator.create(), 40).parents, probes.parents)


def test_the_probe_rates_count_the_variants_that_beat_their_island_best_and_those_that_never_halt():
    """Probes whose island best is the parent's own reward: the edits known to beat them (repairs: the child solves
    its task) score 1, edits that change nothing score 0, and half of each makes one half. The step-limit rate of variants that change nothing
    is the share of parents that never halt by the reference interpreter (a loop that never ends is added)."""
    pairs = generated.pairs("train", 0, 2)
    evaluator = Evaluator.create()
    examples = repair_set(pairs, 8, 40, 3, torch.Generator().manual_seed(1), evaluator)  # their edits solve
    rewards = torch.cat([evaluate(evaluator, examples.parents[examples.groups == g], task, 40)[0]
                         for g, (task, _) in enumerate(pairs)])
    order = torch.cat([(examples.groups == g).nonzero()[:, 0] for g in range(len(pairs))])
    probes = Probes(examples.parents[order], examples.features[order], rewards, rewards, examples.groups[order])
    known = Edits(*(getattr(examples.edits, n)[order] for n in EDIT_FIELDS))

    def write(keep):
        def edits(parents, features, variants):
            rows = (probes.parents[:, None] == parents[0][None]).all(-1).float().argmax(0)  # each parent's probe
            picked = Edits(*(getattr(known, n)[rows][None] for n in EDIT_FIELDS))
            active = picked.active & keep(parents.shape[1])[None, :, None]
            return Edits(*(x.repeat_interleave(variants, 1) for x in (picked.positions, picked.kinds,
                                                                       picked.tokens, active)))
        return edits

    rate = lambda keep: probe_rates(write(keep), pairs, probes, 2, evaluator, 40)[0]  # noqa: E731
    assert rate(lambda n: torch.ones(n, dtype=torch.bool)) == 1.0
    assert rate(lambda n: torch.zeros(n, dtype=torch.bool)) == 0.0
    half = rate(lambda n: torch.arange(n) % 2 == 0)
    assert 0.3 < half < 0.7

    hang = encode_batch(["+[]"], 40)
    probes = Probes(torch.cat([probes.parents, hang]), torch.cat([probes.features, probes.features[:1]]),
                    torch.cat([rewards, rewards[:1]]), torch.cat([rewards, rewards[:1]]),
                    torch.cat([probes.groups, probes.groups[:1]]))
    unchanged = lambda parents, features, variants: dataclasses.replace(  # noqa: E731
        random_edits([torch.Generator().manual_seed(0)], parents.repeat_interleave(variants, 1), 3),
        active=torch.zeros((1, parents.shape[1] * variants, 3), dtype=torch.bool))
    never_halt = [reference.score_program(code, pairs[g][0].cases, pairs[g][0].base, pairs[g][0].max_steps).runs[-1]
                  .status == Status.STEP_LIMIT for code, g in zip(decode_batch(probes.parents), probes.groups.tolist())]
    assert never_halt[-1] and probe_rates(unchanged, pairs, probes, 2, evaluator, 40)[1] == sum(never_halt) / len(
        never_halt)
