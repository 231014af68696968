from __future__ import annotations

import numpy as np
import pytest

from fwbench.trackers.latency import throughput, throughput_interval
from fwbench.trackers.stats import (
    bootstrap_median,
    bootstrap_ratio_of_medians,
    median_ranks,
    order_statistic_median,
    summary,
)


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
