"""The cell runner: runs a measuring child under supervision and always writes a result.

A benchmark that crashes (an exception, a segfault in native code, a hang) is itself a finding, so it becomes a
result with status "failed", the reason and the tail of the child's output; the Snakemake job succeeds and the paper
shows the failure instead of the study stopping.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import fwbench
from fwbench.data.store import MANIFEST, sha256_file
from fwbench.grid import Cell
from fwbench.io import atomic_write_json, read_json
from fwbench.models.weights import read_provenance
from fwbench.results import validate_result
from fwbench.trackers.environment import host_provenance

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
) -> dict[str, Any]:
    """Measure `cell` in a fresh child process and write its result JSON atomically to `out_path`."""
    timeout_s = float(settings["timeout_s"])
    started_at, t0 = _now(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fwbench-cell-") as tmp:
        spec_path, part_path, log_tmp = Path(tmp, "spec.json"), Path(tmp, "part.json"), Path(tmp, "child.log")
        atomic_write_json(
            spec_path,
            {
                "cell": cell.as_dict(),
                "settings": dict(settings),
                "data_dir": str(data_dir),
                "weights_path": str(weights_path),
                "num_classes": num_classes,
                "threads": threads,
            },
        )
        reason = None
        with open(log_tmp, "w+", encoding="utf-8", errors="replace") as log:
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
                reason = f"timeout: no result after {timeout_s:g} s (inference.timeout_s); child killed"
            log.seek(0)
            child_output = log.read()
        if log_path is not None:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            Path(log_path).write_text(child_output, encoding="utf-8")
        part = None
        if returncode == 0:
            try:
                part = read_json(part_path)
            except (OSError, ValueError) as exc:
                reason = f"child exited 0 without a readable result: {type(exc).__name__}: {exc}"
        elif returncode is not None:
            reason = _failure_reason(returncode, child_output)

    result: dict[str, Any] = {
        "schema_version": fwbench.RESULT_SCHEMA_VERSION,
        "status": "ok" if part is not None else "failed",
        "reason": None if part is not None else reason,
        "cell": cell.as_dict(),
        "metrics": part["metrics"] if part is not None else None,
        "samples_ms": part["samples_ms"] if part is not None else [],
        "settings": dict(settings),
        "stderr_tail": None if part is not None else _tail(child_output),
        "inputs": _input_digests(data_dir, weights_path),
        "provenance": {
            **host_provenance(),
            "framework": part["framework"] if part is not None else None,
            "threads_requested": threads,
            "started_at": started_at,
            "finished_at": _now(),
            "duration_s": time.perf_counter() - t0,
        },
    }
    validate_result(result)
    atomic_write_json(out_path, result)
    return result


def _input_digests(data_dir: str | Path, weights_path: str | Path) -> dict[str, Any]:
    manifest, weights = Path(data_dir) / MANIFEST, Path(weights_path)
    return {
        "dataset_manifest_sha256": sha256_file(manifest) if manifest.exists() else None,
        "weights_sha256": sha256_file(weights) if weights.exists() else None,
        "weights_provenance": read_provenance(weights),
    }
