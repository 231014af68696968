"""Timed loop, identical for every framework, with the stopping rule of the measurement core.

Each iteration is bracketed by a device synchronise, so the host clock measures completed work. The loop runs until
`min_iters` and `min_seconds` are both reached, then until the bootstrap 95% confidence interval of the median is
narrower than `ci_target` (relative half-width) or a maximum is hit; a cell stopped by a maximum before its
interval was narrow enough is flagged, never silently reported as precise.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fwbench.trackers.stats import Interval, bootstrap_median, summary

CHECK_RESAMPLES = 500  # a cheaper bootstrap while deciding whether to stop; the reported interval uses the default


@dataclass(frozen=True)
class StopRule:
    min_iters: int
    min_seconds: float
    max_iters: int
    max_seconds: float
    ci_target: float = 0.02


@dataclass
class TimedRun:
    samples_s: list[float]
    stop_reason: str  # "ci_reached" | "max_seconds" | "max_iters"
    wall_s: float
    checks: int = 0
    device_ms: list[float] = field(default_factory=list)

    @property
    def ci_reached(self) -> bool:
        return self.stop_reason == "ci_reached"


def timed_loop(
    step: Callable[[int], Any], sync: Callable[[Any], None], rule: StopRule, device_timer: Any = None
) -> TimedRun:
    """Run `step(i)` under the stopping rule; return per-iteration seconds (the decision work is never timed).

    With a `device_timer` (CUDA events: start() before the step, stop() after it, elapsed_ms() once synchronised),
    each iteration's device time is recorded next to its host time.
    """
    samples: list[float] = []
    device_ms: list[float] = []
    clock = time.perf_counter
    start = clock()
    next_check, checks = rule.min_iters, 0
    while True:
        t0 = clock()
        if device_timer is not None:
            device_timer.start()
            out = step(len(samples))
            device_timer.stop()
            sync(out)
        else:
            sync(step(len(samples)))
        t1 = clock()
        samples.append(t1 - t0)
        if device_timer is not None:
            device_ms.append(device_timer.elapsed_ms())
        elapsed, n = t1 - start, len(samples)
        if n >= rule.max_iters:
            return TimedRun(samples, "max_iters", elapsed, checks, device_ms)
        if elapsed >= rule.max_seconds:
            return TimedRun(samples, "max_seconds", elapsed, checks, device_ms)
        if n >= next_check and elapsed >= rule.min_seconds:
            checks += 1
            interval = bootstrap_median(samples, resamples=CHECK_RESAMPLES)
            if interval.relative_half_width() <= rule.ci_target:
                return TimedRun(samples, "ci_reached", clock() - start, checks, device_ms)
            next_check = n + max(5, n // 5)  # geometric spacing keeps the checks' cost negligible


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


def timing_metrics(samples_ms: list[float], batch_size: int) -> dict[str, Any]:
    """The timing part of a cell's metrics from raw latencies; used per trial and for the pooled trials alike."""
    rates = throughput(batch_size, samples_ms)
    latency = summary(samples_ms)
    median_ci, rate_ci = bootstrap_median(samples_ms), throughput_interval(batch_size, samples_ms)
    return {
        "throughput_img_s": rates["median"],
        "throughput_img_s_total": rates["total"],
        "latency_ms": {k: v for k, v in latency.items() if k != "noisy"},
        "ci95": {
            "latency_p50_ms": [median_ci.low, median_ci.high],
            "throughput_img_s": [rate_ci.low, rate_ci.high],
            "relative_half_width": median_ci.relative_half_width(),
            "method": "percentile bootstrap of the median, 2000 resamples",
        },
        "noisy": latency["noisy"],
        "n_iters": len(samples_ms),
    }
