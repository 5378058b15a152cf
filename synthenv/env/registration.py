"""Gymnasium ids ``synthenv/<task>-v0`` for every registered task.

``gymnasium.make_vec("synthenv/<task>-v0", num_envs=N, **options)`` builds a ``SynthVecEnv``
(options: ``EnvConfig`` fields); ``gymnasium.make("synthenv/<task>-v0")`` builds the single
token-mode ``SynthEnv`` with numpy observations.
"""

from __future__ import annotations

import gymnasium

from synthenv import tasks

NAMESPACE = "synthenv"
VERSION = 0


def env_id(task: str) -> str:
    """The Gymnasium id of a task.

    >>> env_id("reverse")
    'synthenv/reverse-v0'
    """
    return f"{NAMESPACE}/{task}-v{VERSION}"


def register_envs() -> list[str]:
    """Register every task of ``synthenv.tasks.names()`` that has no id yet; returns all ids.

    Runs when ``synthenv`` is imported; call it again after ``synthenv.tasks.register`` to give
    a user task its id.
    """
    ids = []
    for name in tasks.names():
        ident = env_id(name)
        if ident not in gymnasium.registry:
            gymnasium.register(
                id=ident,
                entry_point="synthenv.env.single:SynthEnv",
                vector_entry_point="synthenv.env.vector:SynthVecEnv",
                kwargs={"task": name},
            )
        ids.append(ident)
    return ids


def registered_ids() -> list[str]:
    """Every ``synthenv/*`` id in Gymnasium's registry."""
    return [ident for ident in gymnasium.registry if ident.startswith(NAMESPACE + "/")]
