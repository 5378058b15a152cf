"""The program prior (``agents.search.prior``): its probabilities are the counts it was fitted on, its samples are
balanced programs of the right lengths drawn member by member, ``fresh='prior'`` (the default) starts the agent's
searches from them, and prior files are untrusted data that ``synthenv fit-prior`` writes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from synthenv import reference
from synthenv.agents import PPOConfig
from synthenv.agents.search.agent import IslandAgent
from synthenv.agents.search.prior import END, START, PriorPrograms, ProgramPrior, generated_prior, load_prior, \
    save_prior
from synthenv.checkpoint import CheckpointError, save_checkpoint
from synthenv.cli import main
from synthenv.language import COMMANDS, EOS, Status, decode_batch
from synthenv.tasks import generated

CPU = torch.device("cpu")


def test_the_probabilities_are_the_smoothed_counts_of_each_symbol_after_its_context():
    prior = ProgramPrior.fit(["+.", "+-", "+"], order=1, smoothing=0.5)
    plus, dot, minus = (1 + COMMANDS.index(c) for c in "+.-")
    after_start = prior.probs[START]
    assert after_start[plus].item() == pytest.approx(3.5 / (3 + 9 * 0.5))  # every program starts with +
    assert after_start[dot].item() == pytest.approx(0.5 / (3 + 9 * 0.5))
    after_plus = prior.probs[plus]  # + is followed by . once, - once, the end once
    for symbol in (dot, minus, END):
        assert after_plus[symbol].item() == pytest.approx(1.5 / (3 + 9 * 0.5))
    assert torch.allclose(prior.probs.sum(-1), torch.ones(START + 1))
    order2 = ProgramPrior.fit(["+.", "+-"], order=2, smoothing=0.0)
    assert order2.probs[plus, dot, END].item() == 1.0 and order2.probs[START, plus, dot].item() == 0.5
    assert torch.allclose(order2.probs[dot, dot], torch.full((START,), 1 / START))  # a context never seen: uniform


@pytest.mark.parametrize("order", [1, 2, 3])
def test_samples_are_balanced_programs_of_one_to_longest_commands(order):
    """Even from a model that opens loops far more often than it closes them, every sample is a program the
    reference interpreter accepts (no syntax error), of 1 .. longest commands, padded with EOS."""
    prior = ProgramPrior.fit(["[[[[+", ",[[.", "[]"], order=order, smoothing=0.3)
    programs = prior.sample([torch.Generator().manual_seed(1)], (500,), max_len=16, longest=9, device=CPU)[0]
    assert programs.shape == (500, 16) and (programs[:, 9:] == EOS).all()
    texts = decode_batch(programs)
    assert all(1 <= len(text) <= 9 for text in texts)
    assert all(reference.run(text, [3, 1], 256, 1000).status != Status.SYNTAX_ERROR for text in texts)
    assert sum("[" in text for text in texts) > 250  # the loops were written, and closed
    canonical = torch.tensor([[*(1 + COMMANDS.index(c) for c in t), *[EOS] * (16 - len(t))] for t in texts])
    assert torch.equal(canonical, programs)  # nothing after the end


def test_a_model_of_one_program_writes_that_program():
    prior = ProgramPrior.fit([",[->+<]>."], order=3, smoothing=1e-6)
    programs = prior.sample([torch.Generator().manual_seed(0)], (50,), max_len=20, longest=20, device=CPU)[0]
    assert decode_batch(programs) == [",[->+<]>."] * 50


def test_each_member_draws_from_its_own_generator_only():
    prior = ProgramPrior.fit([",[.,]", ",>,<[->+<]>.", "+++."], order=2)
    alone = prior.sample([torch.Generator().manual_seed(7)], (3, 5), max_len=12, longest=10, device=CPU)
    pair = prior.sample([torch.Generator().manual_seed(3), torch.Generator().manual_seed(7)], (3, 5), max_len=12,
                        longest=10, device=CPU)
    assert pair.shape == (2, 3, 5, 12) and torch.equal(pair[1], alone[0])
    pool = PriorPrograms(prior, longest=10, size=64)
    picks = pool([torch.Generator().manual_seed(0)] * 2, (40,), max_len=12, longest=10, device=CPU)
    assert picks.shape == (2, 40, 12) and set(decode_batch(picks.flatten(0, 1))) <= set(decode_batch(pool.pool))


def test_the_default_agent_starts_from_the_prior_pool_and_uniform_starts_elsewhere():
    config = PPOConfig(batch_size=64, islands=2, island_size=4, queue_size=4, variants_per_parent=1,
                       library="none")  # the default's fresh programs (with a library, its programs come first)
    agent = IslandAgent(config, seeds=(0, 1), max_len=24, device=CPU)
    pool = set(decode_batch(agent.fresh.pool))
    first = decode_batch(agent.propose().flatten(0, 1))  # the elitist phase's first generation
    assert set(first) <= pool and set(decode_batch(agent.islands.programs.tokens.flatten(0, 2))) <= pool
    uniform = IslandAgent(dataclasses.replace(config, fresh="uniform"), seeds=(0, 1), max_len=24, device=CPU)
    assert not set(decode_batch(uniform.propose().flatten(0, 1))) <= pool
    with pytest.raises(ValueError, match="fresh must be 'uniform' or 'prior', got 'learned'"):
        PPOConfig(fresh="learned")


def test_a_prior_file_round_trips_and_a_damaged_or_foreign_file_is_refused_in_one_line(tmp_path):
    prior = ProgramPrior.fit([",[.,]", "+."], order=2)
    save_prior(tmp_path / "p.pt", prior, {"tasks": 2})
    loaded, card = load_prior(tmp_path / "p.pt")
    assert torch.equal(loaded.probs, prior.probs) and loaded.order == 2 and card == {"tasks": 2}
    (tmp_path / "bad.pt").write_bytes(b"not a prior")
    save_checkpoint(tmp_path / "other.pt", {"format": "synthenv-edit-policy", "probs": prior.probs})
    bad = prior.probs.clone()
    bad[0, 0, 0] = -1.0
    save_checkpoint(tmp_path / "negative.pt", {"format": "synthenv-program-prior", "version": 1, "probs": bad})
    for name, match in (("bad.pt", "fit-prior"), ("other.pt", "not a synthenv program-prior file"),
                        ("negative.pt", "non-negative")):
        with pytest.raises(CheckpointError, match=match) as error:
            load_prior(tmp_path / name)
        assert "\n" not in str(error.value) and "synthenv fit-prior" in str(error.value)


def test_fit_prior_writes_the_prior_of_the_generated_tasks_solutions(tmp_path, capsys):
    assert main(["fit-prior", "--tasks", "30", "--order", "1", "--out", str(tmp_path / "p.pt")]) == 0
    prior, card = load_prior(tmp_path / "p.pt")
    expected = ProgramPrior.fit([generated.generate("train", i).program for i in range(30)], order=1)
    assert torch.equal(prior.probs, expected.probs)
    assert card["command"].startswith("synthenv fit-prior --tasks 30 --order 1 --smoothing 0.1")
    assert "an order-1 prior of the solutions of 30 generated train tasks" in capsys.readouterr().out
    assert main(["fit-prior", "--tasks", "0", "--out", str(tmp_path / "q.pt")]) == 2
    assert not (tmp_path / "q.pt").exists()


def test_the_shipped_prior_is_what_its_card_command_writes():
    shipped, card = load_prior()
    assert card["command"] == "synthenv fit-prior --tasks 2000 --order 2 --smoothing 0.1 --out agents/search/program_prior.pt"
    assert torch.equal(shipped.probs, generated_prior(2000, 2, 0.1).probs)


def test_fit_prior_refuses_a_bad_setting_in_one_line_and_writes_nothing(tmp_path, capsys):
    for args in (["--order", "5"], ["--order", "0"], ["--smoothing", "-1"], ["--tasks", "x"]):
        assert main(["fit-prior", *args, "--out", str(tmp_path / "p.pt")]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1 and not (tmp_path / "p.pt").exists()
    with pytest.raises(ValueError, match="order must be an int in 1..4"):
        ProgramPrior.fit(["+."], order=5)
