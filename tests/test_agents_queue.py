"""The priority queue of best unique programs: order, uniqueness, eviction, sampling."""

from __future__ import annotations

import pytest
import torch

from synthenv.agents.search.queue import EMPTY, ProgramQueue

CPU = torch.device("cpu")


def programs(*rows):
    return torch.tensor([rows])  # [1, B, L]


def test_keeps_the_best_unique_programs_sorted():
    queue = ProgramQueue(1, 3, 2, CPU)
    queue.push(programs([1, 1], [2, 2], [1, 1], [3, 3]), torch.tensor([[0.5, 0.2, 0.5, 0.1]]))
    assert queue.tokens[0].tolist() == [[1, 1], [2, 2], [3, 3]]
    assert queue.rewards[0].tolist() == pytest.approx([0.5, 0.2, 0.1])


def test_evicts_the_worst_and_never_duplicates_a_queued_program():
    queue = ProgramQueue(1, 2, 2, CPU)
    queue.push(programs([1, 1], [2, 2]), torch.tensor([[0.5, 0.2]]))
    queue.push(programs([1, 1], [4, 4]), torch.tensor([[0.5, 0.3]]))  # [1,1] again: no second copy
    assert queue.tokens[0].tolist() == [[1, 1], [4, 4]]
    queue.push(programs([5, 5]), torch.tensor([[0.9]]))
    assert queue.tokens[0].tolist() == [[5, 5], [1, 1]]
    queue.push(programs([6, 6]), torch.tensor([[0.0]]))  # worse than everything: not kept
    assert queue.rewards[0].tolist() == pytest.approx([0.9, 0.5])


def test_empty_slots_never_swallow_an_all_eos_program():
    queue = ProgramQueue(1, 3, 2, CPU)  # empty slots hold zero tokens, like an empty program
    queue.push(programs([0, 0]), torch.tensor([[-0.1]]))
    assert queue.valid[0].tolist() == [True, False, False]
    assert queue.tokens[0, 0].tolist() == [0, 0]


def test_members_are_kept_apart():
    queue = ProgramQueue(2, 1, 1, CPU)
    queue.push(torch.tensor([[[1], [2]], [[3], [4]]]), torch.tensor([[0.1, 0.2], [0.4, 0.3]]))
    assert queue.tokens[:, 0].tolist() == [[2], [3]]


def test_a_copy_of_some_members_goes_back_in_their_place():
    """``members(index)`` copies those members' queues; pushed to and put back, they equal queues pushed in
    place, and the other members' are untouched."""
    rewards = torch.tensor([[0.1, 0.2], [0.4, 0.3], [0.7, 0.6]])
    tokens = torch.tensor([[[1], [2]], [[3], [4]], [[5], [6]]])
    direct = ProgramQueue(3, 2, 1, CPU, extras={"score": ((), torch.float32)})
    direct.push(tokens, rewards, score=rewards * 2)
    via_copy = ProgramQueue(3, 2, 1, CPU, extras={"score": ((), torch.float32)})
    before = via_copy.state_dict()
    index = torch.tensor([2, 0])
    part = via_copy.members(index)
    part.push(tokens[index], rewards[index], score=rewards[index] * 2)
    assert torch.equal(via_copy.tokens, before["tokens"])  # a copy: the queue itself is unchanged so far
    via_copy.put_members(index, part)
    for member in (0, 2):
        assert torch.equal(via_copy.tokens[member], direct.tokens[member])
        assert torch.equal(via_copy.rewards[member], direct.rewards[member])
        assert torch.equal(via_copy.hashes[member], direct.hashes[member])
        assert torch.equal(via_copy.extras["score"][member], direct.extras["score"][member])
    assert not via_copy.valid[1].any()  # member 1 was not in the copy


def test_sampling_is_uniform_over_filled_slots_and_flags_an_empty_queue():
    queue = ProgramQueue(2, 4, 1, CPU)
    queue.push(torch.tensor([[[1], [2]], [[3], [3]]]), torch.tensor([[0.1, 0.2], [0.5, 0.5]]))
    generators = [torch.Generator().manual_seed(s) for s in range(2)]
    tokens, valid = queue.sample(4000, generators)
    assert valid.all()
    counts = torch.bincount(tokens[0, :, 0], minlength=3)
    assert counts[0] == 0 and abs(int(counts[1]) - 2000) < 200 and abs(int(counts[2]) - 2000) < 200
    assert (tokens[1, :, 0] == 3).all()  # the duplicate was stored once
    empty = ProgramQueue(1, 4, 1, CPU)
    _, valid = empty.sample(3, [torch.Generator().manual_seed(0)])
    assert not valid.any()


def test_one_members_slots_are_drawn_as_all_members_slots_are():
    queue = ProgramQueue(2, 4, 1, CPU)
    queue.push(torch.tensor([[[1], [2]], [[3], [4]]]), torch.tensor([[0.1, 0.2], [0.5, 0.4]]))
    queue.push(torch.tensor([[[9]], [[5]]]), torch.tensor([[EMPTY], [0.3]]))  # member 1: three filled slots
    everyone = queue.sample_slots(600, [torch.Generator().manual_seed(s) for s in (0, 1)])
    alone = queue.member_slots(1, (20, 30), torch.Generator().manual_seed(1))
    assert torch.equal(alone.reshape(-1), everyone[1])
    assert set(alone.unique().tolist()) == {0, 1, 2}


def test_state_round_trip():
    queue = ProgramQueue(1, 2, 2, CPU)
    queue.push(programs([1, 2], [2, 1]), torch.tensor([[0.3, 0.4]]))
    copy = ProgramQueue(1, 2, 2, CPU)
    copy.load_state_dict(queue.state_dict())
    assert torch.equal(copy.tokens, queue.tokens) and torch.equal(copy.rewards, queue.rewards)
    with pytest.raises(ValueError, match="capacity"):
        ProgramQueue(1, 3, 2, CPU).load_state_dict(queue.state_dict())
