"""The cell runner: runs measuring children under supervision and always writes a result.

A benchmark that crashes (an exception, a segfault in native code, a hang) is itself a finding, so it becomes a
result with status "failed", the reason and the tail of the child's output; the Snakemake job succeeds and the paper
shows the failure instead of the study stopping.

The cells of one comparison (every framework at one model, precision and batch size) run as one group: trial
rounds, one fresh child per cell per round, in the order of a Williams design (fwbench.order), so that drift of the
machine over time and carry-over from the child before affect the frameworks alike and their ratio can be taken
round by round (see `run_group`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import fwbench
from fwbench import order as trial_order
from fwbench import slots
from fwbench.data.store import MANIFEST, sha256_file
from fwbench.failures import Failure, Workaround, classify, ladder_from_config, next_workaround
from fwbench.faults import INJECT_FAULT_ENV
from fwbench.grid import Cell
from fwbench.io import atomic_write_json, read_json
from fwbench.memlimit import MemoryLimit, die_with_parent, system_oom_kills
from fwbench.models.weights import read_provenance
from fwbench.results import validate_result
from fwbench.slots import Slot
from fwbench.trackers.environment import host_provenance
from fwbench.trackers.latency import timing_metrics
from fwbench.trackers.stats import WITHIN_PROCESS_ONLY, geometric_mean_interval, is_noisy
from fwbench.worker import SPAWNED_AT

STDERR_TAIL_CHARS = 4000
WORKER_CMD = (sys.executable, "-m", "fwbench.worker")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _tail(text: str, limit: int = STDERR_TAIL_CHARS) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


@dataclass
class _Outcome:
    """One child's end: its result part, or its classified failure; and everything it printed."""

    part: dict[str, Any] | None
    failure: Failure | None
    output: str
    memory_limit: dict[str, Any] | None = None  # how the host memory limit was enforced, if there was one


def _child_preexec(memory: MemoryLimit | None):
    """What the forked child does before exec: die with the runner, then enter its memory limit."""
    parent = os.getpid()

    def preexec() -> None:
        die_with_parent()
        if os.getppid() != parent:  # the runner died before the request took effect
            os._exit(1)
        if memory is not None:
            memory.in_child()

    return preexec


def _run_child(
    worker_cmd: Sequence[str],
    spec_path: Path,
    part_path: Path,
    log_path: Path,
    settings: Mapping[str, Any],
    suite: str,
    slot: Slot | None = None,
    env: Mapping[str, str] | None = None,
) -> _Outcome:
    """One measuring child, classified. The child inherits the slot's lock (so the slot stays taken while it lives)
    and gets the slot's environment (its GPU), `env` on top (a workaround), and the suite's host memory limit."""
    timeout_s = float(settings["timeout_s"])
    limit_mb = settings.get("max_host_mb")
    memory = MemoryLimit.create(limit_mb) if limit_mb else None
    system_kills = system_oom_kills()
    try:
        with open(log_path, "w+", encoding="utf-8", errors="replace") as log:
            child = subprocess.Popen(
                [*worker_cmd, str(spec_path), str(part_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, so a timeout kills everything it started
                env={
                    **os.environ,
                    **(slot.env if slot is not None else {}),
                    **(env or {}),
                    SPAWNED_AT: repr(time.time()),
                },
                pass_fds=(slot.fd,) if slot is not None and slot.fd >= 0 else (),
                preexec_fn=_child_preexec(memory),
            )
            try:
                returncode = child.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                returncode = None
            except BaseException:  # the runner is being stopped (a scheduler's SIGTERM, Ctrl-C): so is its child
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                raise
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)  # whatever it started must not outlive it
            child.wait()
            log.seek(0)
            output = log.read()
        oom_killed = returncode == -signal.SIGKILL and (
            (memory is not None and memory.oom_kills() > 0)
            or (system_kills is not None and (system_oom_kills() or 0) > system_kills)
        )
    finally:
        if memory is not None:
            memory.close()
    part, result_error = None, None
    if returncode == 0:
        try:
            part = read_json(part_path)
            if not isinstance(part, dict) or "metrics" not in part or "framework" not in part:
                part, result_error = None, "it is not a result part (no metrics or framework)"
        except (OSError, ValueError) as exc:
            result_error = f"{type(exc).__name__}: {exc}"
    failure = classify(
        returncode=returncode,
        output=output,
        timeout_s=timeout_s,
        timeout_key=f"{suite}.timeout_s",
        memory_limit_mb=limit_mb,
        memory_limit_key=f"{suite}.max_host_mb",
        oom_killed=oom_killed,
        on_gpu=slot is not None and slot.gpu is not None,
        result_error=result_error,
    )
    return _Outcome(part if failure is None else None, failure, output, memory.describe() if memory else None)


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _stop_on_sigterm() -> Any:
    """A batch scheduler ends a job (scancel, time limit, preemption) with SIGTERM. Each measuring child runs in a
    session of its own (so that a timeout kills all it started), which also hides it from signals sent to the
    runner's process group and, on a cluster tracking processes by parentage, lets it outlive the job. Turning
    SIGTERM into SystemExit lets `_run_child` kill the child's session before the runner exits; no result is written
    for an interrupted group, and Snakemake reruns it. Returns the handler to restore (None off the main thread)."""
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
    if "variants" in metrics:  # micro: each variant keeps its samples per trial (the analysis resamples trials)
        metrics["variants"] = _merge_variants([part["metrics"] for part in parts])
        metrics["agreement"] = max((p["metrics"]["agreement"] for p in parts), key=lambda a: a["max_rel_error"])
    return {"metrics": metrics, "samples_ms": samples, "framework": first["framework"]}


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
    """Measure the cells of one comparison (e.g. every framework at one model, precision and batch size) in
    interleaved rounds and write each cell's result JSON atomically to its `out_paths` entry.

    An inference or micro group runs `settings["trials"]` rounds; a round runs one fresh child per cell, in the
    order of a Williams design (fwbench.order: A B, B A for two cells; six rounds for three; A B D C, B C A D,
    C D B A, D A C B for four; its labels permuted by a seed from the group's cells), so that drift of the machine
    over time and carry-over from the child before hit every cell alike, and round k of two cells can be compared as
    a pair. Fewer rounds than the design needs take its first rows; `provenance.group.order` records the plan and
    whether it is complete, each trial its round, its position (`order`) and the round's order (`round_order`).
    A cell whose trial fails becomes a failed result (its reason,
    "trial k of T: ...") and leaves the later rounds; the other cells go on. A training cell runs once. With the
    study's `device_record` (results/device.json) the group takes one of `gpu_slots` slots in `slot_dir` (its GPU
    and its share of the cores, see fwbench.slots) for all its children, and a child fails its cell if it computes
    anywhere else."""
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
            runs, log = _run_rounds(
                cells,
                settings,
                tmp,
                data_dir,
                weights_path,
                num_classes,
                threads,
                state_dirs,
                worker_cmd,
                slot,
                device_record,
                t0,
                plan,
                ladder_from_config(fallbacks),
            )
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


def _design(cells: Sequence[Cell], settings: Mapping[str, Any]) -> trial_order.Design:
    """The group's rounds as a Williams design over its cells, labels permuted by a seed from the cells' labels."""
    seed = trial_order.group_seed([cell.label() for cell in cells])
    return trial_order.design(_variant_names(cells), _trials(cells, settings), seed)


def _run_rounds(
    cells,
    settings,
    tmp,
    data_dir,
    weights_path,
    num_classes,
    threads,
    state_dirs,
    worker_cmd,
    slot,
    device_record,
    t0,
    plan: trial_order.Design,
    ladder: Sequence[Workaround] = (),
) -> tuple[list[_CellRun], list[str]]:
    """The group's trial rounds in the order of `plan` (a cell that failed leaves its place in the later rounds);
    a cell leaves at its first failed trial. Returns each cell's run and the group's log (every child's output, in
    the order they ran)."""
    trials = len(plan.rows)
    names = list(plan.variants)
    runs = [_CellRun() for _ in cells]
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
    log: list[str] = []
    headers = trials > 1 or len(cells) > 1 or bool(ladder)
    for round_ in range(trials):
        # The design's row for this round, without the cells that have failed: over a whole design each cell runs
        # in every position and right after every other cell alike.
        order = [i for i in plan.rows[round_] if runs[i].failure is None]
        round_order = [names[i] for i in order]
        for position, index in enumerate(order):
            cell, run = cells[index], runs[index]
            run.started_at = run.started_at or _now()
            started = time.perf_counter()
            attempts = 0
            while True:
                attempts += 1
                outcome = _run_child(
                    worker_cmd,
                    specs[index],
                    Path(tmp, f"part{index}-{round_}-{attempts}.json"),
                    Path(tmp, f"trial{index}-{round_}-{attempts}.log"),
                    settings,
                    cell.suite,
                    slot,
                    run.env,
                )
                header = (
                    f"=== {cell.framework}/{cell.mode}: trial {round_ + 1} of {trials} "
                    f"(round {round_ + 1}, #{position + 1})"
                )
                header += f", attempt {attempts} with {'+'.join(run.applied())} ===" if attempts > 1 else " ==="
                run.outputs.append(outcome.output)
                run.memory_limit = outcome.memory_limit
                log.append(f"{header}\n{outcome.output}" if headers else outcome.output)
                if outcome.failure is None:
                    break
                rung = next_workaround(ladder, run.applied(), outcome.failure, outcome.output, cell.framework)
                if rung is None:
                    break
                workaround, because = rung
                # Recorded before the retry, so that a cell whose workaround fails too still names what was tried.
                run.deviations.append(
                    {
                        "name": workaround.name,
                        "applied_because": because,
                        "first_failure": outcome.failure.as_dict(trial=round_ + 1),
                        "changes": workaround.changes(),
                    }
                )
                run.env = workaround.apply(run.env)
                if cell.suite == "training" and state_dirs[index] is not None:
                    # The whole run under one setting: no resuming from epochs trained without the workaround.
                    shutil.rmtree(state_dirs[index], ignore_errors=True)
            run.finished_at = _now()
            run.schedule.append(
                {
                    "round": round_ + 1,
                    "order": position + 1,
                    "round_order": round_order,
                    "started_s": started - t0,
                    "duration_s": time.perf_counter() - started,
                    "attempts": attempts,
                }
            )
            if outcome.failure is not None:
                run.failure = _cell_failure(outcome.failure, round_ + 1, trials, run.applied())
                run.deviations = []  # a failed cell ran with nothing: what was tried is in failure.workarounds_tried
            else:
                run.parts.append(outcome.part)
    return runs, log


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
