"""Variation operators, hashed de-duplication and the edit policy's action space."""

from __future__ import annotations

import pytest
import torch

from native import require_native
from synthenv.agents.search.members import generator_states, load_generator_states
from synthenv.agents.policy.editor import EditorConfig, EditPolicy, _inverse_cdf
from synthenv.agents.policy.distribution import edit_entropy, edit_log_probs
from synthenv.agents.search.queue import EMPTY, ProgramQueue
from synthenv.agents.search.rows import canonical, first_occurrences, program_lengths, row_hashes, top_unique
from synthenv.agents.search.variation import (DELETE, INSERT, SUBSTITUTE, Edits, apply_edits, insert_pieces, random_edits, random_programs, splice)
from synthenv.language import decode_batch, encode_batch

CPU = torch.device("cpu")


def _generators(count: int, seed: int = 0) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(seed + i) for i in range(count)]


def _assert_canonical(programs: torch.Tensor, max_len: int) -> None:
    assert programs.shape[-1] == max_len
    assert programs.min() >= 0 and programs.max() <= 8
    assert torch.equal(programs, canonical(programs))  # nothing after the first EOS


def _quadratic_first(tokens: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The reference: a valid row is first unless an equal valid row comes before it."""
    same = (tokens[:, :, None, :] == tokens[:, None, :, :]).all(-1)  # [S, M, M]
    m = tokens.shape[1]
    earlier = torch.ones((m, m), dtype=torch.bool).tril(-1)
    return valid & ~(same & earlier & valid[:, None, :]).any(-1)


@pytest.mark.parametrize("seed", range(5))
def test_hashed_first_occurrences_equal_the_quadratic_comparison(seed):
    generator = torch.Generator().manual_seed(seed)
    pool = torch.randint(0, 3, (3, 20, 4), generator=generator)  # small alphabet: many duplicates
    tokens = pool[:, torch.randint(0, 20, (60,), generator=generator)]  # [S, 60, L] with repeats
    valid = torch.rand(3, 60, generator=generator) < 0.8
    assert torch.equal(first_occurrences(tokens, valid), _quadratic_first(tokens, valid))
    assert torch.equal(first_occurrences(tokens), _quadratic_first(tokens, torch.ones_like(valid)))


def _quadratic_push(queue_tokens, queue_rewards, tokens, rewards, capacity):
    """The queue's original O(M^2) push, kept as the reference."""
    candidates = torch.cat([queue_tokens, tokens], dim=1)
    scores = torch.cat([queue_rewards, rewards.float()], dim=1)
    duplicate = ~_quadratic_first(candidates, scores > EMPTY) & (scores > EMPTY)
    scores = torch.where(duplicate, EMPTY, scores)
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :capacity]
    return candidates.gather(1, order[..., None].expand(-1, -1, candidates.shape[2])), scores.gather(1, order)


@pytest.mark.parametrize("seed", range(5))
def test_hashed_queue_push_equals_the_quadratic_push_with_duplicates_and_ties(seed):
    generator = torch.Generator().manual_seed(seed)
    queue = ProgramQueue(2, 6, 5, CPU)
    reference_tokens, reference_rewards = queue.tokens.clone(), queue.rewards.clone()
    for _ in range(4):
        tokens = torch.randint(0, 3, (2, 30, 5), generator=generator)
        rewards = torch.randint(0, 4, (2, 30), generator=generator).float() / 4  # many ties
        queue.push(tokens, rewards)
        reference_tokens, reference_rewards = _quadratic_push(reference_tokens, reference_rewards, tokens, rewards, 6)
        assert torch.equal(queue.tokens, reference_tokens) and torch.equal(queue.rewards, reference_rewards)


def test_queue_extras_follow_their_programs():
    queue = ProgramQueue(1, 2, 3, CPU, extras={"tag": ((), torch.int64)})
    queue.push(torch.tensor([[[1, 0, 0], [2, 0, 0], [3, 0, 0]]]), torch.tensor([[0.25, 0.75, 0.5]]),
               tag=torch.tensor([[10, 20, 30]]))
    assert queue.extras["tag"].tolist() == [[20, 30]] and queue.rewards.tolist() == [[0.75, 0.5]]


def test_row_hashes_are_equal_for_equal_rows_and_differ_for_these():
    rows = encode_batch([",[>,]+[,<.]", ",[>,]+[,<.]", ",[>,]+[,.<]", ""], 12)
    hashes = row_hashes(rows).tolist()
    assert hashes[0] == hashes[1] and len(set(hashes)) == 3


def _edits(positions, kinds, tokens) -> Edits:
    t = lambda values: torch.tensor([[values]])  # noqa: E731  [S=1, N=1, E]
    return Edits(t(positions), t(kinds), t(tokens), torch.ones((1, 1, len(positions)), dtype=torch.bool))


@pytest.mark.parametrize("edits, expected", [
    (([1], [SUBSTITUTE], [3]), ",+>"),          # the `[` at 1 becomes `+`
    (([0], [INSERT], [7]), ".,[>"),             # insert before the first token
    (([3], [INSERT], [7]), ",[>."),             # append at the end (position = length)
    (([1], [DELETE], [1]), ",>"),               # delete the `[`
    (([0, 2], [DELETE, INSERT], [1, 7]), "[.>"),  # positions index the parent: both apply as written
])
def test_point_edits_do_what_they_say(edits, expected):
    parent = encode_batch([",[>"], 6)[None]
    assert decode_batch(apply_edits(parent, _edits(*edits))[0]) == [expected]


def test_inserting_into_a_full_program_drops_its_last_token():
    parent = encode_batch(["+-+"], 3)[None]
    assert decode_batch(apply_edits(parent, _edits([0], [INSERT], [7]))[0]) == [".+-"]


@pytest.mark.parametrize("seed", range(3))
def test_random_variants_stay_valid_programs_within_max_len(seed):
    gens = _generators(2, seed)
    parents = random_programs(gens, (400,), 12, 12, CPU)
    parents[:, :20] = 0  # some empty programs: they can only grow
    for _ in range(6):  # a few generations of variants of variants
        edits = random_edits(gens, parents, max_edits=3)
        assert ((edits.count >= 1) & (edits.count <= 3)).all()
        lengths = program_lengths(parents)[..., None]
        assert (edits.positions <= lengths).all() and ((edits.positions < lengths) | (edits.kinds == INSERT)).all()
        children = apply_edits(parents, edits)
        _assert_canonical(children, 12)
        change = (program_lengths(children) - program_lengths(parents)).abs()
        assert (change <= 3).all()
        parents = children


def test_splice_is_a_valid_program_made_of_its_parents_pieces():
    gens = _generators(1)
    firsts = encode_batch(["++++++"] * 200, 8)[None]
    seconds = encode_batch([".."] * 200, 8)[None]
    children = splice(gens, firsts, seconds)
    _assert_canonical(children, 8)
    texts = decode_batch(children[0])
    assert all(set(t) <= {"+", "."} and t.count(".") <= 2 for t in texts)
    assert len(set(texts)) > 5  # cut points vary


def test_insert_pieces_puts_the_whole_piece_in_place_of_a_window_no_longer_than_it():
    """Every child is ``first[:i] + piece + first[m:]`` for some ``i <= m <= i + len(piece)``; over many draws both
    a pure insertion and a replaced window occur, and a balanced piece keeps a balanced program balanced."""
    gens = _generators(1)
    first, piece = "+-<>.,", "[->+<]"
    children = decode_batch(insert_pieces(gens, encode_batch([first] * 400, 16)[None],
                                          encode_batch([piece] * 400, 16)[None])[0])
    ways = {(i, m) for i in range(len(first) + 1) for m in range(i, min(len(first), i + len(piece)) + 1)}
    made = {(i, m) for i, m in ways if first[:i] + piece + first[m:] in children}
    assert all(any(child == first[:i] + piece + first[m:] for i, m in ways) for child in children)
    assert any(i == m for i, m in made) and any(m > i for i, m in made) and len(made) > 10
    assert all(child.count("[") == child.count("]") == 1 for child in children)
    long = insert_pieces(gens, encode_batch(["+" * 15] * 50, 16)[None], encode_batch([piece] * 50, 16)[None])
    _assert_canonical(long, 16)  # cut at L tokens


def test_random_programs_have_lengths_in_range():
    programs = random_programs(_generators(2), (300,), 10, 4, CPU)
    lengths = program_lengths(programs)
    _assert_canonical(programs, 10)
    assert lengths.min() == 1 and lengths.max() == 4


def test_the_edit_policy_samples_valid_edits_with_their_log_probabilities():
    gens = _generators(2, 7)
    policy = EditPolicy(EditorConfig(max_edits=3), 2, num_features=9, generators=gens, device=CPU)
    parents = random_programs(gens, (64,), 10, 10, CPU)
    parents[:, :4] = 0  # empty programs
    features = torch.rand(2, 64, 9)
    edits, log_probs = policy.sample(parents, features, gens)
    lengths = program_lengths(parents)[..., None]
    assert ((edits.positions <= lengths) & (edits.positions < 10 + (lengths < 10).long())).all()
    assert ((edits.positions < lengths) | (edits.kinds == INSERT)).all()  # at the end only insertion
    assert ((edits.tokens >= 1) & (edits.tokens <= 8)).all()
    _assert_canonical(apply_edits(parents, edits), 10)
    recomputed = edit_log_probs(policy(parents, features), edits)
    assert torch.allclose(recomputed, log_probs, atol=1e-5) and (log_probs < 0).all()


def test_the_edit_policy_draws_k_variants_of_each_parent_from_one_reading():
    """``sample(..., variants=K)``: K edits of each parent (rows i K .. i K + K - 1), each valid for that
    parent, whose log-probabilities, entropies and gradients equal those of one reading per variant (the
    parents repeated K times)."""
    gens = _generators(2, 11)
    policy = EditPolicy(EditorConfig(max_edits=3), 2, num_features=9, generators=gens, device=CPU)
    parents = random_programs(gens, (24,), 10, 10, CPU)
    parents[:, :2] = 0  # empty programs: only an insertion at 0
    features = torch.rand(2, 24, 9)
    edits, log_probs = policy.sample(parents, features, gens, variants=3)
    assert edits.positions.shape == (2, 72, 3) and log_probs.shape == (2, 72)
    repeated, repeated_features = parents.repeat_interleave(3, 1), features.repeat_interleave(3, 1)
    lengths = program_lengths(repeated)[..., None]
    assert ((edits.positions <= lengths) & (edits.positions < 10 + (lengths < 10).long())).all()
    assert ((edits.positions < lengths) | (edits.kinds == INSERT)).all()
    _assert_canonical(apply_edits(repeated, edits), 10)
    assert not torch.equal(edits.positions[:, 0::3], edits.positions[:, 1::3])  # the variants differ

    results = []
    for logits in (lambda: policy(parents, features), lambda: policy(repeated, repeated_features)):
        policy.zero_grad()
        log_p, entropy = edit_log_probs(logits(), edits), edit_entropy(logits(), edits)
        (log_p.sum() + entropy.sum()).backward()
        results.append((log_p, entropy, [p.grad.clone() for p in policy.parameters()]))
    (grouped_lp, grouped_entropy, grouped_grads), (each_lp, each_entropy, each_grads) = results
    assert torch.allclose(grouped_lp, log_probs, atol=1e-5) and torch.allclose(grouped_lp, each_lp, atol=1e-5)
    assert torch.allclose(grouped_entropy, each_entropy, atol=1e-5)
    for a, b in zip(grouped_grads, each_grads):
        assert torch.allclose(a, b, atol=1e-4)


def test_inverse_cdf_draws_follow_the_softmax_and_never_a_masked_index():
    """The policy's sampler: frequencies over 200 000 draws match ``softmax(logits)`` and a masked
    logit (-1e9) is never drawn, also at the top of [0, 1) where the CDF's float rounding bites."""
    logits = torch.tensor([[0.5, -1e9, 2.0, -1.0, -1e9]])
    uniform = torch.rand((1, 200_000), generator=torch.Generator().manual_seed(3))
    drawn = _inverse_cdf(logits, uniform)
    counts = torch.bincount(drawn[0], minlength=5).double() / 200_000
    expected = torch.softmax(logits.double(), -1)[0]
    assert counts[1] == 0 and counts[4] == 0
    assert torch.allclose(counts, expected, atol=0.005)
    edge = _inverse_cdf(logits, torch.tensor([[0.0, 0.5, 1 - 2**-24, 0.9999999]]))
    assert edge[0, :2].tolist() == [0, 2] and set(edge[0, 2:].tolist()) <= {2, 3}
    assert _inverse_cdf(logits, torch.tensor([[1.0]])).tolist() == [[2]]  # past the CDF's top: the likeliest


def test_the_edit_policy_reads_short_programs_the_same_in_the_trimmed_width(monkeypatch):
    """On the CPU the policy skips the padding after the longest program; every edit position's
    logits, the count logits and the log-probabilities of edits (with their gradients) equal
    those of the full-width pass that a GPU runs."""
    from synthenv.agents.policy import editor

    gens = _generators(2, 5)
    policy = EditPolicy(EditorConfig(), 2, num_features=9, generators=gens, device=CPU)
    parents = random_programs(gens, (50,), 40, 12, CPU)  # at most 12 tokens in a width of 40
    features = torch.rand(2, 50, 9)
    edits = random_edits(gens, parents, max_edits=3)
    results = []
    for on_host in (True, False):
        monkeypatch.setattr(editor, "_width_on_host", lambda device, on_host=on_host: on_host)
        policy.zero_grad()
        logits = policy(parents, features)
        log_probs = edit_log_probs(logits, edits)
        log_probs.sum().backward()
        results.append((logits, log_probs, [p.grad.clone() for p in policy.parameters()]))
    (short, short_lp, short_grads), (full, full_lp, full_grads) = results
    width = short.position.shape[-1]
    assert width <= 12 + 1 + EditorConfig().kernel // 2 < full.position.shape[-1] == 41
    assert torch.equal(short.position, full.position[..., :width])
    assert (full.position[..., width:] == full.position.min()).all()  # masked positions only were cut
    assert torch.allclose(short.count, full.count, atol=1e-6)
    assert torch.allclose(short_lp, full_lp, atol=1e-5)
    for a, b in zip(short_grads, full_grads):
        assert torch.allclose(a, b, atol=1e-4)


def test_the_edit_policy_of_some_members_is_their_rows_of_the_whole():
    """``logits(..., members)``: the members' rows of the pass over all, and gradients only for them."""
    gens = _generators(3, 2)
    policy = EditPolicy(EditorConfig(), 3, num_features=9, generators=gens, device=CPU)
    parents = random_programs(gens, (20,), 10, 10, CPU)
    features = torch.rand(3, 20, 9)
    edits = random_edits(gens, parents, max_edits=3)
    index = torch.tensor([2, 0])
    whole = edit_log_probs(policy(parents, features), edits)
    some = edit_log_probs(policy.logits(parents[index], features[index], index), Edits(*(getattr(edits, name)[index] for name in ("positions", "kinds", "tokens", "active"))))
    assert torch.allclose(some, whole[index], atol=1e-5)
    some.sum().backward()
    for name, parameter in policy.named_parameters():
        assert not parameter.grad[1].any(), name
    assert all(parameter.grad[index].any() for parameter in policy.parameters())


def test_the_edit_policy_scores_random_edits_finitely():
    """Random mutation and the policy share one action space: the policy can imitate random edits."""
    gens = _generators(1, 3)
    policy = EditPolicy(EditorConfig(), 1, num_features=9, generators=gens, device=CPU)
    parents = random_programs(gens, (200,), 10, 10, CPU)
    edits = random_edits(gens, parents, max_edits=3)
    log_probs = edit_log_probs(policy(parents, torch.zeros(1, 200, 9)), edits)
    assert torch.isfinite(log_probs).all() and (log_probs > -100).all()


@pytest.mark.parametrize("members, temperature, variants", [(None, 1.0, 4), ((2, 0), 0.5, 2), (None, 2.0, 1)])
def test_the_c_edit_sampler_draws_the_edits_of_the_torch_one(members, temperature, variants):
    """agents/policy/editor.c (the CPU path of ``EditPolicy.sample``) draws, from the same uniform numbers, the edits
    the torch pass (what a GPU runs) draws, with their log-probabilities up to float rounding: on empty, full,
    deeply nested and random programs, for some of the members, at any temperature."""
    from synthenv.agents.policy import editor

    require_native(editor.LIBRARY)
    gens = _generators(3, 4)
    policy = EditPolicy(EditorConfig(), 3, num_features=9, generators=gens, device=CPU, temperature=temperature)
    parents = random_programs(gens, (200,), 40, 40, CPU)
    parents[:, 0] = 0  # empty
    parents[:, 1] = 5  # full, and deeper than the depth embeddings reach
    parents[:, 2] = torch.tensor([6, 6, 5, 1, 6, 5, 5, 5] * 5)  # unmatched closes first
    features = torch.rand(3, 200, 9)
    index = None if members is None else torch.tensor(members)
    rows = slice(None) if index is None else index
    draws = [_generators(3, 9) for _ in range(2)]
    results = [policy.sample(parents[rows], features[rows], [draw[i] for i in (range(3) if index is None else
                                                                              members)], index, variants, impl=impl)
               for draw, impl in zip(draws, ("torch", "native"))]
    (torch_edits, torch_lp), (c_edits, c_lp) = results
    for name in ("positions", "kinds", "tokens", "active"):
        assert torch.equal(getattr(torch_edits, name), getattr(c_edits, name)), name
    assert torch.allclose(torch_lp, c_lp, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("seed", range(4))
def test_the_c_operators_equal_the_torch_ones(seed):
    """agents/search/variation.c (CPU fast path) and the torch passes (what a GPU runs) agree element for element."""

    require_native()
    gens = _generators(2, seed)
    parents = random_programs(gens, (300,), 12, 12, CPU)
    parents[:, :10] = 0
    parents[:, 10:20] = random_programs(gens, (10,), 12, 12, CPU).clamp(min=1)  # full programs
    edits = random_edits(gens, parents, max_edits=4)
    same_position = edits.positions.clone()
    same_position[..., 1] = same_position[..., 0]  # two edits at one position: a window
    for e in (edits, Edits(same_position, edits.kinds, edits.tokens, edits.active)):
        assert torch.equal(apply_edits(parents, e, impl="native"), apply_edits(parents, e, impl="torch"))
    for operator, longest in ((splice, 12), (insert_pieces, 5)):  # the same cut points drawn for both
        seconds = random_programs(gens, (300,), 12, longest, CPU)
        state = generator_states(gens)
        native = operator(gens, parents, seconds, impl="native")
        load_generator_states(gens, state)
        assert torch.equal(native, operator(gens, parents, seconds, impl="torch"))
    assert torch.equal(row_hashes(parents, impl="native"), row_hashes(parents, impl="torch"))
    ragged = torch.where(torch.rand(parents.shape, generator=gens[0]) < 0.1, 0, parents)  # EOS anywhere
    for rows in (parents, ragged, ragged[..., :0]):
        assert torch.equal(program_lengths(rows, impl="native"), program_lengths(rows, impl="torch"))


@pytest.mark.parametrize("seed", range(4))
def test_top_unique_in_c_equals_torch_with_duplicates_ties_and_empty_slots(seed):
    """The selection of the queue and the islands: variation.c's hash table and sort equal the torch
    passes (first_occurrences, stable sorts) index for index, with and without a visiting order."""

    require_native()
    generator = torch.Generator().manual_seed(seed)
    groups, n, k = 7, 90, 20
    hashes = torch.randint(-3, 4, (groups, n), generator=generator) * (2**61)  # 7 programs: many duplicates
    scores = (torch.rand(groups, n, generator=generator) * 4).floor() / 4  # 4 values: many ties
    scores = torch.where(torch.rand(groups, n, generator=generator) < 0.2, float("-inf"), scores)
    scores[0] = float("-inf")  # a group with no program at all
    shuffle = torch.rand(groups, n, generator=generator).argsort(dim=1)
    for visit in (None, shuffle):
        native = top_unique(scores, hashes, k, visit, impl="native")
        expected = top_unique(scores, hashes, k, visit, impl="torch")
        for got, want in zip(native, expected):
            assert torch.equal(got, want)
    order, ranks, kept = top_unique(scores, hashes, k, impl="native")
    # what it means, checked directly: valid unique programs first (each once, best first, earlier first)
    for g in range(1, groups):
        seen, firsts = set(), []
        for j in range(n):
            if scores[g, j] > float("-inf") and int(hashes[g, j]) not in seen:
                seen.add(int(hashes[g, j]))
                firsts.append((-float(scores[g, j]), j))
        best = [j for _, j in sorted(firsts)][:k]
        assert order[g, :len(best)].tolist() == best
        assert bool((ranks[g, len(best):] == float("-inf")).all())
    assert torch.equal(kept, hashes.gather(1, order))
    with pytest.raises(ValueError, match="k=91"):
        top_unique(scores, hashes, n + 1)
    with pytest.raises(ValueError, match="shuffle must be"):
        top_unique(scores, hashes, k, shuffle + 1, impl="native")  # index n: past the end
