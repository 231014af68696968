"""Statistics of raw latency samples: robust summaries, bootstrap confidence intervals, noise flags.

Bootstrap intervals use a fixed seed so that re-aggregating the same samples gives the same interval; the
percentile method is used because the median's sampling distribution is not symmetric for skewed latencies.
The timed loop's stopping rule uses the distribution-free order-statistic interval of the median instead (binomial
ranks, O(n) with a partial sort), so deciding whether to stop costs almost nothing inside the measured window.

Across fresh processes (trials) the unit is the process, not the sample: a process's median carries the
process-to-process variation that no amount of samples inside it can show. Trial throughputs are summarised by their
geometric mean with a Student-t interval on their logs (n - 1 degrees of freedom); a framework ratio from
interleaved rounds is the geometric mean of the per-round ratios, with the same interval on their logs (paired).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
WITHIN_PROCESS_ONLY = "within one process only (trials=1): does not include process-to-process variation"
NOISE_IQR_FRACTION = 0.10  # a cell whose IQR exceeds 10% of its median is flagged noisy (torch.utils.benchmark)


@dataclass(frozen=True)
class Interval:
    """An estimate with its 95% interval. A t interval on logs also keeps its standard error on the log scale and its
    degrees of freedom, from which a verdict can be drawn at another level (a multiplicity-adjusted one, an
    equivalence test: fwbench.analysis.common.verdicts); a bootstrap interval has neither."""

    estimate: float
    low: float
    high: float
    se_log: float | None = None
    df: float | None = None

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    def relative_half_width(self) -> float:
        return self.half_width / self.estimate if self.estimate else float("inf")


def _rng(seed: int | None) -> np.random.Generator:
    return np.random.default_rng(BOOTSTRAP_SEED if seed is None else seed)


def bootstrap_median(
    samples, *, confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES, seed: int | None = None
) -> Interval:
    values = np.asarray(samples, dtype=np.float64)
    if values.size == 0:
        raise ValueError("no samples")
    index = _rng(seed).integers(0, values.size, size=(resamples, values.size))
    medians = np.median(values[index], axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(medians, [alpha, 1.0 - alpha])
    return Interval(float(np.median(values)), float(low), float(high))


@functools.lru_cache(maxsize=512)
def median_ranks(n: int, confidence: float = 0.95) -> tuple[int, int] | None:
    """0-based ranks (j, k) of n sorted samples such that [x_(j), x_(k)] covers the population median with
    probability >= `confidence` whatever the distribution (the count below the median is Binomial(n, 1/2)); None
    when n is too small for any such interval."""
    alpha = (1.0 - confidence) / 2.0
    # P(B <= n/2 - 6 sqrt(n)) is ~1e-9 (normal tail at 12 sigma): the search window never misses the rank
    ks = np.arange(max(0, int(n / 2 - 6 * math.sqrt(n)) - 2), n // 2 + 1)
    below = int(np.searchsorted(_half_binomial_cdf(ks, n), alpha, side="right"))  # ranks with P(B <= k) <= alpha
    if below == 0:
        return None
    j = int(ks[below - 1])  # coverage of [x_(j), x_(n-1-j)] (0-based) is 1 - 2 P(B <= j) >= confidence
    return j, n - 1 - j


def _half_binomial_cdf(ks: np.ndarray, n: int) -> np.ndarray:
    """P(B <= k) for B ~ Binomial(n, 1/2) at the consecutive ranks `ks`, from log-gamma pmfs (scipy.special.bdtr
    gives the same to ~1e-12; tests compare them). Without scipy: importing scipy.special costs every measuring
    process ~0.3 s of start-up. Mass below ks[0] (< 1e-9 by the caller's window) is left out."""
    log_choose = [math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) for k in ks.tolist()]
    return np.cumsum(np.exp(np.asarray(log_choose) - n * math.log(2.0)))


def order_statistic_median(samples, *, confidence: float = 0.95) -> Interval:
    """Distribution-free CI of the median from binomial ranks: no resampling, one partial sort (np.partition).
    Infinite bounds when there are too few samples for the confidence asked."""
    values = np.asarray(samples, dtype=np.float64)
    n = values.size
    if n == 0:
        raise ValueError("no samples")
    ranks = median_ranks(n, confidence)
    middle = [(n - 1) // 2, n // 2]
    part = np.partition(values, sorted({*middle, *(ranks or ())}))
    median = float((part[middle[0]] + part[middle[1]]) / 2.0)
    if ranks is None:
        return Interval(median, -math.inf, math.inf)
    return Interval(median, float(part[ranks[0]]), float(part[ranks[1]]))


def bootstrap_ratio_of_medians(
    numerator, denominator, *, confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES, seed: int | None = None
) -> Interval:
    """CI of median(numerator) / median(denominator), resampling each sample set independently.

    For a throughput ratio A/B from latency samples, pass B's latencies as numerator and A's as denominator.
    """
    a, b = np.asarray(numerator, np.float64), np.asarray(denominator, np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("no samples")
    rng = _rng(seed)
    ma = np.median(a[rng.integers(0, a.size, size=(resamples, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, size=(resamples, b.size))], axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(ma / mb, [alpha, 1.0 - alpha])
    return Interval(float(np.median(a) / np.median(b)), float(low), float(high))


def summary(samples_ms) -> dict[str, float | int | bool]:
    """n, median, mean, p50/p95/p99, IQR, CV and the noise flag of raw per-iteration latencies (ms)."""
    values = np.asarray(samples_ms, dtype=np.float64)
    if values.size == 0:
        raise ValueError("no latency samples")
    p25, p50, p75, p95, p99 = np.percentile(values, [25, 50, 75, 95, 99])
    mean = float(values.mean())
    std = float(values.std(ddof=1)) if values.size > 1 else 0.0
    iqr = float(p75 - p25)
    return {
        "n": int(values.size),
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "mean": mean,
        "min": float(values.min()),
        "max": float(values.max()),
        "std": std,
        "iqr": iqr,
        "cv": std / mean if mean else 0.0,
        "noisy": _noisy(iqr, float(p50)),
    }


def _noisy(iqr: float, median: float) -> bool:
    return bool(iqr / median > NOISE_IQR_FRACTION) if median else False


def is_noisy(samples_ms) -> bool:
    """The noise flag of one process's samples (as `summary` gives it): IQR above NOISE_IQR_FRACTION of the median.
    Judge each trial on its own samples: pooled over processes, the IQR mixes in the differences between trials."""
    values = np.asarray(samples_ms, dtype=np.float64)
    if values.size == 0:
        raise ValueError("no latency samples")
    p25, p50, p75 = np.percentile(values, [25, 50, 75])
    return _noisy(float(p75 - p25), float(p50))


def noisy_trials(trial_samples_ms) -> list[bool]:
    """The noise flag of each trial, each from that trial's own samples (e.g. a micro variant's `trial_samples_ms`)."""
    return [is_noisy(samples) for samples in trial_samples_ms]


def _t_quantile(df: float, confidence: float) -> float:
    from scipy import special  # here, not at import: measuring processes never need it (start-up cost)

    return float(special.stdtrit(df, 0.5 + confidence / 2.0))


def geometric_mean_interval(values, *, confidence: float = 0.95) -> Interval:
    """Geometric mean of positive values with a Student-t CI on their logs (n - 1 df), exponentiated: for per-trial
    throughputs (one value per process) or per-round ratios. Needs at least two values."""
    logs = np.log(np.asarray(values, dtype=np.float64))
    if logs.size < 2:
        raise ValueError("a t interval needs at least two values")
    if not np.isfinite(logs).all():
        raise ValueError("values must be positive and finite")
    mean = float(logs.mean())
    se = float(logs.std(ddof=1)) / math.sqrt(logs.size)
    half = _t_quantile(logs.size - 1, confidence) * se
    return Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), se, float(logs.size - 1))


def paired_ratio_interval(numerator, denominator, *, confidence: float = 0.95) -> Interval:
    """Ratio numerator/denominator from paired values (element k of both measured at the same moment, e.g. one
    round of interleaved trials): geometric mean of the per-pair ratios with a t CI on their logs (pairs - 1 df).
    Drift that moves both members of a pair alike cancels in their ratio."""
    a, b = np.asarray(numerator, np.float64), np.asarray(denominator, np.float64)
    if a.shape != b.shape:
        raise ValueError("paired values need equal lengths")
    return geometric_mean_interval(a / b, confidence=confidence)


def welch_ratio_interval(numerator, denominator, *, confidence: float = 0.95) -> Interval:
    """Ratio of the geometric means of two unpaired sets of values (e.g. trials of two cells not measured
    interleaved), with a Welch t CI on the difference of their mean logs (Welch-Satterthwaite df)."""
    a, b = np.log(np.asarray(numerator, np.float64)), np.log(np.asarray(denominator, np.float64))
    if a.size < 2 or b.size < 2:
        raise ValueError("a Welch interval needs at least two values on each side")
    va, vb = float(a.var(ddof=1)) / a.size, float(b.var(ddof=1)) / b.size
    diff, se = float(a.mean() - b.mean()), math.sqrt(va + vb)
    if se == 0.0:
        return Interval(math.exp(diff), math.exp(diff), math.exp(diff), 0.0, float(a.size + b.size - 2))
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = _t_quantile(df, confidence) * se
    return Interval(math.exp(diff), math.exp(diff - half), math.exp(diff + half), se, df)
