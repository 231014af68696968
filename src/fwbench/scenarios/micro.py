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
from fwbench.scenarios import blocks, served
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
    framework: Framework | served.BackendFor,
    cells: Sequence[Cell],
    settings: Mapping[str, Any],
    *,
    operands_path: str | Path,
) -> list[dict[str, Any]]:
    """Measure the micro cells a warm worker serves in this process (fwbench.running.launches): every operation,
    precision and batch size its scope gives it (fwbench.scenarios.served). Each unit (an operation at a precision)
    puts its weights on the device once, through its precision's framework instance (`framework`: one instance, or
    a function giving each cell's); each batch size then gets its input, its compile on exactly its shapes, its
    check against NumPy and its warm-up, in the order given; the bursts of every cell then run in the same blocks,
    comparison by comparison. Returns one part per cell, in order (a `failed` part for a cell whose preparation
    raised; the others go on); the time the process waited for the other workers is in the first measured cell's
    phases only, so that a process's phases add up once over its cells."""
    served.check_served(cells)
    framework_for = served.backend_of(framework)
    activate = served.activation(cells)
    start = time.perf_counter()
    operands = load_operands(operands_path, settings)
    shared_load_s = time.perf_counter() - start  # the operands, then each unit's weights on the device
    prepared: list[_Prepared] = []
    failed: dict[Cell, dict[str, Any]] = {}
    for unit in served.units(cells, lambda c: (c.model, c.precision)):
        unit_framework = framework_for(unit[0])
        putting = time.perf_counter()
        try:
            activate(unit_framework)
            arrays = unit_framework.arrays()
            params = {name: arrays.put(operands[name]) for name in operation(unit[0].model).params}
        except Exception as exc:
            failed.update({cell: served.failed_part(cell, exc, "operands") for cell in unit})
            continue
        finally:
            shared_load_s += time.perf_counter() - putting
        for cell in unit:
            try:
                prepared.append(_Prepared(unit_framework, arrays, params, operands, cell, settings))
            except Exception as exc:
                failed[cell] = served.failed_part(cell, exc, "compile, first call or agreement check")
    holders = list({id(item.framework): item.framework for item in prepared}.values())
    compilations_before = {id(h): h.compilations for h in holders}
    waiting_from = time.perf_counter()
    steps = {name: step for item in prepared for name, step in item.named_steps().items()}
    measuring = blocks.session(blocks.BurstPlan.from_settings(settings))
    if len(holders) > 1:
        measuring.before = {
            name: (lambda f=item.framework: activate(f)) for item in prepared for name in item.named_steps()
        }
    measured = measuring.measure(steps)
    measuring_s = time.perf_counter() - waiting_from
    recompilations = max((h.compilations - compilations_before[id(h)] for h in holders), default=0)
    order = [item.cell for item in prepared]
    by_cell: dict[Cell, dict[str, Any]] = dict(failed)
    for item in prepared:
        part = item.finish(measured, recompilations)
        part["metrics"]["worker"] = served.worker_record(item.cell, cells, list(failed), order.index(item.cell))
        by_cell[item.cell] = part
    if prepared:
        first = by_cell[prepared[0].cell]["metrics"]["phases_s"]
        own_work = sum(
            by_cell[item.cell]["metrics"]["phases_s"][key]
            for item in prepared
            for key in ("timed_s", "calibration_s", "discard_s")
        )
        first["load_s"] += shared_load_s
        first["waiting_s"] = measuring_s - own_work
        first["scenario_s"] = time.perf_counter() - start
    return [by_cell[cell] for cell in cells]


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

    def step_of(self, variant: str) -> str:
        """The burst step of one of this cell's variants (fwbench.scenarios.blocks.step_name)."""
        cell = self.cell
        return blocks.step_name(cell.model, cell.precision, cell.batch_size, variant)

    def named_steps(self) -> dict[str, blocks.Step]:
        return {self.step_of(name): step for name, step in self.steps.items()}

    def finish(self, measured: Mapping[str, Any], recompilations: int) -> dict[str, Any]:
        """This cell's `metrics` and `samples_ms` from the worker's bursts."""
        cell, settings, framework = self.cell, self.settings, self.framework
        missing = {**self.missing, **measured["missing"]}
        variants = {
            name: _variant(measured, self.step_of(name), name, self.calls[name], cell.batch_size) for name in self.steps
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
                "calibration_s": sum(measured["calibration_s"][self.step_of(name)] for name in self.steps),
                "discard_s": discard_s,
                "waiting_s": 0.0,
                "scenario_s": 0.0,
            },
        }
        return {"metrics": metrics, "samples_ms": samples_ms}
