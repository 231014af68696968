from __future__ import annotations

import numpy as np
import pytest

from fwbench.trackers import latency
from fwbench.trackers.latency import StopRule, device_pass, throughput, throughput_interval, timed_loop
from fwbench.trackers.stats import (
    bootstrap_median,
    bootstrap_ratio_of_medians,
    median_ranks,
    order_statistic_median,
    summary,
)


class FakeClock:
    """perf_counter stand-in: every read advances by the next of `steps` (cycled), so the loop is deterministic."""

    def __init__(self, *steps):
        self.now, self.steps, self.reads = 0.0, steps, 0

    def __call__(self):
        self.now += self.steps[self.reads % len(self.steps)]
        self.reads += 1
        return self.now


def _rule(**kw):
    base = {"min_iters": 5, "min_seconds": 0.0, "max_iters": 100_000, "max_seconds": 1e9, "ci_target": 0.02}
    return StopRule(**{**base, **kw})


def test_loop_runs_until_both_minimums_then_stops_on_a_tight_interval(monkeypatch):
    monkeypatch.setattr(latency.time, "perf_counter", FakeClock(0.01))
    synced, seen = [], []
    run = timed_loop(lambda i: seen.append(i) or i, synced.append, _rule(min_iters=5, min_seconds=0.2))
    # two clock reads per iteration at 10 ms each: 0.2 s needs ~10 iterations; constant latency = zero-width CI
    assert run.stop_reason == "ci_reached" and run.ci_reached
    assert 9 <= len(run.samples_s) <= 11
    assert synced == seen == list(range(len(run.samples_s))), "every iteration synchronises on its own output"
    assert all(s == pytest.approx(0.01) for s in run.samples_s)


def test_noisy_latencies_keep_the_loop_running_until_the_interval_is_tight(monkeypatch):
    # latencies alternate 10 ms / 30 ms: the median's CI is wide for a few samples, then narrows
    monkeypatch.setattr(latency.time, "perf_counter", FakeClock(0.001, 0.01, 0.001, 0.03))
    run = timed_loop(lambda i: None, lambda _: None, _rule(min_iters=5, ci_target=0.02))
    assert run.stop_reason == "ci_reached" and run.checks >= 1
    values = np.asarray(run.samples_s) * 1000
    assert bootstrap_median(values).relative_half_width() <= 0.5


def test_maximums_stop_and_flag_the_loop(monkeypatch):
    monkeypatch.setattr(latency.time, "perf_counter", FakeClock(1.0))
    run = timed_loop(lambda i: None, lambda _: None, _rule(min_iters=100, max_seconds=5.0))
    assert run.stop_reason == "max_seconds" and not run.ci_reached and len(run.samples_s) < 100
    steps = np.random.default_rng(0).uniform(0.001, 0.05, 1001)  # every read a different step: never a tight CI
    monkeypatch.setattr(latency.time, "perf_counter", FakeClock(*steps))
    run = timed_loop(lambda i: None, lambda _: None, _rule(min_iters=10, max_iters=30, ci_target=1e-6))
    assert run.stop_reason == "max_iters" and len(run.samples_s) == 30 and not run.ci_reached


def test_the_stopping_rule_never_bootstraps_inside_the_measured_window(monkeypatch):
    def no_bootstrap(*args, **kwargs):
        raise AssertionError("bootstrap inside the timed loop")

    monkeypatch.setattr(latency, "bootstrap_median", no_bootstrap)
    monkeypatch.setattr(latency.time, "perf_counter", FakeClock(0.001, 0.01, 0.001, 0.03))
    run = timed_loop(lambda i: None, lambda _: None, _rule(min_iters=5, ci_target=0.02))
    assert run.stop_reason == "ci_reached" and run.checks >= 1
    values = np.sort(run.samples_s)
    j, k = median_ranks(len(values))
    assert (values[k] - values[j]) / 2 / np.median(values) <= 0.02, "stopped on the order-statistic interval"
    assert 0 < run.check_s < run.wall_s, "the checks' total time is reported"


def test_checks_cost_little_with_many_samples():
    # the stopping check on 100,000 samples: a partial sort, not 500 resamples of 100,000
    samples = np.random.default_rng(3).lognormal(0, 0.3, 100_000)
    order_statistic_median(samples)  # rank table cached per n, as the loop's checks reuse few n
    import time

    t0 = time.perf_counter()
    interval = order_statistic_median(samples)
    assert time.perf_counter() - t0 < 0.05
    assert interval.low < np.median(samples) < interval.high


def test_order_statistic_interval_of_the_median():
    assert median_ranks(100) == (39, 60)  # the textbook 95% ranks 40 and 61 (1-based) for n = 100
    assert median_ranks(5) is None and median_ranks(6) == (0, 5)  # 2 x 1/64 < 5% but 2 x 1/32 > 5%
    ci = order_statistic_median([5.0, 1.0, 4.0, 2.0, 3.0])
    assert ci.estimate == 3.0 and ci.relative_half_width() == float("inf"), "too few samples: no claim"
    values = np.random.default_rng(4).permutation(np.arange(100.0))
    ci = order_statistic_median(values)
    assert (ci.estimate, ci.low, ci.high) == (49.5, 39.0, 60.0)
    # distribution-free: covers the true median of a skewed distribution at least 95% of the time
    rng = np.random.default_rng(5)
    intervals = [order_statistic_median(rng.lognormal(0, 1, 50)) for _ in range(2000)]
    assert np.mean([ci.low <= 1.0 <= ci.high for ci in intervals]) >= 0.94


def test_device_time_comes_from_a_pass_of_its_own():
    events = []

    class Timer:
        def start(self):
            events.append("start")

        def stop(self):
            events.append("stop")

        def elapsed_ms(self):
            events.append("elapsed")
            return 1.5

    ms = device_pass(lambda i: events.append(f"step{i}"), lambda _: events.append("sync"), Timer(), 2)
    assert ms == [1.5, 1.5]
    assert events == ["start", "step0", "stop", "sync", "elapsed", "start", "step1", "stop", "sync", "elapsed"]


def test_summary_statistics():
    samples = [float(x) for x in range(1, 101)]
    s = summary(samples)
    assert s["n"] == 100 and s["p50"] == pytest.approx(50.5) and s["mean"] == pytest.approx(50.5)
    assert s["p95"] == pytest.approx(np.percentile(samples, 95))
    assert s["p99"] == pytest.approx(np.percentile(samples, 99))
    assert s["iqr"] == pytest.approx(np.percentile(samples, 75) - np.percentile(samples, 25))
    assert s["cv"] == pytest.approx(np.std(samples, ddof=1) / 50.5)
    assert s["noisy"] is True  # IQR is ~98% of the median
    assert summary([10.0, 10.1, 9.9, 10.0])["noisy"] is False
    with pytest.raises(ValueError):
        summary([])


def test_bootstrap_intervals_cover_and_shrink():
    rng = np.random.default_rng(1)
    small, large = rng.lognormal(0, 0.3, 20), rng.lognormal(0, 0.3, 2000)
    ci_small, ci_large = bootstrap_median(small), bootstrap_median(large)
    assert ci_small.low <= np.median(small) <= ci_small.high
    assert ci_large.half_width < ci_small.half_width
    assert ci_large.low > 0.9 and ci_large.high < 1.1  # true median of lognormal(0, .3) is 1
    assert bootstrap_median(small) == bootstrap_median(small), "fixed seed: re-aggregation is reproducible"


def test_ratio_interval():
    rng = np.random.default_rng(2)
    fast, slow = rng.normal(10, 0.5, 500), rng.normal(20, 1.0, 500)
    ratio = bootstrap_ratio_of_medians(slow, fast)  # throughput(fast)/throughput(slow) from latencies
    assert ratio.low < 2.0 < ratio.high and ratio.high - ratio.low < 0.1


def test_throughput_from_median_and_total():
    rates = throughput(8, [2.0, 2.0, 2.0, 10.0])
    assert rates["median"] == pytest.approx(8 / 0.002)
    assert rates["total"] == pytest.approx(8 * 4 / 0.016)
    interval = throughput_interval(8, [2.0, 2.1, 1.9, 2.0, 2.05])
    assert interval.low <= interval.estimate <= interval.high


def test_half_binomial_cdf_matches_scipy_and_picks_the_same_ranks():
    """The measuring processes' scipy-free binomial CDF (start-up cost) against scipy.special.bdtr."""
    import math

    from scipy import special

    from fwbench.trackers.stats import _half_binomial_cdf

    for n in [*range(1, 300), 1000, 4097, 20000, 100000]:
        ks = np.arange(max(0, int(n / 2 - 6 * math.sqrt(n)) - 2), n // 2 + 1)
        ours, reference = _half_binomial_cdf(ks, n), special.bdtr(ks, n, 0.5)
        assert np.max(np.abs(ours - reference)) < 1e-9, n
        for alpha in (0.005, 0.025, 0.05):
            assert np.searchsorted(ours, alpha, side="right") == np.searchsorted(reference, alpha, side="right")
