"""The micro suite: one operation (fwbench.scenarios.operations) at one batch size, timed per call in bursts
(fwbench.scenarios.blocks).

What is timed, for every framework alike: each call of the operation on inputs and weights already on the device,
followed by a synchronise (variant "resident"); and, with `include_transfer`, the host-to-device copy of the input
batch plus the call (variant "transfer": the weights stay resident), which is what a study that times from host
arrays measures. Compilation (JAX's trace, lower and compile) happens before any burst, on the exact shapes timed,
and is reported apart. The output is checked against NumPy in float64 before anything is timed.

A call can take microseconds, less than the timing around it, which would pull every speedup towards 1: one timed
sample is `calls` calls (each with its synchronise), as many as make about `micro.sample_ms`, and each sample is
recorded as its time per call.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from fwbench.backends.base import Arrays, Framework
from fwbench.scenarios import blocks
from fwbench.scenarios.operations import check_agreement, digest, input_rows, load_operands, operation, reference
from fwbench.study.grid import Cell
from fwbench.trackers.latency import timing_metrics
from fwbench.trackers.memory import peak_rss_mb

VARIANTS = {
    "resident": "each call on device-resident inputs and weights, then a synchronise",
    "transfer": "the host-to-device copy of the input batch, then the call, then a synchronise (weights resident)",
}


def _warm(call: Callable[[], Any], arrays: Arrays, warmup: int, sample_s: float) -> tuple[int, float]:
    """Warm up with the exact call timed; (calls per sample so that a sample lasts about `sample_s`, seconds)."""
    start = time.perf_counter()
    times = []
    for _ in range(max(1, warmup)):
        t0 = time.perf_counter()
        arrays.synchronize(call())
        times.append(time.perf_counter() - t0)
    per_call = sorted(times)[len(times) // 2]
    return max(1, math.ceil(sample_s / per_call)) if per_call > 0 else 1, time.perf_counter() - start


def _sample(call: Callable[[], Any], arrays: Arrays, calls: int) -> blocks.Step:
    """One timed iteration of a burst: `calls` calls, each followed by a synchronise (nothing else to synchronise)."""

    def step(_: int) -> None:
        for _ in range(calls):
            arrays.synchronize(call())

    return step, lambda _: None


def _variant(session: Mapping[str, Any], step: str, variant: str, calls: int, batch_size: int) -> dict[str, Any]:
    """A variant's bursts (its session step `step`) as per-call samples (one list for this process: the runner merges
    launches)."""
    timed = blocks.summarise(session, step, batch_size)
    per_call = [sample / calls for sample in timed["samples_ms"]]
    return {
        "trial_samples_ms": [per_call],
        "what": VARIANTS[variant],
        "n_iters": len(per_call) * calls,
        "calls_per_sample": calls,
        "stop_reason": "blocks",
        "timed_s": timed["timed_s"],
        "discard_s": timed["discard_s"],
        "blocks": timed["blocks"],
    }


def run(framework: Framework, cell: Cell, settings: Mapping[str, Any], *, operands_path: str | Path) -> dict[str, Any]:
    """Measure one micro cell; returns the `metrics` and `samples_ms` (resident variant) parts of a cell result."""
    (part,) = run_cells(framework, [cell], settings, operands_path=operands_path)
    return part


def run_cells(
    framework: Framework, cells: Sequence[Cell], settings: Mapping[str, Any], *, operands_path: str | Path
) -> list[dict[str, Any]]:
    """Measure the micro cells of one operation at several batch sizes in this process (a warm worker serving them
    all, fwbench.running.launches): each batch size gets its input, its compile on exactly its shapes, its check
    against NumPy and its warm-up, in the order given; the bursts of every batch size then run in the same blocks.
    Returns one part per cell, in order; the time the process waited for the other workers is in the first cell's
    phases only, so that a process's phases add up once over its cells."""
    if not cells or len({cell.worker_key() for cell in cells}) != 1:
        raise ValueError("a worker serves the batch sizes of one (framework, mode, operation, precision)")
    start = time.perf_counter()
    operands = load_operands(operands_path, settings)
    arrays = framework.arrays()
    params = {name: arrays.put(operands[name]) for name in operation(cells[0].model).params}
    loaded = time.perf_counter()
    prepared = [_Prepared(framework, arrays, params, operands, cell, settings) for cell in cells]
    compilations_before = framework.compilations
    waiting_from = time.perf_counter()
    steps = {f"bs{item.cell.batch_size}/{name}": step for item in prepared for name, step in item.steps.items()}
    measured = blocks.session(blocks.BurstPlan.from_settings(settings)).measure(steps)
    measuring_s = time.perf_counter() - waiting_from
    recompilations = framework.compilations - compilations_before
    parts = [item.finish(measured, recompilations) for item in prepared]
    own_work = sum(
        part["metrics"]["phases_s"][key] for part in parts for key in ("timed_s", "calibration_s", "discard_s")
    )
    parts[0]["metrics"]["phases_s"]["load_s"] += loaded - start
    parts[0]["metrics"]["phases_s"]["waiting_s"] = measuring_s - own_work
    parts[0]["metrics"]["phases_s"]["scenario_s"] = time.perf_counter() - start
    return parts


class _Prepared:
    """One batch size of a worker: its input, compile, agreement with NumPy, warm-up and burst steps."""

    def __init__(self, framework: Framework, arrays, params, operands, cell: Cell, settings: Mapping[str, Any]) -> None:
        started = time.perf_counter()
        self.framework, self.cell, self.settings = framework, cell, settings
        self.op = op = operation(cell.model)
        x_host = input_rows(int(settings["seed"]), cell.batch_size, int(settings["dim"]))
        self.input_sha256 = digest(x_host)
        expected = reference(op, x_host, operands)
        x = arrays.put(x_host)
        arrays.synchronize(x)
        self.load_s = time.perf_counter() - started

        call, self.compile_times = arrays.compile(op.function, x, params)  # same shapes, dtypes and device as calls
        t0 = time.perf_counter()
        output = call(x, params)
        arrays.synchronize(output)
        self.first_call_s = time.perf_counter() - t0
        tf32 = bool(framework.effective_settings.get("tf32_in_effect"))
        self.agreement = check_agreement(cell.label(), arrays.to_numpy(output), expected, arrays.dtype, tf32)

        warmup, sample_s = int(settings["warmup_iters"]), float(settings["sample_ms"]) / 1000.0
        self.calls, self.warmup_s = {}, 0.0
        resident = partial(call, x, params)
        self.calls["resident"], seconds = _warm(resident, arrays, warmup - 1, sample_s)  # the first call counted
        self.warmup_s += seconds
        self.steps = {"resident": _sample(resident, arrays, self.calls["resident"])}
        self.missing: dict[str, str] = {}
        if not settings.get("include_transfer", False):
            self.missing["transfer"] = "micro.include_transfer is false"
        elif framework.host_only:
            self.missing["transfer"] = (
                f"{framework.name} computes on the host: nothing to copy (frameworks' transfer times are compared "
                "with its resident time)"
            )
        else:

            def transfer() -> Any:
                return call(arrays.put(x_host), params)

            self.calls["transfer"], seconds = _warm(transfer, arrays, warmup, sample_s)
            self.warmup_s += seconds
            self.steps["transfer"] = _sample(transfer, arrays, self.calls["transfer"])
        self.dtype, self.put_function = arrays.dtype, arrays.put_function

    def finish(self, measured: Mapping[str, Any], recompilations: int) -> dict[str, Any]:
        """This cell's `metrics` and `samples_ms` from the worker's bursts."""
        cell, settings, framework = self.cell, self.settings, self.framework
        prefix = f"bs{cell.batch_size}/"
        missing = {**self.missing, **measured["missing"]}
        variants = {
            name: _variant(measured, prefix + name, name, self.calls[name], cell.batch_size) for name in self.steps
        }
        samples_ms = variants["resident"]["trial_samples_ms"][0]
        timing = timing_metrics(samples_ms, cell.batch_size, within_interval=False)
        noisy = timing.pop("noisy")
        if self.compile_times is None:
            missing["compile_s"] = f"{framework.name} runs eagerly: no compile step (first_call_s holds the first call)"
        missing["energy"] = "not measured in the micro suite (calls of microseconds, below power sensors' resolution)"
        timed_s = sum(variant["timed_s"] for variant in variants.values())
        discard_s = sum(variant["discard_s"] for variant in variants.values())
        dim, hidden, classes = int(settings["dim"]), int(settings["hidden"]), int(settings["classes"])
        op = self.op
        metrics = {
            **timing,
            "blocks": variants["resident"]["blocks"],
            "flags": {
                "noisy": noisy,
                "steal": any(variant["blocks"]["steal_flagged"] for variant in variants.values()),
                "recompiled": recompilations > 0,
            },
            "timed_s": variants["resident"]["timed_s"],
            "stop_reason": "blocks",
            "warmup_iters": int(settings["warmup_iters"]),
            "compile_s": None if self.compile_times is None else sum(self.compile_times.values()),
            "compile_breakdown_s": self.compile_times,
            "recompilations_in_timed_loop": recompilations,
            "first_call_s": self.first_call_s,
            "variants": variants,
            "agreement": self.agreement,
            "operation": {
                "name": op.name,
                "description": op.description,
                "dim": dim,
                "hidden": hidden,
                "classes": classes,
                "flops_per_row": op.flops_per_row(dim, hidden, classes),
                "dtype": self.dtype,
                "put": self.put_function,
                "input_sha256": self.input_sha256,
            },
            "rss_mb": {"peak_process_lifetime": peak_rss_mb(), "source": "ru_maxrss"},
            "missing": missing,
            "phases_s": {
                "load_s": self.load_s,
                "compile_s": None if self.compile_times is None else sum(self.compile_times.values()),
                "first_call_s": self.first_call_s,
                "warmup_s": self.warmup_s,
                "timed_s": timed_s,
                # calibrating and discarded iterations are the worker's own work (the first cell's phases hold the
                # time the worker waited for the others)
                "calibration_s": sum(measured["calibration_s"][prefix + name] for name in self.steps),
                "discard_s": discard_s,
                "waiting_s": 0.0,
                "scenario_s": 0.0,
            },
        }
        return {"metrics": metrics, "samples_ms": samples_ms}
