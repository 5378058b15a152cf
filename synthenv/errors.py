"""The error type for mistakes a user can fix: a bad option, value, path or file.

``synthenv`` raises ``UserError`` (or a subclass, such as ``synthenv.checkpoint.CheckpointError``)
with a message that names the bad value, the valid set and the fix. The command line prints
such errors as one line, ``synthenv <command>: error: <message>``, with exit code 2; any other
exception is a bug in synthenv and keeps its traceback. ``UserError`` is a ``ValueError``, so
code that catches ``ValueError`` keeps working. ``USER_ERRORS`` lists every exception type that is the
user's to fix, and ``describe`` turns one into that line.

>>> raise UserError("num_envs must be a positive int, got 0")
Traceback (most recent call last):
    ...
synthenv.errors.UserError: num_envs must be a positive int, got 0
"""

from __future__ import annotations


class UserError(ValueError):
    """A bad value, option, path or file given by the user; the message says how to fix it."""


USER_ERRORS = (UserError, ValueError, TypeError, FileNotFoundError, FileExistsError, PermissionError,
               IsADirectoryError, NotADirectoryError)
"""Exceptions that are the user's to fix: one line and exit code 2 at the command line."""


def describe(error: BaseException) -> str:
    """A user error as one line: the message, or for a path error what is wrong with which path."""
    if isinstance(error, OSError) and error.filename is not None:
        text = f"{error.strerror or error}: {str(error.filename)!r}"
        if error.filename2 is not None:
            text += f" -> {str(error.filename2)!r}"
        return text + "; check the path (a missing folder, a file where a folder is meant, or permissions)"
    text = str(error) if str(error) else type(error).__name__
    return " ".join(text.split())
