"""All cell results → one tidy table (one row per cell, failed cells included with their reason).

The tidy table (results/tables/inference.csv) is what every table, figure and macro of the inference section reads
back; the columns of one cell come from its result file alone (`_row`), and the partner and deviation flags from the
cells beside it (fwbench.analysis.common.partners). The ratio tables are computed apart, from the cells themselves
(fwbench.analysis.inference.ratios)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from fwbench.analysis.common.cells import cells_by_path
from fwbench.analysis.common.partners import (
    cell_mode,
    device_columns,
    failure_columns,
    flag_deviations,
    flag_partners,
    placement_columns,
    tf32_scope_of,
)
from fwbench.backends.arithmetic import arithmetic_of
from fwbench.io import atomic_write_text
from fwbench.study import modes as execution_modes
from fwbench.trackers.flops import peak_for

KEY_COLUMNS = ["suite", "model", "precision", "batch_size", "framework", "mode"]
# Every mode of the registry in its order (eager before compile): how rows of one framework in two modes sort.
MODE_ORDER = list(dict.fromkeys(mode for modes in execution_modes.MODES.values() for mode in modes))


def _setting(value: Any, key: str) -> Any:
    """One field of a recorded setting that is a record ({"setting": "on", "in_effect": null, ...}); a setting
    recorded as a bare value is its own first field."""
    if isinstance(value, Mapping):
        return value.get(key)
    return value if key in ("setting", "state") else None


def block_columns(metrics: dict[str, Any]) -> dict[str, Any]:
    """The burst checks of a cell measured by warm workers in blocks (fwbench.scenarios.blocks), empty for older
    results: bursts and those flagged for steal or other processes' load (and that load's share of the machine), CPU
    time per wall second in the bursts and while waiting (the worst launch), hardware counters per image where the
    kernel exposed them."""
    blocks = metrics.get("blocks") or {}
    return {
        "bursts": blocks.get("bursts"),
        "steal_flagged_bursts": blocks.get("steal_flagged"),
        "steal_share_max": blocks.get("steal_share_max"),
        "load_flagged_bursts": blocks.get("load_flagged"),
        "other_load_share": blocks.get("other_load_share"),
        "cpu_per_wall": blocks.get("cpu_per_wall"),
        "idle_cpu_per_wall": blocks.get("idle_cpu_per_wall"),
        "instructions_per_image": blocks.get("instructions_per_item"),
        "cycles_per_image": blocks.get("cycles_per_item"),
    }


def mode_columns(result: dict[str, Any]) -> dict[str, Any]:
    """The tidy columns of the mode axis: `mode` and `compiled`, and how the cell compiled and tuned its kernels
    (torch.compile's `compile_mode`, the `autotune` setting and whether it was in effect, the compilation cache's
    state, PyTorch's `memory_format` and `cuda_graphs` as its cell read them), so that tables can say what a
    compiled number includes and a ratio can say what it pairs."""
    settings = (result["provenance"].get("framework") or {}).get("settings") or {}
    mode = cell_mode(result["cell"])
    return {
        "mode": mode,
        "compiled": execution_modes.is_compiled(mode),
        "compile_mode": settings.get("compile_mode"),
        "autotune": _setting(settings.get("autotune"), "setting"),
        "autotune_in_effect": _setting(settings.get("autotune"), "in_effect"),
        "compilation_cache": _setting(settings.get("compilation_cache"), "state"),
        # PyTorch's: the layout read from its tensors, and whether its compiled model replayed CUDA graphs
        "memory_format": settings.get("memory_format"),
        "cuda_graphs": settings.get("cuda_graphs"),
    }


def graph_breaks(metrics: dict[str, Any] | None) -> int | None:
    """torch.compile's graph breaks in a cell (its `compile_report`, fwbench.backends.torch_compile.report); None
    where the cell records none (XLA compiles whole programs, eager compiles nothing)."""
    return ((metrics or {}).get("compile_report") or {}).get("graph_breaks")


def mode_rank(mode: str) -> int:
    return MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER)


def _sort_key(column: pd.Series) -> pd.Series:
    """Modes sort in the registry's order (eager before compile), every other key column as it is."""
    return column.map(mode_rank) if column.name == "mode" else column


def _row(result: dict[str, Any], path: str) -> dict[str, Any]:
    cell, metrics = result["cell"], result["metrics"] or {}
    framework = result["provenance"].get("framework") or {}
    latency = metrics.get("latency_ms", {})
    rss = metrics.get("rss_mb", {})
    versions = framework.get("versions", {})
    memory = metrics.get("device_memory") or {}
    return {
        **{key: cell[key] for key in ("suite", "framework")},
        **mode_columns(result),
        **{key: cell[key] for key in ("model", "precision", "batch_size", "image_size")},
        "status": result["status"],
        "reason": result["reason"],
        **failure_columns(result),
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
        "trials": len(metrics["trials"]) if metrics.get("trials") else (1 if metrics else None),
        "ci_scope": (metrics.get("ci95") or {}).get("scope"),
        # noisy: at least one trial's own IQR above 10% of its median (older results: the pooled samples')
        "noisy": (metrics.get("flags") or {}).get("noisy"),
        "noisy_trials": metrics.get("noisy_trials"),
        "ci_not_reached": (metrics.get("flags") or {}).get("ci_not_reached"),
        **block_columns(metrics),
        "n_iters": metrics.get("n_iters"),
        "stop_reason": metrics.get("stop_reason"),
        "recompiled": (metrics.get("flags") or {}).get("recompiled"),
        "graph_breaks": graph_breaks(metrics),
        "other_gpu_processes": (metrics.get("flags") or {}).get("other_gpu_processes"),
        "energy_j_per_image": (metrics.get("energy") or {}).get("joules_per_image"),
        "energy_source": (metrics.get("energy") or {}).get("source"),
        "energy_missing": (metrics.get("missing") or {}).get("energy"),
        # steady state (after warm-up; load, compilation and autotuning scratch apart) where the framework has it
        "device_peak_bytes": memory.get("steady_state_peak_bytes", memory.get("peak_allocated_bytes")),
        "device_peak_with_load_bytes": memory.get("peak_allocated_bytes"),
        "device_memory_missing": (metrics.get("missing") or {}).get("device_memory"),
        "compile_s": metrics.get("compile_s"),
        "first_call_s": metrics.get("first_call_s"),
        "rss_before_mb": rss.get("before"),
        "rss_peak_mb": rss.get("peak"),
        "threads": (framework.get("settings") or {}).get("intra_op_threads"),
        **device_columns(result),
        "tf32_in_effect": (framework.get("settings") or {}).get("tf32_in_effect"),
        "tf32_scope": tf32_scope_of(framework.get("settings") or {}),
        "dtype": (framework.get("settings") or {}).get("dtype"),
        "arithmetic": arithmetic_of(
            (framework.get("settings") or {}).get("dtype"),
            tf32_scope_of(framework.get("settings") or {}),
            cell["model"],
        ),
        "cuda_major": str(versions.get("cuda")).split(".")[0] if versions.get("cuda") else None,
        "gpu_index": (result["provenance"].get("placement") or {}).get("gpu_index"),
        "framework_version": versions.get(cell["framework"]),
        **placement_columns(result),
        "git_commit": (result["provenance"].get("git") or {}).get("commit"),
        "path": path,
    }


def tidy(paths: Iterable[str | Path]) -> pd.DataFrame:
    rows = [_row(result, str(path)) for path, result in cells_by_path(paths)]
    frame = pd.DataFrame(rows)
    if frame.empty:
        raise ValueError("no cell results to aggregate")
    frame = frame.sort_values(KEY_COLUMNS, kind="stable", key=_sort_key).reset_index(drop=True)
    return flag_deviations(flag_partners(frame))


def add_mfu(frame: pd.DataFrame, facts: Iterable[dict[str, Any]], peak: dict[str, Any]) -> pd.DataFrame:
    """Achieved FLOP/s and MFU per cell: model FLOPs per image (FlopCounterMode, identical for both frameworks) x
    img/s, against the study's measured peak for the arithmetic the cell ran in (its `arithmetic` column, read from
    what it recorded: a precision-`default` PyTorch ViT-B/16 on a GPU computes its matmuls in true FP32 and is
    measured against the FP32 peak, not the TF32 one).

    Only the facts of the study's configuration count: the reference rows (torchvision's 1000 classes at 224 px)
    can share a model and resolution with the study's cells but not their head, hence not their FLOPs."""
    per_image = {
        (row["model"], row["image_size"]): row["flops_torch"] for row in facts if row.get("configuration") == "study"
    }
    flops = [per_image.get((m, s)) for m, s in zip(frame["model"], frame["image_size"], strict=True)]
    frame = frame.assign(flops_per_image=pd.array(flops, dtype="Float64").astype(float))
    frame["achieved_flops"] = frame["flops_per_image"] * frame["throughput_img_s"]
    arithmetic = frame["arithmetic"] if "arithmetic" in frame else frame["precision"]
    frame["peak_flops"] = [peak_for(a, peak) for a in arithmetic]
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


def present(value: Any) -> bool:
    """A tidy value that is there: not None, NaN or empty (CSV round trips turn None into NaN)."""
    return value is not None and not (not isinstance(value, str) and pd.isna(value)) and str(value) != ""
