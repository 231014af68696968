"""All cell results → one tidy table (one row per cell, failed cells included with their reason)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from fwbench.io import atomic_write_text
from fwbench.results import load_result

KEY_COLUMNS = ["suite", "model", "precision", "batch_size", "framework"]


def _row(result: dict[str, Any], path: str) -> dict[str, Any]:
    cell, metrics = result["cell"], result["metrics"] or {}
    framework = result["provenance"].get("framework") or {}
    latency = metrics.get("latency_ms", {})
    rss = metrics.get("rss_mb", {})
    versions = framework.get("versions", {})
    return {
        **{key: cell[key] for key in ("suite", "framework", "model", "precision", "batch_size", "image_size")},
        "status": result["status"],
        "reason": result["reason"],
        "throughput_img_s": metrics.get("throughput_img_s"),
        "throughput_img_s_total": metrics.get("throughput_img_s_total"),
        "latency_p50_ms": latency.get("p50"),
        "latency_p95_ms": latency.get("p95"),
        "latency_p99_ms": latency.get("p99"),
        "latency_mean_ms": latency.get("mean"),
        "latency_iqr_ms": latency.get("iqr"),
        "n_iters": metrics.get("n_iters"),
        "stop_reason": metrics.get("stop_reason"),
        "compile_s": metrics.get("compile_s"),
        "first_call_s": metrics.get("first_call_s"),
        "rss_before_mb": rss.get("before"),
        "rss_peak_mb": rss.get("peak"),
        "threads": (framework.get("settings") or {}).get("intra_op_threads"),
        "device": (framework.get("device") or {}).get("name"),
        "framework_version": versions.get(cell["framework"]),
        "cpu_model": result["provenance"].get("cpu_model"),
        "git_commit": (result["provenance"].get("git") or {}).get("commit"),
        "path": path,
    }


def tidy(paths: Iterable[str | Path]) -> pd.DataFrame:
    rows = [_row(load_result(path), str(path)) for path in paths]
    frame = pd.DataFrame(rows)
    if frame.empty:
        raise ValueError("no cell results to aggregate")
    return frame.sort_values(KEY_COLUMNS, kind="stable").reset_index(drop=True)


def write_tidy(paths: Iterable[str | Path], out_csv: str | Path) -> pd.DataFrame:
    frame = tidy(paths)
    atomic_write_text(out_csv, frame.to_csv(index=False))
    return frame


def read_tidy(csv_path: str | Path) -> pd.DataFrame:
    return pd.read_csv(csv_path, keep_default_na=True)


def speedups(frame: pd.DataFrame, numerator: str = "jax", denominator: str = "torch") -> pd.DataFrame:
    """Throughput ratio numerator/denominator for every (model, precision, batch) where both cells succeeded."""
    ok = frame[frame["status"] == "ok"]
    wide = ok.pivot_table(
        index=["model", "precision", "batch_size"], columns="framework", values="throughput_img_s", aggfunc="first"
    )
    if numerator not in wide or denominator not in wide:
        return pd.DataFrame(columns=["model", "precision", "batch_size", "ratio"])
    ratio = (wide[numerator] / wide[denominator]).dropna().rename("ratio")
    return ratio.reset_index()
