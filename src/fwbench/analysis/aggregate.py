"""All cell results → one tidy table (one row per cell, failed cells included with their reason)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from fwbench.io import atomic_write_text
from fwbench.results import load_result
from fwbench.trackers.flops import peak_for
from fwbench.trackers.stats import bootstrap_ratio_of_medians

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
        "latency_cv": latency.get("cv"),
        "throughput_ci_low": (metrics.get("ci95") or {}).get("throughput_img_s", [None, None])[0],
        "throughput_ci_high": (metrics.get("ci95") or {}).get("throughput_img_s", [None, None])[1],
        "noisy": (metrics.get("flags") or {}).get("noisy"),
        "ci_not_reached": (metrics.get("flags") or {}).get("ci_not_reached"),
        "n_iters": metrics.get("n_iters"),
        "stop_reason": metrics.get("stop_reason"),
        "recompiled": (metrics.get("flags") or {}).get("recompiled"),
        "other_gpu_processes": (metrics.get("flags") or {}).get("other_gpu_processes"),
        "energy_j_per_image": (metrics.get("energy") or {}).get("joules_per_image"),
        "energy_source": (metrics.get("energy") or {}).get("source"),
        "energy_missing": (metrics.get("missing") or {}).get("energy"),
        "device_peak_bytes": (metrics.get("device_memory") or {}).get("peak_allocated_bytes"),
        "device_memory_missing": (metrics.get("missing") or {}).get("device_memory"),
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


def add_mfu(frame: pd.DataFrame, facts: Iterable[dict[str, Any]], peak: dict[str, Any]) -> pd.DataFrame:
    """Achieved FLOP/s and MFU per cell: model FLOPs per image (FlopCounterMode, identical for both frameworks) x
    img/s, against the study's measured peak for the cell's precision."""
    per_image = {(row["model"], row["image_size"]): row["flops_torch"] for row in facts}
    flops = [per_image.get((m, s)) for m, s in zip(frame["model"], frame["image_size"], strict=True)]
    frame = frame.assign(flops_per_image=pd.array(flops, dtype="Float64").astype(float))
    frame["achieved_flops"] = frame["flops_per_image"] * frame["throughput_img_s"]
    frame["peak_flops"] = [peak_for(p, peak) for p in frame["precision"]]
    frame["mfu"] = frame["achieved_flops"] / frame["peak_flops"]
    return frame


def write_tidy(
    paths: Iterable[str | Path],
    out_csv: str | Path,
    facts: Iterable[dict[str, Any]] | None = None,
    peak: dict[str, Any] | None = None,
) -> pd.DataFrame:
    frame = tidy(paths)
    if facts is not None and peak is not None:
        frame = add_mfu(frame, facts, peak)
    atomic_write_text(out_csv, frame.to_csv(index=False))
    return frame


def read_tidy(csv_path: str | Path) -> pd.DataFrame:
    return pd.read_csv(csv_path, keep_default_na=True)


def speedups(results: Iterable[dict[str, Any]], numerator: str = "jax", denominator: str = "torch") -> pd.DataFrame:
    """Throughput ratio numerator/denominator with a bootstrap 95% CI from the raw samples, for every (model,
    precision, batch) where both cells succeeded."""
    samples: dict[tuple, dict[str, list[float]]] = {}
    for result in results:
        if result["status"] != "ok":
            continue
        cell = result["cell"]
        key = (cell["model"], cell["precision"], cell["batch_size"])
        samples.setdefault(key, {})[cell["framework"]] = result["samples_ms"]
    rows = []
    for (model, precision, batch), by_framework in sorted(samples.items()):
        if numerator in by_framework and denominator in by_framework:
            # throughput ratio = median latency of the denominator / median latency of the numerator
            ci = bootstrap_ratio_of_medians(by_framework[denominator], by_framework[numerator])
            rows.append(
                {
                    "model": model,
                    "precision": precision,
                    "batch_size": batch,
                    "ratio": ci.estimate,
                    "ci_low": ci.low,
                    "ci_high": ci.high,
                    "numerator": numerator,
                    "denominator": denominator,
                }
            )
    return pd.DataFrame(
        rows, columns=["model", "precision", "batch_size", "ratio", "ci_low", "ci_high", "numerator", "denominator"]
    )


def write_speedups(paths: Iterable[str | Path], out_csv: str | Path) -> pd.DataFrame:
    frame = speedups(load_result(path) for path in paths)
    atomic_write_text(out_csv, frame.to_csv(index=False))
    return frame
