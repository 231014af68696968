from __future__ import annotations

import itertools

import numpy as np
import pytest

from fwbench.trackers import latency
from fwbench.trackers.latency import StopRule, latency_summary, throughput, timed_loop


class FakeClock:
    """perf_counter stand-in: each call advances by the next step, so the loop's decisions are deterministic."""

    def __init__(self, step_s):
        self.now, self.step_s = 0.0, step_s

    def __call__(self):
        self.now += self.step_s
        return self.now


def test_loop_runs_until_both_minimums(monkeypatch):
    monkeypatch.setattr(latency.time, "perf_counter", FakeClock(0.01))
    synced = []
    run = timed_loop(
        lambda: "out", synced.append, StopRule(min_iters=5, min_seconds=0.2, max_iters=1000, max_seconds=10)
    )
    # two clock reads per iteration at 10 ms each -> 20 ms per iteration -> 0.2 s needs about 10 iterations
    assert run.stop_reason == "min_reached"
    assert 9 <= len(run.samples_s) <= 11
    assert len(synced) == len(run.samples_s), "every iteration must synchronise on its output"
    assert all(s == pytest.approx(0.01) for s in run.samples_s)


def test_loop_count_minimum_dominates(monkeypatch):
    monkeypatch.setattr(latency.time, "perf_counter", FakeClock(0.001))
    run = timed_loop(lambda: None, lambda _: None, StopRule(50, 0.0, 1000, 10))
    assert len(run.samples_s) == 50


def test_loop_stops_at_maximums(monkeypatch):
    monkeypatch.setattr(latency.time, "perf_counter", FakeClock(1.0))
    run = timed_loop(lambda: None, lambda _: None, StopRule(100, 0.0, 1000, 5.0))
    assert run.stop_reason == "max_seconds" and len(run.samples_s) < 100
    monkeypatch.setattr(latency.time, "perf_counter", FakeClock(0.001))
    run = timed_loop(lambda: None, lambda _: None, StopRule(10, 100.0, 30, 1e9))
    assert run.stop_reason == "max_iters" and len(run.samples_s) == 30


def test_summary_statistics():
    samples = [float(x) for x in range(1, 101)]
    summary = latency_summary(samples)
    assert summary["p50"] == pytest.approx(50.5)
    assert summary["p95"] == pytest.approx(np.percentile(samples, 95))
    assert summary["p99"] == pytest.approx(np.percentile(samples, 99))
    assert summary["mean"] == pytest.approx(50.5)
    assert summary["iqr"] == pytest.approx(np.percentile(samples, 75) - np.percentile(samples, 25))
    with pytest.raises(ValueError):
        latency_summary([])


def test_throughput_from_median_and_total():
    rates = throughput(8, [2.0, 2.0, 2.0, 10.0])
    assert rates["median"] == pytest.approx(8 / 0.002)
    assert rates["total"] == pytest.approx(8 * 4 / 0.016)
    assert list(itertools.islice(iter(rates), 2)) == ["median", "total"]
