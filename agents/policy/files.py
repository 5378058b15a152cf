"""Edit-policy files: one member's weights with the architecture and the features they read.

``ppo`` starts its edit policy from such a file: the one shipped in the package
(``agents/edit_policy.pt``, pretrained across generated tasks by ``synthenv pretrain``), one of
the user's (``--policy PATH``, e.g. a policy a run fine-tuned and saved with ``--policy-out``), or
none (``--policy scratch``: random weights). A file is untrusted data, like a checkpoint: it is read
with ``torch.load(weights_only=True)`` after its archive is verified, and a file that is damaged,
of another kind or of another architecture is refused in one line that names the fix.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from synthenv.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

from .editor import EditorConfig, EditPolicy
from ..run.feedback import FEATURES

FORMAT = "synthenv-edit-policy"
VERSION = 1
SHIPPED = Path(__file__).resolve().parent / "edit_policy.pt"
"""The pretrained policy shipped in the package (``synthenv pretrain`` reproduces it: BENCHMARKS.md)."""
SCRATCH, PRETRAINED = "scratch", "pretrained"
"""The two named starts of ``PPOConfig.policy``; anything else is a path."""


@dataclass(frozen=True)
class PolicyFile:
    """A loaded policy file: ``editor`` (its architecture), ``parameters`` (name -> one member's tensor, no member
    dimension) and ``card`` (what it was trained on, how long, the command: plain data)."""

    editor: EditorConfig
    parameters: dict[str, torch.Tensor]
    card: dict


def require_start(name: str, value: object) -> None:
    """Raise ``ValueError`` unless ``value`` names where a policy starts: ``scratch``, ``pretrained`` or a path."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be '{PRETRAINED}', '{SCRATCH}' or the path of a policy file, got {value!r}")


def policy_path(policy: str) -> Path | None:
    """The file a ``PPOConfig.policy`` value names (None for ``scratch``)."""
    if policy == SCRATCH:
        return None
    return SHIPPED if policy == PRETRAINED else Path(policy)


def save_policy(path: str | os.PathLike, policy: EditPolicy, member: int, card: dict) -> None:
    """Write member ``member``'s weights of ``policy`` to ``path`` (atomically), with ``card``."""
    save_checkpoint(path, {"format": FORMAT, "version": VERSION, "editor": dataclasses.asdict(policy.config),
                           "features": list(FEATURES), "card": dict(card),
                           "parameters": {name: value.detach()[member].clone().cpu()
                                          for name, value in policy.named_parameters()}})


def load_policy(path: str | os.PathLike, option: str = "--policy") -> PolicyFile:
    """Read a policy file (see the module docstring for what is refused); ``option`` is the flag that named it."""
    fix = f"pass a file written by synthenv pretrain or synthenv train --policy-out, or {option} scratch"
    state = load_checkpoint(path, map_location="cpu", required_keys=("format", "editor", "parameters", "features"),
                            fix=fix)
    if state.get("format") != FORMAT or state.get("version") != VERSION:
        raise CheckpointError(f"{str(path)!r} is not a synthenv edit-policy file (version {VERSION}); {fix}")
    if not isinstance(state["features"], (list, tuple)):
        raise CheckpointError(f"{str(path)!r}: 'features' is a {type(state['features']).__name__}, not a list of "
                              f"feature names; {fix}")
    if list(state["features"]) != list(FEATURES):
        raise CheckpointError(f"{str(path)!r} reads the features {list(state['features'])}, this synthenv computes "
                              f"{list(FEATURES)}; {fix}")
    if not isinstance(state["editor"], dict):
        raise CheckpointError(f"{str(path)!r}: 'editor' is a {type(state['editor']).__name__}, not the architecture's "
                              f"fields; {fix}")
    try:
        editor = EditorConfig(**state["editor"])
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{str(path)!r} has an unreadable architecture ({error}); {fix}") from None
    parameters, card = state["parameters"], state.get("card", {})
    if not isinstance(parameters, dict):
        raise CheckpointError(f"{str(path)!r}: 'parameters' is a {type(parameters).__name__}, not a dict of tensors; "
                              f"{fix}")
    if not isinstance(card, dict):
        raise CheckpointError(f"{str(path)!r}: 'card' is a {type(card).__name__}, not a dict; {fix}")
    expected = _parameter_shapes(editor)
    if set(parameters) != set(expected):
        missing, extra = sorted(set(expected) - set(parameters)), sorted(set(parameters) - set(expected), key=str)
        raise CheckpointError(f"{str(path)!r} does not hold the parameters of its architecture (missing {missing}, "
                              f"unexpected {extra}); {fix}")
    for name, shape in expected.items():
        value = parameters[name]
        if not isinstance(value, torch.Tensor) or not value.dtype.is_floating_point:
            kind = f"a {value.dtype} tensor" if isinstance(value, torch.Tensor) else f"a {type(value).__name__}"
            raise CheckpointError(f"{str(path)!r}: parameter {name!r} is {kind}, not a float tensor; {fix}")
        if tuple(value.shape) != shape:
            raise CheckpointError(f"{str(path)!r}: parameter {name!r} has shape {tuple(value.shape)}, its architecture's "
                                  f"is {shape}; {fix}")
        if not bool(torch.isfinite(value).all()):
            raise CheckpointError(f"{str(path)!r}: parameter {name!r} holds NaN or infinite weights; {fix}")
    return PolicyFile(editor, dict(parameters), dict(card))


def _parameter_shapes(editor: EditorConfig) -> dict[str, tuple[int, ...]]:
    """One member's parameter shapes of an edit policy of architecture ``editor``."""
    policy = EditPolicy(editor, 1, len(FEATURES), [torch.Generator()], torch.device("cpu"))
    return {name: tuple(value.shape[1:]) for name, value in policy.named_parameters()}


def start_policy(policy: EditPolicy, file: PolicyFile, path: str | os.PathLike,
                 scratch: str = "--policy scratch, ppo:policy=scratch") -> None:
    """Set every member of ``policy`` to ``file``'s weights (in place); ``path`` names the file in errors, and
    ``scratch`` the options that start from scratch instead."""
    if file.editor != policy.config:
        raise CheckpointError(f"policy {str(path)!r} has the architecture {file.editor}, this one's is "
                              f"{policy.config}; use the same editor settings, or start from scratch ({scratch})")
    own = dict(policy.named_parameters())
    if set(file.parameters) != set(own) or any(file.parameters[n].shape != own[n].shape[1:] for n in own):
        raise CheckpointError(f"policy {str(path)!r} does not hold this edit policy's parameters; use a file written "
                              f"by this version of synthenv, or start from scratch ({scratch})")
    with torch.no_grad():
        for name, value in own.items():
            value.copy_(file.parameters[name].to(value.device, value.dtype).expand_as(value))
