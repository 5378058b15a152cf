"""No host sync on the step path, proven on the CPU (synthenv.testing.syncguard).

The guard fails on every op that would make the host wait for a GPU; the env's step in program
and token mode, for every IR backend on its GPU path (torch compile passes, static shapes, the
torch engine and the torch scorer), runs under it with only the documented sync points
(synthenv.syncpoints) allowed. On a machine with a GPU the same steps also run on CUDA under
``torch.cuda.set_sync_debug_mode("error")``.
"""

from __future__ import annotations

import pytest
import torch

from synthenv import engines, syncpoints, tasks
from synthenv.compilers.hybrid import HybridCompiler
from synthenv.compilers.neural import NeuralCompiler
from synthenv.compilers.traditional import TraditionalCompiler
from synthenv.env import SynthVecEnv
from synthenv.language import encode_batch
from synthenv.pipeline import Evaluator
from synthenv.testing.syncguard import HostSyncError, count_host_syncs, forbid_host_sync

X = torch.arange(6)
MASK = X > 2

FORBIDDEN = {
    "item": lambda: X.sum().item(),
    "bool": lambda: bool(MASK.any()),
    "int": lambda: int(X.max()),
    "if-tensor": lambda: 1 if MASK.any() else 0,
    "equal": lambda: torch.equal(X, X),
    "nonzero": lambda: MASK.nonzero(),
    "where-one-arg": lambda: torch.where(MASK),
    "masked_select": lambda: X.masked_select(MASK),
    "unique": lambda: X.unique(),
    "bincount": lambda: X.bincount(),
    "bool-mask-index": lambda: X[MASK],
    "bool-mask-assign": lambda: X.clone().index_put_((MASK,), torch.zeros((), dtype=X.dtype)),
    "tensor-from-list": lambda: torch.tensor([1, 2, 3]),
    "tensor-from-scalar": lambda: torch.tensor(3, dtype=torch.int8),
    "list-index": lambda: X[[0, 1]],
    "repeat_interleave": lambda: torch.repeat_interleave(X, X),
    "tolist": lambda: X.tolist(),
    "cpu": lambda: X.cpu(),
    "numpy": lambda: X.numpy(),
    "arange-to-tensor-end": lambda: torch.arange(X.max()),
}
FINE = {
    "where": lambda: torch.where(MASK, X, 0),
    "arithmetic": lambda: (X * 2 + 1).remainder(3),
    "gather": lambda: X.gather(0, torch.arange(3)),
    "long-index": lambda: X[MASK.long()],
    "repeat_interleave-sized": lambda: torch.repeat_interleave(X, X, output_size=15),
    "nonzero_static": lambda: torch.nonzero_static(MASK, size=6),
    "factories": lambda: (torch.zeros(3), torch.full((2,), 7), torch.arange(5), torch.rand(2)),
    "reductions": lambda: (X.sum(), X.amax(), MASK.any(), X.cumsum(0), X.argsort()),
}


@pytest.mark.parametrize("name", list(FORBIDDEN))
def test_the_guard_catches_every_kind_of_host_sync(name):
    with pytest.raises(HostSyncError, match="host sync on the step path"):
        with forbid_host_sync():
            FORBIDDEN[name]()


@pytest.mark.parametrize("name", list(FINE))
def test_the_guard_lets_device_side_ops_through(name):
    with forbid_host_sync():
        FINE[name]()


def test_counting_mode_records_every_hit_with_its_place():
    with forbid_host_sync(raise_on_hit=False) as guard:
        X.sum().item()
        X[MASK]
        torch.where(MASK, X, 0)
    assert guard.count == 2
    assert [h.op for h in guard.hits] == ["aten._local_scalar_dense.default", "aten.index.Tensor (boolean mask)"]
    assert all("test_sync.py" in h.where for h in guard.hits)
    assert "test_sync.py" in guard.report()


def test_documented_sync_points_pass_only_when_allowed():
    with forbid_host_sync(allow=("logging",)) as guard:
        with syncpoints.sync_point("logging"):
            X.sum().item()
    assert guard.count == 0 and guard.allowed_count == 1 and guard.hits[0].sync_point == "logging"
    with pytest.raises(HostSyncError, match="inside sync point 'logging', which this check does not allow"):
        with forbid_host_sync(allow=("validate_actions",)):
            with syncpoints.sync_point("logging"):
                X.sum().item()
    with pytest.raises(ValueError, match="unknown sync points"):
        forbid_host_sync(allow=("not-a-sync-point",))
    with pytest.raises(ValueError, match="unknown sync point 'nope'"):
        syncpoints.sync_point("nope")


def test_the_guard_restores_tensor_methods():
    with forbid_host_sync(raise_on_hit=False):
        pass
    assert X.tolist() == [0, 1, 2, 3, 4, 5]


# ---- the env's step on the GPU path ----------------------------------------------------------

GPU_PATH_BACKENDS = {
    "traditional": lambda: TraditionalCompiler(impl="torch"),  # the data-parallel passes (native C off)
    "neural": lambda: NeuralCompiler(static_shapes=True),
    "hybrid": lambda: HybridCompiler(neural=NeuralCompiler(static_shapes=True),
                                     reference=TraditionalCompiler(impl="torch")),
}
ENGINE_CHECK = ("torch_engine_check",)  # lockstep's loop length is data-dependent (on a GPU: the cuda engine)


def gpu_path_env(backend: str, mode: str, device: str = "cpu", **options) -> SynthVecEnv:
    engine = engines.get("torch") if device == "cpu" else engines.get("cuda")
    evaluator = Evaluator(GPU_PATH_BACKENDS[backend](), engine, scorer="torch")
    env = SynthVecEnv("reverse", num_envs=16, mode=mode, max_len=20, device=device, evaluator=evaluator, **options)
    env.reset(seed=0)
    env.step(env.sample_actions())  # first step: lookup tables are built once per device
    return env


def steps(env: SynthVecEnv, count: int) -> None:
    for _ in range(count):
        env.step(env.sample_actions())


@pytest.mark.parametrize("backend", list(GPU_PATH_BACKENDS))
@pytest.mark.parametrize("mode", ["program", "token"])
def test_env_step_makes_no_host_sync(backend, mode):
    """0 host-sync ops per step outside the documented sync points (the torch engine's periodic
    check; the hybrid's audit subset), with validate_actions=False."""
    env = gpu_path_env(backend, mode, validate_actions=False)
    allow = ENGINE_CHECK + (("hybrid_audit",) if backend == "hybrid" else ())
    with forbid_host_sync(allow=allow) as guard:
        steps(env, 3 if mode == "program" else 25)  # token mode: programs end (max_len 20), get scored
    assert guard.count == 0
    assert {h.sync_point for h in guard.hits} <= set(allow)


def test_validate_actions_is_the_step_s_one_documented_sync():
    env = gpu_path_env("traditional", "program")  # validate_actions=True, the default
    with pytest.raises(HostSyncError, match="inside sync point 'validate_actions'"):
        with forbid_host_sync(allow=ENGINE_CHECK):
            steps(env, 1)
    with forbid_host_sync(allow=ENGINE_CHECK + ("validate_actions",)) as guard:
        steps(env, 2)
    assert sum(h.sync_point == "validate_actions" for h in guard.hits) == 2  # one per step


def test_the_hybrid_audit_syncs_only_inside_its_sync_point():
    """Over the hybrid's audit stage: its host reads (the subset's size, the counts) are all
    inside ``hybrid_audit``; everything else in the stage is sync-free."""
    hybrid = GPU_PATH_BACKENDS["hybrid"]()
    evaluator = Evaluator(hybrid, engines.get("torch"), scorer="torch")
    tokens = encode_batch([",[>,]+[,<.]", "+.", ",[.,]", "+[]"] * 8, 20)
    task = tasks.get("reverse")
    evaluator(tokens, task)
    guard = count_host_syncs(evaluator, tokens, task, allow=ENGINE_CHECK + ("hybrid_audit",))
    assert guard.count == 0
    assert any(h.sync_point == "hybrid_audit" for h in guard.hits)
    assert hybrid.audit.stats.steps == 2


def test_lazy_scoring_syncs_at_its_sync_point():
    env = gpu_path_env("traditional", "token", validate_actions=False, lazy_scoring=True)
    with pytest.raises(HostSyncError, match="lazy_scoring"):
        with forbid_host_sync(allow=ENGINE_CHECK):
            steps(env, 1)


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (sync_debug_mode)")


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("backend", list(GPU_PATH_BACKENDS))
@pytest.mark.parametrize("mode", ["program", "token"])
def test_env_step_makes_no_host_sync_on_a_gpu(backend, mode):
    """The cuda engine has no periodic check: only the hybrid's audit may sync, and
    torch.cuda.set_sync_debug_mode("error") agrees with the guard."""
    env = gpu_path_env(backend, mode, device="cuda", validate_actions=False)
    allow = ("hybrid_audit",) if backend == "hybrid" else ()
    with forbid_host_sync(allow=allow, cuda_debug=True) as guard:
        steps(env, 3 if mode == "program" else 25)
    assert guard.count == 0
