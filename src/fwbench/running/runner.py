"""The cell runner: runs measuring children under supervision and always writes a result.

A benchmark that crashes (an exception, a segfault in native code, a hang) is itself a finding, so it becomes a
result with status "failed", the reason and the tail of the child's output; the Snakemake job succeeds and the paper
shows the failure instead of the study stopping.

The cells of one comparison (every framework and mode at one model, precision and batch size) run as one group.
Inference and micro groups run warm workers in balanced blocks (fwbench.scenarios.blocks): in each of `trials` launches
every cell starts one worker process, in the order of a Williams design (fwbench.running.order), and the workers then
time short bursts, one per cell per block, each block in the order of the next row of a Williams design over the blocks,
so that the machine's drift cancels within a block and a ratio can be taken launch by launch (`_run_launches`). A group
without `blocks` in its settings (a training cell) runs one fresh child per cell per round from start to end
(`_run_rounds`).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import fwbench
from fwbench.backends import launch_cache
from fwbench.data.store import MANIFEST, sha256_file
from fwbench.io import atomic_write_json
from fwbench.models.weights import read_provenance
from fwbench.results import validate_result
from fwbench.running import order as trial_order
from fwbench.running import slots
from fwbench.running.children import Child, Outcome
from fwbench.running.failures import Failure, Workaround, ladder_from_config, next_workaround
from fwbench.running.faults import INJECT_FAULT_ENV
from fwbench.running.slots import Slot
from fwbench.study.grid import Cell
from fwbench.trackers.environment import host_provenance
from fwbench.trackers.latency import timing_metrics
from fwbench.trackers.stats import WITHIN_PROCESS_ONLY, geometric_mean_interval, is_noisy

STDERR_TAIL_CHARS = 4000
WORKER_CMD = (sys.executable, "-m", "fwbench.running.worker")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _tail(text: str, limit: int = STDERR_TAIL_CHARS) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _stop_on_sigterm() -> Any:
    """A batch scheduler ends a job (scancel, time limit, preemption) with SIGTERM. Each measuring child runs in a
    session of its own (so that a timeout kills all it started), which also hides it from signals sent to the
    runner's process group and, on a cluster tracking processes by parentage, lets it outlive the job. Turning
    SIGTERM into SystemExit lets the runner kill the children's sessions (fwbench.running.children) before it exits; no
    result is written for an interrupted group, and Snakemake reruns it. Returns the handler to restore (None off
    the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _terminate)


def trial_noisy(part: Mapping[str, Any]) -> bool:
    """One trial's noise flag: the child's own (IQR above 10% of the median of that process's samples), or, where a
    part lacks it, the same rule applied to its samples."""
    recorded = (part["metrics"].get("flags") or {}).get("noisy")
    return bool(recorded) if recorded is not None else is_noisy(part["samples_ms"])


def _trial_summary(part: dict[str, Any], schedule: Mapping[str, Any] | None = None) -> dict[str, Any]:
    m = part["metrics"]
    return {
        **(schedule or {}),
        "noisy": trial_noisy(part),
        "n_iters": m["n_iters"],
        "throughput_img_s": m["throughput_img_s"],
        "throughput_ci95_within": (m.get("ci95") or {}).get("throughput_img_s"),
        "latency_p50_ms": m["latency_ms"]["p50"],
        "compile_s": m["compile_s"],
        "first_call_s": m["first_call_s"],
        "timed_s": m.get("timed_s"),
        "stop_reason": m["stop_reason"],
        "stop_checks": m.get("stop_checks"),
        "stop_check_s": m.get("stop_check_s"),
        "phases_s": m.get("phases_s"),
        "compilation_cache": ((part.get("framework") or {}).get("settings") or {}).get("compilation_cache"),
        **({"blocks": m["blocks"]} if m.get("blocks") else {}),
    }


def merge_trials(
    parts: list[dict[str, Any]], batch_size: int, schedule: Sequence[Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """One result from `trials` fresh-process measurements of a cell.

    The process is the unit: the headline throughput is the geometric mean of the trials' own (median-step)
    throughputs, each trial weighted equally whatever its iteration count, and its 95% CI is a Student-t interval
    on their logs (trials - 1 df), so it includes process-to-process variation. Latency percentiles, n_iters and
    total-time throughput pool every sample and are descriptive only. With one trial the only interval is the
    within-process bootstrap, labelled as such. `schedule[i]` (round, order, round_order, started_s, ...) goes into
    trial i. Noise is judged per trial (each process's own samples, so that differences between processes do not
    count as noise): `flags.noisy` is true when at least one trial is noisy, `noisy_trials` counts them."""
    first = parts[0]
    schedule = list(schedule) if schedule is not None else [{} for _ in parts]
    samples = [s for part in parts for s in part["samples_ms"]]
    metrics = dict(first["metrics"])
    trials = [_trial_summary(part, when) for part, when in zip(parts, schedule, strict=True)]
    if len(parts) > 1:
        # no bootstrap of the pooled samples: it would treat the trials as one process (the interval is over trials)
        timing = timing_metrics(samples, batch_size, within_interval=False)
        timing.pop("noisy")  # the pooled samples' IQR mixes in the differences between trials: judged per trial
        flags = {k: any(p["metrics"]["flags"][k] for p in parts) for k in first["metrics"]["flags"]}
        rates = np.array([t["throughput_img_s"] for t in trials])
        interval = geometric_mean_interval(rates)
        metrics.update(
            timing,
            flags={**flags, "noisy": any(t["noisy"] for t in trials)},
            timed_s=sum(p["metrics"]["timed_s"] for p in parts),
            stop_checks=sum(p["metrics"].get("stop_checks") or 0 for p in parts),
            stop_check_s=sum(p["metrics"].get("stop_check_s") or 0.0 for p in parts),
            throughput_img_s=interval.estimate,
            throughput_img_s_pooled_median=timing["throughput_img_s"],
            ci95={
                "throughput_img_s": [interval.low, interval.high],
                "relative_half_width": interval.relative_half_width(),
                "method": f"Student-t 95% CI of the geometric mean of the {len(parts)} trials' throughputs (on their "
                f"logs, {len(parts) - 1} df): includes process-to-process variation",
                "scope": "between_processes",
                "trials": len(parts),
            },
            pooled=f"latency_ms, n_iters, throughput_img_s_total and throughput_img_s_pooled_median pool the samples "
            f"of all {len(parts)} trials (descriptive); throughput_img_s and ci95 are over the trials",
        )
        metrics["trial_spread"] = {
            "throughput_min": float(rates.min()),
            "throughput_max": float(rates.max()),
            "throughput_median": float(np.median(rates)),
            "throughput_geometric_mean": interval.estimate,
            "throughput_cv": float(rates.std(ddof=1) / rates.mean()),
        }
    else:
        ci95 = dict(metrics.get("ci95") or {})
        if ci95:
            ci95.update(method=f"{ci95['method']}, {WITHIN_PROCESS_ONLY}", scope="within_process", trials=1)
            metrics["ci95"] = ci95
        metrics["trial_spread"] = None
    metrics["trials"] = trials
    metrics["noisy_trials"] = sum(t["noisy"] for t in trials)
    if len(parts) == 1:
        metrics["flags"] = {**(metrics.get("flags") or {}), "noisy": trials[0]["noisy"]}
    if first["metrics"].get("blocks"):  # warm workers in blocks: every launch's bursts, in block order
        metrics["blocks"] = merge_blocks([part["metrics"]["blocks"] for part in parts])
    if "variants" in metrics:  # micro: each variant keeps its samples per trial (the analysis resamples trials)
        metrics["variants"] = _merge_variants([part["metrics"] for part in parts])
        metrics["agreement"] = max((p["metrics"]["agreement"] for p in parts), key=lambda a: a["max_rel_error"])
    return {"metrics": metrics, "samples_ms": samples, "framework": first["framework"]}


def merge_blocks(launches: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A cell's bursts over its launches (each launch's own record stays in its trial): the bursts' rates, blocks
    and positions in the order run, the steal flags counted, the worst steal share and waiting worker's CPU use,
    the CPU use and hardware counters per item averaged over launches (missing if any launch lacks them)."""

    def mean(key: str) -> float | None:
        values = [launch.get(key) for launch in launches]
        return float(np.mean(values)) if all(value is not None for value in values) else None

    idle = [launch["idle_cpu_per_wall"] for launch in launches if launch["idle_cpu_per_wall"] is not None]
    return {
        **launches[0],
        "bursts": sum(launch["bursts"] for launch in launches),
        "iters_per_burst": [launch["iters_per_burst"] for launch in launches],
        "burst_rates": [rate for launch in launches for rate in launch["burst_rates"]],
        "burst_blocks": [block for launch in launches for block in launch["burst_blocks"]],
        "burst_positions": [position for launch in launches for position in launch["burst_positions"]],
        "steal_flagged": sum(launch["steal_flagged"] for launch in launches),
        "steal_share_max": max((launch["steal_share_max"] or 0.0 for launch in launches), default=None),
        "load_flagged": sum(launch.get("load_flagged") or 0 for launch in launches),
        "other_load_share": mean("other_load_share"),
        "cpu_per_wall": mean("cpu_per_wall"),
        "idle_cpu_per_wall": max(idle) if idle else None,
        "idle_wall_s": sum(launch["idle_wall_s"] for launch in launches),
        "instructions_per_item": mean("instructions_per_item"),
        "cycles_per_item": mean("cycles_per_item"),
        "launches": len(launches),
    }


def _merge_variants(trials: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A micro cell's variants over its trials: samples per trial, iterations and timed seconds summed."""
    merged: dict[str, Any] = {}
    for name, first in trials[0]["variants"].items():
        each = [metrics["variants"][name] for metrics in trials]
        merged[name] = {
            **first,
            "trial_samples_ms": [samples for variant in each for samples in variant["trial_samples_ms"]],
            "n_iters": sum(variant["n_iters"] for variant in each),
            "timed_s": sum(variant["timed_s"] for variant in each),
            "stop_reason": [variant["stop_reason"] for variant in each],
        }
    return merged


def run_cell(
    cell: Cell,
    settings: Mapping[str, Any],
    *,
    data_dir: str | Path,
    weights_path: str | Path,
    num_classes: int,
    threads: int,
    out_path: str | Path,
    log_path: str | Path | None = None,
    worker_cmd: Sequence[str] = WORKER_CMD,
    state_dir: str | Path | None = None,
    device_record: Mapping[str, Any] | None = None,
    slot_dir: str | Path | None = None,
    gpu_slots: int = 1,
    fallbacks: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Measure one cell (a group of one, see `run_group`) and write its result JSON atomically.

    A training cell runs once and keeps per-epoch checkpoints in `state_dir`, so a rerun after a kill resumes."""
    (result,) = run_group(
        [cell],
        settings,
        data_dir=data_dir,
        weights_path=weights_path,
        num_classes=num_classes,
        threads=threads,
        out_paths=[out_path],
        log_path=log_path,
        worker_cmd=worker_cmd,
        state_dirs=[state_dir],
        device_record=device_record,
        slot_dir=slot_dir,
        gpu_slots=gpu_slots,
        fallbacks=fallbacks,
    )
    return result


def run_group(
    cells: Sequence[Cell],
    settings: Mapping[str, Any],
    *,
    data_dir: str | Path | None,
    weights_path: str | Path,
    num_classes: int,
    threads: int,
    out_paths: Sequence[str | Path],
    log_path: str | Path | None = None,
    worker_cmd: Sequence[str] = WORKER_CMD,
    state_dirs: Sequence[str | Path | None] | None = None,
    device_record: Mapping[str, Any] | None = None,
    slot_dir: str | Path | None = None,
    gpu_slots: int = 1,
    fallbacks: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Measure the cells of one comparison (e.g. every framework at one model, precision and batch size) and write
    each cell's result JSON atomically to its `out_paths` entry.

    With `blocks` in the settings (inference, micro), `settings["trials"]` launches of warm workers, each serving
    `blocks` blocks (`_run_launches`); otherwise `trials` rounds of one fresh child per cell (`_run_rounds`; a
    training cell runs once). Launches and rounds follow a Williams design (fwbench.running.order: A B, B A for two
    cells; six rows for three; A B D C, B C A D, C D B A, D A C B for four; its labels permuted by a seed from the
    group's cells), so that carry-over from the process before hits every cell alike, and launch (round) k of two cells
    can be compared as a pair. Fewer launches than the design needs take its first rows; `provenance.group.order`
    records the plan and whether it is complete, each trial its round, its position (`order`) and the round's order
    (`round_order`), and `provenance.group.blocks` the blocks' plan and the order each block ran in. A cell whose
    trial fails becomes a failed result (its reason, "trial k of T: ...") and leaves the later launches; the other
    cells go on. With the study's `device_record` (results/device.json) the group takes one of `gpu_slots` slots in
    `slot_dir` (its GPU and its share of the cores, see fwbench.running.slots) for all its children, and a child fails
    its cell if it computes anywhere else."""
    cells, out_paths = list(cells), list(out_paths)
    state_dirs = list(state_dirs) if state_dirs is not None else [None] * len(cells)
    if not cells or len(out_paths) != len(cells) or len(state_dirs) != len(cells):
        raise ValueError("a group needs at least one cell, and one output path (and state dir) per cell")
    if len({cell.suite for cell in cells}) != 1:
        raise ValueError("a group's cells belong to one suite")
    if any(cell.suite == "training" and state is None for cell, state in zip(cells, state_dirs, strict=True)):
        raise ValueError("a training cell needs a state_dir for its epoch checkpoints")
    plan = _design(cells, settings)
    group = {
        "id": uuid.uuid4().hex,
        "cells": [cell.label() for cell in cells],
        "started_at": _now(),
        "order": plan.record(),
    }
    previous_sigterm = _stop_on_sigterm()
    t0 = time.perf_counter()
    slot = None
    if device_record is not None:
        if slot_dir is None:
            raise ValueError("a cell run against a device record needs a slot_dir for its GPU slot")
        slot = slots.acquire(device_record, gpu_slots, slot_dir)
    placement = slot.placement() if slot is not None else None
    try:
        with tempfile.TemporaryDirectory(prefix="fwbench-group-") as tmp:
            specs = _write_specs(
                cells, settings, tmp, data_dir, weights_path, num_classes, threads, state_dirs, slot, device_record
            )
            ladder = ladder_from_config(fallbacks)
            context = _Context(
                cells,
                settings,
                Path(tmp),
                specs,
                state_dirs,
                worker_cmd,
                slot,
                t0,
                ladder,
                headers=len(plan.rows) > 1 or len(cells) > 1 or bool(ladder),
            )
            runs = [_CellRun() for _ in cells]
            if _in_blocks(cells, settings):
                blocks_plan = _blocks_design(cells, settings)
                group["blocks"] = {
                    "order": blocks_plan.record(),
                    "ran": _run_launches(context, plan, blocks_plan, runs),
                }
            else:
                _run_rounds(context, plan, runs)
            log = context.log
    finally:
        if slot is not None:
            slot.release()
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)
    group.update(rounds=max(len(run.schedule) for run in runs), duration_s=time.perf_counter() - t0)
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(log_path).write_text("\n".join(log), encoding="utf-8")
    host = host_provenance()
    inputs = _input_digests(data_dir, weights_path)
    injected = os.environ.get(INJECT_FAULT_ENV)  # test-only fault injection: a result made under it says so
    results = []
    for cell, run, out_path, state_dir in zip(cells, runs, out_paths, state_dirs, strict=True):
        if run.reason is not None:
            merged = None
        elif cell.suite == "training":  # one run: a training cell's repeat is another epoch, not another process
            merged = run.parts[0]
        else:
            merged = merge_trials(run.parts, cell.batch_size, run.schedule)
        result: dict[str, Any] = {
            "schema_version": fwbench.RESULT_SCHEMA_VERSION,
            "status": "ok" if merged is not None else "failed",
            "reason": run.reason,
            "failure": run.failure,
            "deviations": run.deviations if merged is not None else [],
            "cell": cell.as_dict(),
            "metrics": merged["metrics"] if merged is not None else None,
            "samples_ms": merged["samples_ms"] if merged is not None else [],
            "settings": dict(settings),
            "stderr_tail": None if merged is not None else _tail(run.outputs[-1]),
            "inputs": inputs,
            "provenance": {
                **host,
                "framework": merged["framework"] if merged is not None else None,
                "threads_requested": threads,
                "placement": placement,
                "started_at": run.started_at,
                "finished_at": run.finished_at,
                "duration_s": sum(when["duration_s"] for when in run.schedule),  # its own children's time
                "group": group,
                "host_memory_limit": run.memory_limit,
                **({"injected_faults": injected} if injected else {}),
            },
        }
        validate_result(result)
        atomic_write_json(out_path, result)
        if state_dir is not None and result["status"] == "ok":
            # Checkpoints exist to resume an interrupted cell; once its result is written, a rerun (forced, or after
            # a settings change) must train from the start rather than "resume" a finished run.
            shutil.rmtree(state_dir, ignore_errors=True)
        results.append(result)
    return results


@dataclass
class _CellRun:
    parts: list[dict[str, Any]] = field(default_factory=list)
    schedule: list[dict[str, Any]] = field(default_factory=list)  # per trial: round, order, started_s, duration_s
    outputs: list[str] = field(default_factory=list)
    failure: dict[str, Any] | None = None  # the failure that ended the cell (schema: failure)
    deviations: list[dict[str, Any]] = field(default_factory=list)  # workarounds it runs with (schema: deviations)
    env: dict[str, str] = field(default_factory=dict)  # the workarounds' environment, for every later child
    memory_limit: dict[str, Any] | None = None
    started_at: str | None = None
    finished_at: str | None = None

    @property
    def reason(self) -> str | None:
        return None if self.failure is None else self.failure["reason"]

    def applied(self) -> list[str]:
        return [deviation["name"] for deviation in self.deviations]


def _trials(cells: Sequence[Cell], settings: Mapping[str, Any]) -> int:
    return int(settings.get("trials", 1)) if cells[0].suite != "training" else 1


def _variant_names(cells: Sequence[Cell]) -> list[str]:
    """The group's variants as its order names them ("torch/compile"), its cells' full labels if those collide."""
    names = [f"{cell.framework}/{cell.mode}" for cell in cells]
    return names if len(set(names)) == len(names) else [cell.label() for cell in cells]


def _in_blocks(cells: Sequence[Cell], settings: Mapping[str, Any]) -> bool:
    """Whether the group runs warm workers in blocks (its suite's settings have `blocks`) or trials in rounds."""
    return cells[0].suite != "training" and bool(settings.get("blocks"))


def _blocks_design(cells: Sequence[Cell], settings: Mapping[str, Any]) -> trial_order.Design:
    """Every block of every launch in turn as one Williams design over the cells (a launch of `blocks` blocks, a
    multiple of the design's rows, is balanced on its own), labels permuted by a seed from the cells' labels."""
    seed = trial_order.group_seed([cell.label() for cell in cells] + ["blocks"])
    return trial_order.design(_variant_names(cells), _trials(cells, settings) * int(settings["blocks"]), seed)


def _design(cells: Sequence[Cell], settings: Mapping[str, Any]) -> trial_order.Design:
    """The group's rounds as a Williams design over its cells, labels permuted by a seed from the cells' labels."""
    seed = trial_order.group_seed([cell.label() for cell in cells])
    return trial_order.design(_variant_names(cells), _trials(cells, settings), seed)


@dataclass
class _Context:
    """What every child of a group shares: the settings, where its files go, its slot and the workaround ladder."""

    cells: list[Cell]
    settings: Mapping[str, Any]
    tmp: Path
    specs: list[Path]
    state_dirs: list[str | Path | None]
    worker_cmd: Sequence[str]
    slot: Slot | None
    t0: float
    ladder: Sequence[Workaround]
    log: list[str] = field(default_factory=list)
    headers: bool = True

    def attempt(
        self, index: int, run: _CellRun, trial: int, label: str, start: Callable[[int], Outcome]
    ) -> tuple[Outcome, int]:
        """`start(attempts)` (one child, ended or ready) until it does not fail, or the ladder has no workaround
        for its failure: each failure that has one is recorded as the deviation the next attempt runs with.
        Returns the last outcome and the number of attempts."""
        cell, attempts = self.cells[index], 0
        while True:
            attempts += 1
            outcome = start(attempts)
            if outcome.failure is None:
                return outcome, attempts
            self.record(run, f"{label}, attempt {attempts}" if attempts > 1 else label, outcome)
            rung = next_workaround(self.ladder, run.applied(), outcome.failure, outcome.output, cell.framework)
            if rung is None:
                return outcome, attempts
            workaround, because = rung
            # Recorded before the retry, so that a cell whose workaround fails too still names what was tried.
            run.deviations.append(
                {
                    "name": workaround.name,
                    "applied_because": because,
                    "first_failure": outcome.failure.as_dict(trial=trial),
                    "changes": workaround.changes(),
                }
            )
            run.env = workaround.apply(run.env)
            # Programs compiled before the workaround were compiled without it: the next launch compiles cold.
            shutil.rmtree(self.tmp / f"cache-{index}", ignore_errors=True)
            if cell.suite == "training" and self.state_dirs[index] is not None:
                # The whole run under one setting: no resuming from epochs trained without the workaround.
                shutil.rmtree(self.state_dirs[index], ignore_errors=True)

    def record(self, run: _CellRun, header: str, outcome: Outcome) -> None:
        """A child's end in the cell's record and the group's log."""
        run.outputs.append(outcome.output)
        run.memory_limit = outcome.memory_limit
        header += f" with {'+'.join(run.applied())} ===" if run.applied() else " ==="
        self.log.append(f"=== {header}\n{outcome.output}" if self.headers else outcome.output)

    def child(self, index: int, run: _CellRun, name: str, *, serve: bool = False) -> Child:
        env = dict(run.env)
        if serve and launch_cache.enabled(self.settings):  # the cell's own compile cache across its launches
            env[launch_cache.LAUNCH_CACHE_ENV] = str(self.tmp / f"cache-{index}")
        return Child(
            self.worker_cmd,
            self.specs[index],
            self.tmp / f"part-{name}.json",
            self.tmp / f"{name}.log",
            self.settings,
            self.cells[index].suite,
            self.slot,
            env,
            serve=serve,
        )

    def finish(self, run: _CellRun, trial: int, trials: int, schedule: dict[str, Any], outcome: Outcome) -> None:
        run.finished_at = _now()
        run.schedule.append(schedule)
        if outcome.failure is not None:
            run.failure = _cell_failure(outcome.failure, trial, trials, run.applied())
            run.deviations = []  # a failed cell ran with nothing: what was tried is in failure.workarounds_tried
        else:
            run.parts.append(outcome.part)


def _write_specs(cells, settings, tmp, data_dir, weights_path, num_classes, threads, state_dirs, slot, device_record):
    """One spec file per cell, what its worker reads (fwbench.running.worker)."""
    specs = []
    for index, (cell, state_dir) in enumerate(zip(cells, state_dirs, strict=True)):
        spec = {
            "cell": cell.as_dict(),
            "settings": dict(settings),
            "data_dir": str(data_dir) if data_dir is not None else None,
            "weights_path": str(weights_path),
            "num_classes": num_classes,
            "threads": threads,
            "state_dir": str(state_dir) if state_dir is not None else None,
        }
        if slot is not None:
            spec["cpus"] = slot.cpus
            spec["device"] = {
                "record": device_record,
                "expected_name": None if slot.gpu is None else slot.gpu.get("name"),
            }
        specs.append(Path(tmp, f"spec{index}.json"))
        atomic_write_json(specs[-1], spec)
    return specs


def _run_rounds(context: _Context, plan: trial_order.Design, runs: list[_CellRun]) -> None:
    """The group's trial rounds in the order of `plan`, one child per cell per round from start to end (a cell
    that failed leaves its place in the later rounds; a cell leaves at its first failed trial)."""
    trials, names = len(plan.rows), list(plan.variants)
    for round_ in range(trials):
        # The design's row for this round, without the cells that have failed: over a whole design each cell runs
        # in every position and right after every other cell alike.
        order = [i for i in plan.rows[round_] if runs[i].failure is None]
        round_order = [names[i] for i in order]
        for position, index in enumerate(order):
            cell, run = context.cells[index], runs[index]
            run.started_at = run.started_at or _now()
            started = time.perf_counter()
            label = (
                f"{cell.framework}/{cell.mode}: trial {round_ + 1} of {trials} (round {round_ + 1}, #{position + 1})"
            )

            def start(attempts: int, index=index, run=run, round_=round_) -> Outcome:
                return context.child(index, run, f"{index}-{round_}-{attempts}").run()

            outcome, attempts = context.attempt(index, run, round_ + 1, label, start)
            if outcome.failure is None:
                context.record(run, label + (f", attempt {attempts}" if attempts > 1 else ""), outcome)
            schedule = {
                "round": round_ + 1,
                "order": position + 1,
                "round_order": round_order,
                "started_s": started - context.t0,
                "duration_s": time.perf_counter() - started,
                "attempts": attempts,
            }
            context.finish(run, round_ + 1, trials, schedule, outcome)


def _run_launches(
    context: _Context, plan: trial_order.Design, blocks_plan: trial_order.Design, runs: list[_CellRun]
) -> list[list[str]]:
    """The group's launches (fwbench.scenarios.blocks): in launch k every cell still in the group starts a warm worker,
    in the order of `plan`'s row k (a worker that fails to start gets the workaround ladder, as a trial would), and once
    all are ready, `blocks` blocks run: in each, every ready worker runs a burst of each of its steps, in the order
    of `blocks_plan`'s next row. Then each worker finishes (writes its part) and exits. A worker that fails or hangs
    fails its cell; the others go on. Returns the order in which each block ran."""
    trials, names = len(plan.rows), list(plan.variants)
    per_launch = int(context.settings["blocks"])
    ran: list[list[str]] = []
    for launch in range(trials):
        order = [i for i in plan.rows[launch] if runs[i].failure is None]
        launch_order = [names[i] for i in order]
        workers: dict[int, tuple[Child, list[str], float, int, int]] = {}
        try:
            for position, index in enumerate(order):
                cell, run = context.cells[index], runs[index]
                run.started_at = run.started_at or _now()
                started = time.perf_counter()
                label = f"{cell.framework}/{cell.mode}: launch {launch + 1} of {trials} (#{position + 1})"
                ready: dict[str, Any] = {}

                def start(attempts: int, index=index, run=run, ready=ready, launch=launch) -> Outcome:
                    child = context.child(index, run, f"{index}-{launch}-{attempts}", serve=True)
                    try:
                        reply = child.request(None)
                    except BaseException:  # the runner is being stopped (SIGTERM, Ctrl-C): so is the worker
                        child.abandon()
                        raise
                    if reply is not None and "ready" in reply:
                        ready.update(child=child, steps=list(reply["ready"]))
                        return Outcome(None, None, "")
                    return child.end(child.wait(), unready=True)

                outcome, attempts = context.attempt(index, run, launch + 1, label, start)
                if outcome.failure is None:
                    workers[index] = (ready["child"], ready["steps"], started, position, attempts)
                else:
                    context.finish(
                        run,
                        launch + 1,
                        trials,
                        _launch_schedule(launch, position, launch_order, started, context.t0, attempts),
                        outcome,
                    )
            for block in range(per_launch):
                row = blocks_plan.rows[launch * per_launch + block]
                order_run = [i for i in row if i in workers]
                ran.append([names[i] for i in order_run])
                for position, index in enumerate(order_run):
                    child, steps = workers[index][:2]
                    for step in steps:
                        message = {"burst": step, "block": launch * per_launch + block, "position": position}
                        if child.request(message) is None:
                            _end_worker(context, runs, index, workers.pop(index), launch, trials, launch_order)
                            break
            for index in list(workers):
                child = workers[index][0]
                returncode = child.wait() if child.send({"finish": True}) else None
                _end_worker(context, runs, index, workers.pop(index), launch, trials, launch_order, returncode)
        finally:
            for child, *_ in workers.values():  # the runner is being stopped: so are its workers
                child.abandon()
    return ran


def _launch_schedule(launch, position, launch_order, started, t0, attempts) -> dict[str, Any]:
    return {
        "round": launch + 1,
        "order": position + 1,
        "round_order": launch_order,
        "started_s": started - t0,
        "duration_s": time.perf_counter() - started,
        "attempts": attempts,
    }


def _end_worker(context, runs, index, worker, launch, trials, launch_order, returncode=None) -> None:
    """A worker's end: after it was asked to finish (`returncode`), or when it stopped answering (it exited, or
    hung past the timeout and is killed), classified into the cell's record."""
    child, _, started, position, attempts = worker
    if returncode is None and not child.timed_out:
        returncode = child.wait()
    outcome = child.end(returncode)
    cell = context.cells[index]
    label = f"{cell.framework}/{cell.mode}: launch {launch + 1} of {trials} (#{position + 1})"
    context.record(runs[index], label + (f", attempt {attempts}" if attempts > 1 else ""), outcome)
    schedule = _launch_schedule(launch, position, launch_order, started, context.t0, attempts)
    context.finish(runs[index], launch + 1, trials, schedule, outcome)


def _cell_failure(failure: Failure, trial: int, trials: int, tried: list[str]) -> dict[str, Any]:
    reason = failure.reason if trials == 1 else f"trial {trial} of {trials}: {failure.reason}"
    if tried:
        reason += f" (also with workaround{'s' if len(tried) > 1 else ''} {', '.join(tried)})"
    return {**failure.as_dict(trial=trial), "reason": reason, "workarounds_tried": list(tried)}


def _input_digests(data_dir: str | Path | None, weights_path: str | Path) -> dict[str, Any]:
    """Digests of what the cells read: the dataset's manifest (none for the micro suite) and the weights (the micro
    suite's operands)."""
    manifest, weights = (Path(data_dir) / MANIFEST if data_dir else None), Path(weights_path)
    return {
        "dataset_manifest_sha256": sha256_file(manifest) if manifest and manifest.exists() else None,
        "weights_sha256": sha256_file(weights) if weights.exists() else None,
        "weights_provenance": read_provenance(weights),
    }
