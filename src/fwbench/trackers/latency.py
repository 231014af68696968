"""Timed loop, identical for every framework, with the stopping rule of the measurement core.

Each iteration is bracketed by a device synchronise, so the host clock measures completed work; between the two
clock reads there is nothing but the step and the synchronise, for every framework. The loop runs until
`min_iters` and `min_seconds` are both reached, then until the 95% confidence interval of the median is narrower
than `ci_target` (relative half-width) or a maximum is hit; a cell stopped by a maximum before its interval was
narrow enough is flagged, never silently reported as precise. The stopping decision uses the distribution-free
order-statistic interval (binomial ranks, one partial sort), so the checks, which run inside the energy and memory
windows, cost almost nothing (their total time is returned); the reported interval is the bootstrap, computed after
the loop. Device time (CUDA events) is measured in its own pass after the host-timed loop (`device_pass`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fwbench.trackers.stats import Interval, bootstrap_median, order_statistic_median, summary

DEVICE_PASS_ITERS = 100  # at most this many steps in the device-time pass after the host-timed loop
STOP_CI_METHOD = "distribution-free order-statistic 95% CI of the median (binomial ranks)"


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
    check_s: float = 0.0  # total time the stopping checks took (inside wall_s, outside every sample)

    @property
    def ci_reached(self) -> bool:
        return self.stop_reason == "ci_reached"


def timed_loop(step: Callable[[int], Any], sync: Callable[[Any], None], rule: StopRule) -> TimedRun:
    """Run `step(i)` under the stopping rule; return per-iteration seconds (the decision work is never timed)."""
    samples: list[float] = []
    clock = time.perf_counter
    start = clock()
    next_check, checks, check_s = rule.min_iters, 0, 0.0
    while True:
        t0 = clock()
        sync(step(len(samples)))
        t1 = clock()
        samples.append(t1 - t0)
        elapsed, n = t1 - start, len(samples)
        if n >= rule.max_iters:
            return TimedRun(samples, "max_iters", elapsed, checks, check_s)
        if elapsed >= rule.max_seconds:
            return TimedRun(samples, "max_seconds", elapsed, checks, check_s)
        if n >= next_check and elapsed >= rule.min_seconds:
            checks += 1
            narrow = order_statistic_median(samples).relative_half_width() <= rule.ci_target
            t2 = clock()
            check_s += t2 - t1
            if narrow:
                return TimedRun(samples, "ci_reached", t2 - start, checks, check_s)
            next_check = n + max(5, n // 5)  # geometric spacing keeps the number of checks small


def device_pass(step: Callable[[int], Any], sync: Callable[[Any], None], timer: Any, iters: int) -> list[float]:
    """Device milliseconds of `iters` steps from a device timer (CUDA events: start() before the step, stop()
    after it, elapsed_ms() once synchronised), in a pass of its own so that the host-timed samples never contain
    the event records."""
    device_ms = []
    for i in range(iters):
        timer.start()
        out = step(i)
        timer.stop()
        sync(out)
        device_ms.append(float(timer.elapsed_ms()))
    return device_ms


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
