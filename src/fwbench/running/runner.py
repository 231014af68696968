"""The cell runner: runs measuring children under supervision and always writes a result.

A benchmark that crashes (an exception, a segfault in native code, a hang) is itself a finding, so it becomes a
result with status "failed", the reason and the tail of the child's output; the Snakemake job succeeds and the paper
shows the failure instead of the study stopping.

The cells of one comparison (every framework and mode at one model, precision and batch size) run as one group.
Inference and micro groups run warm workers in balanced blocks (fwbench.scenarios.blocks): in each of `trials` launches
every cell starts one worker process, in the order of a Williams design (fwbench.running.order), and the workers then
time short bursts, one per cell per block, each block in the order of the next row of a Williams design over the blocks,
so that the machine's drift cancels within a block and a ratio can be taken launch by launch
(fwbench.running.launches); where their launches share a compile cache, a compile launch before them fills it, so that
every measured launch starts warm (fwbench.running.compile_launch). A group without `blocks` in its settings (a
training cell) runs one fresh child per cell per round from start to end (fwbench.running.rounds). Both start their
children through the group's context (fwbench.running.context), and each cell's trials merge into its result
(fwbench.running.merge).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import fwbench
from fwbench.data.store import MANIFEST, sha256_file
from fwbench.io import atomic_write_json
from fwbench.models.weights import read_provenance
from fwbench.results import validate_result
from fwbench.running import order as trial_order
from fwbench.running import slots
from fwbench.running.context import CellRun, Context, now, write_specs
from fwbench.running.failures import ladder_from_config
from fwbench.running.faults import INJECT_FAULT_ENV
from fwbench.running.launches import run_launches
from fwbench.running.merge import merge_trials
from fwbench.running.profiling import run_profiles
from fwbench.running.rounds import run_rounds
from fwbench.study.grid import Cell, worker_scope
from fwbench.trackers.environment import host_provenance

STDERR_TAIL_CHARS = 4000
WORKER_CMD = (sys.executable, "-m", "fwbench.running.worker")


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
    weights_path: str | Path | Mapping[str, str | Path],
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
    job_keys: Sequence[str | None] | None = None,
) -> list[dict[str, Any]]:
    """Measure the cells of one comparison (e.g. every framework at one model, precision and batch size) and write
    each cell's result JSON atomically to its `out_paths` entry.

    With `blocks` in the settings (inference, micro), `settings["trials"]` launches of warm workers, each serving
    `blocks` blocks (fwbench.running.launches); otherwise `trials` rounds of one fresh child per cell
    (fwbench.running.rounds; a training cell runs once). Launches and rounds follow a Williams design
    (fwbench.running.order: A B, B A for two cells; six rows for three; A B D C, B C A D, C D B A, D A C B for four;
    its labels permuted by a seed from the group's cells), so that carry-over from the process before hits every cell
    alike, and launch (round) k of two cells can be compared as a pair. Fewer launches than the design needs take
    its first rows; `provenance.group.order` records the plan and whether it is complete, each trial its round, its
    position (`order`) and the round's order (`round_order`), and `provenance.group.blocks` the blocks' plan and the
    order each block ran in. A cell whose trial fails becomes a failed result (its reason, "trial k of T: ...") and
    leaves the later launches; the other cells go on. With the study's `device_record` (results/device.json) the
    group takes one of `gpu_slots` slots in `slot_dir` (its GPU and its share of the cores, see
    fwbench.running.slots) for all its children, and a child fails its cell if it computes anywhere else.
    `weights_path`: the weights (a micro group's operands) every cell reads, or a mapping from each cell's model to
    its own (a group of several models, whose workers serve them all). `job_keys`
    (one per cell) name the identity of the job each cell was measured for (`provenance.job_key`,
    fwbench.workflow.comparison_jobs)."""
    cells, out_paths = list(cells), list(out_paths)
    state_dirs = list(state_dirs) if state_dirs is not None else [None] * len(cells)
    job_keys = list(job_keys) if job_keys is not None else [None] * len(cells)
    if not cells or not len(out_paths) == len(state_dirs) == len(job_keys) == len(cells):
        raise ValueError("a group needs at least one cell, and one output path (and state dir, job key) per cell")
    if len({cell.suite for cell in cells}) != 1:
        raise ValueError("a group's cells belong to one suite")
    if any(cell.suite == "training" and state is None for cell, state in zip(cells, state_dirs, strict=True)):
        raise ValueError("a training cell needs a state_dir for its epoch checkpoints")
    workers = _workers(cells, settings)
    plan = _design(cells, settings, workers)
    group = {
        "id": uuid.uuid4().hex,
        "cells": [cell.label() for cell in cells],
        "started_at": now(),
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
            specs = write_specs(
                cells,
                settings,
                tmp,
                data_dir,
                weights_path,
                num_classes,
                threads,
                state_dirs,
                slot,
                device_record,
                workers,
            )
            ladder = ladder_from_config(fallbacks)
            context = Context(
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
                workers=workers,
            )
            runs = [CellRun() for _ in cells]
            context.runs = runs
            if _in_blocks(cells, settings):
                blocks_plan = _blocks_design(cells, settings, workers)
                group["blocks"] = {"order": blocks_plan.record(), **run_launches(context, plan, blocks_plan, runs)}
                run_profiles(context, runs)  # after every timed launch, while the cells' compile caches exist
            else:
                run_rounds(context, plan, runs)
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
    digests: dict[str, dict[str, Any]] = {}
    injected = os.environ.get(INJECT_FAULT_ENV)  # test-only fault injection: a result made under it says so
    results = []
    for cell, run, out_path, state_dir, job_key in zip(cells, runs, out_paths, state_dirs, job_keys, strict=True):
        if run.reason is not None:
            merged = None
        elif cell.suite == "training":  # one run: a training cell's repeat is another epoch, not another process
            merged = run.parts[0]
        else:
            merged = merge_trials(run.parts, cell.batch_size, run.schedule, run.compile_launch)
            if run.profile is not None:
                merged["metrics"]["op_profile"] = run.profile
            if run.disturbed:
                merged["metrics"]["disturbed_launches"] = run.disturbed
        weights = weights_path[cell.model] if isinstance(weights_path, Mapping) else weights_path
        if str(weights) not in digests:
            digests[str(weights)] = _input_digests(data_dir, weights)
        inputs = digests[str(weights)]
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
                # its own children's time, its compile launch's included
                "duration_s": sum(when["duration_s"] for when in run.schedule)
                + ((run.compile_launch or {}).get("duration_s") or 0.0),
                "group": group,
                "host_memory_limit": run.memory_limit,
                **({"injected_faults": injected} if injected else {}),
                **({"job_key": job_key} if job_key else {}),
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


def _trials(cells: Sequence[Cell], settings: Mapping[str, Any]) -> int:
    return int(settings.get("trials", 1)) if cells[0].suite != "training" else 1


def _workers(cells: Sequence[Cell], settings: Mapping[str, Any]) -> list[list[int]]:
    """Which cells each process of the group serves. Warm workers (a suite in blocks) serve what their suite's
    `share_workers` scope gives them (fwbench.study.grid.worker_scope; by default every cell of their framework and
    mode in the group: one import and one process's overhead per launch instead of one per model, precision and
    batch size, their bursts in the same blocks), each one's cells by comparison (model, precision, batch size in
    the group's order of models and precisions). Otherwise, and for training, one cell per process."""
    if not _in_blocks(cells, settings):
        return [[index] for index in range(len(cells))]
    scope = worker_scope(settings)
    shared: dict[tuple, list[int]] = {}
    for index, cell in enumerate(cells):
        shared.setdefault(cell.worker_key(scope), []).append(index)
    first: dict[tuple[str, str], int] = {}
    for cell in cells:
        first.setdefault((cell.model, cell.precision), len(first))
    return [
        sorted(members, key=lambda i: (first[cells[i].model, cells[i].precision], cells[i].batch_size))
        for members in shared.values()
    ]


def _variant_names(cells: Sequence[Cell], workers: Sequence[Sequence[int]]) -> list[str]:
    """The group's variants (its workers) as its order names them ("torch/compile"), their first cells' full labels
    if those collide."""
    names = [f"{cells[members[0]].framework}/{cells[members[0]].mode}" for members in workers]
    return names if len(set(names)) == len(names) else [cells[members[0]].label() for members in workers]


def _in_blocks(cells: Sequence[Cell], settings: Mapping[str, Any]) -> bool:
    """Whether the group runs warm workers in blocks (its suite's settings have `blocks`) or trials in rounds."""
    return cells[0].suite != "training" and bool(settings.get("blocks"))


def _blocks_design(cells: Sequence[Cell], settings: Mapping[str, Any], workers) -> trial_order.Design:
    """Every block of every launch in turn as one Williams design over the workers (a launch of `blocks` blocks, a
    multiple of the design's rows, is balanced on its own), labels permuted by a seed from the cells' labels."""
    seed = trial_order.group_seed([cell.label() for cell in cells] + ["blocks"])
    rows = _trials(cells, settings) * int(settings["blocks"])
    return trial_order.design(_variant_names(cells, workers), rows, seed)


def _design(cells: Sequence[Cell], settings: Mapping[str, Any], workers) -> trial_order.Design:
    """The group's rounds as a Williams design over its workers, labels permuted by a seed from the cells' labels."""
    seed = trial_order.group_seed([cell.label() for cell in cells])
    return trial_order.design(_variant_names(cells, workers), _trials(cells, settings), seed)


def _input_digests(data_dir: str | Path | None, weights_path: str | Path) -> dict[str, Any]:
    """Digests of what the cells read: the dataset's manifest (none for the micro suite) and the weights (the micro
    suite's operands)."""
    manifest, weights = (Path(data_dir) / MANIFEST if data_dir else None), Path(weights_path)
    return {
        "dataset_manifest_sha256": sha256_file(manifest) if manifest and manifest.exists() else None,
        "weights_sha256": sha256_file(weights) if weights.exists() else None,
        "weights_provenance": read_provenance(weights),
    }
