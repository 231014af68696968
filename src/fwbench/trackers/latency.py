"""Timed loop and latency statistics, identical for every framework.

Each iteration is bracketed by a device synchronise, so the host clock measures completed work: the loop
synchronises, reads the clock, runs the step, synchronises on its output, reads the clock again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class StopRule:
    min_iters: int
    min_seconds: float
    max_iters: int
    max_seconds: float


@dataclass
class TimedRun:
    samples_s: list[float]
    stop_reason: str
    wall_s: float


def timed_loop(step: Callable[[], Any], sync: Callable[[Any], None], rule: StopRule) -> TimedRun:
    """Run `step` until both minimums are met (or a maximum is hit); return per-iteration seconds."""
    samples: list[float] = []
    clock = time.perf_counter
    start = clock()
    while True:
        t0 = clock()
        sync(step())
        t1 = clock()
        samples.append(t1 - t0)
        elapsed = t1 - start
        if len(samples) >= rule.max_iters:
            return TimedRun(samples, "max_iters", elapsed)
        if elapsed >= rule.max_seconds:
            reason = "max_seconds" if len(samples) < rule.min_iters else "min_reached"
            return TimedRun(samples, reason, elapsed)
        if len(samples) >= rule.min_iters and elapsed >= rule.min_seconds:
            return TimedRun(samples, "min_reached", elapsed)


def latency_summary(samples_ms: list[float]) -> dict[str, float]:
    values = np.asarray(samples_ms, dtype=np.float64)
    if values.size == 0:
        raise ValueError("no latency samples")
    p25, p50, p75, p95, p99 = np.percentile(values, [25, 50, 75, 95, 99])
    return {
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "mean": float(values.mean()),
        "min": float(values.min()),
        "max": float(values.max()),
        "std": float(values.std(ddof=1)) if values.size > 1 else 0.0,
        "iqr": float(p75 - p25),
    }


def throughput(batch_size: int, samples_ms: list[float]) -> dict[str, float]:
    """Images per second: from the median step (robust to stragglers) and from total time (what a user waits)."""
    values = np.asarray(samples_ms, dtype=np.float64)
    return {
        "median": float(batch_size * 1000.0 / np.median(values)),
        "total": float(batch_size * values.size * 1000.0 / values.sum()),
    }
