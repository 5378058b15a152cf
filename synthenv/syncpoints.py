"""The documented host synchronisation points: the one list of places where synthenv lets the
host wait for a device on (or next to) the step path.

Everything else on the step path is sync-free by construction (no ``.item()``, ``nonzero``,
boolean-mask indexing, tensors from Python data...), and ``synthenv.testing.syncguard`` proves
it on the CPU: it fails on any op that would make the host wait for a GPU, unless the op runs
inside ``sync_point(name)`` for a ``name`` below that the check explicitly allows.

>>> with sync_point("logging"):
...     pass
>>> sync_point("nope")
Traceback (most recent call last):
...
ValueError: unknown sync point 'nope'. Valid sync points: cpu_pipeline, editor_width, ...
"""

from __future__ import annotations

import threading

from synthenv.registry import unknown_name_message

SYNC_POINTS: dict[str, str] = {
    "validate_actions": "SynthVecEnv(validate_actions=True), the default: one read of the token-range check per "
                        "step, so that a bad action raises before the state changes (False: no sync)",
    "lazy_scoring": "token mode with lazy_scoring=True: asks the host whether any program ended this step",
    "torch_engine_check": "the torch engine, once per chunk and every check_every lockstep iterations: drops "
                          "finished lanes and grows tapes (lockstep's loop length is data-dependent)",
    "hybrid_audit": "the hybrid backend's audit, once per step: the size of the audited subset (it is "
                    "recompiled by the traditional compiler) and the counts that feed the error bound",
    "neural_width": "the neural compiler's bracket width read on the host: always on the CPU (free there), on "
                    "CUDA only with sync_width=True",
    "editor_width": "ppo's edit policy reads its batch's longest program on the host to skip the "
                    "padding: on the CPU only (free there); on CUDA it always runs the full width, no sync",
    "cpu_pipeline": "the cpu backend copies programs to the host and back by design (the baseline)",
    "elitist_handover": "the default agent, every 10 generations while a member is still in its elitist phase: "
                        "reads which members' elite has stalled, to hand them over to the islands",
    "logging": "statistics read for logs and display (EpisodeStatistics.stats, decode_batch, write_stats...)",
}
"""Name -> where and why. README ("Compilers and engines") points here."""

_local = threading.local()


def active() -> tuple[str, ...]:
    """The sync points the current thread is inside, innermost last."""
    return tuple(getattr(_local, "stack", ()))


class sync_point:  # noqa: N801  (used like a function: ``with sync_point("logging"):``)
    """Mark a block as the documented sync point ``name`` (one of ``SYNC_POINTS``).

    Costs a list append and pop; a guard (``synthenv.testing.syncguard``) reads the marks.
    """

    __slots__ = ("name", "_restore")

    def __init__(self, name: str):
        if name not in SYNC_POINTS:
            raise ValueError(unknown_name_message("sync point", name, sorted(SYNC_POINTS)))
        self.name = name
        self._restore = None

    def __enter__(self) -> sync_point:
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        stack.append(self.name)
        for hook in _hooks:
            self._restore = hook(self.name)
        return self

    def __exit__(self, *exc) -> None:
        _local.stack.pop()
        if self._restore is not None:
            self._restore()
            self._restore = None


_hooks: list = []
"""Callables ``hook(name) -> restore | None`` run on entering a sync point (the guard's CUDA
sync-debug switch); managed by ``synthenv.testing.syncguard``."""
