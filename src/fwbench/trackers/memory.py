"""Host memory of the benchmark process, each figure labelled with where it came from."""

from __future__ import annotations

import resource
import threading

import psutil

MB = 1024.0 * 1024.0
# Sampling intervals: fine while the model loads and compiles (where the peaks are), coarse inside the timed loop,
# where a 10 ms sampler cost JAX cells 2.5-4.5% of throughput on a 2-core machine (benchmarks/fidelity.py, paired).
LOAD_INTERVAL_S = 0.01
TIMED_INTERVAL_S = 0.25


def rss_mb() -> float:
    """Current resident set size (psutil.Process.memory_info().rss)."""
    return psutil.Process().memory_info().rss / MB


def peak_rss_mb() -> float:
    """The kernel's high-water mark of resident memory for this process (getrusage ru_maxrss, KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class RssSampler:
    """Background thread sampling this process's RSS, for a peak that belongs to a window rather than the process's
    whole life (ru_maxrss also counts imports)."""

    def __init__(self, interval_s: float = LOAD_INTERVAL_S):
        self.interval_s, self.samples = interval_s, 0
        self.peak_mb = rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        process = psutil.Process()
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, process.memory_info().rss / MB)
            self.samples += 1
            self._stop.wait(self.interval_s)

    def set_interval(self, interval_s: float) -> None:
        """Takes effect after the current wait (at most the previous interval)."""
        self.interval_s = interval_s

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, rss_mb())
