"""The op-profile tables, from the inference cells' `metrics.op_profile` (the contract of issue 35):

- `op_profile_table` (results/tables/op_profile.csv): one row per profiled cell and category, its time per step and
  share, with the cell's profiled step time set beside the timed median of its trials (`latency_p50_ms` of the tidy
  table) so the profiler's own overhead is visible, not folded into the categories;
- `op_profile_top_table` (op_profile_top.csv): each cell's most expensive operations under the framework's names;
- `op_profile_unmapped_table` (op_profile_unmapped.csv): the operation names no mapping table knew, which the
  capture put in "other", per framework and platform, so a name that fell through is listed rather than lost.

A cell without `op_profile` (not profiled) or whose status is not "ok" is in none of them. Each cell's shares are
checked to sum to 1 before anything is written: a profile that does not add up would make every figure and sentence
built on it wrong without a visible sign, so the analysis stops and names the cell."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import ordered_variants
from fwbench.analysis.common.partners import cell_mode, with_modes
from fwbench.analysis.profile.categories import category_rank
from fwbench.study.grid import Cell

SHARE_TOLERANCE = 1e-6
CELL_COLUMNS = ["model", "framework", "mode", "precision", "batch_size"]
# One panel of the figure (and one comparison of the ratio tables): the cells of its variants side by side.
PANEL_KEYS = ["model", "precision", "batch_size"]
# The contract's columns first; `steps` and `attributed_ms` after them (the method paragraph quotes the steps).
PROFILE_COLUMNS = [
    *CELL_COLUMNS,
    "category",
    "ms_per_step",
    "share",
    "profiled_step_ms",
    "timed_step_ms",
    "profiler_overhead",
    "platform",
    "profiler",
    "time_basis",
    "steps",
    "attributed_ms",
    "profiled_in",
]
TOP_COLUMNS = [*CELL_COLUMNS, "rank", "name", "category", "ms_per_step", "calls_per_step"]
UNMAPPED_COLUMNS = ["framework", "platform", "profiler", "name", "cells"]
# (model, framework, mode, precision, batch size): a profiled cell in every lookup of this section.
Key = tuple[str, str, str, str, int]
REQUIRED = ("profiler", "platform", "steps", "profiled_step_ms", "attributed_ms", "categories", "top", "unmapped")


class ProfileError(ValueError):
    """A cell's op profile cannot be analysed (its shares do not sum to 1, a field is missing); the message names
    the cell. `terminal_message` is what a workflow script prints instead of a traceback."""

    def __init__(self, message: str):
        super().__init__(message)
        self.terminal_message = f"fwbench: {message}"


@dataclass(frozen=True)
class Profiled:
    """One profiled cell: where it came from (`source`, the file where known), its key and its op profile."""

    source: str
    model: str
    framework: str
    mode: str
    precision: str
    batch_size: int
    profile: Mapping[str, Any]

    @property
    def key(self) -> Key:
        return (self.model, self.framework, self.mode, self.precision, self.batch_size)


def cell_label(cell: Mapping[str, Any]) -> str:
    """A cell as its path names it ("inference/jax/jit/resnet50/fp32/bs32"; fwbench.study.grid.Cell.label)."""
    return Cell(**cell).label()


def _source_and_result(item: Any) -> tuple[str, Mapping[str, Any]]:
    """A result dict, or a (path, result) pair as `fwbench.analysis.common.cells.cells_by_path` gives them."""
    if isinstance(item, tuple):
        path, result = item
        return f"{path} ({cell_label(result['cell'])})", result
    return cell_label(item["cell"]), item


def check_profile(source: str, profile: Mapping[str, Any]) -> None:
    """Raise ProfileError naming `source` where the profile lacks a field of the contract or its shares do not sum
    to 1 (within SHARE_TOLERANCE)."""
    missing = [key for key in REQUIRED if key not in profile]
    if missing:
        raise ProfileError(f"the op profile of {source} lacks {', '.join(missing)}")
    categories = profile["categories"]
    if not categories:
        raise ProfileError(f"the op profile of {source} has no categories")
    if not float(profile["attributed_ms"]) > 0:
        raise ProfileError(f"the op profile of {source} attributes no time to any category: profile the cell again")
    total = math.fsum(float(entry["share"]) for entry in categories)
    if not abs(total - 1.0) <= SHARE_TOLERANCE:
        raise ProfileError(
            f"the category shares of {source} sum to {total:.9g}, not 1 (tolerance {SHARE_TOLERANCE:g}): "
            "its op profile is inconsistent; profile the cell again"
        )


def profiled_cells(cells: Iterable[Any]) -> list[Profiled]:
    """The profiled inference cells among `cells` (result dicts, or (path, result) pairs), each checked
    (`check_profile`), in the paper's order: model, precision, batch size, then framework and mode."""
    found = []
    for item in cells:
        source, result = _source_and_result(item)
        cell, metrics = result["cell"], result.get("metrics") or {}
        profile = metrics.get("op_profile")
        if result.get("status") != "ok" or not profile or cell.get("suite", "inference") != "inference":
            continue
        if profile.get("status") == "failed":  # its profiling process failed: listed by failed_profiles
            continue
        check_profile(source, profile)
        found.append(
            Profiled(
                source,
                str(cell["model"]),
                str(cell["framework"]),
                cell_mode(cell),
                str(cell["precision"]),
                int(cell["batch_size"]),
                profile,
            )
        )
    order = {variant: index for index, variant in enumerate(ordered_variants((p.framework, p.mode) for p in found))}
    return sorted(found, key=lambda p: (p.model, p.precision, p.batch_size, order[(p.framework, p.mode)]))


def failed_profiles(cells: Iterable[Any]) -> list[tuple[dict[str, Any], str]]:
    """(cell, reason) of every ok inference cell whose profiling process failed (fwbench.running.profiling records
    why instead of a profile), in the order of the cells' labels: the section names them, so a missing breakdown is
    never silent."""
    failed = []
    for item in cells:
        _, result = _source_and_result(item)
        profile = (result.get("metrics") or {}).get("op_profile") or {}
        if result.get("status") == "ok" and profile.get("status") == "failed":
            failed.append((dict(result["cell"]), str(profile.get("reason") or "no reason recorded")))
    return sorted(failed, key=lambda pair: cell_label(pair[0]))


def timed_medians(tidy: pd.DataFrame | None) -> dict[Key, float]:
    """(model, framework, mode, precision, batch) -> the timed median step time in ms (`latency_p50_ms`) of each
    successful inference cell of the tidy table; empty without one."""
    if tidy is None or tidy.empty or "latency_p50_ms" not in tidy:
        return {}
    rows = with_modes(tidy)
    if "suite" in rows:
        rows = rows[rows["suite"] == "inference"]
    if "status" in rows:
        rows = rows[rows["status"] == "ok"]
    return {row_key(r): float(r["latency_p50_ms"]) for _, r in rows.iterrows() if pd.notna(r["latency_p50_ms"])}


def _cell_values(cell: Profiled) -> dict[str, Any]:
    return {
        "model": cell.model,
        "framework": cell.framework,
        "mode": cell.mode,
        "precision": cell.precision,
        "batch_size": cell.batch_size,
    }


def op_profile_table(cells: Iterable[Any], tidy: pd.DataFrame | None) -> pd.DataFrame:
    """One row per profiled cell and category (PROFILE_COLUMNS), categories in the contract's order.
    `profiler_overhead` is the profiled step time over the timed median minus 1 (NaN where the tidy table has no
    timed median for the cell)."""
    medians = timed_medians(tidy)
    rows = []
    for cell in profiled_cells(cells):
        profile = cell.profile
        # None: a profile reduced from a recorded trace with no wall clock beside it (no overhead to show)
        recorded = profile["profiled_step_ms"]
        profiled = float(recorded) if recorded is not None else math.nan
        timed = medians.get(cell.key, math.nan)
        overhead = profiled / timed - 1.0 if timed and not math.isnan(timed) else math.nan
        entries = sorted(profile["categories"], key=lambda entry: category_rank(entry["category"]))
        for entry in entries:
            rows.append(
                _cell_values(cell)
                | {
                    "category": str(entry["category"]),
                    "ms_per_step": float(entry["ms_per_step"]),
                    "share": float(entry["share"]),
                    "profiled_step_ms": profiled,
                    "timed_step_ms": timed,
                    "profiler_overhead": overhead,
                    "platform": profile["platform"],
                    "profiler": profile["profiler"],
                    "time_basis": profile.get("time_basis"),
                    "steps": int(profile["steps"]),
                    "attributed_ms": float(profile["attributed_ms"]),
                    # a record without `where` comes from a process of its own (and every pass before 2026-11-28)
                    "profiled_in": "worker" if profile.get("where") else "process",
                }
            )
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS)


def op_profile_top_table(cells: Iterable[Any]) -> pd.DataFrame:
    """Each profiled cell's most expensive operations, kernels or fusions (TOP_COLUMNS), rank 1 the most expensive,
    under the names the framework reports."""
    rows = []
    for cell in profiled_cells(cells):
        top = sorted(cell.profile["top"], key=lambda entry: -float(entry["ms_per_step"]))
        for rank, entry in enumerate(top, start=1):
            rows.append(
                _cell_values(cell)
                | {
                    "rank": rank,
                    "name": str(entry["name"]),
                    "category": str(entry["category"]),
                    "ms_per_step": float(entry["ms_per_step"]),
                    "calls_per_step": float(entry["calls_per_step"]),
                }
            )
    return pd.DataFrame(rows, columns=TOP_COLUMNS)


def op_profile_unmapped_table(cells: Iterable[Any]) -> pd.DataFrame:
    """Every operation name that fell to "other" because no mapping table knew it (UNMAPPED_COLUMNS): per
    framework, platform and profiler, with the number of profiled cells it appeared in."""
    counts: dict[tuple[str, str, str, str], int] = {}
    for cell in profiled_cells(cells):
        profile = cell.profile
        for name in dict.fromkeys(str(n) for n in profile["unmapped"]):
            key = (cell.framework, str(profile["platform"]), str(profile["profiler"]), name)
            counts[key] = counts.get(key, 0) + 1
    rows = [dict(zip(UNMAPPED_COLUMNS, (*key, n), strict=True)) for key, n in sorted(counts.items())]
    return pd.DataFrame(rows, columns=UNMAPPED_COLUMNS)


def cell_rows(table: pd.DataFrame) -> pd.DataFrame:
    """One row per profiled cell of an op-profile table (its per-cell columns), in the table's order."""
    columns = [c for c in PROFILE_COLUMNS if c not in ("category", "ms_per_step", "share")]
    return table.drop_duplicates(CELL_COLUMNS)[columns].reset_index(drop=True)


def row_key(row: Any) -> Key:
    """(model, framework, mode, precision, batch) of a row of an op-profile table (as `Profiled.key`)."""
    return (str(row["model"]), str(row["framework"]), str(row["mode"]), str(row["precision"]), int(row["batch_size"]))


def category_times(table: pd.DataFrame) -> dict[Key, dict[str, float]]:
    """(model, framework, mode, precision, batch) -> {category: ms per step} of an op-profile table."""
    out: dict[Key, dict[str, float]] = {}
    for _, row in table.iterrows():
        out.setdefault(row_key(row), {})[str(row["category"])] = float(row["ms_per_step"])
    return out
