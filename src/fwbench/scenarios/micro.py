"""The micro suite: one operation (fwbench.operations) at one batch size, timed per call with the shared timed loop.

What is timed, for every framework alike: each call of the operation on inputs and weights already on the device,
followed by a synchronise (variant "resident"); and, with `include_transfer`, the host-to-device copy of the input
batch plus the call (variant "transfer": the weights stay resident), which is what a study that times from host
arrays measures. Compilation (JAX's trace, lower and compile) happens before either loop, on the exact shapes timed,
and is reported apart. The output is checked against NumPy in float64 before anything is timed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fwbench.backends.base import Arrays, Framework
from fwbench.grid import Cell
from fwbench.operations import check_agreement, digest, input_rows, load_operands, operation, reference
from fwbench.trackers.latency import STOP_CI_METHOD, StopRule, TimedRun, timed_loop, timing_metrics
from fwbench.trackers.memory import peak_rss_mb

VARIANTS = {
    "resident": "each call on device-resident inputs and weights, then a synchronise",
    "transfer": "the host-to-device copy of the input batch, then the call, then a synchronise (weights resident)",
}


def _stop_rule(settings: Mapping[str, Any]) -> StopRule:
    return StopRule(
        min_iters=int(settings["min_iters"]),
        min_seconds=float(settings["min_seconds"]),
        max_iters=int(settings["max_iters"]),
        max_seconds=float(settings["max_seconds"]),
        ci_target=float(settings["ci_target"]),
    )


def _measure(step, arrays: Arrays, settings: Mapping[str, Any], warmup: int) -> tuple[TimedRun, float]:
    """Warm up with the exact call timed, then the timed loop; (run, warm-up seconds)."""
    start = time.perf_counter()
    for i in range(warmup):
        arrays.synchronize(step(i))
    warmup_s = time.perf_counter() - start
    return timed_loop(step, arrays.synchronize, _stop_rule(settings)), warmup_s


def _variant(run: TimedRun, what: str) -> dict[str, Any]:
    return {
        "trial_samples_ms": [[s * 1000.0 for s in run.samples_s]],
        "what": what,
        "n_iters": len(run.samples_s),
        "stop_reason": run.stop_reason,
        "timed_s": run.wall_s,
    }


def run(framework: Framework, cell: Cell, settings: Mapping[str, Any], *, operands_path: str | Path) -> dict[str, Any]:
    """Measure one micro cell; returns the `metrics` and `samples_ms` (resident variant) parts of a cell result."""
    start = time.perf_counter()
    op = operation(cell.model)
    operands = load_operands(operands_path, settings)
    x_host = input_rows(int(settings["seed"]), cell.batch_size, int(settings["dim"]))
    expected = reference(op, x_host, operands)
    arrays = framework.arrays()
    params = {name: arrays.put(operands[name]) for name in op.params}
    x = arrays.put(x_host)
    arrays.synchronize(x)
    loaded = time.perf_counter()

    call, compile_times = arrays.compile(op.function, x, params)  # same shapes, dtypes and device as every call
    t0 = time.perf_counter()
    output = call(x, params)
    arrays.synchronize(output)
    first_call_s = time.perf_counter() - t0
    tf32 = bool(framework.effective_settings.get("tf32_in_effect"))
    agreement = check_agreement(cell.label(), arrays.to_numpy(output), expected, arrays.dtype, tf32)

    warmup = int(settings["warmup_iters"])
    compilations_before = framework.compilations
    resident, warmup_s = _measure(lambda i: call(x, params), arrays, settings, warmup - 1)  # first call counted
    variants = {"resident": _variant(resident, VARIANTS["resident"])}
    missing: dict[str, str] = {}
    transfer = None
    if not settings.get("include_transfer", False):
        missing["transfer"] = "micro.include_transfer is false"
    elif framework.host_only:
        missing["transfer"] = (
            f"{framework.name} computes on the host: nothing to copy (frameworks' transfer times are compared "
            "with its resident time)"
        )
    else:
        transfer, transfer_warmup_s = _measure(lambda i: call(arrays.put(x_host), params), arrays, settings, warmup)
        warmup_s += transfer_warmup_s
        variants["transfer"] = _variant(transfer, VARIANTS["transfer"])
    recompilations = framework.compilations - compilations_before

    samples_ms = variants["resident"]["trial_samples_ms"][0]
    timing = timing_metrics(samples_ms, cell.batch_size)
    noisy = timing.pop("noisy")
    if compile_times is None:
        missing["compile_s"] = f"{framework.name} runs eagerly: no compile step (first_call_s holds the first call)"
    missing["energy"] = "not measured in the micro suite (calls of microseconds, below power sensors' resolution)"
    timed_s = resident.wall_s + (transfer.wall_s if transfer else 0.0)
    check_s = resident.check_s + (transfer.check_s if transfer else 0.0)
    dim, hidden, classes = int(settings["dim"]), int(settings["hidden"]), int(settings["classes"])
    metrics = {
        **timing,
        "flags": {"noisy": noisy, "ci_not_reached": not resident.ci_reached, "recompiled": recompilations > 0},
        "timed_s": resident.wall_s,
        "stop_reason": resident.stop_reason,
        "stop_checks": resident.checks,
        "stop_check_s": resident.check_s,
        "stop_ci_method": STOP_CI_METHOD,
        "warmup_iters": warmup,
        "compile_s": None if compile_times is None else sum(compile_times.values()),
        "compile_breakdown_s": compile_times,
        "recompilations_in_timed_loop": recompilations,
        "first_call_s": first_call_s,
        "variants": variants,
        "agreement": agreement,
        "operation": {
            "name": op.name,
            "description": op.description,
            "dim": dim,
            "hidden": hidden,
            "classes": classes,
            "flops_per_row": op.flops_per_row(dim, hidden, classes),
            "dtype": arrays.dtype,
            "put": arrays.put_function,
            "input_sha256": digest(x_host),
        },
        "rss_mb": {"peak_process_lifetime": peak_rss_mb(), "source": "ru_maxrss"},
        "missing": missing,
        "phases_s": {
            "load_s": loaded - start,
            "compile_s": None if compile_times is None else sum(compile_times.values()),
            "first_call_s": first_call_s,
            "warmup_s": warmup_s,
            "timed_s": timed_s,
            "stop_check_s": check_s,
            "scenario_s": time.perf_counter() - start,
        },
    }
    return {"metrics": metrics, "samples_ms": samples_ms}
