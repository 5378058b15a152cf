"""Probabilistic verification: how sure can we be that a compiler errs rarely?

A learned compiler cannot be proven correct, but its error rate can be bounded from a random
sample. If ``n`` programs drawn independently from a distribution ``D`` are checked against
an exact reference and ``k`` of them are miscompiled, then with probability at least
``1 - delta`` over the draw, the miscompile rate ``p`` of the compiler on ``D`` satisfies

    p <= clopper_pearson_upper(k, n, delta)

(the one-sided Clopper–Pearson bound: the exact binomial tail, never an approximation).
With ``k = 0`` it has the closed form ``1 - delta ** (1 / n)``, and since
``1 - delta ** (1/n) <= ln(1/delta) / n``, checking ``n >= ln(1/delta) / epsilon`` programs
without a failure proves ``p <= epsilon`` at confidence ``1 - delta``
(``zero_failure_samples``; for epsilon = 0.1 %, delta = 5 %: 2996 programs).

What the guarantee does NOT say:

- It holds for the distribution the sample was drawn from, and only for it. A bound measured
  on uniform random programs says nothing about the programs a trained agent writes; the
  hybrid backend therefore samples the agent's own programs, step by step.
- It bounds a rate, not any single program: a program outside the sample may be wrong. That
  is why the hybrid also checks every program whose reward matters (those are exact, not
  probably exact).
- ``delta`` is the chance that the bound is wrong for one look at one sample. A monitor that
  recomputes the bound every step and adapts its sampling rate to it looks many times; the
  bound then describes the current window at each look, but the chance that it fails at
  *some* look over a long run is larger than ``delta`` (the usual sequential-testing caveat;
  a union bound over T looks needs ``delta / T``). The distribution also drifts as the agent
  learns, which is why ``ErrorRateMonitor`` bounds a sliding window of recent steps.

>>> round(clopper_pearson_upper(0, 2996, 0.05), 6) <= 0.001
True
>>> zero_failure_samples(0.001, 0.05)
2996
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from synthenv.checks import require_finite_fields


def _check_delta(delta: float) -> None:
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1) (1 - delta is the confidence), got {delta!r}")


def _check_counts(failures: int, trials: int) -> None:
    if not (isinstance(trials, int) and isinstance(failures, int)) or trials < 0 or not 0 <= failures <= trials:
        raise ValueError(f"need integers 0 <= failures <= trials, got failures={failures!r}, trials={trials!r}")


def clopper_pearson_upper(failures: int, trials: int, delta: float = 0.05) -> float:
    """One-sided upper confidence bound on a failure rate at confidence ``1 - delta``.

    The largest ``p`` for which seeing at most ``failures`` in ``trials`` still has
    probability ``>= delta``: the ``1 - delta`` quantile of ``Beta(k + 1, n - k)``. With no
    trials it is 1 (nothing is known).

    >>> round(clopper_pearson_upper(0, 10, 0.05), 5)  # 1 - 0.05 ** (1 / 10)
    0.25887
    """
    _check_counts(failures, trials)
    _check_delta(delta)
    if failures == trials:
        return 1.0
    from scipy import stats  # imported on first use: scipy.stats is slow to import

    return float(stats.beta.ppf(1.0 - delta, failures + 1, trials - failures))


def clopper_pearson_interval(failures: int, trials: int, delta: float = 0.05) -> tuple[float, float]:
    """Two-sided Clopper–Pearson interval at confidence ``1 - delta`` (``delta / 2`` per side).

    >>> [round(x, 4) for x in clopper_pearson_interval(1, 10, 0.05)]
    [0.0025, 0.445]
    """
    _check_counts(failures, trials)
    _check_delta(delta)
    from scipy import stats

    low = 0.0 if failures == 0 else float(stats.beta.ppf(delta / 2, failures, trials - failures + 1))
    high = 1.0 if failures == trials else float(stats.beta.ppf(1 - delta / 2, failures + 1, trials - failures))
    return low, high


def zero_failure_samples(epsilon: float, delta: float = 0.05) -> int:
    """Programs to check, all correct, to prove a failure rate ``<= epsilon`` at ``1 - delta``.

    The rule ``n >= ln(1/delta) / epsilon`` (slightly conservative: the exact smallest n,
    ``required_samples(epsilon, delta, 0)``, uses ``-ln(1 - epsilon)`` for ``epsilon``).

    >>> zero_failure_samples(0.01, 0.05)
    300
    """
    _check_delta(delta)
    if not 0.0 < epsilon < 1.0:
        raise ValueError(f"epsilon must be in (0, 1) (a failure rate), got {epsilon!r}")
    return math.ceil(math.log(1.0 / delta) / epsilon - 1e-9)


def required_samples(epsilon: float, delta: float = 0.05, failures: int = 0, limit: int = 10**9) -> int | None:
    """The smallest ``n`` with ``clopper_pearson_upper(failures, n, delta) <= epsilon``.

    ``None`` if no ``n <= limit`` suffices (the observed failures are too many for epsilon).

    >>> required_samples(0.001, 0.05, 0)
    2995
    """
    _check_delta(delta)
    if not 0.0 < epsilon < 1.0:
        raise ValueError(f"epsilon must be in (0, 1) (a failure rate), got {epsilon!r}")
    low, high = failures + 1, failures + 1  # the bound decreases with n: double, then bisect
    while clopper_pearson_upper(failures, high, delta) > epsilon:
        low, high = high, high * 2
        if high > limit:
            return None
    while low < high:
        mid = (low + high) // 2
        if clopper_pearson_upper(failures, mid, delta) <= epsilon:
            high = mid
        else:
            low = mid + 1
    return high


@dataclass(frozen=True)
class AuditConfig:
    """How the hybrid backend samples programs for its deterministic audit."""

    epsilon: float = 1e-3
    """Target: keep the upper bound on the miscompile rate at or below this."""
    delta: float = 0.05
    """The bound holds with probability ``1 - delta`` (per look; see the module docstring)."""
    window_steps: int = 100
    """Steps the bound covers (a sliding window, since the agent's programs drift); 0 = the whole run."""
    horizon_steps: int = 10
    """When the window lacks samples, audit at the rate that gathers all that are needed in this many steps."""
    min_rate: float = 0.01
    """Audit at least this fraction of each batch, always (so that drift is noticed)."""
    max_rate: float = 1.0
    """Never audit more than this fraction at random."""

    def __post_init__(self):
        require_finite_fields(self, "epsilon", "delta", low=0, high=1, low_open=True, high_open=True)
        require_finite_fields(self, "min_rate", "max_rate", low=0, high=1)
        if self.window_steps < 0 or self.horizon_steps < 1:
            raise ValueError(f"window_steps must be >= 0 and horizon_steps >= 1, got {self.window_steps!r}, "
                             f"{self.horizon_steps!r}")
        if self.min_rate > self.max_rate:
            raise ValueError(f"need min_rate <= max_rate, got min_rate={self.min_rate!r} > max_rate={self.max_rate!r}")


class ErrorRateMonitor:
    """Online Clopper–Pearson bound on a failure rate, and the sampling rate that keeps it low.

    Feed it, once per step, how many randomly sampled programs were checked and how many
    failed (``update``); read ``upper_bound`` and ask ``rate(batch_size)`` for the fraction
    to sample next. The rate rises while the window holds too few samples to push the
    bound under ``epsilon`` (or failures raise the number needed) and falls to ``min_rate``
    once it has enough.

    >>> monitor = ErrorRateMonitor(AuditConfig(epsilon=0.01, window_steps=0))
    >>> monitor.update(trials=300, failures=0)
    >>> monitor.upper_bound <= 0.01, monitor.rate(1000)
    (True, 0.01)
    """

    def __init__(self, config: AuditConfig = AuditConfig()):
        self.config = config
        self._steps: deque[tuple[int, int]] = deque(maxlen=config.window_steps or None)
        self._trials = 0
        self._failures = 0
        self.total_trials = 0
        self.total_failures = 0
        self._needed: dict[int, int | None] = {}  # failures -> required_samples (memo)

    def update(self, trials: int, failures: int) -> None:
        """Record one step: ``trials`` random programs checked, ``failures`` miscompiled."""
        _check_counts(failures, trials)
        if self._steps.maxlen is not None and len(self._steps) == self._steps.maxlen:
            old_trials, old_failures = self._steps[0]
            self._trials -= old_trials
            self._failures -= old_failures
        self._steps.append((trials, failures))
        self._trials += trials
        self._failures += failures
        self.total_trials += trials
        self.total_failures += failures

    @property
    def trials(self) -> int:
        """Random checks in the window."""
        return self._trials

    @property
    def failures(self) -> int:
        """Failures among them."""
        return self._failures

    @property
    def upper_bound(self) -> float:
        """Clopper–Pearson upper bound on the failure rate over the window (1.0 before any check)."""
        return clopper_pearson_upper(self._failures, self._trials, self.config.delta)

    def rate(self, batch_size: int) -> float:
        """The fraction of the next batch (``batch_size`` programs) to check at random."""
        cfg = self.config
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size!r}")
        if self._failures not in self._needed:
            self._needed[self._failures] = required_samples(cfg.epsilon, cfg.delta, self._failures, limit=10**12)
        needed = self._needed[self._failures]
        if needed is None:  # the window's failure rate is too high for epsilon: check all we may
            return cfg.max_rate
        if needed > self._trials:  # a rate that gathers all that is needed within the horizon
            wanted = needed / (batch_size * cfg.horizon_steps)
        elif cfg.window_steps:  # enough now; keep the window's count up as old steps leave it
            wanted = needed / (batch_size * cfg.window_steps)
        else:
            wanted = 0.0
        return float(min(cfg.max_rate, max(cfg.min_rate, wanted)))
