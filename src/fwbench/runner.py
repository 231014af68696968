"""The cell runner: runs measuring children under supervision and always writes a result.

A benchmark that crashes (an exception, a segfault in native code, a hang) is itself a finding, so it becomes a
result with status "failed", the reason and the tail of the child's output; the Snakemake job succeeds and the paper
shows the failure instead of the study stopping.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import fwbench
from fwbench.data.store import MANIFEST, sha256_file
from fwbench.grid import Cell
from fwbench.io import atomic_write_json, read_json
from fwbench.models.weights import read_provenance
from fwbench.results import validate_result
from fwbench.trackers.environment import host_provenance
from fwbench.trackers.latency import timing_metrics

STDERR_TAIL_CHARS = 4000
WORKER_CMD = (sys.executable, "-m", "fwbench.worker")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _tail(text: str, limit: int = STDERR_TAIL_CHARS) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _exception_line(stderr: str) -> str:
    """The final 'Type: message' line of a Python traceback, if the child printed one."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    if "Traceback (most recent call last):" in stderr and lines:
        return lines[-1].strip()
    return lines[-1].strip() if lines else "no output"


def _failure_reason(returncode: int, stderr: str) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"crashed: killed by {name}"
    return f"exception (exit code {returncode}): {_exception_line(stderr)}"


def _run_child(
    worker_cmd: Sequence[str], spec_path: Path, part_path: Path, log_path: Path, timeout_s: float, suite: str
):
    """One measuring child; returns (part or None, failure reason or None, its output)."""
    with open(log_path, "w+", encoding="utf-8", errors="replace") as log:
        child = subprocess.Popen(
            [*worker_cmd, str(spec_path), str(part_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, so a timeout kills everything it started
            env=os.environ.copy(),
        )
        try:
            returncode = child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            returncode = None
        log.seek(0)
        output = log.read()
    if returncode is None:
        return None, f"timeout: no result after {timeout_s:g} s ({suite}.timeout_s); child killed", output
    if returncode != 0:
        return None, _failure_reason(returncode, output), output
    try:
        return read_json(part_path), None, output
    except (OSError, ValueError) as exc:
        return None, f"child exited 0 without a readable result: {type(exc).__name__}: {exc}", output


def _trial_summary(part: dict[str, Any]) -> dict[str, Any]:
    m = part["metrics"]
    return {
        "n_iters": m["n_iters"],
        "throughput_img_s": m["throughput_img_s"],
        "latency_p50_ms": m["latency_ms"]["p50"],
        "compile_s": m["compile_s"],
        "first_call_s": m["first_call_s"],
        "stop_reason": m["stop_reason"],
    }


def merge_trials(parts: list[dict[str, Any]], batch_size: int) -> dict[str, Any]:
    """One result from `trials` fresh-process measurements: timing over the pooled samples, every trial's summary,
    and the across-trial spread of throughput (the variation a single process cannot show)."""
    first = parts[0]
    samples = [s for part in parts for s in part["samples_ms"]]
    metrics = dict(first["metrics"])
    trials = [_trial_summary(part) for part in parts]
    if len(parts) > 1:
        timing = timing_metrics(samples, batch_size)
        noisy = timing.pop("noisy")
        flags = {k: any(p["metrics"]["flags"][k] for p in parts) for k in first["metrics"]["flags"]}
        metrics.update(timing, flags={**flags, "noisy": noisy}, timed_s=sum(p["metrics"]["timed_s"] for p in parts))
        rates = np.array([t["throughput_img_s"] for t in trials])
        metrics["trial_spread"] = {
            "throughput_min": float(rates.min()),
            "throughput_max": float(rates.max()),
            "throughput_median": float(np.median(rates)),
            "throughput_cv": float(rates.std(ddof=1) / rates.mean()),
        }
    else:
        metrics["trial_spread"] = None
    metrics["trials"] = trials
    return {"metrics": metrics, "samples_ms": samples, "framework": first["framework"]}


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
) -> dict[str, Any]:
    """Measure `cell` in `settings["trials"]` fresh child processes and write its result JSON atomically.

    A training cell runs once and keeps per-epoch checkpoints in `state_dir`, so a rerun after a kill resumes."""
    timeout_s = float(settings["timeout_s"])
    trials = int(settings.get("trials", 1)) if cell.suite == "inference" else 1
    if cell.suite == "training" and state_dir is None:
        raise ValueError("a training cell needs a state_dir for its epoch checkpoints")
    started_at, t0 = _now(), time.perf_counter()
    parts, reason, outputs = [], None, []
    with tempfile.TemporaryDirectory(prefix="fwbench-cell-") as tmp:
        spec_path = Path(tmp, "spec.json")
        atomic_write_json(
            spec_path,
            {
                "cell": cell.as_dict(),
                "settings": dict(settings),
                "data_dir": str(data_dir),
                "weights_path": str(weights_path),
                "num_classes": num_classes,
                "threads": threads,
                "state_dir": str(state_dir) if state_dir is not None else None,
            },
        )
        for trial in range(trials):
            part, failure, output = _run_child(
                worker_cmd,
                spec_path,
                Path(tmp, f"part{trial}.json"),
                Path(tmp, f"trial{trial}.log"),
                timeout_s,
                cell.suite,
            )
            outputs.append(f"=== trial {trial + 1} of {trials} ===\n{output}" if trials > 1 else output)
            if part is None:
                reason = failure if trials == 1 else f"trial {trial + 1} of {trials}: {failure}"
                break
            parts.append(part)
    child_output = "\n".join(outputs)
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(log_path).write_text(child_output, encoding="utf-8")
    if reason is not None:
        merged = None
    elif cell.suite == "training":  # one run: a training cell's repeat is another epoch, not another process
        merged = parts[0]
    else:
        merged = merge_trials(parts, cell.batch_size)

    result: dict[str, Any] = {
        "schema_version": fwbench.RESULT_SCHEMA_VERSION,
        "status": "ok" if merged is not None else "failed",
        "reason": reason,
        "cell": cell.as_dict(),
        "metrics": merged["metrics"] if merged is not None else None,
        "samples_ms": merged["samples_ms"] if merged is not None else [],
        "settings": dict(settings),
        "stderr_tail": None if merged is not None else _tail(outputs[-1]),
        "inputs": _input_digests(data_dir, weights_path),
        "provenance": {
            **host_provenance(),
            "framework": merged["framework"] if merged is not None else None,
            "threads_requested": threads,
            "started_at": started_at,
            "finished_at": _now(),
            "duration_s": time.perf_counter() - t0,
        },
    }
    validate_result(result)
    atomic_write_json(out_path, result)
    if state_dir is not None and result["status"] == "ok":
        # Checkpoints exist to resume an interrupted cell; once its result is written, a rerun (forced, or after a
        # settings change) must train from the start rather than "resume" a finished run.
        shutil.rmtree(state_dir, ignore_errors=True)
    return result


def _input_digests(data_dir: str | Path, weights_path: str | Path) -> dict[str, Any]:
    manifest, weights = Path(data_dir) / MANIFEST, Path(weights_path)
    return {
        "dataset_manifest_sha256": sha256_file(manifest) if manifest.exists() else None,
        "weights_sha256": sha256_file(weights) if weights.exists() else None,
        "weights_provenance": read_provenance(weights),
    }
