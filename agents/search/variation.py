"""Variation operators on batches of programs, on the device: edits, splices, fresh programs.

Programs are canonical token rows ``[..., L]``: commands 1..8 up to the program's length,
EOS (0) after it. Every operator here maps canonical rows to canonical rows of the same width,
so a child is always a valid program of at most ``L`` tokens; none loops over programs and none
synchronises with the host.

An *edit* of a program is up to E point edits, each ``(position, kind, token)``:

- ``SUBSTITUTE``: the token at ``position`` becomes ``token``;
- ``INSERT``: ``token`` is inserted before ``position`` (a full program drops its last token);
- ``DELETE``: the token at ``position`` is removed.

Positions index the *parent*, so an edit never moves the place another one refers to; edits at
one position act on consecutive tokens (``apply_edits``), so a few of them rewrite a window. Random mutation
(``random_edits``) and the learned edit policy (``agents.policy.editor``) write edits in this one
format, which is what lets the policy imitate edits that random mutation found.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from synthenv.language import EOS, VOCAB_SIZE

from . import rows
from .rows import MAX_NATIVE_EDITS, canonical, program_lengths

SUBSTITUTE, INSERT, DELETE = range(3)
NUM_KINDS = 3
NUM_COMMANDS = VOCAB_SIZE - 1  # tokens 1..8


def member_uniform(generators: list[torch.Generator], shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """``[S, *shape]`` float32 uniform in [0, 1), member s drawn from ``generators[s]`` only."""
    out = torch.empty((len(generators), *shape), dtype=torch.float32, device=device)
    for row, generator in zip(out, generators):  # drawn in place: the same numbers as a stack, one copy fewer
        torch.rand(shape, generator=generator, device=device, out=row)
    return out


def member_commands(generators: list[torch.Generator], shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """``[S, *shape]`` int64 tokens uniform over the eight commands (1..8)."""
    out = torch.empty((len(generators), *shape), dtype=torch.int64, device=device)
    for row, generator in zip(out, generators):
        torch.randint(1, VOCAB_SIZE, shape, generator=generator, device=device, out=row)
    return out


def random_programs(generators: list[torch.Generator], shape: tuple[int, ...], max_len: int, longest: int,
                    device: torch.device) -> torch.Tensor:
    """``[S, *shape, L]`` uniform random programs with lengths uniform in ``[1, longest]``.

    >>> gens = [torch.Generator().manual_seed(0)]
    >>> programs = random_programs(gens, (4,), max_len=6, longest=3, device=torch.device("cpu"))
    >>> tuple(programs.shape), bool((program_lengths(programs) <= 3).all())
    ((1, 4, 6), True)
    """
    longest = max(1, min(longest, max_len))
    lengths = 1 + (member_uniform(generators, shape, device) * longest).long()  # [S, *shape]
    tokens = member_commands(generators, (*shape, longest), device)  # only the columns a program can reach
    tokens = torch.where(torch.arange(longest, device=device) < lengths[..., None], tokens, EOS)
    return torch.nn.functional.pad(tokens, (0, max_len - longest), value=EOS)


@dataclass(frozen=True)
class Edits:
    """Up to E point edits per program, for programs ``[..., L]`` (see the module docstring).

    Attributes:
        positions: ``[..., E]`` int64, where in the parent (0 .. its length).
        kinds: ``[..., E]`` int64, ``SUBSTITUTE``, ``INSERT`` or ``DELETE``.
        tokens: ``[..., E]`` int64 commands 1..8 (ignored by ``DELETE``).
        active: ``[..., E]`` bool; inactive edits change nothing.
    """

    positions: torch.Tensor
    kinds: torch.Tensor
    tokens: torch.Tensor
    active: torch.Tensor

    @property
    def count(self) -> torch.Tensor:
        """``[...]`` int64 active edits per program."""
        return self.active.sum(-1)


def random_edits(generators: list[torch.Generator], parents: torch.Tensor, max_edits: int) -> Edits:
    """Uniform point edits of ``parents [S, N, L]``: 1 .. ``max_edits`` per program (uniform),
    each a substitution, insertion or deletion (uniform; an empty program can only grow) at a
    uniform position, writing a uniform command.

    >>> gens = [torch.Generator().manual_seed(1)]
    >>> parents = torch.tensor([[[3, 3, 7, 0]]])
    >>> children = apply_edits(parents, random_edits(gens, parents, max_edits=2))
    >>> bool((children != parents).any()), tuple(children.shape)
    (True, (1, 1, 4))
    """
    s, n, length = parents.shape
    device = parents.device
    draws = member_uniform(generators, (n, max_edits, 4), device)  # count, kind, position, token
    lengths = program_lengths(parents)[..., None]  # [S, N, 1]
    count = 1 + (draws[..., 0, 0] * max_edits).long()  # [S, N]
    kinds = (draws[..., 1] * NUM_KINDS).long()  # [S, N, E]
    kinds = torch.where(lengths == 0, INSERT, kinds)  # nothing to substitute or delete
    room = lengths + ((kinds == INSERT) & (lengths < length)).long()  # appending needs a free slot
    positions = (draws[..., 2] * room).long()
    tokens = 1 + (draws[..., 3] * NUM_COMMANDS).long()
    active = torch.arange(max_edits, device=device) < count[..., None]
    return Edits(positions, kinds, tokens, active)


def apply_edits(parents: torch.Tensor, edits: Edits, impl: str = "auto") -> torch.Tensor:
    """The children: each parent ``[..., L]`` with its edits applied (see the module docstring).

    ``impl``: ``"torch"`` (batched tensor ops, any device), ``"native"`` (``variation.c``, CPU
    tensors) or ``"auto"`` (native on the CPU when it builds); the results are identical.

    Edits act in ascending position order with a read cursor over the parent: the parent is
    copied up to the edit's position (or the cursor, if already past it), a substitution or
    insertion writes its command, and a substitution or deletion then consumes the next parent
    token. So two substitutions at one position rewrite a window of two tokens. One gather and
    O(E) comparisons per token, whatever the edits: output position t reads the parent at
    ``t + offset``, and the offset changes only after each edit.
    """
    rows.check_impl(impl)
    lib = rows.native(parents, edits.positions) if impl != "torch" else None
    if impl == "native" and lib is None:
        raise RuntimeError("impl='native' needs CPU tensors and a working C compiler; use impl='torch'")
    if lib is not None and edits.positions.shape[-1] <= MAX_NATIVE_EDITS:
        return _apply_edits_native(lib, parents, edits)
    length = parents.shape[-1]
    order = torch.where(edits.active, edits.positions, length + 1).argsort(dim=-1, stable=True)
    pick = lambda x: x.gather(-1, order)  # noqa: E731  [..., E] in ascending position order
    positions, kinds, tokens, active = pick(edits.positions), pick(edits.kinds), pick(edits.tokens), pick(edits.active)
    lengths = program_lengths(parents)  # [...]
    t = torch.arange(length, device=parents.device)
    cursor = torch.zeros_like(lengths)  # parent read position
    out = torch.zeros_like(lengths)  # output write position
    source = t.expand_as(parents)  # [..., L] the parent position each output position reads
    written = []
    for e in range(positions.shape[-1]):
        act = active[..., e]
        read = torch.where(act, torch.maximum(cursor, positions[..., e]), cursor)  # where the edit acts
        emit = act & (kinds[..., e] != DELETE)
        consume = act & (kinds[..., e] != INSERT) & (read < lengths)
        at = out + read - cursor  # output position of the edit's command (if it writes one)
        written.append((at, emit, tokens[..., e]))
        cursor = read + consume.long()
        out = at + emit.long()
        source = torch.where(t >= out[..., None], t + (cursor - out)[..., None], source)  # copying resumes at out
    children = parents.gather(-1, source.clamp(max=length - 1))
    children = torch.where(source < lengths[..., None], children, EOS)  # past the parent's end
    for at, emit, token in written:
        children = torch.where((t == at[..., None]) & emit[..., None], token[..., None], children)
    return children


def inverse_edits(parents: torch.Tensor, edits: Edits) -> Edits:
    """The edits of the children ``apply_edits(parents, edits)`` that give the ``parents [..., L]`` back, in the
    same format (positions index the child): a substitution undoes a substitution, a deletion an insertion, an
    insertion (of the parent's token) a deletion. ``apply_edits(children, inverse_edits(parents, edits))``
    equals ``parents`` unless an insertion into a full program dropped its last token.

    >>> parents = torch.tensor([[3, 4, 5, 0]])
    >>> edits = Edits(torch.tensor([[1, 2]]), torch.tensor([[DELETE, SUBSTITUTE]]), torch.tensor([[1, 8]]),
    ...               torch.tensor([[True, True]]))
    >>> children = apply_edits(parents, edits)
    >>> children.tolist(), apply_edits(children, inverse_edits(parents, edits)).tolist()
    ([[3, 8, 0, 0]], [[3, 4, 5, 0]])
    """
    length = parents.shape[-1]
    order = torch.where(edits.active, edits.positions, length + 1).argsort(dim=-1, stable=True)
    pick = lambda x: x.gather(-1, order)  # noqa: E731  [..., E] in ascending position order (as apply_edits)
    positions, kinds, active = pick(edits.positions), pick(edits.kinds), pick(edits.active)
    lengths = program_lengths(parents)
    cursor, out = torch.zeros_like(lengths), torch.zeros_like(lengths)  # parent read, child write positions
    undo = []
    for e in range(positions.shape[-1]):
        act = active[..., e]
        read = torch.where(act, torch.maximum(cursor, positions[..., e]), cursor)
        emit = act & (kinds[..., e] != DELETE)
        consume = act & (kinds[..., e] != INSERT) & (read < lengths)
        at = out + read - cursor  # the child position of what the edit wrote, or where the deleted token was
        old = parents.gather(-1, read.clamp(max=length - 1)[..., None])[..., 0]  # the token it consumed
        kind = torch.where(emit & consume, SUBSTITUTE, torch.where(emit, DELETE, INSERT))
        undo.append((at, kind, torch.where(kind == DELETE, 1, old), emit | consume))
        cursor, out = read + consume.long(), at + emit.long()
    return Edits(*(torch.stack(part, dim=-1) for part in zip(*undo)))


def _apply_edits_native(lib, parents: torch.Tensor, edits: Edits) -> torch.Tensor:
    length, num_edits = parents.shape[-1], edits.positions.shape[-1]
    rows = [x.reshape(-1, x.shape[-1]).to(dtype).contiguous() for x, dtype in (
        (parents, torch.int64), (edits.positions, torch.int64), (edits.kinds, torch.int64),
        (edits.tokens, torch.int64), (edits.active, torch.uint8))]
    out = torch.empty_like(rows[0])
    lib.apply_edits(rows[0].data_ptr(), rows[0].shape[0], length, *(r.data_ptr() for r in rows[1:]),
                             num_edits, out.data_ptr(), 0)
    return out.view(parents.shape)


def splice(generators: list[torch.Generator], firsts: torch.Tensor, seconds: torch.Tensor,
           impl: str = "auto") -> torch.Tensor:
    """Crossover of variable-length programs: ``first[:i] + second[j:j+w] + first[m:]``.

    Cut points are uniform: ``i <= m`` within the first program, ``j`` and ``w`` within the
    second; the child is cut at ``L`` tokens. With ``w = 0`` it is a deletion of
    ``first[i:m]``; with ``i = m`` an insertion of a piece of the second. ``[S, N, L]`` each.

    >>> gens = [torch.Generator().manual_seed(0)]
    >>> child = splice(gens, torch.tensor([[[1, 1, 1, 0, 0]]]), torch.tensor([[[2, 2, 0, 0, 0]]]))
    >>> set(child.flatten().tolist()) <= {0, 1, 2}
    True
    """
    rows.check_impl(impl)
    draws = member_uniform(generators, (firsts.shape[1], 4), firsts.device)
    len_a, len_b = program_lengths(firsts), program_lengths(seconds)  # [S, N]
    i = (draws[..., 0] * (len_a + 1)).long()
    m = i + (draws[..., 1] * (len_a - i + 1)).long()  # the first program resumes at m >= i
    j = (draws[..., 2] * (len_b + 1)).long()
    w = (draws[..., 3] * (len_b - j + 1)).long()
    return splice_at(firsts, seconds, torch.stack([i, m, j, w], dim=-1), impl)


def insert_pieces(generators: list[torch.Generator], firsts: torch.Tensor, pieces: torch.Tensor,
                  impl: str = "auto") -> torch.Tensor:
    """Each whole piece put into its program: ``first[:i] + piece + first[m:]``, ``i`` uniform in the first
    program and the window it replaces, ``m - i``, uniform from none to the piece's length (within the program).
    A balanced piece keeps a balanced program balanced. ``[S, N, L]`` each.

    >>> gens = [torch.Generator().manual_seed(0)]
    >>> insert_pieces(gens, torch.tensor([[[1, 1, 1, 0, 0, 0]]]), torch.tensor([[[7, 8, 0, 0, 0, 0]]])).tolist()
    [[[1, 7, 8, 0, 0, 0]]]
    """
    rows.check_impl(impl)
    draws = member_uniform(generators, (firsts.shape[1], 2), firsts.device)
    len_a, len_b = program_lengths(firsts), program_lengths(pieces)  # [S, N]
    i = (draws[..., 0] * (len_a + 1)).long()
    m = i + (draws[..., 1] * (torch.minimum(len_b, len_a - i) + 1)).long()
    return splice_at(firsts, pieces, torch.stack([i, m, torch.zeros_like(i), len_b], dim=-1), impl)


def splice_at(firsts: torch.Tensor, seconds: torch.Tensor, cuts: torch.Tensor, impl: str = "auto") -> torch.Tensor:
    """``first[:i] + second[j:j+w] + first[m:]`` cut at ``L`` tokens, for programs ``[S, N, L]`` and their cut
    points ``cuts [S, N, 4]`` = ``(i, m, j, w)`` with ``i <= m <= len(first)``, ``j + w <= len(second)``."""
    rows.check_impl(impl)
    length = firsts.shape[-1]
    lib = rows.native(firsts) if impl != "torch" else None
    if impl == "native" and lib is None:
        raise RuntimeError("impl='native' needs CPU tensors and a working C compiler; use impl='torch'")
    if lib is not None:
        a, b = firsts.reshape(-1, length).contiguous(), seconds.reshape(-1, length).contiguous()
        cuts = cuts.reshape(-1, 4).contiguous()
        out = torch.empty_like(a)
        lib.splice(a.data_ptr(), b.data_ptr(), cuts.data_ptr(), a.shape[0], length, out.data_ptr(), 0)
        return out.view(firsts.shape)
    t = torch.arange(length, device=firsts.device)
    i, m, j, w = (cuts[..., k, None] for k in range(4))
    from_a = torch.where(t < i, t, m + t - i - w)  # [S, N, L] source position in the first program
    a = torch.where(from_a < length, firsts.gather(-1, from_a.clamp(0, length - 1)), EOS)
    b = seconds.gather(-1, (j + t - i).clamp(0, length - 1))
    child = torch.where((t >= i) & (t < i + w), b, a)
    total = i + w + program_lengths(firsts)[..., None] - m
    return canonical(torch.where(t < total, child, EOS))
