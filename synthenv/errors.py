"""The error type for mistakes a user can fix: a bad option, value, path or file.

``synthenv`` raises ``UserError`` (or a subclass, such as ``synthenv.checkpoint.CheckpointError``)
with a message that names the bad value, the valid set and the fix. The command line prints
such errors as one line, ``synthenv <command>: error: <message>``, with exit code 2; any other
exception is a bug in synthenv and keeps its traceback. ``UserError`` is a ``ValueError``, so
code that catches ``ValueError`` keeps working.

>>> raise UserError("num_envs must be a positive int, got 0")
Traceback (most recent call last):
    ...
synthenv.errors.UserError: num_envs must be a positive int, got 0
"""

from __future__ import annotations


class UserError(ValueError):
    """A bad value, option, path or file given by the user; the message says how to fix it."""
