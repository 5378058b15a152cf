"""The training loop: NPE accounting, stop on success, exact resume, seeds batched independently."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from states import assert_same
from synthenv import agents, tasks
from synthenv.checkpoint import CheckpointError
from synthenv.language import canonical_programs
from synthenv.agents import GAConfig, MutationConfig, PPOConfig, RandomConfig, TrainConfig, Trainer
from synthenv.agents.search.agent import HANDOVER_CHECK_EVERY
from synthenv.tasks import Task

# "." prints the zero cell: one token in eight solves it, so a batch of 64 always does
DOT = Task.from_pairs("agents-test-dot", [([], [0])], base=2)


@pytest.fixture(autouse=True)
def dot_task():
    """Registered only while a test of this module runs, so task-parametrized tests elsewhere never see it."""
    tasks.register(DOT, overwrite=True)
    yield DOT
    tasks.unregister(DOT.name)

FAST = dict(log_dir=None, progress=False, engine="torch", log_every=1)


def small_config(algo: str, **changes):
    config = {
        "ppo": PPOConfig(batch_size=32, islands=2, island_size=4, queue_size=4, update_every=2, update_batch=8,
                         patience=2, elitist=False, variants_per_parent=1),  # one policy child per island
        "mutation": MutationConfig(batch_size=16, elite=4),
        "pqt": dataclasses.replace(agents.default_config("pqt"), batch_size=8),
        "pg-pqt": dataclasses.replace(agents.default_config("pg-pqt"), batch_size=8),
        "reinforce": dataclasses.replace(agents.default_config("reinforce"), batch_size=8),
        "ga": GAConfig(batch_size=10),
        "random": RandomConfig(batch_size=8),
    }[algo]
    return dataclasses.replace(config, **changes)


def handover_config(**changes) -> TrainConfig:
    """ppo with its elitist phase, seeds 2 and 3, which hand over at different steps (``handovers``)."""
    settings = dict(task="reverse-tune", algo="ppo", npe=10**6, max_len=8, seeds=(2, 3),
                    algo_config=small_config("ppo", elitist=True, elitist_patience=2),
                    **{**FAST, "engine": "auto"})  # most of these programs run to the step limit: the fast engine
    return TrainConfig(**{**settings, **changes})


@functools.lru_cache(maxsize=None)
def handovers(config: TrainConfig, steps: int = 60) -> list[int]:
    """The step count at which each member of a run of ``config`` hands over (the first it is past its
    elitist phase), checked against the rule: at a check step (every ``HANDOVER_CHECK_EVERY``), a running
    member that has not solved hands over once its queue has gone ``elitist_patience`` generations unchanged."""
    trainer = Trainer(dataclasses.replace(config, max_train_steps=steps))
    agent, patience = trainer.algorithm, config.algo_config.elitist_patience
    found = [None] * len(config.seeds)
    for _ in range(steps):
        trainer.step()
        for member, elitist in enumerate(agent.elitist):
            if found[member] is None and not elitist:
                found[member] = trainer.step_count
        stale, check = agent.search.stale.tolist(), trainer.step_count % HANDOVER_CHECK_EVERY == 0
        for member, elitist in enumerate(agent.elitist):  # who is still elitist at a check must not be stale
            assert not (check and elitist and stale[member] >= patience and not bool(agent.solved[member])), member
    for member, step in enumerate(found):  # who handed over was stale then (its count restarts with changes)
        assert step is not None and step % HANDOVER_CHECK_EVERY == 0, (member, step)
    return tuple(found)


def test_npe_counts_sampled_programs_only():
    results = agents.train(TrainConfig(task="print-hello", algo="random", npe=200, max_len=6,
                                       algo_config=RandomConfig(batch_size=64), **FAST))
    assert results[0].npe == 192 and not results[0].solved  # 3 batches of 64; a 4th would exceed the budget
    results = agents.train(TrainConfig(task="print-hello", algo="ga", npe=300, max_len=6, **FAST))
    assert results[0].npe == 100 + 98 + 98  # later generations replay the 2 hall-of-fame programs


def test_stops_on_success_and_reports_the_solving_program():
    trainer = Trainer(TrainConfig(task=DOT.name, algo="random", npe=10_000, max_len=1, seeds=(0, 1),
                                  algo_config=RandomConfig(batch_size=64), **FAST))
    results = trainer.run()
    assert [r.solved for r in results] == [True, True]
    assert [r.npe for r in results] == [64, 64]
    assert all(0 < r.seconds <= trainer.elapsed for r in results)
    assert [r.best_program for r in results] == [".", "."]
    assert trainer.step_count == 1


def test_a_solved_seed_stops_counting_while_the_others_go_on():
    trainer = Trainer(TrainConfig(task=DOT.name, algo="random", npe=64 * 40, max_len=1, seeds=(0,),
                                  algo_config=RandomConfig(batch_size=1), **FAST))
    results = trainer.run()
    assert results[0].solved and results[0].npe == trainer.schedule.done_programs <= 64 * 40  # its first solve


@pytest.mark.parametrize("algo", ["ppo", "ppo-elitist", "mutation", "pqt", "ga"])
def test_resume_gives_bitwise_the_same_next_updates(tmp_path, algo):
    if algo == "ppo-elitist":  # resumed between seed 3's hand-over and seed 2's
        base = handover_config()
        first_over, last_over = sorted(handovers(base))
        assert first_over < last_over
        steps, stop = last_over + 3, first_over + 1 + (first_over % 2 == 0)  # stop between two updates
    else:
        base = TrainConfig(task="reverse-tune", algo=algo, npe=10_000, max_len=10, seeds=(3, 4),
                           algo_config=small_config(algo), **FAST)
        steps, stop = 5, 3
    straight = Trainer(dataclasses.replace(base, max_train_steps=steps))
    straight.run()
    path = str(tmp_path / "run.pt")
    first = Trainer(dataclasses.replace(base, max_train_steps=stop, checkpoint=path, checkpoint_every=1))
    first.run()
    resumed = Trainer(dataclasses.replace(base, max_train_steps=steps, resume=path))
    assert resumed.step_count == stop  # mid-way between two policy updates of ppo (update_every=2)
    if algo == "ppo-elitist":
        assert sorted(resumed.algorithm.elitist) == [False, True]
    resumed.run()
    assert_same(straight.algorithm.state_dict(), resumed.algorithm.state_dict())
    assert straight.record.npe.tolist() == resumed.record.npe.tolist()
    assert torch.equal(straight.record.best_tokens, resumed.record.best_tokens)


def test_resume_names_what_a_checkpoint_from_another_version_lacks(tmp_path):
    """A checkpoint of ppo written before it tracked which members solved: a clear error, not a KeyError."""
    path = str(tmp_path / "run.pt")
    config = TrainConfig(task="reverse-tune", algo="ppo", npe=10**6, max_len=8, max_train_steps=2, checkpoint=path,
                         algo_config=small_config("ppo"), **FAST)
    agents.train(config)
    state = torch.load(path, weights_only=True)
    del state["algorithm"]["solved"]
    torch.save(state, path)
    with pytest.raises(CheckpointError, match="lacks 'solved'.*another version of synthenv"):
        Trainer(dataclasses.replace(config, checkpoint=None, resume=path))


def test_resume_refuses_other_settings(tmp_path):
    path = str(tmp_path / "run.pt")
    config = TrainConfig(task="reverse-tune", algo="random", npe=64, max_len=5, checkpoint=path, **FAST)
    agents.train(config)
    with pytest.raises(ValueError, match="max_len"):
        Trainer(dataclasses.replace(config, max_len=6, checkpoint=None, resume=path))


def test_a_seed_trains_the_same_alone_or_batched():
    config = TrainConfig(task="reverse-tune", algo="ppo", npe=10_000, max_len=8, max_train_steps=4,
                         algo_config=small_config("ppo"), **FAST)
    alone = Trainer(dataclasses.replace(config, seeds=(5,)))
    alone.run()
    batched = Trainer(dataclasses.replace(config, seeds=(5, 6)))
    batched.run()
    for (name, a), b in zip(alone.algorithm.learner.policy.state_dict().items(),
                            batched.algorithm.learner.policy.state_dict().values()):
        assert torch.allclose(a[0], b[0], atol=1e-5), name
    alone_islands, batched_islands = alone.algorithm.islands.programs.tokens, batched.algorithm.islands.programs.tokens
    assert torch.equal(alone_islands[0], batched_islands[0])
    assert not torch.equal(batched_islands[0], batched_islands[1])


def _steps_and_phases(config: TrainConfig, steps: int) -> tuple[Trainer, list[tuple[bool, ...]], list[tuple[bool, ...]]]:
    """A run of ``config``: the trainer, and at each step who was in the elitist phase and who stepped."""
    trainer = Trainer(config)
    phases, stepped = [], []
    for _ in range(steps):
        phases.append(tuple(trainer.algorithm.elitist))
        trainer.step()
        stepped.append(tuple(trainer.algorithm.stepping))
    return trainer, phases, stepped


def test_a_seed_trains_the_same_alone_or_batched_across_its_elitist_handover():
    """Between the two seeds' hand-overs only the first seed's islands run (on a copy of its rows, written back
    each generation), and only every islands_every-th step of the job while the other seed's elitist phase
    steps at every one. Each seed's run is still the one it makes alone, in as many of its own generations."""
    config = handover_config()
    over = handovers(config)
    first = min(range(2), key=over.__getitem__)
    steps = max(over) + 6
    batched, phases, stepped = _steps_and_phases(dataclasses.replace(config, max_train_steps=steps), steps)
    every = config.algo_config.islands_every
    for step in range(steps):  # the schedule's rule: the dear member steps every islands_every-th step
        both_cheap_or_one_running = phases[step][1 - first] is False or phases[step][first] is True
        expected_first = both_cheap_or_one_running or step % every == 0
        assert stepped[step] == tuple(expected_first if m == first else True for m in range(2)), step
    own_steps = [sum(step[member] for step in stepped) for member in range(2)]
    assert own_steps[1 - first] == steps > own_steps[first]
    assert batched.schedule.programs == [count * 32 for count in own_steps] == batched.record.npe.tolist()
    for member, seed in enumerate(config.seeds):
        alone = Trainer(dataclasses.replace(config, seeds=(seed,), max_train_steps=own_steps[member]))
        alone.run()
        mine, theirs = alone.algorithm.state_dict(), batched.algorithm.state_dict()
        for name, value in mine["learner"]["policy"].items():
            assert torch.allclose(value[0], theirs["learner"]["policy"][name][member], atol=1e-6), name
        for part, rows in (("islands", mine["islands"]["programs"]), ("queue", mine["search"]["elite"]),
                           ("imitation", mine["learner"]["imitation"])):
            other = {"islands": theirs["islands"]["programs"], "queue": theirs["search"]["elite"],
                     "imitation": theirs["learner"]["imitation"]}[part]
            for name, value in rows.items():
                assert torch.equal(value[0], other[name][member]), (part, name)
        assert int(alone.algorithm.learner.optimizer.steps[0]) == int(batched.algorithm.learner.optimizer.steps[member])
        assert int(alone.algorithm.learner.optimizer.steps[0]) > 0


def test_the_schedule_changes_when_a_seed_steps_never_what_it_writes():
    """With islands_every=4 the first seed past its elitist phase waits 3 steps in 4 while the other is still in
    its own; with 1 it steps at every one. Each seed writes the same programs in its own generations either way
    (its policy updates and the slots of its rollout follow its own count)."""
    steps = max(handovers(handover_config())) + 6

    def own_programs(islands_every: int) -> list[list[torch.Tensor]]:
        config = handover_config(max_train_steps=steps)
        config = dataclasses.replace(config, algo_config=dataclasses.replace(config.algo_config,
                                                                              islands_every=islands_every))
        trainer = Trainer(config)
        env_step, written = trainer.env.step, [[], []]

        def step(actions):
            for member, stepping in enumerate(trainer.algorithm.stepping):
                if stepping:
                    written[member].append(actions.view(2, 32, -1)[member].clone())
            return env_step(actions)

        trainer.env.step = step
        trainer.run()
        return written

    waiting, every = own_programs(4), own_programs(1)
    assert sorted(len(programs) for programs in waiting)[0] < steps == max(len(programs) for programs in waiting)
    assert [len(programs) for programs in every] == [steps, steps]
    for member in range(2):
        assert all(torch.equal(a, b) for a, b in zip(waiting[member], every[member])), member


def test_a_seed_spends_its_whole_budget_even_when_it_waited():
    """The seed that waits 3 steps in 4 while the other is in its elitist phase spends its budget of 40
    generations last; the job goes on for it alone until its 40 are spent too, and each seed's run is the one
    it makes alone."""
    config = handover_config(npe=40 * 32)
    batched = Trainer(config)
    results = batched.run()
    assert [r.npe for r in results] == [40 * 32] * 2 and not any(r.solved for r in results)
    assert batched.step_count > 40 and batched.schedule.programs == [40 * 32] * 2
    for member, seed in enumerate(config.seeds):
        alone = Trainer(dataclasses.replace(config, seeds=(seed,)))
        mine = alone.run()[0]
        assert alone.step_count == 40
        assert (mine.npe, mine.best_program, mine.best_reward) == (40 * 32, results[member].best_program,
                                                                  results[member].best_reward)
        assert torch.equal(alone.algorithm.islands.programs.tokens[0], batched.algorithm.islands.programs.tokens[member])


@pytest.mark.parametrize("algo", ["ppo", "mutation"])
def test_a_finished_member_writes_empty_programs_and_keeps_its_state(algo):
    """Once the trainer knows a member is done (here as a sync point after its solve would note it), the member's
    rows are empty programs that count no NPE, its queue stays as it was, and the other member runs on as alone."""
    config = TrainConfig(task="reverse-tune", algo=algo, npe=10**6, max_len=8, seeds=(2, 3), max_train_steps=6,
                         algo_config=small_config(algo, **({"elitist": True} if algo == "ppo" else {})), **FAST)
    trainer = Trainer(config)
    agent = trainer.algorithm
    queue = agent.queue if algo == "ppo" else agent.elite
    for _ in range(3):
        trainer.step()
    trainer.schedule.finished = [True, False]
    before, npe = {k: v[0].clone() for k, v in queue.state_dict().items()}, trainer.record.npe.tolist()
    env_step, actions = trainer.env.step, []
    trainer.env.step = lambda tokens: (actions.append(tokens.clone()), env_step(tokens))[1]
    for _ in range(3):
        trainer.step()
        assert agent.stepping == [False, True] and trainer.schedule.programs[1] > trainer.schedule.programs[0]
        programs = canonical_programs(actions[-1]).view(2, agent.programs_per_step, -1)
        assert not programs[0].any() and programs[1].any()  # every program of member 0 is empty
    assert_same(before, {k: v[0] for k, v in queue.state_dict().items()})
    assert trainer.record.npe.tolist()[0] == npe[0] and trainer.record.npe.tolist()[1] == npe[1] + 3 * agent.programs_per_step
    alone = Trainer(dataclasses.replace(config, seeds=(3,)))
    alone.run()
    alone_queue = alone.algorithm.queue if algo == "ppo" else alone.algorithm.elite
    assert torch.equal(alone_queue.tokens[0], queue.tokens[1])


def test_a_member_in_its_elitist_phase_costs_the_islands_nothing():
    """Between the two seeds' hand-overs, the seed still in its elitist phase keeps its islands, rollout,
    imitation queue, edit policy and generator as they were: only the other seed's rows are computed."""
    config = handover_config()
    over = handovers(config)
    first, later = min(range(2), key=over.__getitem__), max(range(2), key=over.__getitem__)
    trainer = Trainer(config)
    agent = trainer.algorithm
    for _ in range(over[first]):
        trainer.step()
    assert not agent.elitist[first] and agent.elitist[later]

    def member(index: int) -> dict:
        state = agent.state_dict()
        learner = state["learner"]
        return {"islands": {k: v[index] for k, v in state["islands"]["programs"].items()},
                "imitation": {k: v[index] for k, v in learner["imitation"].items()},
                "policy": {k: v[index] for k, v in learner["policy"].items()},
                "rollout": {k: v[index] for k, v in learner["rollout"].items()},
                "generator": state["generators"][index]}

    before, first_islands = member(later), agent.islands.programs.tokens[first].clone()
    for _ in range(over[later] - over[first] - 1):
        trainer.step()
    assert agent.elitist[later]
    assert_same(before, member(later))
    assert not torch.equal(first_islands, agent.islands.programs.tokens[first])  # evolved meanwhile


def test_a_member_that_solved_stays_in_its_elitist_phase():
    """One program in eight solves DOT: every seed solves in its first generation, and its queue (all
    solving programs soon) stalls, yet it never hands over: the islands would cost steps and find nothing."""
    config = TrainConfig(task=DOT.name, algo="ppo", npe=10**6, max_len=2, seeds=(0, 1),
                         algo_config=small_config("ppo", elitist=True, elitist_patience=2), **FAST)
    trainer = Trainer(config)
    for _ in range(30):
        trainer.step()
    assert trainer.algorithm.solved.tolist() == [True, True]
    assert int(trainer.algorithm.search.stale.min()) > 2 and trainer.algorithm.elitist == [True, True]


def test_bad_settings_raise_clear_errors():
    with pytest.raises(ValueError, match="Did you mean 'ppo'"):
        TrainConfig(algo="ppp")
    with pytest.raises(ValueError, match="npe must be a positive int .* or None"):
        TrainConfig(npe=0)
    assert TrainConfig(npe=None).npe is None  # no NPE budget
    with pytest.raises(ValueError, match="seconds must be a finite float in \\(0, inf\\), got nan"):
        TrainConfig(seconds=float("nan"))
    with pytest.raises(ValueError, match="seeds must be distinct"):
        TrainConfig(seeds=(1, 1))
    with pytest.raises(TypeError, match="PPOConfig"):
        agents.make("ppo", GAConfig(), (0,), 10, torch.device("cpu"))
    with pytest.raises(ValueError, match="islands=3 must divide batch_size=8"):
        PPOConfig(batch_size=8, islands=3)


def test_a_time_budget_stops_the_job_at_the_step_that_crosses_it():
    trainer = Trainer(TrainConfig(task="reverse", algo="random", seconds=0.3, max_len=20, log_every=2,
                                  algo_config=RandomConfig(batch_size=64), log_dir=None, progress=False))
    results = trainer.run()
    steps_after = sum(1 for t in trainer.record.step_seconds if t >= 0.3)
    # the generation the budget ends in is dropped when an engine sees the clock pass inside it; one that ends
    # between two looks at the clock is kept and is the last: no step starts after the budget
    assert steps_after <= 1
    assert all(t < 0.3 for t in trainer.record.step_seconds[:-1])
    assert trainer.elapsed >= 0.3 and trainer.out_of_time()
    assert not results[0].solved and results[0].seconds == pytest.approx(trainer.elapsed)


def test_the_solving_batch_counts_in_the_logged_success_rate(tmp_path):
    """A run that stops on success logs the success of the batch that solved (the members running during
    a step are weighted, not those still running after it), even with log_every=1."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = RandomConfig(batch_size=64)
    Trainer(TrainConfig(task=DOT.name, algo="random", npe=10_000, max_len=1, log_dir=str(tmp_path),
                        algo_config=config, progress=False, log_every=1)).run()
    (run,) = list(tmp_path.glob(f"{DOT.name}__random__0__*"))
    accumulator = EventAccumulator(str(run))
    accumulator.Reload()
    (event,) = accumulator.Scalars("charts/success_rate")
    first_batch = agents.make("random", config, (0,), 1, torch.device("cpu")).propose()  # the same draws
    dots = (first_batch == 7).float().mean().item()  # "." (token 7) is the only 1-token solution
    assert dots > 0 and event.value == pytest.approx(dots)
