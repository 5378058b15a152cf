"""Program mode's step as a CUDA graph: captured once, replayed every step (``EnvConfig.cuda_graphs``).

A program-mode transition on a GPU is a few dozen small kernels (the compiler's passes, the
engine, the scorer) whose launch cost dominates at moderate batch sizes; a CUDA graph replays
them with one launch. It needs what synthenv's GPU path already guarantees: static shapes and
no host sync inside the step (tests/test_sync.py). Capture happens on the first step, after a
few eager warm-up runs on the capture stream (they build the lookup tables, the case tensors,
the compiled kernel and the engine's tape, so nothing is created while capturing); every step
then copies the actions into the graph's static input, replays, and clones the outputs (the
graph overwrites its output buffers on the next replay).

Only for the ``cuda`` engine and backends without an audit (the hybrid's audit syncs by
design), in program mode; off by default until tests/test_env_graphs.py has run on a GPU
(``synthenv doctor --gpu-suite`` runs it: graph vs eager, step by step).
"""

from __future__ import annotations

import torch

from synthenv.engines import cuda as cuda_engine

State = dict[str, torch.Tensor]


class GraphedTransition:
    """``dynamics.transition`` captured as a CUDA graph (see the module docstring).

    Args:
        dynamics: a ``ProgramDynamics`` whose evaluator runs on the ``cuda`` engine.
        device: the env's CUDA device.
        warmup: eager runs on the capture stream before capturing.
    """

    def __init__(self, dynamics, device: torch.device, warmup: int = 3):
        self.dynamics = dynamics
        self.device = device
        self.warmup = warmup
        self.graph: torch.cuda.CUDAGraph | None = None
        self._inputs: State = {}
        self._outputs = None
        self._keep: list[torch.Tensor] = []  # tensors the graph reads that no one else may free

    def __call__(self, state: State, actions: torch.Tensor):
        """The transition's ``(state, rewards, terminated, info)``, from a replay of the graph."""
        if self.graph is None:
            self._capture(state, actions)
        self._inputs["actions"].copy_(actions)
        self._inputs["elapsed"].copy_(state["elapsed"])
        self.graph.replay()
        new, rewards, terminated, info = self._outputs
        return ({k: v.clone() for k, v in new.items()}, rewards.clone(), terminated.clone(),
                {k: v.clone() for k, v in info.items()})

    def _run(self):
        return self.dynamics.transition({"elapsed": self._inputs["elapsed"]}, self._inputs["actions"])

    def _capture(self, state: State, actions: torch.Tensor) -> None:
        self._inputs = {"actions": actions.clone(), "elapsed": state["elapsed"].clone()}
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(self.warmup):
                self._run()
        torch.cuda.current_stream(self.device).wait_stream(stream)
        task = self.dynamics.task
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        # The engine's tape for the capture stream, made in the warm-up: the graph keeps its address.
        self._keep.append(cuda_engine.tape_for(index, stream.cuda_stream, task.base <= 256, task.max_steps)[0])
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=stream):
            self._outputs = self._run()


def check_graphable(config, evaluator, device: torch.device) -> None:
    """Raise a clear error unless ``cuda_graphs=True`` can work for this env."""
    if device.type != "cuda":
        raise ValueError(f"cuda_graphs=True captures the step as a CUDA graph and needs a CUDA device, got "
                         f"device={str(device)!r}; drop cuda_graphs or use device='cuda'")
    engine = getattr(evaluator.engine, "name", None)
    if engine != "cuda":
        raise ValueError(f"cuda_graphs=True needs the cuda engine (the torch engine's loop length depends on the "
                         f"data), got engine={engine!r}; use engine='cuda' or 'auto' with CuPy installed")
    if evaluator.audit is not None:
        raise ValueError(f"cuda_graphs=True cannot capture backend {getattr(evaluator.backend, 'name', '?')!r}: its "
                         "audit reads results on the host every step; use backend='traditional' or 'neural'")
