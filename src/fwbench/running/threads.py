"""Pinning a benchmark process to exactly N threads, before any framework starts its thread pools.

XLA:CPU sizes its intra-op pool from the CPUs the process may run on (sched_getaffinity), and OpenMP/MKL read their
environment variables at start-up, so both must be set before jax or torch is imported. The backends then set
their own knobs (torch.set_num_threads) and report what the frameworks actually use.
"""

from __future__ import annotations

import os

THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
# OpenBLAS's threads busy-wait for 2^28 cycles (about 0.1 s) after each call before they sleep, so a warm worker
# waiting for its next burst (fwbench.scenarios.blocks) spins a core through most of the wait and takes it from the
# worker that runs: 99% of a core over a 0.1 s wait after NumPy matmuls, up to 56% over whole launches of the default
# study's NumPy workers (measured, docs/measurement.md). 4 is OpenBLAS's least timeout (2^4 cycles): its threads sleep
# at once. Set for every worker alike, unless the environment already sets it; recorded with the threads.
QUIET_WAITING_ENV = {"OPENBLAS_THREAD_TIMEOUT": "4"}


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def pin_threads(threads: int, cpus: list[int] | None = None) -> dict[str, object]:
    """Restrict this process (and its future children) to `threads` CPUs and set the thread env vars.

    A request above the CPUs this process may use is clamped, so that both frameworks get the same count (XLA
    cannot use more threads than schedulable CPUs); the result records requested and effective counts. `cpus`
    narrows the choice to a share of the machine (a GPU slot's cores), so concurrent cells never share a core.
    """
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    cpus = available_cpus() if cpus is None else sorted(set(cpus) & set(available_cpus()))
    if not cpus:
        raise ValueError("none of the CPUs given to pin_threads is available to this process")
    effective = min(threads, len(cpus))
    if cpus[:effective] != available_cpus():
        os.sched_setaffinity(0, cpus[:effective])
    for var in THREAD_ENV_VARS:
        os.environ[var] = str(effective)
    for var, value in QUIET_WAITING_ENV.items():
        os.environ.setdefault(var, value)
    return {
        "requested": threads,
        "effective": effective,
        "clamped": effective != threads,
        "affinity": available_cpus(),
        "cpus_available": len(cpus),
        "waiting": {var: os.environ[var] for var in QUIET_WAITING_ENV},
    }
