"""Checkpoints as untrusted files: atomic writes, safe loads, one clear error for a bad file.

A checkpoint is a ``dict`` of plain data: tensors (``torch.Generator`` states are uint8
tensors), ints, floats, bools, strings, bytes, None, and dicts, lists and tuples of those,
written with ``torch.save``. ``load_checkpoint`` reads it with ``torch.load(...,
weights_only=True)``, so a file whose pickle would call a function (``os.system``...) is refused
without running anything. Before that it checks that the file is a complete zip
archive whose every member matches its CRC-32: ``torch.load`` alone loads a byte-flipped
tensor without a word. Whatever is wrong with a file (missing, empty, truncated, corrupted,
another format, unsafe), the error is one ``CheckpointError`` naming the path and the fix.

``save_checkpoint`` refuses content a safe load would refuse (a numpy scalar, an object), so
a run never writes a checkpoint it cannot resume from, and it writes atomically: a crash
leaves the previous checkpoint, never half a file.

>>> import tempfile, torch
>>> path = tempfile.mkdtemp() + "/run/ckpt.pt"
>>> save_checkpoint(path, {"step": 3, "weights": torch.ones(2), "rng": torch.Generator().get_state()})
>>> load_checkpoint(path, required_keys=("step", "weights"))["step"]
3
"""

from __future__ import annotations

import io
import math
import os
import re
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

import torch

from synthenv.checks import resolve_device
from synthenv.errors import UserError
from synthenv.storage import check_destination

RESUME_FIX = "resume from a checkpoint written by synthenv (synthenv train --checkpoint PATH) or start a fresh run"
"""What the user can do about a checkpoint that does not load."""

_PLAIN = (bool, int, float, complex, str, bytes, type(None), torch.Tensor, torch.dtype, torch.device)


MAX_CHECKPOINT_BYTES = 2**30
"""The most bytes a checkpoint, policy or prior file may hold, packed or unpacked (1 GiB; the largest synthenv
writes, a run of many members with its queues, is a few MiB): checked before anything is inflated."""


class CheckpointError(UserError):
    """A checkpoint that cannot be written, or a file that is not a loadable synthenv checkpoint."""


def save_checkpoint(path: str | os.PathLike, state: dict) -> None:
    """Write ``state`` to ``path`` atomically (temporary file + rename), creating parent folders.

    Args:
        path: the checkpoint file; its folder is created if needed.
        state: a dict of plain data (see the module docstring); nothing else is written.

    Raises:
        CheckpointError: ``state`` holds something a safe load would refuse (the message names
            where), or ``path`` cannot be written (a folder, a read-only place, under a file).
    """
    path = Path(path)
    if not isinstance(state, dict):
        raise CheckpointError(f"a checkpoint is a dict of plain data, got {type(state).__name__}")
    buffer = io.BytesIO()
    torch.save(state, buffer)
    try:
        torch.load(io.BytesIO(buffer.getvalue()), map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - any refusal: name what is not plain data
        where, kind = _first_unsafe(state, "state")
        what = f"{where} is a {kind}, which" if where else "it holds data that"
        raise CheckpointError(f"cannot write checkpoint {str(path)!r}: {what} a safe load (torch.load(weights_only="
                              f"True)) refuses ({_reason(error)}); store plain data instead (tensors, numbers, "
                              "strings, lists, dicts; e.g. int(x) or torch.as_tensor(x))") from None
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            raise IsADirectoryError(21, "Is a directory", str(path))
        try:
            check_destination(path, "checkpoint")  # a device node is never replaced by a zip file
        except UserError as error:
            raise CheckpointError(str(error)) from None
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
        with os.fdopen(handle, "wb") as file:
            file.write(buffer.getbuffer())
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
        temporary = None
    except OSError as error:
        raise CheckpointError(f"cannot write checkpoint {str(path)!r}: {error.strerror or error}"
                              f"{f' ({error.filename})' if error.filename else ''}; choose a path in a writable "
                              "folder") from None
    finally:
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device | None = "cpu",
                    required_keys: Iterable[str] = (), fix: str = RESUME_FIX) -> dict:
    """Load a checkpoint written by ``save_checkpoint``, treating the file as untrusted.

    Args:
        path: the checkpoint file.
        map_location: the device tensors are loaded onto (checked to exist: ``resolve_device``).
        required_keys: top-level keys the checkpoint must have (``require_keys``).
        fix: what every error message tells the user to do (default: resume from a synthenv checkpoint or
            start afresh; a file of another kind, e.g. a policy file, names its own).

    Returns:
        The checkpoint's dict.

    Raises:
        CheckpointError: the file is missing, a folder, unreadable, empty, truncated, corrupted
            (a CRC mismatch), not a torch checkpoint, holds code or objects a safe load refuses,
            is not a dict, or lacks a required key. The message names the path and the fix.
        ValueError: ``map_location`` names a device this machine does not have.
    """
    path = Path(path)
    if map_location is not None:
        map_location = resolve_device(map_location)
    _check_archive(path, fix)
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # noqa: BLE001 - untrusted data: every failure is a bad file
        raise CheckpointError(_message(path, f"it cannot be loaded safely ({_reason(error)})", fix)) from None
    if not isinstance(state, dict):
        raise CheckpointError(_message(path, f"it holds a {type(state).__name__}, not a checkpoint's dict", fix))
    require_keys(state, required_keys, path, fix)
    return state


def require_keys(state: dict, keys: Iterable[str], path: str | os.PathLike = "the checkpoint",
                 fix: str = RESUME_FIX) -> None:
    """Raise ``CheckpointError`` naming the keys of ``keys`` that ``state`` lacks (and ``fix``).

    >>> require_keys({"step": 1}, ["step", "policy"], "run.pt")
    Traceback (most recent call last):
        ...
    synthenv.checkpoint.CheckpointError: cannot load checkpoint 'run.pt': it lacks 'policy' (it has 'step'): ...
    """
    missing = [key for key in keys if key not in state]
    if missing:
        present = ", ".join(repr(k) for k in list(state)[:12]) or "nothing"
        raise CheckpointError(_message(Path(path), f"it lacks {', '.join(repr(k) for k in missing)} (it has "
                                                   f"{present}): it was written by another program or another "
                                                   "version of synthenv", fix))


def check_like(state: dict, template: dict, path: str | os.PathLike, fix: str = RESUME_FIX,
               ranges: dict[str, tuple[int, int]] | None = None) -> None:
    """Raise ``CheckpointError`` unless ``state`` (a loaded checkpoint) has the form of ``template`` (what this run
    would write): the same keys, each value of the same kind (a tensor of the same dtype and shape, a bool, an int,
    a float, a string or None; lists of the same length, or of numbers where the template's is empty); every number
    finite and >= 0 (counts, times, settings); every integer tensor under a key of ``ranges`` within its
    ``[low, high)``; every generator state one a generator accepts. The message names the file, the entry and the
    fix, before anything of the state is used.

    >>> check_like({"step": -1}, {"step": 0}, "run.pt")
    Traceback (most recent call last):
        ...
    synthenv.checkpoint.CheckpointError: cannot load checkpoint 'run.pt': state['step'] is -1, ...
    """
    problem = _unlike(state, template, "state", ranges or {}, "")
    if problem:
        raise CheckpointError(_message(Path(path), problem, fix))


def _unlike(value: object, template: object, where: str, ranges: dict, key: str) -> str:
    """What makes ``value`` unlike ``template`` ('' if nothing)."""
    if isinstance(template, dict):
        if not isinstance(value, dict):
            return f"{where} is a {type(value).__name__}, not a dict"
        if not template:  # filled as a run goes (an optimizer's state): its owner checks it as it loads it
            return ""
        if set(value) != set(template):
            missing = [k for k in template if k not in value]
            extra = [k for k in value if k not in template]
            return f"{where} lacks {missing} and has {extra} besides: it was written by another version or program"
        return next((p for k in template if (p := _unlike(value[k], template[k], f"{where}[{k!r}]", ranges, str(k)))),
                    "")
    if isinstance(template, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            return f"{where} is a {type(value).__name__}, not a list"
        if len(template) == len(value):
            return next((p for i, (v, t) in enumerate(zip(value, template))
                         if (p := _unlike(v, t, f"{where}[{i}]", ranges, key))), "")
        if template and not all(_is_number(t) for t in template):
            return f"{where} has {len(value)} entries, this run's has {len(template)}"
        return next((p for i, v in enumerate(value) if (p := _unlike(v, 0.0, f"{where}[{i}]", ranges, key))), "")
    if isinstance(template, torch.Tensor):
        if not isinstance(value, torch.Tensor):
            return f"{where} is a {type(value).__name__}, not a tensor"
        if value.dtype != template.dtype or value.shape != template.shape:
            return (f"{where} is a {value.dtype} tensor of shape {tuple(value.shape)}, this run's is a "
                    f"{template.dtype} tensor of shape {tuple(template.shape)}")
        if key == "generators" or where.endswith("generator"):
            try:
                torch.Generator(device="cpu").set_state(value) if value.dtype == torch.uint8 and \
                    value.numel() == torch.Generator().get_state().numel() else None
            except RuntimeError:
                return f"{where} is not a random generator's state"
        if key in ranges and not value.dtype.is_floating_point and value.dtype != torch.bool and value.numel():
            low, high = ranges[key]
            least, most = int(value.min()), int(value.max())
            if least < low or most >= high:
                return f"{where} holds {least if least < low else most}, outside [{low}, {high - 1}]"
        return ""
    if isinstance(template, bool) or template is None or isinstance(template, str):
        kind = type(template)
        if type(value) is not kind:
            return f"{where} is {value!r}, not a {kind.__name__}" if not isinstance(value, (dict, list, tuple)) \
                else f"{where} is a {type(value).__name__}, not a {kind.__name__}"
        return ""
    if _is_number(template):
        if not _is_number(value) or (isinstance(template, int) and not isinstance(value, int)):
            shown = repr(value) if not isinstance(value, (dict, list, tuple, torch.Tensor)) else type(value).__name__
            return f"{where} is {shown[:60]}, not {'an int' if isinstance(template, int) else 'a number'}"
        if not math.isfinite(value) or value < 0:
            return f"{where} is {value!r}, a count or time must be a finite number >= 0"
        return ""
    return ""


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _message(path: Path, problem: str, fix: str) -> str:
    return f"cannot load checkpoint {str(path)!r}: {problem}; {fix}"


def _check_archive(path: Path, fix: str) -> None:
    """Raise unless ``path`` is a readable, complete zip archive whose members match their CRC-32."""
    if not path.exists():
        raise CheckpointError(_message(path, "no such file", fix))
    if path.is_dir():
        raise CheckpointError(_message(path, "it is a folder, not a file", fix))
    try:
        size = path.stat().st_size
        if size == 0:
            raise CheckpointError(_message(path, "the file is empty (0 bytes; an interrupted copy?)", fix))
        if not zipfile.is_zipfile(path):
            raise CheckpointError(_message(path, f"it is not a torch checkpoint ({size} bytes that are not a "
                                                 "complete zip archive: truncated, or another kind of file)", fix))
        if size > MAX_CHECKPOINT_BYTES:
            raise CheckpointError(_message(path, f"it is {size} bytes, more than the {MAX_CHECKPOINT_BYTES} a "
                                                 "checkpoint may be (synthenv.checkpoint.MAX_CHECKPOINT_BYTES, "
                                                 "docs/limits.md)", fix))
        with zipfile.ZipFile(path) as archive:
            inflated = sum(member.file_size for member in archive.infolist())
            if inflated > MAX_CHECKPOINT_BYTES:  # before a byte is inflated: a small file can unpack to GiBs
                raise CheckpointError(_message(path, f"it unpacks to {inflated} bytes, more than the "
                                                     f"{MAX_CHECKPOINT_BYTES} a checkpoint may hold (synthenv."
                                                     "checkpoint.MAX_CHECKPOINT_BYTES, docs/limits.md)", fix))
            bad = archive.testzip()
    except CheckpointError:
        raise
    except OSError as error:
        raise CheckpointError(_message(path, f"it cannot be read ({error.strerror or error})", fix)) from None
    except Exception as error:  # noqa: BLE001 - zipfile's errors on a damaged archive vary
        raise CheckpointError(_message(path, f"it is corrupted ({type(error).__name__}: {error})", fix)) from None
    if bad is not None:
        raise CheckpointError(_message(path, f"it is corrupted (member {bad!r} fails its CRC-32 check)", fix))


def _reason(error: BaseException) -> str:
    """A short, single-line account of why ``torch.load`` refused something."""
    text = str(error)
    unsafe = re.search(r"(?:Unsupported global: GLOBAL|unsupported GLOBAL) (\S+)", text)
    if unsafe:
        return f"it refers to {unsafe.group(1)}, which weights_only loading refuses because loading it could run code"
    if "Weights only load failed" in text:
        detail = re.search(r"WeightsUnpickler error: ([^\n]+)", text)
        return "weights_only loading refused it" + (f": {detail.group(1)}" if detail else "")
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(error).__name__}: {first[:200]}" if first else type(error).__name__


def _first_unsafe(value: object, where: str) -> tuple[str, str]:
    """The key path and type name of the first value in ``value`` that is not plain data."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int)):
                return f"{where} key {key!r}", type(key).__name__
            found = _first_unsafe(item, f"{where}[{key!r}]")
            if found[0]:
                return found
        return "", ""
    if isinstance(value, (list, tuple, set, frozenset)):
        for index, item in enumerate(value):
            found = _first_unsafe(item, f"{where}[{index}]")
            if found[0]:
                return found
        return "", ""
    if isinstance(value, _PLAIN):
        return "", ""
    return where, f"{type(value).__module__}.{type(value).__qualname__}"
