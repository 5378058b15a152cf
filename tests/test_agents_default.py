"""The island agent (``islands``, the default, and ``ppo``, with its edit policy): ``islands`` is ``ppo`` without the
policy, program for program; the elitist phase is the mutation baseline and hands over to the islands; every ablation
switch changes what it does; it solves a user task from a task file, checked against the
reference interpreter."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from states import assert_same
from native import require_native
from synthenv import reference, tasks
from synthenv.agents import IslandAgent, IslandsConfig, MutationConfig, PPOConfig, TrainConfig, Trainer, train
from synthenv.agents.search.agent import HANDOVER_CHECK_EVERY
from synthenv.agents.search.islands import Islands
from synthenv.agents.search.queue import EMPTY, ProgramQueue
from synthenv.agents.search.prior import prior_programs
from synthenv.agents.search.variation import Edits, apply_edits
from synthenv.language import Status, decode_batch

SMALL = PPOConfig(batch_size=64, islands=4, island_size=4, queue_size=8, update_every=1, update_batch=16,
                  policy_fraction=0.25, splice_fraction=0.25, patience=3, elitist=False, policy="scratch")
"""The islands from the first step (the elitist phase's tests switch it on)."""


def _trainer(algo: str, config, seeds: tuple[int, ...] = (1,), task: str = "reverse-tune") -> Trainer:
    return Trainer(TrainConfig(task=task, algo=algo, algo_config=config, seeds=seeds, max_len=10, log_dir=None,
                               progress=False, npe=10**9))


def run_steps(config: PPOConfig, steps: int = 6, task: str = "reverse-tune") -> Trainer:
    trainer = _trainer("ppo", config, task=task)
    trainer.stats = [trainer.step()[0] for _ in range(steps)]
    return trainer


def test_the_elitist_phase_is_the_mutation_baseline():
    """Until it hands over, each member writes exactly the programs of the mutation baseline with its seed (from
    the baseline's uniform fresh programs, without a library)."""
    ppo = _trainer("ppo", dataclasses.replace(SMALL, elitist=True, elitist_patience=10**6, fresh="uniform",
                                              library="none"),
                   seeds=(1, 2))
    mutation = _trainer("mutation", MutationConfig(batch_size=64, elite=8, max_edits=SMALL.max_edits,
                                                   initial_length=SMALL.initial_length), seeds=(1, 2))
    for _ in range(12):
        assert torch.equal(ppo.algorithm.propose(), mutation.algorithm.propose())
        stats, _ = ppo.step()
        mutation.step()
        assert stats["charts/elitist_phase"].tolist() == [1.0, 1.0] and "losses/policy_loss" not in stats
        assert "charts/improve_rate_policy" not in stats  # the islands do not run
    assert ppo.algorithm.elitist == [True, True]
    assert torch.equal(ppo.algorithm.queue.tokens, mutation.algorithm.elite.tokens)


def _until_handover(trainer: Trainer, steps: int = 60) -> int:
    """Step until the (single) member hands over; the generation at which it did."""
    for _ in range(steps):
        trainer.step()
        if not trainer.algorithm.elitist[0]:
            return trainer.algorithm.step_count
    raise AssertionError(f"no hand-over in {steps} steps")


def _before_each_hand_over(agent: IslandAgent, read) -> list:
    """Wrap ``agent._hand_over`` so that ``read(member)`` is noted just before each hand-over; the notes."""
    notes, hand_over = [], agent._hand_over

    def spy(member: int) -> None:
        notes.append(read(member))
        hand_over(member)

    agent._hand_over = spy
    return notes


def test_a_member_hands_over_to_islands_seeded_from_its_queue_when_the_queue_stalls():
    config = dataclasses.replace(SMALL, elitist=True, elitist_patience=2, seeded_islands=0.5)
    trainer = _trainer("ppo", config)
    agent = trainer.algorithm
    generation = _until_handover(trainer)
    assert generation % HANDOVER_CHECK_EVERY == 0 and int(agent.search.stale[0]) >= config.elitist_patience
    queued = {tuple(row): reward for row, reward in zip(agent.queue.tokens[0].tolist(), agent.queue.rewards[0].tolist())}
    programs = agent.islands.programs
    for island in range(2):  # seeded from the queue, with the queue's rewards
        for row, reward in zip(programs.tokens[0, island].tolist(), programs.rewards[0, island].tolist()):
            assert queued[tuple(row)] == reward
    assert bool((programs.rewards[0, 2:] == EMPTY).all())  # fresh, not run yet
    assert float(agent.islands.best[0].max()) == EMPTY and int(agent.islands.restarts[0]) == 0
    stats, _ = trainer.step()  # the islands' first generation
    assert stats["charts/elitist_phase"].tolist() == [0.0] and "charts/improve_rate_policy" in stats
    assert bool((agent.islands.best[0] > EMPTY).all())


def test_by_default_a_member_hands_over_to_fresh_islands_and_keeps_its_queue():
    assert PPOConfig().seeded_islands == 0.0
    config = dataclasses.replace(SMALL, elitist=True, elitist_patience=2)  # SMALL keeps the default seeding
    trainer = _trainer("ppo", config)
    agent = trainer.algorithm
    queue_before = _before_each_hand_over(agent, lambda member: agent.queue.tokens.clone())
    _until_handover(trainer)
    assert bool((agent.islands.programs.rewards[0] == EMPTY).all())  # every island fresh, none run yet
    assert torch.equal(agent.queue.tokens, queue_before[0])  # the queue stays: crossover mates
    queued = {tuple(row) for row in agent.queue.tokens[0].tolist()}
    island_programs = {tuple(row) for row in agent.islands.programs.tokens[0].flatten(0, 1).tolist()}
    assert len(island_programs & queued) < len(queued)  # not the queue's programs


def test_without_elite_mates_the_queue_is_emptied_at_the_hand_over_and_refilled_by_the_islands():
    config = dataclasses.replace(SMALL, elitist=True, elitist_patience=2, elite_mates=False)
    trainer = _trainer("ppo", config)
    agent = trainer.algorithm
    queue_before = _before_each_hand_over(agent, lambda member: agent.queue.valid[member].clone())
    _until_handover(trainer)
    assert bool(queue_before[0].all())  # the elitist phase had filled it
    assert not bool(agent.queue.valid[0].any())  # emptied: no crossover mate from the elitist phase
    propose, written = agent.propose, set()

    def record() -> torch.Tensor:
        children = propose()
        written.update(tuple(row) for row in children[0].tolist())
        return children

    agent.propose = record
    trainer.step()  # the islands' first generation
    queued = [tuple(row) for row, valid in zip(agent.queue.tokens[0].tolist(), agent.queue.valid[0].tolist()) if valid]
    assert queued and set(queued) <= written  # refilled by the islands' programs alone


def test_the_elitist_phase_skips_the_feedback_features_and_runs_the_same_search(monkeypatch):
    """In a generation where no member's islands step nothing reads the feedback features, so the trainer
    skips them (``uses_features``); the run, through the hand-over and the islands after it, writes the
    programs that it writes with them computed at every step."""
    config = dataclasses.replace(SMALL, elitist=True, elitist_patience=2)

    def programs() -> tuple[list[torch.Tensor], list[bool], list[bool]]:
        trainer = _trainer("ppo", config, seeds=(1, 2))
        written, skipped, mixed = [], [], []
        env_step = trainer.env.step

        def step(actions):  # called between the agent's propose and the features' computation
            written.append(actions.clone())
            skipped.append(not trainer.algorithm.uses_features)
            mixed.append(len(set(trainer.algorithm.elitist)) == 2)
            return env_step(actions)

        trainer.env.step = step
        for _ in range(4 * HANDOVER_CHECK_EVERY):
            trainer.step()
        assert not any(trainer.algorithm.elitist)  # both handed over within the run
        return written, skipped, mixed

    lazy, skipped, mixed = programs()
    assert skipped[0] and not skipped[-1]  # skipped in the elitist phase, computed once all have handed over
    waiting = [step for step, (skip, mix) in enumerate(zip(skipped, mixed)) if mix]
    assert [skipped[step] for step in waiting] == [step % config.islands_every != 0 for step in waiting]
    assert IslandAgent(dataclasses.replace(config, seeded_islands=0.5), (1,), 10, torch.device("cpu")).uses_features
    monkeypatch.setattr(IslandAgent, "uses_features", property(lambda self: True))
    always, _, _ = programs()
    assert len(lazy) == len(always) and all(torch.equal(a, b) for a, b in zip(lazy, always))


def test_without_the_elitist_phase_the_islands_start_at_once():
    assert PPOConfig().elitist  # the default
    with_phase = _trainer("ppo", dataclasses.replace(SMALL, elitist=True))
    with_phase.algorithm.propose()
    assert with_phase.algorithm._proposal is None  # the islands wrote nothing
    without = _trainer("ppo", SMALL)
    without.algorithm.propose()
    assert without.algorithm.elitist == [False] and without.algorithm._proposal is not None


def test_the_policy_writes_a_share_of_each_generation_and_learns():
    trainer = run_steps(SMALL)
    assert all("charts/improve_rate_policy" in stats for stats in trainer.stats)
    assert all(bool(torch.isfinite(stats["losses/policy_loss"]).all()) for stats in trainer.stats)  # each step
    untrained = IslandAgent(SMALL, (1,), 10, torch.device("cpu")).learner.policy.state_dict()
    trained = trainer.algorithm.learner.policy.state_dict()
    assert any(not torch.equal(untrained[k], trained[k]) for k in trained)


def test_the_policy_writes_v_variants_of_each_parent_it_reads():
    """``variants_per_parent``: each island's policy children are V variants of each of n_pol / V parents,
    the rollout keeps one copy of each parent read, and V = 1 reads a parent per variant."""
    trainer = run_steps(SMALL, steps=2)
    agent, n_pol = trainer.algorithm, SMALL.policy_children
    assert SMALL.variants_per_parent == 4 == n_pol
    agent.propose()
    parents = agent._proposal.parents
    for name in ("tokens", "features", "rewards"):
        value = getattr(parents, name).view(1, SMALL.islands, SMALL.children_per_island, -1)[:, :, :n_pol]
        assert torch.equal(value, value[:, :, :1].expand_as(value)), name
    rollout = agent.learner.rollout
    assert rollout.parents.shape[1] == SMALL.islands * n_pol // 4 * SMALL.update_every == rollout.gains.shape[1] // 4
    one = run_steps(dataclasses.replace(SMALL, variants_per_parent=1), steps=2).algorithm
    one.propose()
    tokens = one._proposal.parents.tokens.view(1, SMALL.islands, SMALL.children_per_island, -1)[:, :, :n_pol]
    assert not torch.equal(tokens, tokens[:, :, :1].expand_as(tokens))
    assert one.learner.rollout.parents.shape[1] == one.learner.rollout.gains.shape[1]


def test_variants_per_parent_must_divide_the_policy_share_and_update_batch():
    config = dataclasses.replace(SMALL, batch_size=96, islands=4, policy_fraction=0.25, variants_per_parent=2)
    assert config.policy_children == 6 and config.policy_reads == 3
    with pytest.raises(ValueError, match=r"variants_per_parent=4 must divide the policy variants per island \(6"):
        dataclasses.replace(config, variants_per_parent=4)
    with pytest.raises(ValueError, match=r"variants_per_parent=3 must divide .* update_batch \(16\)"):
        dataclasses.replace(config, variants_per_parent=3)
    assert dataclasses.replace(config, variants_per_parent=3, update_batch=18).policy_reads == 2
    assert dataclasses.replace(SMALL, policy_fraction=0.0, variants_per_parent=3).policy_children == 0  # unused
    with pytest.raises(ValueError, match="variants_per_parent"):
        dataclasses.replace(SMALL, variants_per_parent=0)


def test_the_new_best_rates_count_the_children_that_beat_their_islands_best():
    """``charts/new_best_rate_*``: the share of each kind of child whose reward, by the reference
    interpreter, beats the best its island had reached before the generation; ``charts/step_limit_rate_*``:
    the share that ran out of steps."""
    trainer = run_steps(SMALL, steps=4)
    agent, task = trainer.algorithm, tasks.get("reverse-tune")
    agent.islands.best[0, 0] = EMPTY  # an island that has just restarted has no best to beat
    agent.islands.best[0, 1] = -1e9  # one that every child beats
    best = agent.islands.best[0].clone()  # [G]
    stats, _ = trainer.step()
    children = agent._proposal.children[0]  # [G, C, L]
    beat, known, hung = (torch.zeros(children.shape[:2]) for _ in range(3))
    for g, island in enumerate(children):
        for c, code in enumerate(decode_batch(island)):
            score = reference.score_program(code, task.cases, task.base, task.max_steps, task.dialect)
            known[g, c] = float(best[g] > EMPTY)
            beat[g, c] = float(torch.tensor(score.reward, dtype=torch.float32) > best[g])
            hung[g, c] = float(any(run.status == Status.STEP_LIMIT for run in score.runs))
    n_pol, n_spl, n_idi = SMALL.policy_children, SMALL.splice_children, SMALL.idiom_children
    assert n_idi > 0
    for name, part in {"policy": slice(0, n_pol), "crossover": slice(n_pol, n_pol + n_spl),
                       "idiom": slice(n_pol + n_spl, n_pol + n_spl + n_idi),
                       "random": slice(n_pol + n_spl + n_idi, None)}.items():
        expected = (beat[:, part] * known[:, part]).sum() / known[:, part].sum()
        assert float(stats[f"charts/new_best_rate_{name}"][0]) == pytest.approx(float(expected))
        assert float(expected) > 0  # island 1's children of this kind
        assert float(stats[f"charts/step_limit_rate_{name}"][0]) == pytest.approx(float(hung[:, part].mean()))
    assert not known[0].any() and beat[1].all() and hung.any()


def test_without_the_policy_nothing_is_learned():
    trainer = run_steps(dataclasses.replace(SMALL, policy_fraction=0.0))
    assert not any("charts/improve_rate_policy" in stats for stats in trainer.stats)
    assert not any(key.startswith("losses/") for stats in trainer.stats for key in stats)


def test_islands_builds_no_edit_policy_and_its_random_children_are_edits_of_their_parents():
    """The default agent has none of the policy's settings and builds no policy or learner; through the library,
    the elitist phase, the hand-over and the islands no child of its is a policy child: each island's children are
    crossovers, idioms and, in the rest of its slots, its parent with 1 to max_edits random point edits."""
    search = dict(batch_size=64, islands=4, island_size=4, queue_size=8, patience=3, elitist_patience=2)
    trainer = _trainer("islands", IslandsConfig(**search), seeds=(1, 2))
    agent = trainer.algorithm
    assert agent.learner is None and agent.library_slots == 64  # the shipped library fills the first generation
    assert agent.config.child_slots["policy"] == slice(0, 0)
    for _ in range(40):
        stats, _ = trainer.step()
        assert not [key for key in stats if key.startswith("losses/") or key.endswith("_policy")]
    assert agent.elitist == [False, False]  # both handed over
    agent.propose()
    proposal, config = agent._proposal, agent.config
    c, part = config.children_per_island, config.child_slots["random"]
    rows = lambda x: x.view(2, config.islands, c, *x.shape[2:])[:, :, part].reshape(2, -1, *x.shape[2:])  # noqa: E731
    edits = Edits(*(rows(getattr(proposal.edits, name)) for name in ("positions", "kinds", "tokens", "active")))
    children = proposal.children[:, :, part].reshape(2, -1, proposal.children.shape[-1])
    assert children.shape[1] == config.islands * (part.stop - part.start) > 0
    assert torch.equal(apply_edits(rows(proposal.parents.tokens), edits), children)
    assert ((edits.count >= 1) & (edits.count <= config.max_edits)).all()
    policy_fields = {f.name for f in dataclasses.fields(PPOConfig)} - {f.name for f in dataclasses.fields(IslandsConfig)}
    assert {"policy_fraction", "policy", "learning_rate", "editor", "fine_tune"} <= policy_fields
    assert not any(hasattr(IslandsConfig(), name) for name in policy_fields)
    with pytest.raises(TypeError, match="islands' takes a IslandsConfig, got PPOConfig"):
        _trainer("islands", PPOConfig(**search))


def test_ppo_writes_policy_children_in_its_policy_slots_and_islands_never_does():
    """Each kind of child has its slots: ppo's first slots are its policy's variants (and it learns from them); the
    same search without a policy keeps those slots for the other kinds."""
    ppo = run_steps(SMALL, steps=3)
    assert ppo.algorithm.learner is not None and SMALL.child_slots["policy"].stop == SMALL.policy_children > 0
    assert "charts/new_best_rate_policy" in ppo.stats[-1]
    without = run_steps(dataclasses.replace(SMALL, policy_fraction=0.0), steps=3)
    assert without.algorithm.learner is None and "charts/new_best_rate_policy" not in without.stats[-1]


def test_without_fine_tuning_the_policy_writes_its_share_as_it_started():
    """``fine_tune=False``: the same first generation as the fine-tuned agent's, then no update: the policy's
    parameters stay its start's, its rollout stays empty, and its later children differ."""
    tuned, frozen = run_steps(SMALL, steps=4), run_steps(dataclasses.replace(SMALL, fine_tune=False), steps=4)
    assert all("charts/improve_rate_policy" in stats for stats in frozen.stats)
    assert not any(key.startswith("losses/") for stats in frozen.stats for key in stats)
    start = IslandAgent(SMALL, (1,), 10, torch.device("cpu")).learner.policy.state_dict()
    assert_same(frozen.algorithm.learner.policy.state_dict(), start)
    assert not frozen.algorithm.learner.rollout.valid.any() and tuned.algorithm.learner.rollout.valid.any()
    first = [_trainer("ppo", config) for config in (SMALL, dataclasses.replace(SMALL, fine_tune=False))]
    assert torch.equal(first[0].algorithm.propose(), first[1].algorithm.propose())
    assert not torch.equal(tuned.algorithm.propose(), frozen.algorithm.propose())


@pytest.mark.parametrize("switch", [dict(pg_weight=0.0), dict(queue_weight=0.0), dict(feedback=False),
                                    dict(entropy_coef=0.0), dict(risk_quantile=0.5), dict(variants_per_parent=1),
                                    dict(temperature=0.5)],
                         ids=["no-ppo", "no-imitation", "no-feedback", "no-entropy", "risk-seeking", "one-variant",
                              "tempered"])
def test_each_learning_switch_changes_the_policy_update(switch):
    base = run_steps(SMALL, steps=3).algorithm.learner.policy.state_dict()
    changed = run_steps(dataclasses.replace(SMALL, **switch), steps=3).algorithm.learner.policy.state_dict()
    assert any(not torch.equal(base[k], changed[k]) for k in base)


def test_without_feedback_the_policy_sees_zero_features():
    trainer = run_steps(dataclasses.replace(SMALL, feedback=False), steps=2)
    trainer.algorithm.propose()
    assert not trainer.algorithm._proposal.parents.features.any()
    trainer = run_steps(SMALL, steps=2)
    trainer.algorithm.propose()
    assert trainer.algorithm._proposal.parents.features.any()


def test_without_crossover_there_are_no_crossover_children():
    assert "charts/improve_rate_crossover" in run_steps(SMALL, steps=2).stats[-1]
    assert "charts/improve_rate_crossover" not in run_steps(dataclasses.replace(SMALL, splice_fraction=0.0),
                                                              steps=2).stats[-1]


def test_idiom_children_are_their_parents_with_a_sample_of_the_prior_put_in():
    """With idiom_fraction, the slots after the crossovers hold their parent with one of the prior's short samples
    (at most idiom_length commands) in place of a window no longer than it; without it there are none."""
    config = dataclasses.replace(SMALL, fresh="prior", idiom_fraction=0.25, idiom_length=4)
    assert "charts/new_best_rate_idiom" not in run_steps(dataclasses.replace(config, idiom_fraction=0.0), 2).stats[-1]
    trainer = Trainer(TrainConfig(task="reverse-tune", algo="ppo", algo_config=config, seeds=(1,), max_len=32,
                                  log_dir=None, progress=False, npe=10**9))
    assert "charts/new_best_rate_idiom" in [trainer.step()[0] for _ in range(2)][-1]
    agent = trainer.algorithm
    agent.propose()
    n_pol, n_spl, n_idi, c = config.policy_children, config.splice_children, config.idiom_children, \
        config.children_per_island
    assert n_idi == 4
    pool = set(decode_batch(prior_programs(4).pool))
    assert max(map(len, pool)) == 4
    proposal, checked = agent._proposal, 0
    parents = proposal.parents.tokens[0].view(config.islands, c, -1)
    for island, parent_rows in zip(proposal.children[0], parents):
        part = slice(n_pol + n_spl, n_pol + n_spl + n_idi)
        for child, parent in zip(decode_batch(island[part]), decode_batch(parent_rows[part])):
            if len(child) == 32:
                continue  # cut at max_len: the piece may be cut too
            grown = len(child) - len(parent)
            assert any(child[:i] == parent[:i] and child[i:i + grown + m - i] in pool and
                       child[i + grown + m - i:] == parent[m:] for i in range(len(parent) + 1)
                       for m in range(i, len(parent) + 1)), (parent, child)
            checked += 1
    assert checked >= 8


def test_the_elite_share_breeds_variants_of_queued_programs():
    """With elite_fraction, the last children of a generation are 1..max_edits edits of queue programs."""
    config = dataclasses.replace(SMALL, elite_fraction=0.25, variants_per_parent=1)  # 16 of 64: 48 for 4 islands
    assert (config.elite_variants, config.children_per_island) == (16, 12)
    trainer = run_steps(config, steps=3)
    assert all("charts/improve_rate_elite" in stats for stats in trainer.stats)
    agent = trainer.algorithm
    children = agent.propose()
    assert children.shape == (1, 64, 10)
    parents, elite = agent._proposal.elite
    assert torch.equal(children[:, 48:], elite.tokens)
    queued = {tuple(row) for row in agent.queue.tokens[0].tolist()}
    assert all(tuple(row) in queued for row in parents.tokens[0].tolist())
    assert torch.equal(parents.rewards, ProgramQueue.gather(agent.queue.rewards, _slots(agent, parents.tokens)))
    assert bool((elite.edits.count >= 1).all()) and bool((elite.edits.count <= config.max_edits).all())
    assert "charts/improve_rate_elite" not in run_steps(SMALL, steps=1).stats[-1]


def _slots(agent: IslandAgent, parents: torch.Tensor) -> torch.Tensor:
    """The queue slot of each parent ``[S, N, L]`` of the elite variants (queued programs are unique)."""
    same = (parents[:, :, None, :] == agent.queue.tokens[:, None, :, :]).all(-1)  # [S, N, Q]
    return same.long().argmax(-1)


def test_the_elite_share_must_leave_the_islands_a_divisible_share():
    with pytest.raises(ValueError, match="islands=4 must divide the islands' children"):
        dataclasses.replace(SMALL, elite_fraction=0.1)  # 64 - 6 = 58 children for 4 islands
    with pytest.raises(ValueError, match="elite_fraction"):
        dataclasses.replace(SMALL, elite_fraction=1.0)


def test_child_shares_that_round_past_an_islands_children_are_refused_by_the_kinds_the_agent_has():
    # 48 children on 16 islands: 3 each; half of 3 rounds to 2 (half to even), so 2 + 2 > 3
    with pytest.raises(ValueError, match=r"^crossover and idiom children \(2 \+ 2, rounded\) exceed the 3 children per "
                                         r"island; lower one of splice_fraction, idiom_fraction$"):
        IslandsConfig(batch_size=48, islands=16, splice_fraction=0.5, idiom_fraction=0.5)
    with pytest.raises(ValueError, match=r"^policy, crossover and idiom children \(1 \+ 2 \+ 2, rounded\) exceed the 4 "
                                         r"children per island; lower one of policy_fraction, splice_fraction, "
                                         r"idiom_fraction$"):  # 64 on 16 islands: 0.6, 1.7, 1.7 of 4 children
        PPOConfig(batch_size=64, islands=16, policy_fraction=0.15, splice_fraction=0.425, idiom_fraction=0.425,
                  variants_per_parent=1)


def test_restarts_happen_only_when_switched_on():
    with_restarts = run_steps(SMALL, steps=12, task="count-char")  # patience 3: some islands stall
    assert int(with_restarts.algorithm.islands.restarts.sum()) > 0
    without = run_steps(dataclasses.replace(SMALL, restarts=False), steps=12, task="count-char")
    assert int(without.algorithm.islands.restarts.sum()) == 0


def _islands(tokens: torch.Tensor, num_features: int) -> Islands:
    """Islands holding ``tokens [S, G, M, L]``, not run yet."""
    s, g, m, length = tokens.shape
    islands = Islands([torch.Generator().manual_seed(i) for i in range(s)], g, m, length, 1, num_features)
    islands.programs.tokens = tokens
    return islands


def test_drift_lets_equally_good_children_in():
    """Ties keep the island's own programs unless random tie keys break them (neutral drift)."""
    def merged(tie_keys):
        islands = _islands(torch.ones((1, 1, 4, 3), dtype=torch.int64), num_features=1)
        programs = islands.programs
        programs.tokens[0, 0, :, 0] = torch.arange(1, 5)
        programs.rewards.fill_(0.5)
        programs.hashes = torch.arange(4)[None, None]
        children = torch.full((1, 1, 4, 3), 7)
        children[0, 0, :, 1] = torch.arange(1, 5)
        islands.merge(children, torch.full((1, 1, 4), 0.5), torch.zeros(1, 1, 4, 1), torch.arange(10, 14)[None, None],
                      programs.tokens.clone(), patience=100, tie_keys=tie_keys)
        return (islands.programs.tokens[0, 0, :, 0] == 7).sum().item()  # children kept

    assert merged(None) == 0
    keys = torch.tensor([[[0.9, 0.8, 0.7, 0.6, 0.1, 0.2, 0.3, 0.4]]])  # children draw the smaller keys: first
    assert merged(keys) == 4


def test_islands_of_some_members_merge_on_a_copy_and_go_back_in_their_place():
    """What the agent does while some members are still in their elitist phase: ``members(index)``, a
    generation merged into that copy, ``put_members``. The result equals merging all members in place, for
    those members; the others are untouched."""
    gens = [torch.Generator().manual_seed(seed) for seed in range(3)]
    tokens = torch.randint(0, 9, (3, 2, 4, 5), generator=gens[0])
    children = torch.randint(0, 9, (3, 2, 6, 5), generator=gens[1])
    rewards, features = torch.rand((3, 2, 6), generator=gens[2]), torch.rand((3, 2, 6, 1), generator=gens[2])
    hashes, fresh = torch.arange(36).view(3, 2, 6), torch.zeros((3, 2, 4, 5), dtype=torch.int64)
    in_place, via_copy = _islands(tokens.clone(), 1), _islands(tokens.clone(), 1)
    in_place.merge(children, rewards, features, hashes, fresh, patience=100)
    before = via_copy.state_dict()
    index = torch.tensor([2, 0])
    part = via_copy.members(index)
    part.merge(children[index], rewards[index], features[index], hashes[index], fresh[index], patience=100)
    via_copy.put_members(index, part)
    merged, kept = _flat(in_place.state_dict()), _flat(via_copy.state_dict())
    before = _flat(before)
    for name in merged:
        assert torch.equal(kept[name][index], merged[name][index]), name
        assert torch.equal(kept[name][1], before[name][1]), name
    assert not torch.equal(merged["programs.tokens"][1], before["programs.tokens"][1])  # merging changes it


def _flat(state: dict, prefix: str = "") -> dict:
    """A nested state dict as one level, keys joined by dots."""
    rows = {}
    for key, value in state.items():
        if isinstance(value, dict):
            rows.update(_flat(value, f"{prefix}{key}."))
        else:
            rows[f"{prefix}{key}"] = value
    return rows


def test_the_agent_solves_a_task_from_a_task_file(tmp_path):
    task_file = tmp_path / "add-three.json"
    pairs = [[[v], [(v + 3) % 256]] for v in (0, 5, 17, 100, 250, 41)]
    task_file.write_text(json.dumps({"name": "add-three", "base": 256, "cases": pairs}))
    (result,) = train(TrainConfig(task=str(task_file), algo="ppo", npe=3_000_000, log_dir=None, progress=False))
    assert result.solved
    task = tasks.from_spec(str(task_file))
    assert reference.score_program(result.best_program, task.cases, task.base, task.max_steps).solved


def test_the_c_fast_path_and_the_torch_path_run_the_same_search(monkeypatch):
    """The agent's C operators (variation.c through agents.search.rows: edits, splices, hashes, lengths, the islands' and queues'
    selection) are the CPU's fast path; a GPU runs their torch twins. Whole runs agree bit for bit:
    islands, queues, edit policy, optimizer and generators after several generations with drift and
    restarts. (The feedback features and the edit policy's draws are computed one way in both runs: their C
    and torch versions agree only up to float rounding, tests/test_agents_feedback.py and
    tests/test_agents_variation.py.)"""
    from synthenv.agents.run import feedback
    from synthenv.agents.search import rows

    require_native()
    monkeypatch.setattr(feedback, "_native", lambda *tensors: None)
    config = dataclasses.replace(SMALL, update_every=2)

    def run() -> dict:
        trainer = Trainer(TrainConfig(task="reverse-tune", algo="ppo", algo_config=config, seeds=(3, 4), max_len=10,
                                      log_dir=None, progress=False, npe=10**9))
        for _ in range(8):
            trainer.step()
        assert int(trainer.algorithm.islands.restarts.sum()) > 0  # restarts ran (patience=3)
        return trainer.algorithm.state_dict()

    fast = run()
    monkeypatch.setattr(rows, "native", lambda *tensors: None)
    assert_same(fast, run())
