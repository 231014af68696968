"""What the micro-benchmarks section says, as values (`micro_findings`): per framework, from which batch size it
computes faster than NumPy on each operation and how sure that is, its speed at the largest batch size, what the
copy of the input batch changes, and how our crossovers stand against the reference's. The words are the
template's (report/templates/micro.tex.j2), so an author rewords the section without touching Python; every value
here is read from the tables of one analysis (fwbench.analysis.micro.analysis).

A series is a framework in one execution mode, one operation, precision and variant. The body speaks of each
framework's resident series (the computation alone) and says in one sentence what the copy changes; the appendix's
tables keep every series.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fwbench.analysis.common.names import precision_name, variant_name
from fwbench.analysis.micro.analysis import MicroAnalysis
from fwbench.analysis.micro.crossovers import from_row
from fwbench.analysis.micro.reference import AGREEMENTS, NO_INTERVAL, NOT_COMPARABLE, REFERENCE_GPU
from fwbench.analysis.micro.text import cell_counts, distinct
from fwbench.analysis.micro.vocabulary import NUMPY, frame_modes, is_measured, is_measured_text, row_modes
from fwbench.study.modes import is_compiled

# The operations as a sentence names them ("the matrix product"), never by their identifiers.
OPERATION_NAMES = {"matmul": "matrix product", "mlp": "MLP"}
RESIDENT, TRANSFER = "resident", "transfer"


def operation_name(operation: str) -> str:
    """ "matrix product" for `matmul`; an operation the suite does not know by its identifier, underscores as
    spaces."""
    return OPERATION_NAMES.get(str(operation), str(operation).replace("_", " "))


@dataclass(frozen=True)
class Crossing:
    """One series' crossover over NumPy: `kind` "crossover", "never" (not above 1 at the largest batch size) or "no
    data"; `batch` the point crossover; its 95% interval `low` to `high` (None: beyond the largest batch size
    measured), `has_interval` false with one process per cell; `unverified`: the batch sizes above the crossover
    whose cells failed; `speedup` at the `largest` batch size measured, with its `verdict` there."""

    operation: str
    precision: str | None
    kind: str
    batch: int | None
    at_smallest: bool
    has_interval: bool
    low: int | None
    high: int | None
    unverified: tuple[int, ...]
    speedup: float | None
    largest: int | None
    verdict: str | None


@dataclass(frozen=True)
class FrameworkCrossings:
    """A framework (in one execution mode) against NumPy: its resident series, and the range of its speedups at the
    largest batch size over them (None where none was measured)."""

    name: str
    series: tuple[Crossing, ...]
    slowest: float | None
    fastest: float | None
    largest: int | None


@dataclass(frozen=True)
class CopyEffect:
    """What timing the copy of the input batch does to the crossovers, over the series measured both ways:
    `later` and `earlier` count the series whose point crossover moves (never counts as beyond the largest)."""

    pairs: int
    later: int
    earlier: int


@dataclass(frozen=True)
class Agreement:
    """Our crossovers against the reference's (fwbench.analysis.micro.reference.agreement): the count of each word,
    `by_points` those compared by point estimates only (one process per cell), `not_comparable` the series without
    a partner on either side."""

    same: int
    earlier: int
    later: int
    inconclusive: int
    by_points: int
    not_comparable: int

    @property
    def compared(self) -> int:
        return self.same + self.earlier + self.later + self.inconclusive + self.by_points


@dataclass(frozen=True)
class MicroFindings:
    """Everything the body's section says: the reference's question (`reference_device`, its batch range), the
    operations and sizes, the batch sizes and processes per cell, whether the intervals are over processes, whether
    the copy variant was measured, the cells, the devices (`device_names`), the findings per framework, `compiled`
    (the names of those whose mode compiles, whose speedups include what their compiler gains over NumPy's eager
    calls), the copy's effect and the agreement with the reference."""

    reference_device: str
    reference_batches: tuple[int, int]
    operations: tuple[str, ...]
    dim: tuple[int, ...]
    hidden: tuple[int, ...]
    classes: tuple[int, ...]
    has_mlp: bool
    batches: tuple[int, ...]
    processes: tuple[int, ...]
    over_processes: bool
    copy_measured: bool
    precisions: tuple[str, ...]
    cells: int
    failed: int
    devices: tuple[str, ...]
    frameworks: tuple[FrameworkCrossings, ...]
    compiled: tuple[str, ...]
    copy: CopyEffect
    agreement: Agreement


def _int_or_none(value: Any) -> int | None:
    return int(value) if is_measured(value) and math.isfinite(float(value)) else None


def crossing(row: Mapping[str, Any], precisions: bool) -> Crossing:
    """One crossovers row as values."""
    result = from_row(row)
    return Crossing(
        operation=operation_name(row["operation"]),
        precision=precision_name(row["precision"]) if precisions else None,
        kind=result.kind,
        batch=result.batch,
        at_smallest=result.at_smallest,
        has_interval=result.has_interval,
        low=_int_or_none(result.ci_low) if result.has_interval else None,
        high=_int_or_none(result.ci_high) if result.has_interval else None,
        unverified=tuple(int(b) for b in result.unverified),
        speedup=float(row["speedup_at_largest"]) if is_measured(row.get("speedup_at_largest")) else None,
        largest=_int_or_none(row.get("largest_batch")),
        verdict=str(row["verdict_at_largest"]) if is_measured_text(row.get("verdict_at_largest")) else None,
    )


def series_names(frame: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(framework, mode) -> "PyTorch", or "compiled PyTorch" where the framework ran in several modes."""
    pairs = [pair for pair in frame_modes(frame) if pair[0] != NUMPY]
    counts = pd.Series([f for f, _ in pairs]).value_counts() if pairs else pd.Series(dtype=int)
    return {(f, m): variant_name(f, m, alone=counts[f] == 1) for f, m in pairs}


def _framework(name: str, rows: pd.DataFrame, precisions: bool) -> FrameworkCrossings:
    series = tuple(crossing(row, precisions) for _, row in rows.iterrows())
    speeds = [s.speedup for s in series if s.speedup is not None]
    largest = [s.largest for s in series if s.largest is not None]
    return FrameworkCrossings(
        name=name,
        series=series,
        slowest=min(speeds) if speeds else None,
        fastest=max(speeds) if speeds else None,
        largest=max(largest) if largest else None,
    )


def _point(row: Mapping[str, Any]) -> float:
    """A series' point crossover as a number to compare: never is beyond every batch size."""
    result = from_row(row)
    return float(result.batch) if result.kind == "crossover" else math.inf


def copy_effect(crossovers: pd.DataFrame) -> CopyEffect:
    """How the copy of the input batch moves each series' point crossover, over the series measured both ways."""
    measured = crossovers[crossovers["kind"].isin(["crossover", "never"])]
    measured = measured.assign(mode=row_modes(measured))
    later = earlier = pairs = 0
    for _, group in measured.groupby(["framework", "mode", "operation", "precision"]):
        by_variant = {row["variant"]: row for _, row in group.iterrows()}
        if RESIDENT in by_variant and TRANSFER in by_variant:
            pairs += 1
            resident, transfer = _point(by_variant[RESIDENT]), _point(by_variant[TRANSFER])
            later += transfer > resident
            earlier += transfer < resident
    return CopyEffect(pairs=pairs, later=later, earlier=earlier)


def agreement_counts(comparison: pd.DataFrame) -> Agreement:
    words = comparison["agreement"].astype(str) if "agreement" in comparison else pd.Series(dtype=str)
    counts = {word: int((words == word).sum()) for word in AGREEMENTS}
    return Agreement(
        **counts,
        by_points=int(words.str.endswith(NO_INTERVAL).sum()),
        not_comparable=int((words == NOT_COMPARABLE).sum()),
    )


def device_names(frame: pd.DataFrame) -> tuple[str, ...]:
    """The devices the cells ran on, each with its kind where its name lacks it: "AMD EPYC CPU", "NVIDIA H200
    GPU"."""
    names = set()
    for device, platform in frame[["device", "platform"]].drop_duplicates().itertuples(index=False):
        if is_measured_text(device):
            kind = "CPU" if str(platform) == "cpu" else "GPU"
            names.add(str(device) if kind in str(device) else f"{device} {kind}")
    return tuple(sorted(names))


def micro_findings(analysis: MicroAnalysis) -> MicroFindings:
    """The body's values from one analysis."""
    frame, crossovers = analysis.frame, analysis.crossovers
    precisions = frame["precision"].nunique() > 1
    names = series_names(frame)
    frameworks = []
    for (framework, mode), name in names.items():
        rows = crossovers[(crossovers["framework"] == framework) & (row_modes(crossovers) == mode)]
        primary_variant = RESIDENT if (rows["variant"] == RESIDENT).any() else None
        rows = rows[rows["variant"] == primary_variant] if primary_variant else rows
        frameworks.append(_framework(name, rows, precisions))
    total, ok, _ = cell_counts(frame)
    others = frame[frame["framework"] != NUMPY]
    published = analysis.published
    return MicroFindings(
        reference_device=REFERENCE_GPU,
        reference_batches=(int(published["batch_size"].min()), int(published["batch_size"].max())),
        operations=tuple(operation_name(o) for o in sorted(set(frame["operation"]))),
        dim=tuple(int(v) for v in distinct(frame["dim"])),
        hidden=tuple(int(v) for v in distinct(frame["hidden"])),
        classes=tuple(int(v) for v in distinct(frame["classes"])),
        has_mlp="mlp" in set(frame["operation"]),
        batches=tuple(int(b) for b in sorted(set(frame["batch_size"]))),
        processes=tuple(int(v) for v in distinct(frame["trials"])),
        over_processes=bool(crossovers["crossover_ci_high"].notna().any()) if len(crossovers) else False,
        copy_measured=bool((frame["variant"] == TRANSFER).any()),
        precisions=tuple(precision_name(p) for p in sorted(set(frame["precision"]))),
        cells=total,
        failed=total - ok,
        devices=device_names(others if len(others) else frame),
        frameworks=tuple(frameworks),
        compiled=tuple(name for (_, mode), name in names.items() if is_compiled(mode)),
        copy=copy_effect(crossovers),
        agreement=agreement_counts(analysis.comparison),
    )
