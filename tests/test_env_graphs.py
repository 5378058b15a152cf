"""CUDA graphs for program mode's step (``EnvConfig.cuda_graphs``): clear errors where they cannot
work, and, on a GPU, step-by-step equality with eager steps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from synthenv import workloads
from synthenv.engines.cuda import cupy_available
from synthenv.env import EnvConfig, SynthVecEnv


def test_cuda_graphs_are_off_by_default():
    assert EnvConfig().cuda_graphs is False


def test_cuda_graphs_need_program_mode():
    with pytest.raises(ValueError, match="cuda_graphs=True applies to program mode only"):
        EnvConfig(mode="token", cuda_graphs=True)
    with pytest.raises(TypeError, match="cuda_graphs must be True or False"):
        EnvConfig(cuda_graphs="yes")


def test_cuda_graphs_need_a_cuda_device():
    with pytest.raises(ValueError, match="needs a CUDA device, got device='cpu'"):
        SynthVecEnv("reverse", num_envs=2, engine="torch", cuda_graphs=True)


def test_cuda_graphs_name_the_engine_and_backend_they_need(monkeypatch):
    """Checked without a GPU by handing check_graphable a CUDA device."""
    from synthenv.env.graphs import check_graphable
    from synthenv.pipeline import Evaluator

    cuda = torch.device("cuda", 0)
    with pytest.raises(ValueError, match="needs the cuda engine.*got engine='torch'"):
        check_graphable(EnvConfig(), Evaluator.create("traditional", "torch"), cuda)
    hybrid = Evaluator.create("hybrid", "torch")
    on_cuda = SimpleNamespace(engine=SimpleNamespace(name="cuda"), audit=hybrid.audit, backend=hybrid.backend)
    with pytest.raises(ValueError, match="cannot capture backend 'hybrid'"):
        check_graphable(EnvConfig(), on_cuda, cuda)


needs_gpu = pytest.mark.skipif(not (torch.cuda.is_available() and cupy_available()),
                               reason="needs an NVIDIA GPU and CuPy")


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("backend", ["traditional", "neural"])
def test_graphed_steps_equal_eager_steps(backend):
    options = dict(num_envs=512, max_len=40, device="cuda", engine="cuda", backend=backend, iterations=2)
    eager, graphed = SynthVecEnv("reverse", **options), SynthVecEnv("reverse", cuda_graphs=True, **options)
    for env in (eager, graphed):
        env.reset(seed=0)
    for step in range(6):
        actions = workloads.make("near" if step % 2 else "uniform", 512, 40, seed=step, device="cuda")
        a, b = eager.step(actions), graphed.step(actions)
        for name in a[0]:
            assert torch.equal(a[0][name], b[0][name]), (step, name)
        for x, y in zip(a[1:4], b[1:4]):
            assert torch.equal(x, y), step
        for name in ("solved", "program_status", "_final_obs"):
            assert torch.equal(a[4][name], b[4][name]), (step, name)
        for name in a[4]["final_obs"]:
            assert torch.equal(a[4]["final_obs"][name], b[4]["final_obs"][name]), (step, name)
    assert graphed._transition.graph is not None
