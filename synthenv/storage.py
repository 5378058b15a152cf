"""Reading and writing the files synthenv's tools touch: bounded reads, atomic writes, checked destinations.

Every file a tool writes is written atomically (a temporary file in the same folder, flushed, fsynced and renamed
over the destination, as SQLite and git do), so that a full disk, a size limit or a kill during the write leaves
the old file or none, never a truncated one; and only where the user asked: a destination must be a new path or
a regular file (never a device, a folder or a pipe). Every file a tool reads is read with a size cap checked
before the bytes are held. docs/files.md says which files are trusted and how each is loaded.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "out.json")
>>> write_text(path, "[]\\n", "the table").name
'out.json'
>>> read_text(path, "the table", max_bytes=10)
'[]\\n'
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from synthenv.errors import UserError

MAX_TEXT_BYTES = 64 * 2**20
"""Largest text file (task file, table JSON, library) the tools read: 64 MiB."""


class FileSizeError(UserError):
    """A file larger than what the tool that reads it accepts."""


def check_destination(path: str | os.PathLike, what: str) -> Path:
    """``path`` as a ``Path`` if a tool may write ``what`` there: a new path in an existing folder, or an existing
    regular file (replaced atomically). A device, a folder, a pipe or a socket is refused (``UserError``).

    >>> check_destination("/dev/null", "the checkpoint")
    Traceback (most recent call last):
        ...
    synthenv.errors.UserError: the checkpoint '/dev/null' is not a regular file (a character device); write it to a new path or over a regular file
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return path
    except OSError as error:
        raise UserError(f"{what} {str(path)!r} cannot be checked: {error.strerror or error}; choose another path"
                        ) from None
    if not stat.S_ISREG(mode):
        raise UserError(f"{what} {str(path)!r} is not a regular file ({_kind(mode)}); write it to a new path or over a "
                        "regular file")
    return path


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def write_atomic(path: str | os.PathLike, write: Callable[[IO[bytes]], None], what: str) -> Path:
    """Write ``path`` atomically: ``write(f)`` fills a temporary file in the same folder, which is flushed,
    fsynced and renamed over ``path``. On any error the temporary file is removed and ``path`` is as it was; a
    full disk or a size limit is a ``UserError`` naming ``what`` and the path.
    """
    path = check_destination(path, what)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise UserError(f"cannot write {what} {str(path)!r}: {error.strerror or error}; check the folder") from None
    try:
        with os.fdopen(handle, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(error, OSError):
            raise UserError(f"cannot write {what} {str(path)!r}: {error.strerror or error} (nothing was changed); "
                            "free space or choose another path") from None
        raise
    return path


def write_text(path: str | os.PathLike, text: str, what: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (``write_atomic``)."""
    data = text.encode("utf-8")
    return write_atomic(path, lambda f: f.write(data), what)


def write_json(path: str | os.PathLike, document: object, what: str, indent: int | None = 2) -> Path:
    """Write ``document`` as JSON to ``path`` atomically (``write_atomic``)."""
    return write_text(path, json.dumps(document, indent=indent) + "\n", what)


def read_bytes(path: str | os.PathLike, what: str, max_bytes: int = MAX_TEXT_BYTES,
               missing: str = "check the path") -> bytes:
    """The bytes of ``path``, refused (``FileSizeError``) past ``max_bytes`` before more is read: a device such as
    ``/dev/zero`` or a huge file never fills memory. A missing (``missing``: the fix to name) or unreadable file
    is a ``UserError``."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise UserError(f"{what} {str(path)!r} does not exist; {missing}") from None
    except IsADirectoryError:
        raise UserError(f"{what} {str(path)!r} is a folder; give a file") from None
    except OSError as error:
        raise UserError(f"{what} {str(path)!r} cannot be read: {error.strerror or error}") from None
    if len(data) > max_bytes:
        raise FileSizeError(f"{what} {str(path)!r} is larger than {max_bytes} bytes, the most synthenv reads for it "
                            "(docs/limits.md); check that it is the right file")
    return data


def read_text(path: str | os.PathLike, what: str, max_bytes: int = MAX_TEXT_BYTES,
              missing: str = "check the path") -> str:
    """``read_bytes`` decoded as UTF-8 (a file that is not is a ``UserError``)."""
    try:
        return read_bytes(path, what, max_bytes, missing).decode("utf-8")
    except UnicodeDecodeError as error:
        raise UserError(f"{what} {str(path)!r} is not UTF-8 text (byte {error.start}); check that it is the right "
                        "file") from None


def read_json(path: str | os.PathLike, what: str, max_bytes: int = MAX_TEXT_BYTES,
              missing: str = "check the path") -> object:
    """The JSON document of ``path`` (``read_text``); malformed JSON, nesting too deep to parse or a number too
    long to read is a ``UserError`` naming the file."""
    text = read_text(path, what, max_bytes, missing)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise UserError(f"{what} {str(path)!r} is not valid JSON ({error.msg} at line {error.lineno}, column "
                        f"{error.colno})") from None
    except RecursionError:
        raise UserError(f"{what} {str(path)!r} nests too deeply to read; check that it is the right file") from None
    except ValueError as error:  # e.g. an integer of thousands of digits
        raise UserError(f"{what} {str(path)!r} holds a value that cannot be read: {error}") from None
