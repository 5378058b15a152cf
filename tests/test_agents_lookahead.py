"""One-edit lookahead examples (``agents.lookahead``): every single point edit is enumerated, the examples are
exactly the improving ones by the reference interpreter, and a policy fitted to them generalises to the parents
of tasks it never saw."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from synthenv import reference
from synthenv.agents import PPOConfig
from synthenv.agents.editor import EditorConfig, EditPolicy
from synthenv.agents.experience import search_experience
from synthenv.agents.feedback import NUM_FEATURES
from synthenv.agents.lookahead import label, single_edits
from synthenv.agents.operators import EDIT_FIELDS
from synthenv.agents.pretrain import PretrainConfig, fit
from synthenv.agents.repair import repair_loss
from synthenv.agents.variation import Edits, apply_edits, random_programs
from synthenv.language import decode_batch, encode_batch
from synthenv.pipeline import Evaluator
from synthenv.tasks import generated

COMMANDS = "<>+-.,[]"
SMALL_SEARCH = PPOConfig(batch_size=256, islands=4, island_size=8, queue_size=16, elitist=False, policy_fraction=0.0,
                         policy="scratch")


def _every_point_edit(code: str, width: int) -> list[str]:
    """Every program one point edit from ``code``, written out plainly (a substitution by the same command too; an
    insertion into a full program pushes its last command out)."""
    out = []
    for i in range(len(code)):
        out += [code[:i] + c + code[i + 1:] for c in COMMANDS] + [code[:i] + c + code[i:] for c in COMMANDS]
        out.append(code[:i] + code[i + 1:])
    if len(code) < width:
        out += [code + c for c in COMMANDS]
    return [child[:width] for child in out]


def _children(parents: torch.Tensor, owners: torch.Tensor, edits: Edits) -> list[str]:
    return decode_batch(apply_edits(parents[owners][None], Edits(*(getattr(edits, n)[None] for n in EDIT_FIELDS)))[0])


@pytest.mark.parametrize("seed", range(3))
def test_single_edits_are_every_point_edit_of_each_parent(seed):
    width = 12
    programs = random_programs([torch.Generator().manual_seed(seed)], (6,), width, width, torch.device("cpu"))[0]
    parents = torch.cat([programs, encode_batch(["", "+" * width], width)])  # and an empty and a full program
    owners, edits = single_edits(parents, max_edits=3)
    assert edits.positions.shape == (len(owners), 3) and bool((edits.count == 1).all())
    children = _children(parents, owners, edits)
    for row, code in enumerate(decode_batch(parents)):
        mine = [child for child, owner in zip(children, owners.tolist()) if owner == row]
        assert sorted(mine) == sorted(_every_point_edit(code, width)), code
        assert len(mine) == 17 * len(code) + 8 * (len(code) < width)


@pytest.fixture(scope="module")
def parents():
    pairs = generated.pairs("train", 0, 2)
    _, probes = search_experience(pairs, 8, 0, Evaluator.create(), 16, SMALL_SEARCH, probes_per_generation=2)
    return pairs, probes.every(3)


def _gains(code: str, task, width: int) -> list[tuple[str, float]]:
    """Each point edit of ``code`` with the change of reward it makes on ``task``, by the reference interpreter."""
    def reward(program: str) -> float:
        return reference.score_program(program, task.cases, task.base, task.max_steps).reward

    own = reward(code)
    return [(child, reward(child) - own) for child in _every_point_edit(code, width)]


def test_the_examples_are_exactly_the_edits_that_improve_their_parent_by_the_reference_interpreter(parents):
    """Every edit that raises the reference reward is an example, as often as its parent was drawn, and no edit
    that lowers it or leaves it is; a change within float rounding (the env's rewards are float32) is not judged."""
    pairs, probes = parents
    examples = label(probes, pairs, Evaluator.create(), 3, torch.Generator().manual_seed(0), per_parent=10**6)
    found = Counter(zip(examples.groups.tolist(), decode_batch(examples.parents),
                        _children(examples.parents, torch.arange(len(examples)), examples.edits)))
    improving = 0
    for (group, code), copies in Counter(zip(probes.groups.tolist(), decode_batch(probes.parents))).items():
        gains = _gains(code, pairs[group][0], 16)
        edits_to = Counter(child for child, _ in gains)  # distinct edits that write the same child
        for child, gain in gains:
            mine = found[(group, code, child)]
            if gain > 1e-6:
                improving += 1
                assert mine == copies * edits_to[child], child
            elif gain < -1e-6 or gain == 0:
                assert mine == 0, (code, child, gain)
    assert improving >= 20  # the check saw edits that improve their parent
    row = (probes.parents == examples.parents[0]).all(-1).nonzero()[0, 0]
    assert torch.equal(examples.features[0], probes.features[row])  # the parent's own feedback


def test_at_most_per_parent_examples_are_drawn_from_its_improving_edits(parents):
    pairs, probes = parents
    every = label(probes, pairs, Evaluator.create(), 3, torch.Generator().manual_seed(0), per_parent=10**6)
    few = label(probes, pairs, Evaluator.create(), 3, torch.Generator().manual_seed(0), per_parent=2)
    assert 0 < len(few) < len(every)

    def key(s, i):
        return tuple(s.parents[i].tolist()), int(s.edits.positions[i, 0]), int(s.edits.kinds[i, 0]), \
            int(s.edits.tokens[i, 0])

    allowed = {key(every, i) for i in range(len(every))}
    per_parent: dict = {}
    for i in range(len(few)):
        assert key(few, i) in allowed
        per_parent[key(few, i)[0]] = per_parent.get(key(few, i)[0], 0) + 1
    assert max(per_parent.values()) <= 2 * 2  # a parent drawn twice contributes twice


def test_a_policy_fitted_to_lookahead_examples_prefers_improving_edits_on_tasks_it_never_saw():
    """The loss on the lookahead examples of held-out tasks (their parents' improving edits) falls well below the
    untrained policy's: what improves a parent carries over from task to task."""
    evaluator, generator = Evaluator.create(), torch.Generator().manual_seed(0)

    def examples(first: int, count: int):
        pairs = generated.pairs("train", first, count)
        _, probes = search_experience(pairs, 20, 0, evaluator, 100, SMALL_SEARCH, probes_per_generation=4)
        return label(probes, pairs, evaluator, 3, generator)

    train_set, held_out = examples(0, 30), examples(10**6, 10)  # train split, never trained on
    assert len(train_set) > 500 and len(held_out) > 100
    policy = EditPolicy(EditorConfig(), 1, NUM_FEATURES, [torch.Generator().manual_seed(0)], torch.device("cpu"))
    with torch.no_grad():
        before = float(repair_loss(policy, held_out))
    log = fit(policy, train_set, held_out, steps=200, batch_size=256, learning_rate=3e-3, generator=generator,
              log_every=100)
    assert log.validation_loss[-1] < before - 1.0


def test_lookahead_tasks_are_training_tasks():
    with pytest.raises(ValueError, match="lookahead_tasks=300 is more than tasks=200"):
        PretrainConfig(tasks=200, lookahead_tasks=300)
    with pytest.raises(ValueError, match="lookahead_tasks must be an int >= 0"):
        PretrainConfig(lookahead_tasks=-1)
    assert PretrainConfig(corruptions=0, lookahead_tasks=5).lookahead_tasks == 5  # examples enough on their own
