"""What the micro-benchmarks appendix says, as values (`micro_details`): the method in full (operations, modes,
timing, threads, the output check, the statistics for the trials this study has, the precisions), the counts of
the results, and the comparison with the reference with its caveats, computed from the reference's own numbers.
The words are the template's (report/templates/micro_detail.tex.j2); the tables beside them are
fwbench.analysis.micro.tables'.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from fwbench.analysis.common.names import framework_name, precision_name
from fwbench.analysis.micro.analysis import MicroAnalysis
from fwbench.analysis.micro.figure import framework_order
from fwbench.analysis.micro.findings import TRANSFER, Agreement, agreement_counts, operation_name, series_names
from fwbench.analysis.micro.reference import NO_INTERVAL, REFERENCE_GPU
from fwbench.analysis.micro.tables import ci_scopes, micro_label, micro_variants, of
from fwbench.analysis.micro.text import cell_counts, distinct
from fwbench.analysis.micro.vocabulary import (
    NUMPY,
    PAIRED,
    UNPAIRED,
    WITHIN,
    frame_modes,
    is_measured,
    is_measured_text,
)
from fwbench.study.modes import DESCRIPTIONS, is_compiled, primary


@dataclass(frozen=True)
class Mode:
    """A framework's execution mode in words (fwbench.study.modes.DESCRIPTIONS): "PyTorch", "eager (operator by
    operator)"; `compiled` where it compiles."""

    framework: str
    description: str
    compiled: bool


@dataclass(frozen=True)
class CompileTime:
    """A compiling series' compile time per cell, in seconds: the median and the most."""

    name: str
    median: float
    most: float


@dataclass(frozen=True)
class Threads:
    """NumPy's BLAS (its description as recorded) and thread count, each other framework's pool as (name, threads),
    and the BLAS core type the machine forced on NumPy, if any."""

    blas: tuple[str, ...]
    numpy: tuple[int, ...]
    pools: tuple[tuple[str, str], ...]
    forced: tuple[str, ...]


@dataclass(frozen=True)
class Statistics:
    """How times, speedups and intervals are made for the trials this study has: `processes` per cell; `paired`
    (per-round ratios), `unpaired` (the trials' geometric means) or `within` (one process's samples) intervals;
    `resamples` of the bootstrap and of the crossover's series."""

    processes: tuple[int, ...]
    paired: bool
    unpaired: bool
    within: bool
    resamples: int


@dataclass(frozen=True)
class Results:
    """The counts of the series: all of them, those that cross over, never do, have no data, whose crossover is
    unverified, and those whose intervals are within one process only; `tables` the LaTeX labels of the variants'
    tables."""

    series: int
    crossed: int
    at_smallest: int
    never: int
    empty: int
    unverified: int
    within_only: int
    modes: bool
    precisions: bool
    tables: tuple[str, ...]


@dataclass(frozen=True)
class Flatness:
    """The reference's JAX time per call over its batch range against its NumPy time (reference_flatness): the
    factors over the whole range and from the second batch size on; `fixed` where JAX's factor is under a tenth of
    NumPy's."""

    operation: str
    batch_min: int
    batch_next: int
    batch_max: int
    jax: float
    numpy: float
    jax_tail: float
    numpy_tail: float
    fixed: bool


@dataclass(frozen=True)
class Baseline:
    """The reference's two NumPy baselines of one operation: the range of the JAX table's over the PyTorch table's
    at the same batch size, or `both` false where the PyTorch table has none."""

    operation: str
    both: bool
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Comparison:
    """Our crossovers against the reference's: the counts, those compared by points only by their word, the devices
    of ours (device, the frameworks that ran on it), the reference's caveats, and the modes: `primaries` compared,
    `others` without a reference series."""

    agreement: Agreement
    by_points: tuple[tuple[str, int], ...]
    devices: tuple[tuple[str, tuple[str, ...]], ...]
    flatness: tuple[Flatness, ...]
    growth: int | None
    baselines: tuple[Baseline, ...]
    primaries: tuple[str, ...]
    others: tuple[str, ...]


@dataclass(frozen=True)
class MicroDetails:
    """Everything the appendix's text says (its tables are handed over beside it)."""

    reference_device: str
    operations: tuple[str, ...]
    has_matmul: bool
    has_mlp: bool
    dim: tuple[int, ...]
    hidden: tuple[int, ...]
    classes: tuple[int, ...]
    batches: tuple[int, ...]
    cells: int
    ok: int
    modes: tuple[Mode, ...]
    compile_times: tuple[CompileTime, ...]
    copy_measured: bool
    threads: Threads | None
    errors: tuple[tuple[str, float], ...]
    error_bounds: tuple[float, ...]
    statistics: Statistics
    other_precisions: tuple[str, ...]
    results: Results
    comparison: Comparison


def _modes(frame: pd.DataFrame) -> tuple[Mode, ...]:
    names = series_names(frame)
    return tuple(
        Mode(name, DESCRIPTIONS.get((f, m), m), is_compiled(m)) for (f, m), name in names.items() if f != NUMPY
    )


def _compile_times(frame: pd.DataFrame) -> tuple[CompileTime, ...]:
    names = series_names(frame)
    times = []
    for (framework, mode), name in names.items():
        seconds = of(frame, framework, mode).drop_duplicates("path")["compile_s"]
        seconds = seconds[seconds.map(is_measured)].astype(float)
        if len(seconds):
            times.append(CompileTime(name, float(seconds.median()), float(seconds.max())))
    return tuple(times)


def _threads(frame: pd.DataFrame) -> Threads | None:
    numpy_rows = frame[frame["framework"] == NUMPY]
    if numpy_rows.empty:
        return None
    pools = tuple(
        (framework_name(f), " / ".join(str(int(v)) for v in distinct(frame.loc[frame["framework"] == f, "threads"])))
        for f in framework_order(frame["framework"])
        if f != NUMPY
    )
    forced = distinct(numpy_rows["blas_core_type"]) if "blas_core_type" in numpy_rows else []
    return Threads(
        blas=tuple(str(v) for v in distinct(numpy_rows["blas"])),
        numpy=tuple(int(v) for v in distinct(numpy_rows["threads"])),
        pools=pools,
        forced=tuple(str(v) for v in forced),
    )


def _errors(frame: pd.DataFrame) -> tuple[tuple[str, float], ...]:
    names = {(NUMPY, m): "NumPy" for f, m in frame_modes(frame) if f == NUMPY} | series_names(frame)
    errors = []
    for (framework, mode), name in names.items():
        values = of(frame, framework, mode)["max_rel_error"].dropna()
        if len(values):
            errors.append((name, float(values.max())))
    return tuple(errors)


def _results(analysis: MicroAnalysis) -> Results:
    crossovers = analysis.crossovers
    kinds = crossovers["kind"] if len(crossovers) else pd.Series(dtype=str)
    crossed = crossovers[kinds == "crossover"]
    measured = crossovers[kinds.isin(["crossover", "never"])]
    names = series_names(analysis.frame)
    modes = len(names) > len({framework for framework, _ in names})
    return Results(
        series=len(crossovers),
        crossed=len(crossed),
        at_smallest=int(crossed["at_smallest"].astype(bool).sum()) if len(crossed) else 0,
        never=int((kinds == "never").sum()),
        empty=int((kinds == "no data").sum()),
        unverified=int(crossed["unverified_batches"].map(is_measured_text).sum()) if len(crossed) else 0,
        within_only=int(measured["crossover_ci_high"].isna().sum()) if len(measured) else 0,
        modes=modes,
        precisions=analysis.frame["precision"].nunique() > 1,
        tables=tuple(micro_label(v) for v in micro_variants(analysis.frame)),
    )


def _flatness(flatness: pd.DataFrame) -> tuple[Flatness, ...]:
    return tuple(
        Flatness(
            operation=operation_name(row["operation"]),
            batch_min=int(row["batch_min"]),
            batch_next=int(row["batch_next"]),
            batch_max=int(row["batch_max"]),
            jax=float(row["jax_ratio"]),
            numpy=float(row["numpy_ratio"]),
            jax_tail=float(row["jax_tail_ratio"]),
            numpy_tail=float(row["numpy_tail_ratio"]),
            fixed=bool(row["jax_tail_ratio"] * 10 < row["numpy_tail_ratio"]),
        )
        for _, row in flatness.iterrows()
    )


def _comparison(analysis: MicroAnalysis) -> Comparison:
    frame = analysis.frame
    words = analysis.comparison["agreement"].astype(str)
    points = words[words.str.endswith(NO_INTERVAL)].str.removesuffix(f", {NO_INTERVAL}").value_counts()
    devices: dict[str, list[str]] = {}
    for framework in framework_order(frame["framework"]):
        for device in distinct(frame.loc[frame["framework"] == framework, "device"]):
            devices.setdefault(str(device), []).append(framework_name(framework))
    flatness = _flatness(analysis.flatness)
    fixed = [f for f in flatness if f.fixed]
    names = series_names(frame)
    several = {f for f, _ in names if sum(1 for g, _ in names if g == f) > 1}
    primaries = tuple(n for (f, m), n in names.items() if f in several and m == primary(f))
    others = tuple(n for (f, m), n in names.items() if f in several and m != primary(f))
    return Comparison(
        agreement=agreement_counts(analysis.comparison),
        by_points=tuple((str(word), int(count)) for word, count in sorted(points.items())),
        devices=tuple((device, tuple(frameworks)) for device, frameworks in devices.items()),
        flatness=flatness,
        growth=max(f.batch_max // f.batch_next for f in fixed) if fixed else None,
        baselines=tuple(
            Baseline(
                operation_name(row["operation"]),
                bool(row["rows_with_both"]),
                float(row["ratio_min"]) if is_measured(row["ratio_min"]) else None,
                float(row["ratio_max"]) if is_measured(row["ratio_max"]) else None,
            )
            for _, row in analysis.baselines.iterrows()
        ),
        primaries=primaries,
        others=others,
    )


def micro_details(analysis: MicroAnalysis) -> MicroDetails:
    """The appendix's values from one analysis."""
    frame = analysis.frame
    total, ok, _ = cell_counts(frame)
    scopes = ci_scopes(analysis.speedups)
    operations = sorted(set(frame["operation"]))
    return MicroDetails(
        reference_device=REFERENCE_GPU,
        operations=tuple(operation_name(o) for o in operations),
        has_matmul="matmul" in operations,
        has_mlp="mlp" in operations,
        dim=tuple(int(v) for v in distinct(frame["dim"])),
        hidden=tuple(int(v) for v in distinct(frame["hidden"])),
        classes=tuple(int(v) for v in distinct(frame["classes"])),
        batches=tuple(int(b) for b in sorted(set(frame["batch_size"]))),
        cells=total,
        ok=ok,
        modes=_modes(frame),
        compile_times=_compile_times(frame),
        copy_measured=bool((frame["variant"] == TRANSFER).any()),
        threads=_threads(frame),
        errors=_errors(frame),
        error_bounds=tuple(float(v) for v in distinct(frame["error_bound"])),
        statistics=Statistics(
            processes=tuple(int(v) for v in distinct(frame["trials"])),
            paired=PAIRED in scopes,
            unpaired=UNPAIRED in scopes and PAIRED not in scopes,
            within=WITHIN in scopes,
            resamples=analysis.resamples,
        ),
        other_precisions=tuple(precision_name(p) for p in sorted(set(frame["precision"]) - {"fp32"})),
        results=_results(analysis),
        comparison=_comparison(analysis),
    )
