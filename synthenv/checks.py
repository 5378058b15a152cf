"""Argument checks shared by configs and constructors, with the error messages users see.

>>> require_positive_int("steps", 3)
>>> require_positive_int("steps", 0)
Traceback (most recent call last):
    ...
ValueError: steps must be a positive int, got 0
"""

from __future__ import annotations

import math
import numbers
import os
import tempfile
from pathlib import Path

import torch

from synthenv.errors import UserError

SEED_LIMIT = 2**64
"""Seeds are ints in ``[0, SEED_LIMIT)``: what ``torch.Generator.manual_seed`` takes (a uint64)."""


def require_positive_int(name: str, value: object, prefix: str = "") -> None:
    """Raise ``ValueError`` naming ``prefix + name`` unless ``value`` is an int >= 1."""
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{prefix}{name} must be a positive int, got {value!r}")


def require_positive_int_fields(owner: object, *names: str, prefix: str = "") -> None:
    """``require_positive_int`` for each attribute ``names`` of ``owner`` (a config), in order."""
    for name in names:
        require_positive_int(name, getattr(owner, name), prefix)


def require_nonnegative_int(name: str, value: object, note: str = "", prefix: str = "") -> None:
    """Raise ``ValueError`` naming ``prefix + name`` (and ``note``, what the value means) unless ``value`` is an
    int >= 0 (not a bool)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        meaning = f" ({note})" if note else ""
        raise ValueError(f"{prefix}{name} must be an int >= 0{meaning}, got {value!r}")


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    left = "(-inf" if low is None else ("(" if low_open else "[") + f"{low:g}"
    right = "inf)" if high is None else f"{high:g}" + (")" if high_open else "]")
    return f"{left}, {right}"


def require_finite(name: str, value: object, low: float | None = None, high: float | None = None,
                   low_open: bool = False, high_open: bool = False, prefix: str = "") -> None:
    """Raise unless ``value`` is a finite real number in the interval ``low``..``high``.

    Args:
        name: the option's name, as the message shows it (after ``prefix``).
        value: the value to check; ints count as floats, bools do not.
        low, high: the bounds (None: unbounded on that side).
        low_open, high_open: exclude the bound itself (``(0, 1]`` is ``low=0, high=1, low_open=True``).
        prefix: put before ``name`` (e.g. ``"audit."``).

    Raises:
        TypeError: ``value`` is not a real number.
        ValueError: it is nan, infinite or out of range.

    >>> require_finite("entropy_coef", 0.01, low=0)
    >>> require_finite("entropy_coef", float("nan"), low=0)
    Traceback (most recent call last):
        ...
    ValueError: entropy_coef must be a finite float in [0, inf), got nan
    """
    expected = f"{prefix}{name} must be a finite float"
    if low is not None or high is not None:
        expected += f" in {_interval(low, high, low_open, high_open)}"
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{expected}, got {value!r} ({type(value).__name__})")
    value = float(value)
    if (not math.isfinite(value) or (low is not None and (value < low or (low_open and value == low)))
            or (high is not None and (value > high or (high_open and value == high)))):
        raise ValueError(f"{expected}, got {value!r}")


def require_finite_fields(owner: object, *names: str, low: float | None = None, high: float | None = None,
                          low_open: bool = False, high_open: bool = False, prefix: str = "") -> None:
    """``require_finite`` for each attribute ``names`` of ``owner`` (a config), with the same range.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Config:
    ...     lr: float = 1e-3
    ...     clip: float = 0.2
    >>> require_finite_fields(Config(), "lr", "clip", low=0, low_open=True)
    >>> require_finite_fields(Config(clip=float("inf")), "lr", "clip", low=0, low_open=True)
    Traceback (most recent call last):
        ...
    ValueError: clip must be a finite float in (0, inf), got inf
    """
    for name in names:
        require_finite(name, getattr(owner, name), low, high, low_open, high_open, prefix)


def require_seed(name: str, value: object, allow_none: bool = True) -> None:
    """Raise ``ValueError`` unless ``value`` is an int in ``[0, 2**64)`` (or None if ``allow_none``).

    >>> require_seed("seed", 2**70)
    Traceback (most recent call last):
        ...
    ValueError: seed must be None or an int in [0, 2**64), got 1180591620717411303424; pass a smaller seed such as 0
    """
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < SEED_LIMIT:
        what = "None or an int" if allow_none else "an int"
        raise ValueError(f"{name} must be {what} in [0, 2**64), got {value!r}; pass a smaller seed such as 0")


def resolve_device(device: str | torch.device) -> torch.device:
    """The torch device ``device`` names, checked to exist on this machine.

    ``"cuda"`` becomes ``cuda:<current device>`` and ``"cpu:0"`` becomes ``cpu`` (so that
    tensors compare equal by device). Call it where a device option is first used, before
    anything is allocated there.

    Raises:
        ValueError: not a device string; ``meta`` (holds no data); CUDA asked for where this
            torch has no CUDA or sees no GPU; a CUDA index past the last GPU; another
            backend (``mps``, ``xpu``) that is not available.

    >>> resolve_device("cpu")
    device(type='cpu')
    >>> resolve_device("gpu")
    Traceback (most recent call last):
        ...
    ValueError: device must be a torch device such as 'cpu', 'cuda' or 'cuda:1', got 'gpu'
    """
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device must be a torch device such as 'cpu', 'cuda' or 'cuda:1', got {device!r}") from None
    if parsed.type == "cpu":
        return torch.device("cpu")
    if parsed.type == "meta":
        raise ValueError(f"device {str(device)!r} holds no data (tensors there have shapes only); "
                         "use 'cpu' or 'cuda'")
    if parsed.type == "cuda":
        return _resolve_cuda(parsed, str(device))
    backend = getattr(torch, parsed.type, None) if parsed.type != "mps" else torch.backends.mps
    if backend is not None and hasattr(backend, "is_available") and not backend.is_available():
        raise ValueError(f"device {str(device)!r} is not available on this machine "
                         f"(torch.{parsed.type}.is_available() is False); use 'cpu'")
    return parsed


def _resolve_cuda(parsed: torch.device, name: str) -> torch.device:
    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            why = f"this torch ({torch.__version__}) is a CPU-only build"
            fix = "use device 'cpu' (--device cpu), or install a CUDA build of torch"
        else:
            why = "torch.cuda.is_available() is False (no GPU visible, or a driver problem)"
            fix = "use device 'cpu' (--device cpu), or check the GPU with nvidia-smi"
        raise ValueError(f"device {name!r} needs CUDA, but {why}; {fix}")
    count = torch.cuda.device_count()
    index = parsed.index if parsed.index is not None else torch.cuda.current_device()
    if index >= count:
        raise ValueError(f"device {name!r} does not exist: this machine has {count} CUDA device(s), "
                         f"cuda:0 to cuda:{count - 1}")
    return torch.device("cuda", index)


def require_writable(path: str | os.PathLike, what: str = "output", directory: bool = False) -> Path:
    """Check, before any work is done, that ``path`` can be written; create its folders.

    Args:
        path: a file to be written (``directory=False``) or a folder to write into.
        what: how the message names it (``"--json"``, ``"log dir"``...).
        directory: ``path`` is a folder (created if missing) rather than a file.

    Returns:
        ``path`` as a ``Path``.

    Raises:
        UserError: a folder on the way is a file, ``path`` is a folder where a file is meant
            (or the reverse), or nothing can be created there (permissions, read-only).

    >>> import tempfile
    >>> require_writable(tempfile.mkdtemp() + "/new/out.json", "--json").name
    'out.json'
    """
    path = Path(path)
    folder = path if directory else path.parent
    try:
        if not directory and path.is_dir():
            raise IsADirectoryError(21, "it is a folder, not a file", str(path))
        if directory and path.exists() and not path.is_dir():
            raise NotADirectoryError(20, "it is a file, not a folder", str(path))
        for parent in (folder, *folder.parents):  # the nearest existing folder on the way must be one
            if parent.exists():
                if not parent.is_dir():
                    raise NotADirectoryError(20, f"'{parent}' is a file, not a folder", str(parent))
                break
        if not directory:
            from synthenv.storage import check_destination
            check_destination(path, what)  # a device, pipe or socket is never replaced
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".synthenv-write-check-"):
            pass
    except OSError as error:
        reason = error.strerror or str(error)
        named = error.filename is not None and str(error.filename) not in (str(path), *reason.split("'"))
        where = f" ({error.filename})" if named else ""
        raise UserError(f"{what} {str(path)!r} cannot be written: {reason}{where}; choose a path in a writable "
                        "folder") from None
    return path
