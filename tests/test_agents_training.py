"""The training loop: NPE accounting, stop on success, exact resume, seeds batched independently."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from states import assert_same
from synthenv import agents, tasks
from synthenv.checkpoint import CheckpointError
from synthenv.language import canonical_programs
from synthenv.agents import GAConfig, MutationConfig, PPOConfig, RandomConfig, TrainConfig, Trainer
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
                         patience=2, elitist=False),
        "mutation": MutationConfig(batch_size=16, elite=4),
        "pqt": dataclasses.replace(agents.default_config("pqt"), batch_size=8),
        "pg-pqt": dataclasses.replace(agents.default_config("pg-pqt"), batch_size=8),
        "reinforce": dataclasses.replace(agents.default_config("reinforce"), batch_size=8),
        "ga": GAConfig(batch_size=10),
        "random": RandomConfig(batch_size=8),
    }[algo]
    return dataclasses.replace(config, **changes)


def handover_config(**changes) -> TrainConfig:
    """ppo with its elitist phase, seeds 5 and 7: seed 5 hands over at generation 10, seed 7 at 30."""
    settings = dict(task="reverse-tune", algo="ppo", npe=10**6, max_len=8, seeds=(5, 7),
                    algo_config=small_config("ppo", elitist=True, elitist_patience=2), **FAST)
    return TrainConfig(**{**settings, **changes})


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
    assert results[0].solved and results[0].npe == trainer.npe_done <= 64 * 40  # stopped at its first solve


@pytest.mark.parametrize("algo", ["ppo", "ppo-elitist", "mutation", "pqt", "ga"])
def test_resume_gives_bitwise_the_same_next_updates(tmp_path, algo):
    if algo == "ppo-elitist":  # resumed between seed 5's hand-over (step 10) and seed 7's (step 30)
        base = handover_config()
        steps, stop = 33, 21
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
        assert resumed.algorithm.elitist == [False, True]
    resumed.run()
    assert_same(straight.algorithm.state_dict(), resumed.algorithm.state_dict())
    assert straight.npe.tolist() == resumed.npe.tolist()
    assert torch.equal(straight.best_tokens, resumed.best_tokens)


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
    for (name, a), b in zip(alone.algorithm.editor.state_dict().items(), batched.algorithm.editor.state_dict().values()):
        assert torch.allclose(a[0], b[0], atol=1e-5), name
    assert torch.equal(alone.algorithm.islands.tokens[0], batched.algorithm.islands.tokens[0])
    assert not torch.equal(batched.algorithm.islands.tokens[0], batched.algorithm.islands.tokens[1])


def test_a_seed_trains_the_same_alone_or_batched_across_its_elitist_handover():
    """Seed 5 hands over from its elitist phase at generation 10, seed 7 at 30: in between, only seed 5's islands
    ran (on a copy of its rows, written back each generation), and only every 4th generation (islands_every) while
    seed 7's elitist phase stepped at every one. Each seed's run is still the one it makes alone, in as many of
    its own generations."""
    config = handover_config(max_train_steps=36)
    batched = Trainer(config)
    phases, stepped = [], []
    for _ in range(36):
        batched.step()
        phases.append(tuple(batched.algorithm.elitist))
        stepped.append(tuple(batched.algorithm.stepped))
    assert phases[8] == (True, True) and phases[9] == (False, True) and phases[29] == (False, False)
    assert [step for step in range(10, 30) if stepped[step][0]] == [12, 16, 20, 24, 28]
    assert all(step[1] for step in stepped) and all(step[0] for step in stepped[30:])
    own_steps = [sum(step[member] for step in stepped) for member in range(2)]
    assert own_steps == [36 - 15, 36]
    assert batched.member_programs == [steps * 32 for steps in own_steps] == batched.npe.tolist()
    for member, seed in enumerate((5, 7)):
        alone = Trainer(dataclasses.replace(config, seeds=(seed,), max_train_steps=own_steps[member]))
        alone.run()
        mine, theirs = alone.algorithm.state_dict(), batched.algorithm.state_dict()
        for name, value in mine["editor"].items():
            assert torch.allclose(value[0], theirs["editor"][name][member], atol=1e-6), name
        for part in ("islands", "queue", "edit_queue"):
            for name, value in mine[part].items():
                assert torch.equal(value[0], theirs[part][name][member]), (part, name)
        assert int(alone.algorithm.optimizer.steps[0]) == int(batched.algorithm.optimizer.steps[member]) > 0


def test_the_schedule_changes_when_a_seed_steps_never_what_it_writes():
    """With islands_every=4 seed 5's islands wait 3 generations in 4 while seed 7 is in its elitist phase; with 1
    they step at every one. Each seed writes the same programs in its own generations either way (its policy
    updates and the slots of its update buffer follow its own count)."""
    def own_programs(islands_every: int) -> list[list[torch.Tensor]]:
        config = handover_config(max_train_steps=36)
        config = dataclasses.replace(config, algo_config=dataclasses.replace(config.algo_config,
                                                                              islands_every=islands_every))
        trainer = Trainer(config)
        env_step, written = trainer.env.step, [[], []]

        def step(actions):
            for member, stepped in enumerate(trainer.algorithm.stepped):
                if stepped:
                    written[member].append(actions.view(2, 32, -1)[member].clone())
            return env_step(actions)

        trainer.env.step = step
        trainer.run()
        return written

    waiting, every = own_programs(4), own_programs(1)
    assert [len(programs) for programs in waiting] == [21, 36] and [len(programs) for programs in every] == [36, 36]
    for member in range(2):
        assert all(torch.equal(a, b) for a, b in zip(waiting[member], every[member])), member


def test_a_seed_spends_its_whole_budget_even_when_it_waited():
    """Seed 5's islands wait 3 generations in 4 while seed 7 is in its elitist phase (generations 10-30), so seed 7
    spends its budget of 40 generations first; the job goes on for seed 5 alone until its 40 are spent too, and
    each seed's run is the one it makes alone."""
    config = handover_config(npe=40 * 32)
    batched = Trainer(config)
    results = batched.run()
    assert [r.npe for r in results] == [40 * 32] * 2 and not any(r.solved for r in results)
    assert batched.step_count == 10 + 5 + 40 and batched.member_programs == [40 * 32] * 2
    for member, seed in enumerate((5, 7)):
        alone = Trainer(dataclasses.replace(config, seeds=(seed,)))
        mine = alone.run()[0]
        assert (mine.npe, mine.best_program, mine.best_reward) == (40 * 32, results[member].best_program,
                                                                  results[member].best_reward)
        assert torch.equal(alone.algorithm.islands.tokens[0], batched.algorithm.islands.tokens[member])


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
    trainer.finished = [True, False]
    before, npe = {k: v[0].clone() for k, v in queue.state_dict().items()}, trainer.npe.tolist()
    env_step, actions = trainer.env.step, []
    trainer.env.step = lambda tokens: (actions.append(tokens.clone()), env_step(tokens))[1]
    for _ in range(3):
        trainer.step()
        assert agent.stepped == [False, True] and trainer.member_programs[1] > trainer.member_programs[0]
        programs = canonical_programs(actions[-1]).view(2, agent.programs_per_step, -1)
        assert not programs[0].any() and programs[1].any()  # every program of member 0 is empty
    assert_same(before, {k: v[0] for k, v in queue.state_dict().items()})
    assert trainer.npe.tolist()[0] == npe[0] and trainer.npe.tolist()[1] == npe[1] + 3 * agent.programs_per_step
    alone = Trainer(dataclasses.replace(config, seeds=(3,)))
    alone.run()
    alone_queue = alone.algorithm.queue if algo == "ppo" else alone.algorithm.elite
    assert torch.equal(alone_queue.tokens[0], queue.tokens[1])


def test_a_member_in_its_elitist_phase_costs_the_islands_nothing():
    """Between seed 5's hand-over (generation 10) and seed 7's (30), seed 7's islands, update buffer, edit
    queue, edit policy and generator are left as they were: only seed 5's rows are computed."""
    trainer = Trainer(handover_config())
    agent = trainer.algorithm
    for _ in range(11):
        trainer.step()
    assert agent.elitist == [False, True]

    def member_one():
        state = agent.state_dict()
        return {"islands": {k: v[1] for k, v in state["islands"].items()},
                "edit_queue": {k: v[1] for k, v in state["edit_queue"].items()},
                "editor": {k: v[1] for k, v in state["editor"].items()},
                "buffer": {k: v[1] for k, v in state["buffer"].items()},
                "generator": state["generators"][1]}

    before, seed_five = member_one(), agent.islands.tokens[0].clone()
    for _ in range(10):
        trainer.step()
    assert agent.elitist == [False, True]
    assert_same(before, member_one())
    assert not torch.equal(seed_five, agent.islands.tokens[0])  # seed 5's islands evolved meanwhile


def test_a_member_that_solved_stays_in_its_elitist_phase():
    """One program in eight solves DOT: every seed solves in its first generation, and its queue (all
    solving programs soon) stalls, yet it never hands over: the islands would cost steps and find nothing."""
    config = TrainConfig(task=DOT.name, algo="ppo", npe=10**6, max_len=2, seeds=(0, 1),
                         algo_config=small_config("ppo", elitist=True, elitist_patience=2), **FAST)
    trainer = Trainer(config)
    for _ in range(30):
        trainer.step()
    assert trainer.algorithm.solved.tolist() == [True, True]
    assert int(trainer.algorithm.elite_stale.min()) > 2 and trainer.algorithm.elitist == [True, True]


def test_bad_settings_raise_clear_errors():
    with pytest.raises(ValueError, match="Did you mean 'ppo'"):
        TrainConfig(algo="ppp")
    with pytest.raises(ValueError, match="npe must be a positive int"):
        TrainConfig(npe=0)
    with pytest.raises(ValueError, match="seconds must be a finite float in \\(0, inf\\), got nan"):
        TrainConfig(seconds=float("nan"))
    with pytest.raises(ValueError, match="seeds must be distinct"):
        TrainConfig(seeds=(1, 1))
    with pytest.raises(TypeError, match="PPOConfig"):
        agents.make("ppo", GAConfig(), (0,), 10, torch.device("cpu"))
    with pytest.raises(ValueError, match="islands=3 must divide batch_size=8"):
        PPOConfig(batch_size=8, islands=3)


def test_a_time_budget_stops_the_job_within_one_sync_interval():
    trainer = Trainer(TrainConfig(task="reverse", algo="random", seconds=0.3, max_len=20, log_every=2,
                                  algo_config=RandomConfig(batch_size=64), log_dir=None, progress=False))
    results = trainer.run()
    steps_after = sum(1 for t in trainer.step_seconds if t >= 0.3)
    assert 1 <= steps_after <= 2  # the step that crossed the budget, then at most up to the next sync point
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
