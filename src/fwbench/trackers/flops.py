"""FLOP rates: the device's measured peak (a study-level probe) and each cell's model FLOP utilisation (MFU).

The peak is measured, not taken from a datasheet: large square matmuls in fp32 and bf16, in both frameworks, the
best rate taken per precision. A cell's achieved rate is its model FLOPs per image (FlopCounterMode's count, the
same for both frameworks, so MFU compares like with like) times its images per second.
"""

from __future__ import annotations

import time
from typing import Any

PROBE_SIZES = (1024, 2048)
PROBE_SECONDS = 0.5  # per framework, precision and size


def _best_rate(step, sync, flops: float, seconds: float) -> float:
    sync(step())  # compile / warm up with the measured shapes
    best, end = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        sync(step())
        best = max(best, flops / (time.perf_counter() - t0))
    return best


def probe_torch(precision: str, size: int, seconds: float) -> float:
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)

    def sync(_):
        if device.type == "cuda":
            torch.cuda.synchronize()

    return _best_rate(lambda: a @ b, sync, 2.0 * size**3, seconds)


def probe_jax(precision: str, size: int, seconds: float) -> float:
    import jax
    import jax.numpy as jnp

    dtype = {"fp32": jnp.float32, "bf16": jnp.bfloat16}[precision]
    key_a, key_b = jax.random.split(jax.random.PRNGKey(0))
    a, b = jax.random.normal(key_a, (size, size), dtype), jax.random.normal(key_b, (size, size), dtype)
    matmul = jax.jit(lambda x, y: jnp.matmul(x, y, precision="highest")).lower(a, b).compile()
    return _best_rate(lambda: matmul(a, b), lambda out: out.block_until_ready(), 2.0 * size**3, seconds)


def measure_peak(sizes=PROBE_SIZES, seconds: float = PROBE_SECONDS) -> dict[str, Any]:
    """{"fp32": {...}, "bf16": {...}}: best FLOP/s per precision with the rate of every (framework, size) probe."""
    out: dict[str, Any] = {}
    for precision in ("fp32", "bf16"):
        rates = {
            f"{name}/{size}": probe(precision, size, seconds)
            for name, probe in (("torch", probe_torch), ("jax", probe_jax))
            for size in sizes
        }
        best = max(rates, key=rates.get)
        out[precision] = {"peak_flops": rates[best], "best": best, "probes": rates}
    out["method"] = f"best of square matmuls {list(sizes)} in torch and jax, {seconds:g} s each"
    return out


def peak_for(precision: str, peak: dict[str, Any]) -> float:
    """The peak a cell of `precision` is measured against (tf32 cells against the fp32 probe: a conservative MFU)."""
    return float(peak["bf16" if precision == "bf16" else "fp32"]["peak_flops"])
