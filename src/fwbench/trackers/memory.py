"""Host memory of the benchmark process, each figure labelled with where it came from."""

from __future__ import annotations

import resource

import psutil

MB = 1024.0 * 1024.0


def rss_mb() -> float:
    """Current resident set size (psutil.Process.memory_info().rss)."""
    return psutil.Process().memory_info().rss / MB


def peak_rss_mb() -> float:
    """The kernel's high-water mark of resident memory for this process (getrusage ru_maxrss, KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
