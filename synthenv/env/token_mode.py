"""Token mode's transition: an action is one token per env; a program is scored when it ends.

A program ends when its env writes EOS or reaches ``max_len`` tokens. Envs end independently
and without host synchronisation: every step compiles, runs and scores the whole batch, with
the programs that have not ended replaced by empty ones (they halt at once), and rewards
masked to the envs that ended.

Syntax masks (``syntax_masks``) let a masked agent write only bracket-balanced programs.
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from synthenv.language import CLOSE, EOS, OPEN, RIGHT, VOCAB_SIZE, Status
from synthenv.pipeline import Evaluator
from synthenv.syncpoints import sync_point
from synthenv.tasks import Task

State = dict[str, torch.Tensor]


def syntax_masks(position: torch.Tensor, depth: torch.Tensor, max_len: int, allow_eos: bool = True) -> torch.Tensor:
    """``[N, V]`` bool: the tokens that keep a program closable within ``max_len`` tokens.

    With ``r = max_len - position - 1`` slots left after this token and ``depth`` open brackets:
    ``]`` needs depth > 0; ``[`` needs depth + 1 <= r; any other command needs depth <= r;
    EOS needs depth == 0. So ``]`` is never written at depth 0, EOS never ends a program with
    open loops, and once the open loops fill the remaining slots only ``]`` is legal.

    >>> syntax_masks(torch.tensor([0, 2]), torch.tensor([0, 1]), max_len=3).int().tolist()
    [[1, 1, 1, 1, 1, 1, 0, 1, 1], [0, 0, 0, 0, 0, 0, 1, 0, 0]]
    """
    remaining = (max_len - 1 - position)[:, None]  # [N, 1] slots after this token
    depth = depth[:, None]  # [N, 1]
    token = torch.arange(VOCAB_SIZE, device=position.device)[None, :]  # [1, V]
    command_ok = depth <= remaining  # [N, 1]
    masks = torch.where(token == OPEN, depth + 1 <= remaining, command_ok)  # [N, V]
    masks = torch.where(token == CLOSE, depth > 0, masks)
    masks = torch.where(token == EOS, (depth == 0) & allow_eos, masks)
    return masks


class TokenDynamics:
    """One token step of token mode for N envs (pure: returns a new state, never mutates one).

    State: ``program [N, L]``, ``position [N]`` (tokens written), ``depth [N]`` (open brackets,
    an unmatched ``]`` at depth 0 is a no-op as in PQT) and ``elapsed [N]`` (owned by the env).
    """

    def __init__(self, task: Task, evaluator: Evaluator, num_envs: int, max_len: int, allow_eos: bool,
                 lazy_scoring: bool, device: torch.device):
        self.task, self.evaluator, self.device = task, evaluator, device
        self.num_envs, self.max_len, self.allow_eos = num_envs, max_len, allow_eos
        self.lazy_scoring = lazy_scoring
        self.episode_limit = max_len  # a program ends (terminated) at max_len: truncation never fires
        self.num_outputs = max(1, task.max_output_length)
        self.action_shape = (num_envs,)
        # What an env that is not playing this step (NextStep's reset step, Disabled's ended env) writes instead
        # of its action, from a fresh state: '>', which ends no program (max_len > 1), so nothing extra is scored.
        self.idle_actions = torch.full(self.action_shape, RIGHT, dtype=torch.int64, device=device)  # [N]
        self.single_action_space = spaces.Discrete(VOCAB_SIZE)
        self.single_observation_space = spaces.Dict({
            "program": spaces.MultiDiscrete(np.full(max_len, VOCAB_SIZE, dtype=np.int64)),
            "position": spaces.Discrete(max_len + 1),
        })

    def initial_state(self) -> State:
        n, dev = self.num_envs, self.device
        return {
            "program": torch.zeros((n, self.max_len), dtype=torch.int64, device=dev),
            "position": torch.zeros(n, dtype=torch.int64, device=dev),
            "depth": torch.zeros(n, dtype=torch.int64, device=dev),
            "elapsed": torch.zeros(n, dtype=torch.int64, device=dev),
        }

    def observe(self, state: State) -> dict[str, torch.Tensor]:
        """The observation dict (tensors shared with the state: treat them as read-only)."""
        return {"program": state["program"], "position": state["position"]}

    def action_masks(self, state: State) -> torch.Tensor:
        """``[N, V]`` bool syntax masks for the next token of each env."""
        return syntax_masks(state["position"], state["depth"], self.max_len, self.allow_eos)

    def reset_info(self, state: State) -> dict[str, torch.Tensor]:
        return {"action_mask": self.action_masks(state)}

    def transition(self, state: State, actions: torch.Tensor) -> tuple[State, torch.Tensor, torch.Tensor, dict]:
        """Write ``actions [N]``; score the programs that ended; returns (state, rewards, terminated, info)."""
        token = actions.long()  # [N]
        position = state["position"]  # [N]
        program = state["program"].scatter(1, position[:, None], token[:, None])  # [N, L]; EOS writes 0
        ended = (token == EOS) | (position + 1 >= self.max_len)  # [N]
        depth = (state["depth"] + (token == OPEN).long() - (token == CLOSE).long()).clamp(min=0)
        if self.lazy_scoring and not self._any_ended(ended):
            rewards, info = self._nothing_ended()
        else:
            rewards, info = self._score_ended(program, ended)
        new = {"program": program, "position": position + 1, "depth": depth, "elapsed": state["elapsed"]}
        return new, rewards, ended, info

    @staticmethod
    def _any_ended(ended: torch.Tensor) -> bool:
        with sync_point("lazy_scoring"):
            return bool(ended.any())

    def _score_ended(self, program: torch.Tensor, ended: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """Score the whole batch with the programs still being written replaced by empty ones."""
        finished = program * ended[:, None]  # [N, L] empty programs halt at once
        scores = self.evaluator.evaluate(finished, self.task, self.num_outputs).scores
        rewards = torch.where(ended, scores.rewards, 0.0).float()  # [N] float32 for RL
        return rewards, {"solved": ended & scores.solved,
                         "program_status": torch.where(ended, scores.program_status, int(Status.OK))}

    def _nothing_ended(self) -> tuple[torch.Tensor, dict]:
        n, dev = self.num_envs, self.device
        return torch.zeros(n, dtype=torch.float32, device=dev), {
            "solved": torch.zeros(n, dtype=torch.bool, device=dev),
            "program_status": torch.zeros(n, dtype=torch.int8, device=dev),
        }

    def sample_actions(self, state: State, generator: torch.Generator, masked: bool) -> torch.Tensor:
        """``[N]`` int64 tokens drawn uniformly from the legal ones (syntax masks if ``masked``)."""
        if masked:
            allowed = self.action_masks(state)
        else:
            allowed = torch.ones((self.num_envs, VOCAB_SIZE), dtype=torch.bool, device=self.device)
            allowed[:, EOS] = self.allow_eos
        return torch.multinomial(allowed.float(), 1, generator=generator)[:, 0]
