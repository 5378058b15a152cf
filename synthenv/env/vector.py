"""``SynthVecEnv``: N program-synthesis environments stepped together, all state as device tensors."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from synthenv.checks import require_seed, resolve_device
from synthenv.language import EOS, VOCAB_SIZE
from synthenv.audit import AuditStats
from synthenv.pipeline import Evaluator
from synthenv.syncpoints import sync_point
from synthenv.tasks import Task

from .config import EnvConfig, Mode, check_batch_size
from .graphs import GraphedTransition, check_graphable
from .program_mode import ProgramDynamics
from .token_mode import TokenDynamics

State = dict[str, torch.Tensor]


class SynthVecEnv(VectorEnv):
    """Write BF programs that turn each test input of a task into its expected output.

    ## Description

    N environments share one task (docs/semantics.md §3) and one compiler + engine (``Evaluator``). All
    state lives in torch tensors on ``device``; ``step`` takes and returns tensors there and
    adds no host synchronisation of its own (``validate_actions=True`` adds one, marked).

    - **program mode** (``mode="program"``, the fast path): an action is N whole programs; one
      step compiles, runs and scores all of them. An episode is ``iterations`` rounds of
      write -> compile -> run -> test; the observation carries the last program and its
      per-case feedback, so an agent can revise its own code.
    - **token mode** (``mode="token"``, the classic MDP): an action is one token per env; the
      observation is the program so far; the program is scored when it ends (EOS or
      ``max_len`` tokens). ``action_masks()`` gives syntax masks under which every program an
      agent writes has balanced brackets.

    ## Action Space

    Tokens: 0 = EOS, then ``> < + - [ ] . ,`` = 1..8 (V = 9). Program mode: ``[N, L]`` integer
    tensor (a program ends at its first EOS); token mode: ``[N]`` integer tensor. Any integer
    dtype; on the env's device.

    ## Observation Space

    A dict of tensors, batched from ``single_observation_space`` (``observation_space``):

    - program mode: ``program [N, L]`` int64 (the last program, EOS-padded), ``reward [N]``
      float32, ``case_passed [N, K]`` int8 (0/1), ``case_status [N, K]`` int8 (``Status``:
      OK, STEP_LIMIT, SYNTAX_ERROR, ABORTED), ``case_rewards [N, K]`` float32 (4.0 = correct),
      ``outputs [N, K, O]`` int32 (first O printed values, O = longest expected output),
      ``output_lengths [N, K]`` int32, ``round [N]`` int64 (rounds played this episode). All
      zero after a reset.
    - token mode: ``program [N, L]`` int64 (tokens written so far, EOS-padded) and
      ``position [N]`` int64 (how many).

    Observation tensors are shared with the env state: read them, do not write into them.

    ## Rewards

    PQT's program reward (docs/semantics.md §2, ``synthenv.scoring``), ``[N]`` float32 (scored in
    float64, rounded once): 1.0 for a solved task, lower for wrong outputs, ``-2 / (4 K)`` for
    a failure (step limit; syntax error in strict mode).
    Program mode: every round's program is scored. Token mode: the reward comes on the step
    that ends the program, 0 before.

    ## Episode End

    Program mode: terminated when the program solves the task; truncated after ``iterations``
    rounds. Token mode: terminated when the program ends (EOS or ``max_len``); never truncated.

    ``info`` describes the step just taken: ``solved [N]`` bool, ``program_status [N]`` int8
    (token mode: OK where no program ended) and, in token mode, ``action_mask [N, V]`` bool for
    the next step (after any reset). With a backend that has an audit stage (``backend="hybrid"``),
    ``info["audit"]`` is the audit's typed statistics after the step, a
    ``synthenv.audit.AuditStats`` (one for the whole batch: ``miscompile_bound``, ``audit_rate``,
    ``sampled``, ... as host numbers; ``.as_scalars()`` gives them keyed by TensorBoard tag
    ``verify/*``); ``audit_stats()`` reads the same at any time.

    ## Autoreset

    ``autoreset_mode`` picks one of Gymnasium's three (``gymnasium.vector.AutoresetMode``,
    declared per instance in ``metadata["autoreset_mode"]``); all of them run on the device
    with no host sync, every env on its own:

    - ``SameStep`` (the default): an env whose episode ends is reset within the same ``step``;
      the returned observation is its reset observation and ``info["final_obs"]`` holds the
      observation it ended on, as a dict of ``[N, ...]`` tensors for all envs (meaningful where
      ``info["_final_obs"]`` [N] bool is True). The default because a program-mode episode is
      usually one round: every step is then a real step for every env, and synthenv's agents
      read the per-case feedback from ``info["final_obs"]``.
    - ``NextStep``: the step that ends an episode returns the observation it ended on; the
      next ``step`` resets that env instead of acting (its action is ignored) and returns its
      reset observation with reward 0, ``terminated`` and ``truncated`` False, ``solved``
      False. With one-round episodes every other step is such a reset step.
    - ``Disabled``: no env is ever reset by ``step``; call
      ``reset(options={"reset_mask": mask})`` (``mask [N]`` bool, a tensor on the env's device
      or a numpy array) to reset the envs where ``mask`` is True, the others untouched. An
      ended env stepped again without a reset stays as it ended: the same observation, reward
      0, the same ``terminated``/``truncated`` (its action is ignored).

    Neither ``NextStep`` nor ``Disabled`` adds ``final_obs``: the observation returned with
    ``terminated | truncated`` is the final one. ``reset_mask`` works in every mode.

    ## Arguments

    Every ``EnvConfig`` field is a keyword argument (``SynthVecEnv.from_config`` takes the
    dataclass): ``task`` (name or ``Task``), ``num_envs``, ``mode`` (``"program"``/``"token"``),
    ``autoreset_mode`` (``"SameStep"``, ``"NextStep"``, ``"Disabled"``; through Gymnasium:
    ``gymnasium.make_vec(id, num_envs=N, autoreset_mode="NextStep")``),
    ``backend``, ``engine``, ``device``, ``max_len`` (``DEFAULT_MAX_LEN``, 100), ``iterations`` (1, program mode),
    ``seed``, the task overrides ``base``/``max_steps``/``strict_syntax``, ``allow_eos``,
    ``validate_actions`` (True: range check, one host sync per step), ``lazy_scoring`` and
    ``cuda_graphs`` (program mode on CUDA: the step replayed as a CUDA graph).
    ``evaluator``: a prebuilt ``synthenv.pipeline.Evaluator`` (compiler, engine, scorer) to use
    instead of the one ``backend`` and ``engine`` name, e.g. a custom compiler or the torch
    scorer; it must run on ``device``.

    ## Version History

    - v0: initial version (program and token modes; the three autoreset modes).

    >>> env = SynthVecEnv(task="reverse", num_envs=2, mode="program", engine="torch", max_len=12)
    >>> obs, info = env.reset(seed=0)
    >>> from synthenv.language import encode_batch
    >>> obs, rewards, terminated, truncated, info = env.step(encode_batch([",[>,]+[,<.]", "+."], 12))
    >>> [round(r, 4) for r in rewards.tolist()], terminated.tolist(), truncated.tolist()
    ([1.0, 0.0288], [True, False], [False, True])
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}  # the default; set per instance

    def __init__(self, task: str | Task = "reverse", num_envs: int = 1, evaluator: Evaluator | None = None,
                 **options: Any):
        self.config = EnvConfig(task=task, num_envs=num_envs, **options)
        self.task = self.config.resolve_task()
        check_batch_size(self.config, self.task)  # before anything of the N envs is allocated
        self.device = resolve_device(self.config.device)
        self.num_envs = self.config.num_envs
        self.autoreset_mode = self.config.autoreset_mode
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        if evaluator is not None and not isinstance(evaluator, Evaluator):
            raise TypeError(f"evaluator must be a synthenv.pipeline.Evaluator or None, got {type(evaluator).__name__}")
        self.evaluator = evaluator or Evaluator.create(self.config.backend, self.config.engine, self.device)
        self._dynamics = _make_dynamics(self.config, self.task, self.evaluator, self.device)
        self._transition = self._dynamics.transition
        if self.config.cuda_graphs:
            check_graphable(self.config, self.evaluator, self.device)
            self._transition = GraphedTransition(self._dynamics, self.device)
        self.single_observation_space = self._dynamics.single_observation_space
        self.single_action_space = self._dynamics.single_action_space
        self._initial = self._dynamics.initial_state()
        self._state: State | None = None  # None until reset()
        # [N] bool: how each env's last step ended (NextStep and Disabled read them; set by reset())
        self._terminated = self._truncated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self._generator = torch.Generator(device=self.device)
        self._seeded = False

    @functools.cached_property
    def observation_space(self) -> spaces.Dict:
        """``single_observation_space`` batched over the N envs: built when first asked for (host-side numpy bounds
        of every env, which a large batch that never reads them should not pay for)."""
        return batch_space(self.single_observation_space, self.num_envs)

    @functools.cached_property
    def action_space(self) -> spaces.Space:
        """``single_action_space`` batched over the N envs (built when first asked for)."""
        return batch_space(self.single_action_space, self.num_envs)

    @classmethod
    def from_config(cls, config: EnvConfig, evaluator: Evaluator | None = None) -> SynthVecEnv:
        """The env an ``EnvConfig`` describes (e.g. one parsed by tyro)."""
        return cls(evaluator=evaluator, **{f.name: getattr(config, f.name) for f in dataclasses.fields(config)})

    @property
    def mode(self) -> Mode:
        return self.config.mode

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """Reset every env, or with ``options={"reset_mask": mask}`` only those where ``mask [N]`` is True.

        ``seed`` seeds the env's torch generator (and Gymnasium's ``np_random``). ``mask`` is a
        bool tensor on the env's device or a numpy bool array (Gymnasium's form); an all-False
        mask resets nothing. ``options`` is read, never modified.

        Returns:
            ``(obs, info)``: the observation dict of all N envs (the unmasked ones as they were);
            ``info`` holds ``action_mask`` in token mode.
        """
        require_seed("seed", seed)  # what torch.Generator.manual_seed takes: [0, 2**64)
        options = dict(options or {})  # Gymnasium's wrappers read options["reset_mask"] after we return
        reset_mask = options.pop("reset_mask", None)
        if options:
            raise ValueError(f"SynthVecEnv.reset takes only options['reset_mask'], got {sorted(options)}; pass "
                             "options=None, or {'reset_mask': mask} to reset some envs")
        self._check_open()
        mask = None if reset_mask is None else self._check_reset_mask(reset_mask)
        if mask is not None and self._state is None:
            raise RuntimeError("reset(options={'reset_mask': ...}) resets some envs of a running batch; call "
                               "reset() once first")
        if seed is None and not self._seeded:
            seed = self.config.seed
        if seed is not None:
            self._generator.manual_seed(seed)
            super().reset(seed=seed)
        elif not self._seeded:
            self._generator.seed()
        self._seeded = True
        if mask is None:
            self._state = {name: value.clone() for name, value in self._initial.items()}
            self._terminated, self._truncated = (torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
                                                 for _ in range(2))
        else:
            self._state = _where(mask, self._initial, self._state)
            self._terminated, self._truncated = self._terminated & ~mask, self._truncated & ~mask
        return self._dynamics.observe(self._state), self._reset_info()

    def step(self, actions: torch.Tensor) -> tuple[dict, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """Apply one action per env; ended episodes restart as ``autoreset_mode`` says (see class docs).

        Returns:
            ``(obs, rewards [N] float32, terminated [N] bool, truncated [N] bool, info)``.
        """
        state = self._require_state()
        actions = self._check_actions(actions)  # raises before any state changes
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            obs, rewards, terminated, truncated, info = self._step_same_step(state, actions)
        else:
            obs, rewards, terminated, truncated, info = self._step_after_end(state, actions)
        if self.evaluator.audit is not None:
            info["audit"] = self.evaluator.audit.stats  # typed AuditStats, host numbers
        return obs, rewards, terminated, truncated, info

    def _play(self, state: State, actions: torch.Tensor) -> tuple[State, torch.Tensor, torch.Tensor, torch.Tensor,
                                                                   dict]:
        """One transition plus the episode clock: ``(state, rewards, terminated, truncated, info)``."""
        new, rewards, terminated, info = self._transition(state, actions)
        elapsed = new["elapsed"] + 1  # [N]
        truncated = ~terminated & (elapsed >= self._dynamics.episode_limit)
        return {**new, "elapsed": elapsed}, rewards, terminated, truncated, info

    def _step_same_step(self, state: State, actions: torch.Tensor):
        """``SameStep``: ended envs restart now; ``info["final_obs"]`` holds where they ended."""
        new, rewards, terminated, truncated, info = self._play(state, actions)
        done = terminated | truncated  # [N]
        final_obs = self._dynamics.observe(new)
        if self._dynamics.episode_limit == 1:  # every step ends every episode: all envs start afresh
            new = self._dynamics.initial_state()  # new tensors: the caller may keep the last observation
        else:
            new = _where(done, self._initial, new)
        self._state = new
        info = {**info, **self._reset_info(), "final_obs": final_obs, "_final_obs": done}
        return self._dynamics.observe(new), rewards, terminated, truncated, info

    def _step_after_end(self, state: State, actions: torch.Tensor):
        """``NextStep`` and ``Disabled``: the envs that ended on the last step are idle in this one.

        Idle envs run a fresh state with ``idle_actions`` (cheap, and never out of bounds) and
        their results are replaced: by the reset state (``NextStep``) or by the state they ended
        in (``Disabled``), with reward 0 and empty info.
        """
        idle = self._terminated | self._truncated  # [N] ended on the last step (Disabled: and not reset since)
        actions = torch.where(_column(idle, actions), self._dynamics.idle_actions, actions)
        new, rewards, terminated, truncated, info = self._play(_where(idle, self._initial, state), actions)
        next_step = self.autoreset_mode is AutoresetMode.NEXT_STEP
        new = _where(idle, self._initial if next_step else state, new)
        rewards = torch.where(idle, 0.0, rewards)
        if next_step:
            terminated, truncated = terminated & ~idle, truncated & ~idle
        else:  # an ended env stays ended until reset(options={"reset_mask": ...})
            terminated = torch.where(idle, self._terminated, terminated)
            truncated = torch.where(idle, self._truncated, truncated)
        info = {name: torch.where(_column(idle, value), torch.zeros((), dtype=value.dtype, device=value.device),
                                  value) for name, value in info.items()}  # solved False, program_status OK
        self._state, self._terminated, self._truncated = new, terminated, truncated
        info.update(self._reset_info())
        return self._dynamics.observe(new), rewards, terminated, truncated, info

    def audit_stats(self) -> AuditStats | None:
        """The audit stage's statistics after the last step (``backend="hybrid"``), else None.

        Host numbers, no sync: ``audit_stats().as_scalars()`` gives ``{"verify/miscompile_bound":
        ..., ...}`` for a logger; ``audit_stats().write(writer, step)`` writes them to TensorBoard.
        """
        return self.evaluator.audit_stats()

    def action_masks(self) -> torch.Tensor:
        """Token mode: ``[N, V]`` bool syntax masks for the next token (see ``syntax_masks``)."""
        if self.mode is not Mode.TOKEN:
            raise RuntimeError("action_masks() exists in token mode only; create the env with mode='token'")
        self._require_state()
        return self._reset_info()["action_mask"]

    def sample_actions(self, masked: bool = True) -> torch.Tensor:
        """Random actions drawn on the device from the env's generator (seeded by ``reset``).

        Program mode: ``[N, L]`` uniform tokens; token mode: ``[N]`` tokens uniform over the
        legal ones (the syntax masks if ``masked``). EOS is left out if ``allow_eos=False``.
        """
        state = self._require_state()
        if self.mode is Mode.TOKEN:
            return self._dynamics.sample_actions(state, self._generator, masked)
        return self._dynamics.sample_actions(self._generator, self.config.allow_eos)

    def close(self, **kwargs: Any) -> None:
        self._state = None
        self.closed = True

    def _reset_info(self) -> dict[str, torch.Tensor]:
        """The info of the current state (token mode: ``action_mask``). An env that ended under
        ``NextStep``/``Disabled`` ignores its next action: every token is legal there (its own
        mask could be empty at ``max_len`` with ``allow_eos=False``, and a masked sampler would fail)."""
        info = self._dynamics.reset_info(self._state)
        if "action_mask" in info and self.autoreset_mode is not AutoresetMode.SAME_STEP:
            info["action_mask"] = info["action_mask"] | (self._terminated | self._truncated)[:, None]  # [N, V]
        return info

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("this SynthVecEnv is closed; create a new one")

    def _require_state(self) -> State:
        self._check_open()
        if self._state is None:
            raise RuntimeError("call reset() before step(): the env has no state yet (env.reset(seed=...))")
        return self._state

    def _check_reset_mask(self, mask: object) -> torch.Tensor:
        """``options["reset_mask"]`` as a ``[N]`` bool tensor on the env's device, or a clear error."""
        expected = f"a bool tensor (or numpy array) of shape ({self.num_envs},)"
        if isinstance(mask, np.ndarray):
            if mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
                raise ValueError(f"options['reset_mask'] must be {expected}, got a numpy array of dtype {mask.dtype} "
                                 f"and shape {mask.shape}; pass e.g. terminated | truncated")
            return torch.from_numpy(mask).to(self.device)
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"options['reset_mask'] must be {expected}, got {type(mask).__name__}; pass e.g. "
                            "terminated | truncated from the last step")
        if mask.dtype != torch.bool or tuple(mask.shape) != (self.num_envs,):
            raise ValueError(f"options['reset_mask'] must be {expected}, got dtype {mask.dtype} and shape "
                             f"{tuple(mask.shape)}; pass e.g. terminated | truncated")
        return mask.to(self.device)

    def _check_actions(self, actions: object) -> torch.Tensor:
        """Check type, shape, dtype, device and (optionally) token range; never mutates state."""
        shape = self._dynamics.action_shape
        what = "N programs of L tokens" if self.mode is Mode.PROGRAM else "one token per env"
        if not isinstance(actions, torch.Tensor):
            raise TypeError(f"actions must be a torch.Tensor of shape {shape} on {self.device}, got "
                            f"{type(actions).__name__}; use torch.as_tensor(actions, device=env.device), or wrap "
                            "the env in synthenv.env.NumpyVecEnv to step it with numpy arrays")
        if tuple(actions.shape) != shape:
            raise ValueError(f"actions must have shape {shape} ({what}, mode={self.mode.value!r}), got "
                             f"{tuple(actions.shape)}; {_shape_fix(self.mode, shape)}")
        if actions.dtype.is_floating_point or actions.dtype.is_complex or actions.dtype == torch.bool:
            raise TypeError(f"actions must hold integer token ids, got dtype {actions.dtype}; use actions.long()")
        if actions.device != self.device:
            raise ValueError(f"actions are on {actions.device}, the env is on {self.device}; "
                             f"use actions.to(env.device)")
        if self.config.validate_actions:
            out_of_range = (actions < 0) | (actions >= VOCAB_SIZE)
            with sync_point("validate_actions"):  # the default: ranges checked on the host, once per step
                if bool(out_of_range.any()):
                    _raise_out_of_range(actions, out_of_range)
            return actions
        if self.mode is Mode.PROGRAM:  # unchecked: the transition reads an out-of-range token as EOS
            return actions
        return torch.where((actions < 0) | (actions >= VOCAB_SIZE), EOS, actions)  # unchecked: acts as EOS


def _raise_out_of_range(actions: torch.Tensor, out_of_range: torch.Tensor) -> None:
    index = tuple(out_of_range.nonzero()[0].tolist())  # sync point: building the error only
    value = int(actions[index])
    raise ValueError(f"token {value} at actions{list(index)} is out of range: token ids must be in [0, {VOCAB_SIZE}) "
                     "(0 = EOS, 1..8 = '><+-[].,'); fix the policy's output (e.g. sample from 9 logits)")


def _shape_fix(mode: Mode, shape: tuple[int, ...]) -> str:
    if mode is Mode.PROGRAM:
        return f"pad programs with EOS (0) to max_len={shape[1]} tokens and pass one per env"
    return "pass one token per env, e.g. actions of shape (num_envs,)"


def _where(mask: torch.Tensor, chosen: State, other: State) -> State:
    """Per env: the state ``chosen`` where ``mask [N]`` is True, else ``other`` (new tensors)."""
    return {name: torch.where(_column(mask, value), chosen[name], value) for name, value in other.items()}


def _column(mask: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``mask [N]`` viewed to broadcast against ``value [N, ...]``."""
    return mask.view(-1, *([1] * (value.dim() - 1)))


def _make_dynamics(config: EnvConfig, task: Task, evaluator: Evaluator, device: torch.device):
    if config.mode is Mode.PROGRAM:
        return ProgramDynamics(task, evaluator, config.num_envs, config.max_len, config.iterations, device)
    return TokenDynamics(task, evaluator, config.num_envs, config.max_len, config.allow_eos, config.lazy_scoring,
                         device)
