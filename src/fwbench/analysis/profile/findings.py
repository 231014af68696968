"""What the section "Where the time goes" says, as values (`profile_findings`): the category that takes most of the
profiled steps, how the cells were profiled, and for each resolved ratio between frameworks beyond THRESHOLD either
way the categories that account for most of the difference (fwbench.analysis.profile.sentences.attribution), or why
none can be named. The words are the template's (report/templates/profile.tex.j2), so an author rewords the section
without touching Python; every number is read from the op-profile table and the ratio table.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import ordered_frameworks
from fwbench.analysis.common.names import (
    framework_name,
    model_in_text,
    models_in_text,
    precision_name,
    variant_name,
)
from fwbench.analysis.inference.summary import resolved_adjusted
from fwbench.analysis.profile.categories import category_phrase, ordered_categories
from fwbench.analysis.profile.sentences import COVER, THRESHOLD, Key, attribution, beyond_threshold, ratio_keys
from fwbench.analysis.profile.tables import category_times, cell_rows, row_key
from fwbench.study.modes import TORCH_COMPILED_MODES, primary

PLATFORMS = {"cpu": "the CPU", "cuda": "the GPU"}


@dataclass(frozen=True)
class Basis:
    """What an operation time is (`basis`, as the capture recorded it) on a platform, and the profilers that report
    it."""

    basis: str
    platform: str
    profilers: tuple[str, ...]


@dataclass(frozen=True)
class Overhead:
    """Profiled over timed step time, minus one, over the cells with both: the lowest, the highest, the median."""

    low: float
    high: float
    median: float
    cells: int


@dataclass(frozen=True)
class ProfileMethod:
    """How the cells were profiled: how many, of which models (in running text) at which batch sizes, in how many
    framework and mode variants; how many in the timed worker (`in_worker`) and in a process of their own (`alone`,
    `recompiled` where those are compiled PyTorch on the CPU); the steps; each framework's profilers; the time
    bases; the categories (in words); the names in no mapping table (None: not known); the profiler's overhead
    (None without a timed median)."""

    cells: int
    models: tuple[str, ...]
    batches: tuple[int, ...]
    variants: int
    in_worker: int
    alone: int
    recompiled: bool
    steps: tuple[int, ...]
    profilers: tuple[tuple[str, tuple[str, ...]], ...]
    bases: tuple[Basis, ...]
    categories: tuple[str, ...]
    unmapped: int | None
    overhead: Overhead | None


@dataclass(frozen=True)
class Majority:
    """The category named most often, in words, and in how many of how many things (the profiled cells' largest
    category; the attributed ratios' first category)."""

    category: str
    count: int
    of: int


@dataclass(frozen=True)
class CategoryShare:
    """A category's part of a difference: its ms per step in the numerator's and the denominator's cell, and the
    difference between them (positive)."""

    category: str
    numerator_ms: float
    denominator_ms: float
    difference: float


@dataclass(frozen=True)
class Ratio:
    """A ratio between two variants on one model, batch size and precision, with its 95% interval."""

    model: str
    batch: int
    precision: str
    numerator: str
    denominator: str
    ratio: float
    low: float
    high: float


@dataclass(frozen=True)
class Attributed:
    """A ratio whose two cells were both profiled: their timed step times (None without a timed median), their
    profiled totals, whether those order the two as the timed trials do (`ordered`; nothing is attributed
    otherwise), the difference, the categories that account for most of it and what they cover together
    (`partial` where that is under half)."""

    ratio: Ratio
    numerator_timed_ms: float | None
    denominator_timed_ms: float | None
    numerator_profiled_ms: float
    denominator_profiled_ms: float
    ordered: bool
    difference: float
    shares: tuple[CategoryShare, ...]
    covered: float
    partial: bool


@dataclass(frozen=True)
class Unattributed:
    """A ratio beyond the threshold whose cells are not both profiled: the ratio, and the variants not profiled."""

    ratio: Ratio
    missing: tuple[str, ...]


@dataclass(frozen=True)
class FailedProfile:
    """A cell whose profiling process failed, in words: its model (in running text), batch size, variant and the
    reason recorded."""

    model: str
    batch: int
    variant: str
    reason: str


@dataclass(frozen=True)
class ProfileFindings:
    """Everything the section says: `method` (None where no cell was profiled), the category largest in most cells
    (`dominant`), the one that accounts for most of the most attributed differences (`leading`), the threshold, the
    ratios attributed and those that cannot be, the count of resolved ratios and of all ratios, and the cells whose
    profiling failed."""

    method: ProfileMethod | None
    dominant: Majority | None
    leading: Majority | None
    threshold: float
    attributed: tuple[Attributed, ...]
    unattributed: tuple[Unattributed, ...]
    resolved: int
    ratios: int
    failed: tuple[FailedProfile, ...]


def _names(keys: list[Key]) -> dict[tuple[str, str], str]:
    """(framework, mode) -> "compiled PyTorch" where the framework has several modes among `keys`, else
    "PyTorch"."""
    modes: dict[str, set[str]] = {}
    for key in keys:
        modes.setdefault(key[1], set()).add(key[2])
    return {(f, m): variant_name(f, m, alone=len(found) == 1) for f, found in modes.items() for m in found}


def _overhead(cells: pd.DataFrame) -> Overhead | None:
    overhead = pd.to_numeric(cells["profiler_overhead"], errors="coerce").dropna()
    if overhead.empty:
        return None
    return Overhead(float(overhead.min()), float(overhead.max()), float(overhead.median()), len(overhead))


def _bases(cells: pd.DataFrame) -> tuple[Basis, ...]:
    """Each time basis with its platform and the profilers that reported it, in the paper's order of frameworks."""
    groups: dict[tuple[str, str], list[str]] = {}
    for framework in ordered_frameworks(cells["framework"]):
        mine = cells[cells["framework"] == framework]
        for profiler, platform, basis in zip(mine["profiler"], mine["platform"], mine["time_basis"], strict=True):
            basis = basis if isinstance(basis, str) and basis else "not recorded"
            names = groups.setdefault((basis, PLATFORMS.get(str(platform), str(platform))), [])
            if str(profiler) not in names:
                names.append(str(profiler))
    return tuple(Basis(basis, platform, tuple(names)) for (basis, platform), names in groups.items())


def profile_method(table: pd.DataFrame, unmapped: pd.DataFrame | None) -> ProfileMethod:
    cells = cell_rows(table)
    where = cells["profiled_in"]
    alone = cells[where != "worker"]
    return ProfileMethod(
        cells=len(cells),
        models=tuple(models_in_text(set(cells["model"]))),
        batches=tuple(sorted({int(b) for b in cells["batch_size"]})),
        variants=len({(f, m) for f, m in zip(cells["framework"], cells["mode"], strict=True)}),
        in_worker=int((where == "worker").sum()),
        alone=len(alone),
        recompiled=bool(len(alone))
        and set(alone["mode"]) <= set(TORCH_COMPILED_MODES)
        and set(alone["platform"]) == {"cpu"},
        steps=tuple(sorted({int(s) for s in cells["steps"]})),
        profilers=tuple(
            (framework_name(f), tuple(sorted(set(cells.loc[cells["framework"] == f, "profiler"].astype(str)))))
            for f in ordered_frameworks(cells["framework"])
        ),
        bases=_bases(cells),
        categories=tuple(category_phrase(c) for c in ordered_categories(table["category"])),
        unmapped=(int(unmapped["name"].nunique()) if len(unmapped) else 0) if unmapped is not None else None,
        overhead=_overhead(cells),
    )


def majority(categories: list[str]) -> Majority | None:
    """The category named most often among `categories` (in words), or None where there is none."""
    if not categories:
        return None
    category, count = Counter(categories).most_common(1)[0]
    return Majority(category, count, len(categories))


def dominant_category(table: pd.DataFrame) -> Majority | None:
    """The category with the most ms per step in the most profiled cells."""
    return majority([category_phrase(max(times, key=times.get)) for times in category_times(table).values() if times])


def _ratio(row: pd.Series, names: dict[tuple[str, str], str]) -> Ratio:
    numerator, denominator = ratio_keys(row)
    return Ratio(
        model=model_in_text(row["model"]),
        batch=int(row["batch_size"]),
        precision=precision_name(row["precision"]),
        numerator=names[numerator[1:3]],
        denominator=names[denominator[1:3]],
        ratio=float(row["ratio"]),
        low=float(row["ci_low"]),
        high=float(row["ci_high"]),
    )


def _attributed(row: pd.Series, ratio: Ratio, cells: dict[Key, pd.Series], times: dict) -> Attributed:
    num_key, den_key = ratio_keys(row)
    num, den = cells[num_key], cells[den_key]
    num_total, den_total = math.fsum(times[num_key].values()), math.fsum(times[den_key].values())
    total = num_total - den_total
    ordered = total != 0 and (total > 0) == (float(row["ratio"]) < 1)
    shares = attribution(times[num_key], times[den_key]) if ordered else []
    covered = math.fsum(abs(s.difference) for s in shares)
    return Attributed(
        ratio=ratio,
        numerator_timed_ms=float(num["timed_step_ms"]) if pd.notna(num["timed_step_ms"]) else None,
        denominator_timed_ms=float(den["timed_step_ms"]) if pd.notna(den["timed_step_ms"]) else None,
        numerator_profiled_ms=num_total,
        denominator_profiled_ms=den_total,
        ordered=ordered,
        difference=abs(total),
        shares=tuple(
            CategoryShare(category_phrase(s.category), s.numerator_ms, s.denominator_ms, abs(s.difference))
            for s in shares
        ),
        covered=covered,
        partial=bool(shares) and covered < COVER * abs(total),
    )


def _failed(cell: Mapping[str, Any], reason: str) -> FailedProfile:
    framework = str(cell["framework"])
    return FailedProfile(
        model=model_in_text(cell["model"]),
        batch=int(cell["batch_size"]),
        variant=variant_name(framework, cell.get("mode"), alone=cell.get("mode") in (None, primary(framework))),
        reason=reason,
    )


def profile_findings(
    table: pd.DataFrame,
    ratios: pd.DataFrame,
    unmapped: pd.DataFrame | None = None,
    failed: list[tuple[Mapping[str, Any], str]] | None = None,
) -> ProfileFindings:
    """The section's values from the op-profile table (`tables.op_profile_table`), the speedups table and the
    unmapped names; `failed`: (cell, reason) of the cells whose profiling failed (`tables.failed_profiles`)."""
    failed_cells = tuple(_failed(cell, reason) for cell, reason in failed or [])
    if table.empty:
        return ProfileFindings(None, None, None, THRESHOLD, (), (), 0, 0, failed_cells)
    far = ratios[beyond_threshold(ratios)] if len(ratios) else ratios
    cells = {row_key(r): r for _, r in cell_rows(table).iterrows()}
    times = category_times(table)
    names = _names([*cells, *(key for _, row in far.iterrows() for key in ratio_keys(row))])
    attributed, unattributed = [], []
    for _, row in far.iterrows():
        ratio = _ratio(row, names)
        missing = [key for key in ratio_keys(row) if key not in cells]
        if missing:
            unattributed.append(Unattributed(ratio, tuple(names[key[1:3]] for key in missing)))
        else:
            attributed.append(_attributed(row, ratio, cells, times))
    return ProfileFindings(
        method=profile_method(table, unmapped),
        dominant=dominant_category(table),
        leading=majority([a.shares[0].category for a in attributed if a.shares]),
        threshold=THRESHOLD,
        attributed=tuple(attributed),
        unattributed=tuple(unattributed),
        resolved=int(resolved_adjusted(ratios).sum()) if len(ratios) else 0,
        ratios=len(ratios),
        failed=failed_cells,
    )
