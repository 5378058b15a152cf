"""Continuing a run from its checkpoint: the file is untrusted data, checked against the trainer's own state.

A checkpoint is loaded with ``weights_only=True`` (no code runs: ``synthenv.checkpoint``), then compared with what
a fresh trainer of the same settings writes (``checkpoint.check_like``: keys, tensor dtypes and shapes, integer
tensors within their ranges), and only then set. A damaged file, or one written by something else or with other
settings, is a ``CheckpointError`` (or ``ValueError`` for other settings) naming the fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from synthenv.checkpoint import RESUME_FIX, CheckpointError, check_like, load_checkpoint, require_keys
from synthenv.language import VOCAB_SIZE

from ..search.variation import NUM_KINDS

if TYPE_CHECKING:
    from .trainer import Trainer

STATE_KEYS = ("config", "algorithm", "step_count", "schedule", "record", "run_dirs", "elapsed", "env_programs")
"""What ``Trainer.state_dict`` holds."""


def load_state(trainer: Trainer, path: str) -> None:
    """Set ``trainer``'s state to the checkpoint at ``path`` (written by ``Trainer.save`` with the same settings)."""
    state = load_checkpoint(path, map_location="cpu", required_keys=STATE_KEYS)
    if not isinstance(state["config"], dict) or not isinstance(state["algorithm"], dict):
        raise CheckpointError(f"cannot load checkpoint {path!r}: it was not written by synthenv train; {RESUME_FIX}")
    saved, current = state["config"], trainer.config.comparable(trainer.algorithm.config)
    different = sorted(k for k in current if saved.get(k) != current[k])
    if different:
        details = ", ".join(f"{k}: checkpoint {saved.get(k)!r} vs now {current[k]!r}" for k in different)
        raise ValueError(f"checkpoint {path} was written with other settings ({details}); resume with the "
                         "same task, algorithm, seeds and options")
    require_keys(state["algorithm"], trainer.algorithm.state_dict(), path)  # a file from an older synthenv
    template = {key: value for key, value in trainer.state_dict().items() if key != "config"}
    check_like({key: state[key] for key in template}, template, path, ranges=integer_ranges(trainer.config.max_len))
    try:
        trainer.algorithm.load_state_dict(state["algorithm"])
        trainer.schedule.load_state_dict(state["schedule"])
        trainer.record.load_state_dict(state["record"])
    except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as error:  # what check_like cannot see
        raise CheckpointError(f"cannot load checkpoint {path!r}: its state does not fit this run ({error}); "
                              f"{RESUME_FIX}") from None
    for name in ("step_count", "run_dirs", "elapsed", "env_programs"):
        setattr(trainer, name, state[name])


def integer_ranges(max_len: int) -> dict[str, tuple[int, int]]:
    """The bounds ``[low, high)`` of a checkpoint's integer tensors, by key: token ids, edit kinds and positions,
    counts (-1: not solved)."""
    tokens, positions = (0, VOCAB_SIZE), (0, max_len + 1)
    return {**dict.fromkeys(("tokens", "children", "parents", "best_tokens", "extra.parents",
                             "extra.edit_tokens"), tokens),
            "kinds": (0, NUM_KINDS), "extra.edit_kinds": (0, NUM_KINDS),
            "positions": positions, "extra.edit_positions": positions,
            "npe": (0, 2**63 - 1), "steps": (0, 2**63 - 1), "solved_npe": (-1, 2**63 - 1),
            "solved_step": (-1, 2**63 - 1)}
