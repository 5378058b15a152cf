"""``Feedback``: what the env reports about one batch of programs, as the agents read it.

The trainer turns one program-mode step into a ``Feedback`` for the S members x B programs it
holds: rewards, solved flags and the per-case results the env's observation carries (which
cases passed, how each ended, what was printed). ``features`` condenses the per-case results
into F numbers per program that do not depend on the task's number of cases, so that a policy
can condition its edits on them (``agents.policy.editor``).
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

import torch

from synthenv import native_build
from synthenv.language import Status

from ..search.rows import check_impl, program_lengths, row_hashes

FEATURES = ("reward", "passed", "failed", "too_short", "too_long", "wrong_values", "case_reward", "length",
            "positions_right")
"""Names of the ``features`` columns, in order."""
NUM_FEATURES = len(FEATURES)  # F


@dataclass(frozen=True)
class Feedback:
    """One batch of programs and their results, ``[S, B, ...]`` for S members of B programs.

    Attributes:
        tokens: ``[S, B, L]`` int64 programs (EOS-padded).
        rewards: ``[S, B]`` float32 PQT reward (1.0 = solved).
        solved: ``[S, B]`` bool.
        program_status: ``[S, B]`` int8 ``Status`` of each program.
        case_passed: ``[S, B, K]`` bool, the case printed exactly its expected output.
        case_status: ``[S, B, K]`` int8 ``Status`` per case.
        features: ``[S, B, F]`` float32 summary of the per-case results (``FEATURES``); computed only
            when the algorithm's ``uses_features`` is true at that step (F = 0 otherwise).
        hashes: ``[S, B]`` int64 row hashes of the programs (``rows.row_hashes``), computed at the first
            read and kept.
    """

    tokens: torch.Tensor
    rewards: torch.Tensor
    solved: torch.Tensor
    program_status: torch.Tensor
    case_passed: torch.Tensor
    case_status: torch.Tensor
    features: torch.Tensor

    @functools.cached_property
    def hashes(self) -> torch.Tensor:
        return row_hashes(self.tokens)


def feedback_features(obs: dict[str, torch.Tensor], expected: torch.Tensor, expected_lengths: torch.Tensor,
                      max_len: int, impl: str = "auto") -> torch.Tensor:
    """``[N, F]`` float32 features from a program-mode observation of N programs.

    Args:
        obs: the env's observation fields ``program [N, L]``, ``reward [N]``, ``case_passed``,
            ``case_status``, ``case_rewards``, ``output_lengths`` ``[N, K]`` and ``outputs [N, K, O]``.
        expected: ``[K, M]`` the task's expected outputs (zero-padded), M <= O.
        expected_lengths: ``[K]``.
        max_len: L, to scale the program length to [0, 1].
        impl: ``"torch"`` (tensor ops, any device), ``"native"`` (``feedback.c``, one loop per
            program, CPU tensors as the env makes them) or ``"auto"`` (native when it can);
            equal up to float rounding.

    >>> obs = {"program": torch.tensor([[8, 7, 0]]), "reward": torch.tensor([1.0]),
    ...        "case_passed": torch.tensor([[1]], dtype=torch.int8), "case_status": torch.tensor([[0]]),
    ...        "case_rewards": torch.tensor([[4.0]]), "output_lengths": torch.tensor([[1]]),
    ...        "outputs": torch.tensor([[[5]]])}
    >>> [round(v, 3) for v in feedback_features(obs, torch.tensor([[5]]), torch.tensor([1]), max_len=3)[0].tolist()]
    [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.667, 1.0]
    """
    check_impl(impl)
    lib = _native(obs, expected) if impl != "torch" else None
    if impl == "native" and lib is None:
        raise RuntimeError("impl='native' needs CPU tensors of the env's dtypes and a working C compiler; "
                           "use impl='torch'")
    if lib is not None:
        return _features_native(lib, obs, expected, expected_lengths, max_len)
    status = obs["case_status"]
    ok = status == Status.OK  # [N, K]
    failed = ~ok.all(1)  # [N]
    lengths, wanted = obs["output_lengths"].long(), expected_lengths.long()[None]  # [N, K], [1, K]
    passed = obs["case_passed"].bool()
    num_cases = status.shape[1]
    width = expected.shape[1]
    produced = obs["outputs"][..., :width]  # [N, K, M]
    t = torch.arange(width, device=expected.device)
    # a failed or aborted case has no output (the Execution contract), so printed positions are ok ones
    right = (produced == expected[None].to(produced.dtype)) & (t < torch.minimum(lengths, wanted)[..., None])
    positions = wanted.sum().clamp(min=1)  # expected positions over all cases

    def rate(mask: torch.Tensor) -> torch.Tensor:
        return (mask & ok).float().sum(1) / num_cases

    return torch.stack([
        obs["reward"].float(),
        passed.float().mean(1),
        failed.float(),
        rate(lengths < wanted),
        rate(lengths > wanted),
        rate((lengths == wanted) & ~passed),
        obs["case_rewards"].float().mean(1) / 4.0,
        program_lengths(obs["program"]).float() / max_len,
        right.sum((1, 2)).float() / positions,
    ], dim=1)


_DTYPES = {"reward": torch.float32, "case_passed": torch.int8, "case_status": torch.int8,
           "case_rewards": torch.float32, "output_lengths": torch.int32, "outputs": torch.int32, "program": torch.int64}
"""The dtypes of the program-mode observation fields the C path reads (``synthenv.env.program_mode``)."""


LIBRARY = native_build.register(__name__, ["feedback.c"], beside=__file__, exports=("synthenv_feedback_features",))
"""``features`` in C (``agents/run/feedback.c``)."""


@functools.lru_cache(maxsize=1)
def _library():
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    return LIBRARY.bind("synthenv_feedback_features", [i64, i64, i64, i64, i64, *[p] * 9, i64, p, i32], None)


def _native(obs: dict[str, torch.Tensor], expected: torch.Tensor):
    """The C function when every field is a CPU tensor of the env's dtype and the library builds, else None."""
    tensors = [obs[name] for name in _DTYPES] + [expected]
    if any(t.device.type != "cpu" for t in tensors) or any(obs[n].dtype != d for n, d in _DTYPES.items()):
        return None
    if obs["outputs"].shape[-1] < expected.shape[-1] or not LIBRARY.is_available():
        return None
    return _library()


def _features_native(lib, obs: dict[str, torch.Tensor], expected: torch.Tensor, expected_lengths: torch.Tensor,
                     max_len: int) -> torch.Tensor:
    fields = {name: obs[name].contiguous() for name in _DTYPES}
    n, k, o = fields["outputs"].shape
    expected = expected.to(torch.int64).contiguous()
    wanted = expected_lengths.to(torch.int64).contiguous()
    out = torch.empty((n, NUM_FEATURES), dtype=torch.float32)
    lib(n, k, o, expected.shape[1], fields["program"].shape[1], fields["reward"].data_ptr(),
        fields["case_passed"].data_ptr(), fields["case_status"].data_ptr(), fields["case_rewards"].data_ptr(),
        fields["output_lengths"].data_ptr(), fields["outputs"].data_ptr(), fields["program"].data_ptr(),
        expected.data_ptr(), wanted.data_ptr(), max_len, out.data_ptr(), 0)
    return out
