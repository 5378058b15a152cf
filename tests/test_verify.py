"""Probabilistic verification utilities: closed forms, table values, the bound's defining
property, its coverage, and the audit-rate policy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from synthenv.verify import (
    AuditConfig,
    ErrorRateMonitor,
    clopper_pearson_interval,
    clopper_pearson_upper,
    required_samples,
    zero_failure_samples,
)


@pytest.mark.parametrize("trials", [1, 10, 300, 2996, 100000])
@pytest.mark.parametrize("delta", [0.01, 0.05, 0.2])
def test_zero_failures_closed_form(trials, delta):
    # P(0 failures | p) = (1 - p)^n = delta  <=>  p = 1 - delta^(1/n)
    assert clopper_pearson_upper(0, trials, delta) == pytest.approx(1 - delta ** (1 / trials), rel=1e-9)


def test_rule_of_three_and_sample_size_rule():
    # The "rule of three": 95 % upper bound with no failures is about 3 / n.
    assert clopper_pearson_upper(0, 3000, 0.05) == pytest.approx(3 / 3000, rel=0.01)
    # n >= ln(1/delta) / epsilon: ln(20) / 0.001 = 2995.73 -> 2996, ln(20) / 0.01 -> 300
    assert zero_failure_samples(0.001, 0.05) == 2996
    assert zero_failure_samples(0.01, 0.05) == 300
    assert zero_failure_samples(0.1, 0.1) == 24  # ln(10) / 0.1 = 23.03
    for eps, delta in [(0.001, 0.05), (0.01, 0.01), (0.2, 0.1)]:
        assert clopper_pearson_upper(0, zero_failure_samples(eps, delta), delta) <= eps


@pytest.mark.parametrize("failures, trials, low, high", [
    (0, 10, 0.0, 0.3085),
    (1, 10, 0.0025, 0.4450),
    (5, 10, 0.1871, 0.8129),
    (10, 10, 0.6915, 1.0),
    (0, 20, 0.0, 0.1684),
])
def test_two_sided_interval_table_values(failures, trials, low, high):
    # Exact 95 % binomial confidence limits as printed in standard tables.
    got_low, got_high = clopper_pearson_interval(failures, trials, 0.05)
    assert got_low == pytest.approx(low, abs=6e-5)
    assert got_high == pytest.approx(high, abs=6e-5)


@pytest.mark.parametrize("failures, trials", [(1, 10), (3, 50), (7, 1000), (40, 4000)])
def test_upper_bound_inverts_the_binomial_tail(failures, trials):
    # Defining property: at p = bound, seeing <= k failures has probability exactly delta.
    bound = clopper_pearson_upper(failures, trials, 0.05)
    assert stats.binom.cdf(failures, trials, bound) == pytest.approx(0.05, rel=1e-6)


def test_bound_is_monotone():
    by_trials = [clopper_pearson_upper(2, n, 0.05) for n in range(3, 400, 7)]
    assert all(a > b for a, b in zip(by_trials, by_trials[1:]))
    by_failures = [clopper_pearson_upper(k, 200, 0.05) for k in range(0, 200, 5)]
    assert all(a < b for a, b in zip(by_failures, by_failures[1:]))
    by_delta = [clopper_pearson_upper(3, 100, d) for d in (0.001, 0.01, 0.05, 0.2)]
    assert all(a > b for a, b in zip(by_delta, by_delta[1:]))
    assert clopper_pearson_upper(0, 0, 0.05) == 1.0
    assert clopper_pearson_upper(5, 5, 0.05) == 1.0


def test_bound_covers_the_true_rate():
    # Over many simulated audits, the 95 % bound falls below the true rate at most ~5 % of
    # the time (Clopper-Pearson is conservative).
    rng = np.random.default_rng(0)
    p, n, runs = 0.01, 500, 2000
    failures = rng.binomial(n, p, size=runs)
    misses = sum(clopper_pearson_upper(int(k), n, 0.05) < p for k in failures)
    assert misses / runs <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)


def test_required_samples():
    for eps, delta in [(0.001, 0.05), (0.01, 0.1)]:  # closed form with no failures
        assert required_samples(eps, delta, 0) == math.ceil(math.log(delta) / math.log(1 - eps))
    for failures in (1, 3, 10):
        n = required_samples(0.01, 0.05, failures)
        assert clopper_pearson_upper(failures, n, 0.05) <= 0.01 < clopper_pearson_upper(failures, n - 1, 0.05)
    assert required_samples(0.01, 0.05, 10, limit=500) is None


@pytest.mark.parametrize("call", [
    lambda: clopper_pearson_upper(0, 10, 0.0),
    lambda: clopper_pearson_upper(0, 10, 1.5),
    lambda: clopper_pearson_upper(11, 10),
    lambda: clopper_pearson_upper(-1, 10),
    lambda: zero_failure_samples(0.0),
    lambda: AuditConfig(epsilon=2.0),
    lambda: AuditConfig(min_rate=0.5, max_rate=0.1),
])
def test_bad_arguments_raise(call):
    with pytest.raises(ValueError):
        call()


def test_monitor_window_and_bound():
    monitor = ErrorRateMonitor(AuditConfig(window_steps=3))
    assert monitor.upper_bound == 1.0
    for trials, failures in [(100, 1), (200, 0), (300, 2), (400, 0)]:
        monitor.update(trials, failures)
    assert (monitor.trials, monitor.failures) == (900, 2)  # the first step left the window
    assert (monitor.total_trials, monitor.total_failures) == (1000, 3)
    assert monitor.upper_bound == pytest.approx(clopper_pearson_upper(2, 900, 0.05))


def test_monitor_rate_adapts():
    config = AuditConfig(epsilon=0.001, delta=0.05, window_steps=0, horizon_steps=10, min_rate=0.01)
    monitor = ErrorRateMonitor(config)
    # No evidence yet: a rate that gathers the 2995 needed samples in 10 steps of 1000 programs.
    assert monitor.rate(1000) == pytest.approx(2995 / 10000)
    monitor.update(2995, 0)
    assert monitor.upper_bound <= 0.001
    assert monitor.rate(1000) == 0.01  # enough: fall back to the floor
    monitor.update(1000, 1)  # a failure raises the number needed
    needed = required_samples(0.001, 0.05, 1)
    assert monitor.rate(1000) == pytest.approx(needed / 10000)
    monitor.update(1000, 50)  # a failure rate far above epsilon: audit as much as allowed
    assert monitor.rate(1000) == 1.0


def test_monitor_keeps_a_window_full():
    monitor = ErrorRateMonitor(AuditConfig(epsilon=0.001, window_steps=100, min_rate=0.0))
    monitor.update(5000, 0)
    # Enough samples now; as old steps leave the window, keep 2995 per 100 steps coming.
    assert monitor.rate(1000) == pytest.approx(2995 / (1000 * 100))
