"""What every framework's timing shares: the throughput and latency summaries of raw samples. The timed iterations
themselves run in bursts (fwbench.scenarios.blocks): each iteration is bracketed by a device synchronise, so the host
clock measures completed work, and nothing but the step and the synchronise falls between the two clock reads, for
every framework. That host clock is the study's one timer. A device-side timer existed for PyTorch alone (CUDA
events, in a pass after the bursts), disagreed with the host timing it was meant to confirm (compiled
EfficientNet-B0 on an H200: 8.44 ms against 7.42 ms), and had no JAX or TensorFlow counterpart outside their
profilers: a timer only one framework has cannot be compared, so there is none (docs/measurement.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fwbench.trackers.stats import Interval, bootstrap_median, summary


def throughput(batch_size: int, samples_ms: list[float]) -> dict[str, float]:
    """Images per second: from the median step (robust to stragglers) and from total time (what a user waits)."""
    values = np.asarray(samples_ms, dtype=np.float64)
    return {
        "median": float(batch_size * 1000.0 / np.median(values)),
        "total": float(batch_size * values.size * 1000.0 / values.sum()),
    }


def throughput_interval(batch_size: int, samples_ms: list[float]) -> Interval:
    """Bootstrap 95% CI of the median-based throughput."""
    latency = bootstrap_median(samples_ms)
    return Interval(
        batch_size * 1000.0 / latency.estimate, batch_size * 1000.0 / latency.high, batch_size * 1000.0 / latency.low
    )


def timing_metrics(samples_ms: list[float], batch_size: int, *, within_interval: bool = True) -> dict[str, Any]:
    """The timing part of a cell's metrics from raw latencies; used per trial and for the pooled trials alike. The
    within-process bootstrap interval (two 2000-resample bootstraps: seconds for a long sample) only where it is
    reported: pooled over several trials it would treat them as one process, so the caller asks for none."""
    rates = throughput(batch_size, samples_ms)
    latency = summary(samples_ms)
    metrics = {
        "throughput_img_s": rates["median"],
        "throughput_img_s_total": rates["total"],
        "latency_ms": {k: v for k, v in latency.items() if k != "noisy"},
        "noisy": latency["noisy"],
        "n_iters": len(samples_ms),
    }
    if within_interval:
        median_ci, rate_ci = bootstrap_median(samples_ms), throughput_interval(batch_size, samples_ms)
        metrics["ci95"] = {
            "latency_p50_ms": [median_ci.low, median_ci.high],
            "throughput_img_s": [rate_ci.low, rate_ci.high],
            "relative_half_width": median_ci.relative_half_width(),
            "method": "percentile bootstrap of the median, 2000 resamples",
        }
    return metrics
