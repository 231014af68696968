"""FLOP rates: the device's measured peak (a study-level probe) and each cell's model FLOP utilisation (MFU).

The peak is measured, not taken from a datasheet: square matmuls in fp32, tf32 and bf16, in both frameworks, the
best rate taken per precision, so every cell is divided by the peak of its own precision. The matrix size is found
by time, not fixed: small matrices are launch-bound on a GPU (a 1024^2 matmul takes microseconds on an H100), so
the size doubles from `PROBE_START` until the rate improves by less than 5% with calls long enough to be
compute-bound, bounded by `PROBE_MAX`, by device memory and by a time budget per framework and precision (on a
slow CPU the next size is skipped when its predicted calls do not fit). Every size tried is recorded with its rate.
TF32 exists only on NVIDIA GPUs: on a CPU the tf32 peak is the fp32 one, recorded as such with the reason.

A cell's achieved rate is its model FLOPs per image (FlopCounterMode's count, the same for both frameworks, so MFU
compares like with like) times its images per second.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

PRECISIONS = ("fp32", "tf32", "bf16")
# The probe a study precision without one of its own is measured against: `default` (each framework's own float32
# arithmetic, TF32 in some of a GPU's operations) against the TF32 peak, the fastest arithmetic any framework's
# default uses (the fp32 one on a CPU).
PEAK_OF = {"default": "tf32"}
PROBE_START = 1024
PROBE_MAX = 16384
PROBE_SECONDS = 0.5  # of timed calls per framework, precision and size (at least one call)
PROBE_BUDGET_S = 8.0  # per framework and precision: a larger size is tried only if its predicted calls fit
MIN_CALL_S = 0.005  # a call shorter than this may be launch-bound, so the size keeps growing
MIN_GAIN = 0.05  # ... and it keeps growing while doubling it improves the rate by at least 5%
MEMORY_FRACTION = 0.5  # a size's three matrices take at most half the free device memory
# The matmul precision each cell precision runs with in the JAX backend (backends/jax.py), mirrored here.
JAX_MATMUL_PRECISION = {"fp32": "highest", "tf32": "tensorfloat32", "bf16": "default"}
TF32_ON_CPU = "TF32 does not exist on CPUs: tf32 cells compute in fp32 there, so their peak is the fp32 one"


def _best_rate(step, sync, flops: float, seconds: float) -> tuple[float, float]:
    """(best FLOP/s, duration of that call): one warm-up call with the measured shapes, then `seconds` of calls."""
    sync(step())  # compile / warm up with the measured shapes
    best, end = float("inf"), time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        sync(step())
        best = min(best, time.perf_counter() - t0)
        if time.perf_counter() >= end:
            return flops / best, best


def grow(
    measure: Callable[[int, float], tuple[float, float]],
    *,
    free_bytes: Callable[[], float],
    element_bytes: int,
    start: int = PROBE_START,
    max_size: int = PROBE_MAX,
    seconds: float = PROBE_SECONDS,
    budget_s: float = PROBE_BUDGET_S,
    min_call_s: float = MIN_CALL_S,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Any]:
    """Double the matrix size from `start` until the rate stops improving (< MIN_GAIN over the best smaller size)
    with calls of at least `min_call_s`, or a bound (largest size, memory, time budget) stops it.

    `measure(size, seconds)` returns (FLOP/s, seconds of its best call). The size with the best rate is the peak.
    The budget counts from the end of the first size: its time holds the framework's start on the device and its
    first compile, which no size changes (JAX's took 8.7 s of an 8 s budget on an H200, stopping its probe at 1024).
    """
    begin, tried, size = clock(), [], start
    growing_since: float | None = None
    while True:
        rate, call_s = measure(size, seconds)
        growing_since = clock() if growing_since is None else growing_since
        before = max((t["flops_per_s"] for t in tried), default=0.0)
        tried.append({"size": size, "flops_per_s": rate, "call_s": call_s})
        if before and rate < (1.0 + MIN_GAIN) * before and call_s >= min_call_s:
            stop = f"rate improved by < {MIN_GAIN:.0%} over the smaller sizes, calls >= {min_call_s * 1e3:g} ms"
            break
        bigger = 2 * size
        if bigger > max_size:
            stop = f"largest size ({max_size})"
            break
        if 3 * bigger**2 * element_bytes > MEMORY_FRACTION * free_bytes():
            stop = f"size {bigger}: its matrices would exceed {MEMORY_FRACTION:.0%} of free device memory"
            break
        predicted = 2 * (2.0 * bigger**3 / max(rate, before))  # warm-up + one timed call at the best rate so far
        if clock() - growing_since + predicted > budget_s:
            stop = f"size {bigger}: its predicted {predicted:.2g} s would exceed the {budget_s:g} s budget"
            break
        size = bigger
    best = max(tried, key=lambda t: t["flops_per_s"])
    return {
        "peak_flops": best["flops_per_s"],
        "best_size": best["size"],
        "sizes": tried,
        "stopped": stop,
        "elapsed_s": clock() - begin,
    }


def _host_free_bytes() -> float:
    import psutil

    return float(psutil.virtual_memory().available)


class TorchProbe:
    name = "torch"

    def __init__(self):
        import torch

        self.torch = torch
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.on_gpu = self.device.type == "cuda"

    def free_bytes(self) -> float:
        if self.on_gpu:
            return float(self.torch.cuda.mem_get_info(self.device)[0])
        return _host_free_bytes()

    def measure(self, precision: str, size: int, seconds: float) -> tuple[float, float]:
        torch = self.torch
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        allow = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"  # fp32 is true fp32, as in the cells
        try:
            a = torch.randn(size, size, device=self.device, dtype=dtype)
            b = torch.randn(size, size, device=self.device, dtype=dtype)

            def sync(_):
                if self.on_gpu:
                    torch.cuda.synchronize(self.device)

            return _best_rate(lambda: a @ b, sync, 2.0 * size**3, seconds)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = allow
            a = b = None
            if self.on_gpu:
                torch.cuda.empty_cache()


class JaxProbe:
    name = "jax"

    def __init__(self):
        import jax

        self.jax = jax
        self.device = jax.devices()[0]
        self.on_gpu = self.device.platform != "cpu"

    def free_bytes(self) -> float:
        stats = self.device.memory_stats() if self.on_gpu else None
        if stats and "bytes_limit" in stats:
            return float(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
        return _host_free_bytes()

    def measure(self, precision: str, size: int, seconds: float) -> tuple[float, float]:
        jax = self.jax
        import jax.numpy as jnp

        dtype = jnp.bfloat16 if precision == "bf16" else jnp.float32
        key_a, key_b = jax.random.split(jax.random.PRNGKey(0))
        a, b = jax.random.normal(key_a, (size, size), dtype), jax.random.normal(key_b, (size, size), dtype)
        matmul_precision = JAX_MATMUL_PRECISION[precision]
        matmul = jax.jit(lambda x, y: jnp.matmul(x, y, precision=matmul_precision)).lower(a, b).compile()
        return _best_rate(lambda: matmul(a, b), lambda out: out.block_until_ready(), 2.0 * size**3, seconds)


def probed_precisions(study_precisions) -> tuple[str, ...]:
    """The precisions a study's probe measures: its cells' precisions, and fp32 always (tf32 on a CPU is the fp32
    peak, and fp32 is the reference every report can quote). Probing a precision no cell uses cost the default CPU
    study ~10 s of its time to report."""
    wanted = {"fp32", *(PEAK_OF.get(p, p) for p in study_precisions)}
    return tuple(p for p in PRECISIONS if p in wanted)


def measure_peak(
    *,
    precisions=PRECISIONS,
    start: int = PROBE_START,
    max_size: int = PROBE_MAX,
    seconds: float = PROBE_SECONDS,
    budget_s: float = PROBE_BUDGET_S,
    min_call_s: float = MIN_CALL_S,
) -> dict[str, Any]:
    """{"fp32": {...}, "tf32": {...}, "bf16": {...}} for `precisions` (fp32 first; see probed_precisions): best
    FLOP/s per precision, with every (framework, size) probe (`probes`, "framework/size" -> FLOP/s) and each
    framework's growth (`series`: sizes tried, why it stopped)."""
    begin = time.perf_counter()
    if "fp32" not in precisions or not set(precisions) <= set(PRECISIONS):
        raise ValueError(f"precisions {list(precisions)}: must include fp32 and be among {list(PRECISIONS)}")
    precisions = [p for p in PRECISIONS if p in precisions]  # fp32 first: CPU tf32 copies its series
    probes = (TorchProbe(), JaxProbe())
    out: dict[str, Any] = {}
    for precision in precisions:
        series: dict[str, Any] = {}
        for probe in probes:
            if precision == "tf32" and not probe.on_gpu:
                series[probe.name] = {**out["fp32"]["series"][probe.name], "same_as": "fp32", "reason": TF32_ON_CPU}
                continue
            series[probe.name] = grow(
                lambda size, secs, probe=probe, precision=precision: probe.measure(precision, size, secs),
                free_bytes=probe.free_bytes,
                element_bytes=2 if precision == "bf16" else 4,
                start=start,
                max_size=max_size,
                seconds=seconds,
                budget_s=budget_s,
                min_call_s=min_call_s,
            )
        rates = {f"{name}/{t['size']}": t["flops_per_s"] for name, s in series.items() for t in s["sizes"]}
        best = max(rates, key=rates.get)
        out[precision] = {"peak_flops": rates[best], "best": best, "probes": rates, "series": series}
        if all("same_as" in s for s in series.values()):
            out[precision].update(same_as="fp32", reason=TF32_ON_CPU)
    out["devices"] = {probe.name: "gpu" if probe.on_gpu else "cpu" for probe in probes}
    out["precisions"] = precisions
    out["method"] = (
        f"best of square matmuls in torch and jax, sizes doubling from {start} (at most {max_size}, "
        f"{MEMORY_FRACTION:.0%} of free memory) until the rate improves by < {MIN_GAIN:.0%} with calls >= "
        f"{min_call_s * 1e3:g} ms; {seconds:g} s of timed calls per size, a {budget_s:g} s budget per framework and "
        "precision"
    )
    out["probe_s"] = time.perf_counter() - begin
    return out


def peak_for(precision: str, peak: dict[str, Any]) -> float:
    """The peak a cell of `precision` is measured against: the probe of the same precision (tf32 cells against the
    TF32 probe, which on a CPU is the fp32 one; `default` cells against it too, PEAK_OF)."""
    precision = PEAK_OF.get(precision, precision)
    if precision not in peak or not isinstance(peak[precision], dict):
        probed = [p for p in PRECISIONS if isinstance(peak.get(p), dict)]
        raise KeyError(
            f"the peak probe has no {precision!r} entry (it has {probed}, the study's precisions when it ran): "
            "rerun the device_peak rule"
        )
    return float(peak[precision]["peak_flops"])
