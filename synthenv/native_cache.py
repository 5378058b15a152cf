"""The build cache of synthenv's native libraries: where builds live, which are trusted, and how one is stored.

A cached build is code that synthenv loads into its own process, so it is trusted only when nobody else could
have put it there and it is the file that was built (``synthenv.native_build`` builds; this module keeps):

- The cache directory (``$SYNTHENV_CACHE_DIR``, else ``$XDG_CACHE_HOME/synthenv`` or ``~/.cache/synthenv``) is
  created with mode 0700. One that another user owns, or that its group or others can write, is refused, and
  an unusable one (a file, ``/proc/x``) is a clear ``NativeCacheError``.
- A build and its record (``<name>.json``: size, SHA-256, compiler, flags, source hash and the CPU it was built
  on) are trusted only when the current user owns both and nobody else can write either, the file matches its
  record (size and SHA-256) and the record names this machine's CPU; otherwise the build is made again and
  replaces them. ``-march=native`` code uses every instruction the building CPU has, so a cache shared between
  machines must never hand a build from a newer CPU to an older one (SIGILL at the first instruction it lacks).
- A build is stored atomically (``store``): renamed into place from a file in the same directory; a full disk
  or another write error is a ``NativeBuildError`` naming the cause, and leaves the cache as it was.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import stat
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
"""Where Linux describes the CPU (``cpu_identity``)."""
CACHE_HINT = "point $SYNTHENV_CACHE_DIR at a directory of your own (e.g. export SYNTHENV_CACHE_DIR=~/.cache/synthenv)"


class NativeBuildError(RuntimeError):
    """The C sources could not be compiled or loaded."""


class NativeCacheError(NativeBuildError):
    """The build cache directory cannot be used safely (the message names it and the fix)."""


def cache_dir() -> Path:
    """Where builds live: ``$SYNTHENV_CACHE_DIR``, else ``$XDG_CACHE_HOME/synthenv`` or ``~/.cache/synthenv``."""
    if os.environ.get("SYNTHENV_CACHE_DIR"):
        return Path(os.environ["SYNTHENV_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "synthenv"


def ensure_cache_dir() -> Path:
    """The cache directory, created with mode 0700 if missing, checked safe to build in.

    Raises:
        NativeCacheError: it cannot be created or written, is not a directory, belongs to another user, or its
            group or other users can write it (anyone who can could plant a library that synthenv loads).
    """
    path = cache_dir()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except OSError as error:
        raise NativeCacheError(f"synthenv's build cache {str(path)!r} cannot be used ({error.strerror or error}); "
                               f"{CACHE_HINT}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise NativeCacheError(f"synthenv's build cache {str(path)!r} is not a directory; {CACHE_HINT}")
    if info.st_mode & (stat.S_IWOTH | stat.S_IWGRP):
        who = "every user" if info.st_mode & stat.S_IWOTH else "its group"
        raise NativeCacheError(f"synthenv's build cache {str(path)!r} is writable by {who} (mode "
                               f"{stat.S_IMODE(info.st_mode):o}), so others could replace the library synthenv "
                               f"loads; chmod 700 {path}, or {CACHE_HINT}")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise NativeCacheError(f"synthenv's build cache {str(path)!r} belongs to another user (uid {info.st_uid}); "
                               f"{CACHE_HINT}")
    if not os.access(path, os.W_OK | os.X_OK):
        raise NativeCacheError(f"synthenv's build cache {str(path)!r} is not writable; {CACHE_HINT}")
    return path


def cpu_identity(cpuinfo: Path = CPUINFO) -> dict[str, str]:
    """The CPU builds run on: ``{"model": ..., "flags": ...}`` (part of the cache key and the record).

    On Linux, the first processor's ``model name`` and ``flags`` lines of ``/proc/cpuinfo``
    (``Features`` on ARM, which has no ``flags``); where there is no such file, or no model line,
    ``platform.processor()`` (else ``platform.machine()``) is the model.

    >>> sorted(cpu_identity())
    ['flags', 'model']
    """
    model, flags = _read_cpu(cpuinfo)
    return {"model": model, "flags": flags}


@functools.lru_cache(maxsize=4)
def _read_cpu(cpuinfo: Path) -> tuple[str, str]:
    fields: dict[str, str] = {}
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    model = fields.get("model name") or platform.processor() or platform.machine()
    flags = fields.get("flags") or fields.get("Features") or ""
    return model, " ".join(flags.split())


def sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def record_path(target: Path) -> Path:
    """Where the record of the build ``target`` lives."""
    return target.with_name(target.name + ".json")


def owned_privately(info: os.stat_result) -> bool:
    """Whether a cache entry is the current user's own regular file that its group and others cannot write."""
    mine = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    return stat.S_ISREG(info.st_mode) and mine and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def verify(target: Path) -> bool:
    """Whether the build ``target`` can be trusted (module docstring): it and its record are the current user's
    own files that nobody else can write, it matches its record (size, SHA-256), and it was built on this
    machine's CPU."""
    try:
        record_file = record_path(target)
        info, record_info = target.stat(), record_file.stat()
        if not (owned_privately(info) and owned_privately(record_info)):
            return False
        record = json.loads(record_file.read_text())
        return (isinstance(record, dict) and record.get("size") == info.st_size
                and record.get("cpu") == cpu_identity() and record.get("sha256") == sha256(target))
    except (OSError, ValueError):
        return False


def store(built: Path, record: dict, target: Path) -> None:
    """Move the checked build ``built`` (a file in the cache directory) to ``target`` with its ``record``, each
    renamed into place atomically (other processes see the old file or the new one, never a part).

    Raises:
        NativeCacheError: ``target`` or its record path is a folder (nothing can replace it).
        NativeBuildError: the record could not be written or a file could not be moved (a full disk, a
            read-only cache): the cause is named, and the cache is left as it was.
    """
    for path in (target, record_path(target)):
        if path.is_dir():
            raise NativeCacheError(f"synthenv's build cache holds a folder where a build belongs: {str(path)!r}; "
                                   "remove it")
    staged = built.with_name(built.name + ".json")
    try:
        with open(staged, "w") as f:
            f.write(json.dumps(record, indent=1))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(built, 0o700)
        os.replace(built, target)
        os.replace(staged, record_path(target))
    except OSError as error:
        raise NativeBuildError(f"could not store synthenv's native build in {str(target.parent)!r}: "
                               f"{error.strerror or error}; free space there, or {CACHE_HINT}") from None
