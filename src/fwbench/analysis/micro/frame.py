"""The micro suite's tidy table (`micro_frame`): one row per cell and timing variant ("resident": each call on
device-resident inputs; "transfer": the host-to-device copy of the input batch plus the call), failed cells one row.
Each row holds the variant's time per call with its 95% interval (over processes with several trials, within one
process with one, and says which), and what the cell recorded of its operation, its machine (BLAS, threads, device)
and its output's agreement with NumPy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from fwbench.analysis.micro.cells import MicroCell, as_cells, framework_provenance, platform_device
from fwbench.analysis.micro.vocabulary import CONFIDENCE, NUMPY, WITHIN, integers
from fwbench.trackers.hardware import recorded_core_type
from fwbench.trackers.stats import WITHIN_PROCESS_ONLY, geometric_mean_interval, order_statistic_median, summary

FRAME_COLUMNS = [
    "framework",
    "mode",
    "operation",
    "precision",
    "batch_size",
    "variant",
    "status",
    "reason",
    "median_ms",
    "median_ci_low",
    "median_ci_high",
    "ci_method",
    "ci_scope",
    "n_samples",
    "trials",
    "noisy",
    "noisy_trials",
    "compile_s",
    "first_call_s",
    "max_rel_error",
    "error_bound",
    "dim",
    "hidden",
    "classes",
    "flops_per_row",
    "dtype",
    "threads",
    "blas",
    "blas_core_type",
    "platform",
    "device",
    "cpu_model",
    "path",
]


def _kernels(settings: dict[str, Any], pool: dict[str, Any]) -> str:
    """The kernels the process's own record (`process_blas`) says this BLAS chose, as ", Haswell kernels"; nothing
    where the cell recorded none."""
    libraries = (settings.get("process_blas") or {}).get("libraries") or []
    for library in libraries:
        same = all(library.get(key) == pool.get(key) for key in ("internal_api", "version"))
        if same and library.get("architecture"):
            return f", {library['architecture']} kernels"
    return ""


def _blas(result: dict[str, Any]) -> str | None:
    """The BLAS pools threadpoolctl found in a NumPy cell, e.g. "openblas 0.3.29, Haswell kernels, 2 threads" (the
    kernels where the cell recorded them)."""
    settings = framework_provenance(result).get("settings") or {}
    described = {
        f"{pool.get('internal_api') or pool.get('user_api') or 'BLAS'} {pool.get('version') or ''}".strip()
        + _kernels(settings, pool)
        + (f", {pool['num_threads']} threads" if pool.get("num_threads") is not None else "")
        for pool in settings.get("blas") or []
        if isinstance(pool, dict)
    }
    return "; ".join(sorted(described)) or None


def _forced_core_type(cell: MicroCell) -> str | None:
    """The OPENBLAS_CORETYPE a NumPy cell ran under; None where unset, and for a framework's cell, whose matmuls do
    not run on NumPy's OpenBLAS."""
    if cell.framework != NUMPY:
        return None
    return recorded_core_type(cell.result.get("provenance") or {})[0]


def _threads(result: dict[str, Any]) -> int | None:
    framework = framework_provenance(result)
    effective = (framework.get("threads") or {}).get("effective")
    return effective if effective is not None else (framework.get("settings") or {}).get("intra_op_threads")


def _sizes(result: dict[str, Any]) -> dict[str, Any]:
    operation = (result.get("metrics") or {}).get("operation") or {}
    settings = result.get("settings") or {}
    return {key: operation.get(key, settings.get(key)) for key in ("dim", "hidden", "classes", "flops_per_row")}


def _common(cell: MicroCell) -> dict[str, Any]:
    """The columns a cell's variant rows share."""
    metrics = cell.result.get("metrics") or {}
    agreement = metrics.get("agreement") or {}
    framework = framework_provenance(cell.result)
    platform, device = platform_device(cell.result)
    return {
        "framework": cell.framework,
        "mode": cell.mode,
        "operation": cell.operation,
        "precision": cell.precision,
        "batch_size": cell.batch_size,
        "status": cell.status,
        "reason": cell.reason,
        "compile_s": metrics.get("compile_s"),
        "first_call_s": metrics.get("first_call_s"),
        "max_rel_error": agreement.get("max_rel_error"),
        "error_bound": agreement.get("bound"),
        **_sizes(cell.result),
        "dtype": (framework.get("settings") or {}).get("dtype") or (metrics.get("operation") or {}).get("dtype"),
        "threads": _threads(cell.result),
        "blas": _blas(cell.result) if cell.framework == NUMPY else None,
        "blas_core_type": _forced_core_type(cell),
        "platform": platform,
        "device": device,
        "cpu_model": (cell.result.get("provenance") or {}).get("cpu_model"),
        "path": cell.path,
    }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _variant_row(cell: MicroCell, variant: str) -> dict[str, Any]:
    """Time per call of one variant. With several trials the process is the unit: the geometric mean of the trials'
    medians with a Student-t 95% CI on their logs (trials - 1 df), as the inference suite summarises trials. With
    one trial: the median of its samples with the distribution-free order-statistic 95% CI (O(n), no resampling),
    which leaves out the variation between processes and says so. Noisy: a trial whose IQR exceeds 10% of its
    median (each process on its own; pooling processes would count their differences as noise)."""
    trials = cell.variants[variant]
    pooled = cell.pooled(variant)
    noisy = sum(bool(summary(trial)["noisy"]) for trial in trials)
    if len(trials) >= 2:
        interval = geometric_mean_interval(cell.trial_medians(variant), confidence=CONFIDENCE)
        method = (
            f"geometric mean of the {len(trials)} trials' medians, Student-t 95% CI on their logs "
            f"({len(trials) - 1} df): between processes"
        )
        scope = "between_processes"
    else:
        interval = order_statistic_median(pooled, confidence=CONFIDENCE)
        method = f"order statistics of the samples, {WITHIN_PROCESS_ONLY}"
        scope = WITHIN
    return {
        "variant": variant,
        "median_ms": interval.estimate,
        "median_ci_low": _finite(interval.low),
        "median_ci_high": _finite(interval.high),
        "ci_method": method,
        "ci_scope": scope,
        "n_samples": int(pooled.size),
        "trials": len(trials),
        "noisy": noisy > 0,
        "noisy_trials": noisy,
    }


def micro_frame(cells_or_paths: Iterable[MicroCell | str | Path]) -> pd.DataFrame:
    """The tidy table: one row per cell and variant (a failed cell: one row, variant "resident", with its reason).
    Accepts cell result paths or cells already loaded by `load_micro_cells`."""
    rows = []
    for cell in as_cells(cells_or_paths):
        common = _common(cell)
        if not cell.ok:
            rows.append({**common, "variant": "resident"})
            continue
        rows += [{**common, **_variant_row(cell, variant)} for variant in cell.variants]
    return integers(pd.DataFrame(rows).reindex(columns=FRAME_COLUMNS))
