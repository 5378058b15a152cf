"""Program mode's transition: an action is N whole programs; one step compiles, runs and scores all N.

An episode is ``iterations`` rounds of write -> compile -> run -> test. The observation carries
the last program and its per-case feedback so that an agent can revise its own code. Autoreset
and truncation belong to ``SynthVecEnv.step``; this module only knows one round.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np
import torch
from gymnasium import spaces

from synthenv import native_build
from synthenv.language import VOCAB_SIZE, Status, canonical_programs
from synthenv.pipeline import Evaluator
from synthenv.tasks import Task

State = dict[str, torch.Tensor]


def _canonical(actions: torch.Tensor) -> torch.Tensor:
    """``canonical_programs``, in C for int64 CPU actions (one pass instead of several; the same values,
    tests/test_env_errors.py)."""
    if actions.device.type != "cpu" or actions.dtype != torch.int64 or not native_build.is_available():
        return canonical_programs(actions)
    rows = actions.contiguous()
    out = torch.empty_like(rows)
    _canonical_kernel()(rows.data_ptr(), rows.shape[0], rows.shape[1], out.data_ptr(), 0)
    return out


@functools.lru_cache(maxsize=1)
def _canonical_kernel():
    return native_build.bind("synthenv_canonical_programs", [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                                             ctypes.c_void_p, ctypes.c_int32], None)


class ProgramDynamics:
    """One round of program mode for N envs (pure: returns a new state, never mutates one).

    State (all ``[N, ...]`` tensors on the env's device): the observation fields below plus
    ``elapsed`` (owned by ``SynthVecEnv``: rounds played in the episode so far).
    """

    def __init__(self, task: Task, evaluator: Evaluator, num_envs: int, max_len: int, iterations: int,
                 device: torch.device):
        self.task, self.evaluator, self.device = task, evaluator, device
        self.num_envs, self.max_len = num_envs, max_len
        self.episode_limit = iterations
        self.num_outputs = max(1, task.max_output_length)  # O
        self.action_shape = (num_envs, max_len)
        # What an env that is not playing this step (NextStep's reset step, Disabled's ended env) runs instead
        # of its action: the empty program, which halts at once.
        self.idle_actions = torch.zeros(self.action_shape, dtype=torch.int64, device=device)  # [N, L]
        self.single_action_space = spaces.MultiDiscrete(np.full(max_len, VOCAB_SIZE, dtype=np.int64))
        k, o = task.num_cases, self.num_outputs
        self.single_observation_space = spaces.Dict({
            "program": spaces.MultiDiscrete(np.full(max_len, VOCAB_SIZE, dtype=np.int64)),
            "reward": spaces.Box(-np.inf, 1.0, (), np.float32),
            "case_passed": spaces.MultiBinary(k),
            "case_status": spaces.Box(0, max(Status), (k,), np.int8),
            "case_rewards": spaces.Box(-np.inf, 4.0, (k,), np.float32),
            "outputs": spaces.Box(0, task.base - 1, (k, o), np.int32),
            "output_lengths": spaces.Box(0, task.max_steps, (k,), np.int32),
            "round": spaces.Box(0, iterations, (), np.int64),
        })

    def initial_state(self) -> State:
        """The state of a freshly reset env: no program yet, all feedback zero."""
        n, k, o, dev = self.num_envs, self.task.num_cases, self.num_outputs, self.device
        return {
            "program": torch.zeros((n, self.max_len), dtype=torch.int64, device=dev),
            "reward": torch.zeros(n, dtype=torch.float32, device=dev),
            "case_passed": torch.zeros((n, k), dtype=torch.int8, device=dev),
            "case_status": torch.zeros((n, k), dtype=torch.int8, device=dev),
            "case_rewards": torch.zeros((n, k), dtype=torch.float32, device=dev),
            "outputs": torch.zeros((n, k, o), dtype=torch.int32, device=dev),
            "output_lengths": torch.zeros((n, k), dtype=torch.int32, device=dev),
            "elapsed": torch.zeros(n, dtype=torch.int64, device=dev),
        }

    def observe(self, state: State) -> dict[str, torch.Tensor]:
        """The observation dict (tensors shared with the state: treat them as read-only)."""
        obs = {name: state[name] for name in self.single_observation_space.spaces if name != "round"}
        obs["round"] = state["elapsed"]
        return obs

    def reset_info(self, state: State) -> dict[str, torch.Tensor]:
        return {}

    def transition(self, state: State, actions: torch.Tensor) -> tuple[State, torch.Tensor, torch.Tensor, dict]:
        """Compile, run and score ``actions [N, L]``; returns (state, rewards, terminated, info).

        A token id outside ``[0, VOCAB_SIZE)`` ends its program like EOS (``canonical_programs``)."""
        program = _canonical(actions)  # [N, L] EOS-padded after the end
        evaluation = self.evaluator.evaluate(program, self.task, self.num_outputs)
        execution, scores = evaluation.execution, evaluation.scores
        rewards = scores.rewards.float()  # [N] float64 scores, rounded once for RL (float32 everywhere)
        new = {
            "program": program,
            "reward": rewards,
            "case_passed": scores.case_correct.to(torch.int8),
            "case_status": execution.status.to(torch.int8),
            "case_rewards": scores.case_rewards.float(),
            "outputs": execution.outputs.to(torch.int32),
            "output_lengths": execution.output_lengths.to(torch.int32),
            "elapsed": state["elapsed"],
        }
        info = {"solved": scores.solved, "program_status": scores.program_status}
        return new, rewards, scores.solved, info

    def sample_actions(self, generator: torch.Generator, allow_eos: bool) -> torch.Tensor:
        """``[N, L]`` int64 uniform random programs (EOS included only if ``allow_eos``)."""
        low = 0 if allow_eos else 1
        return torch.randint(low, VOCAB_SIZE, self.action_shape, generator=generator, device=self.device)
