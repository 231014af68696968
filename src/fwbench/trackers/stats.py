"""Statistics of raw latency samples: robust summaries, bootstrap confidence intervals, noise flags.

Bootstrap intervals use a fixed seed so that re-aggregating the same samples gives the same interval; the
percentile method is used because the median's sampling distribution is not symmetric for skewed latencies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
NOISE_IQR_FRACTION = 0.10  # a cell whose IQR exceeds 10% of its median is flagged noisy (torch.utils.benchmark)


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float

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
        "noisy": bool(iqr / p50 > NOISE_IQR_FRACTION) if p50 else False,
    }
