"""The micro suite's report: LaTeX tables, the macros the text quotes, the paper's section, and the one entry point
the workflow calls (`write_micro_outputs`), from the analysis of fwbench.analysis.micro.speedups. Every series is a
framework in one execution mode, named with its mode wherever its framework has another one in the study (`mode_names`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import (
    define_macros,
    escape,
    macro_name,
    mode_label,
    number,
    short_label,
    variant_short,
)
from fwbench.analysis.common.partners import cell_mode, multi_mode
from fwbench.analysis.common.verdicts import DEFAULT_MULTIPLICITY
from fwbench.analysis.inference.tables import stacked, stacked_header
from fwbench.analysis.micro.figure import (
    framework_order,
    micro_figure,
)
from fwbench.analysis.micro.reference import (
    AGREEMENTS,
    NO_INTERVAL,
    NOT_COMPARABLE,
    REFERENCE_GPU,
    REFERENCE_STUDY,
    SERIES,
    compare_crossovers,
    published_crossovers,
    published_micro,
    reference_baselines,
    reference_flatness,
)
from fwbench.analysis.micro.speedups import (
    BETWEEN_PROCESSES,
    FAILED,
    FASTER,
    NUMPY,
    PAIRED,
    VARIANT_LABELS,
    VARIANTS,
    WITHIN,
    counted,
    crossover_text,
    frame_modes,
    from_row,
    interval_text,
    is_measured,
    is_measured_text,
    label,
    load_micro_cells,
    micro_crossovers,
    micro_frame,
    micro_speedups,
    mode_names,
    plural,
    row_modes,
)
from fwbench.io import atomic_write_text
from fwbench.study.modes import DESCRIPTIONS, is_compiled, primary
from fwbench.trackers.stats import BOOTSTRAP_RESAMPLES

WITHIN_MARK = r"$^{w}$"


def _speedup_text(row: Mapping[str, Any] | None, mark_within: bool = False) -> str:
    """Speedup with its 95% CI; bold when the CI over processes lies above 1 (faster than NumPy, resolved: verdict
    "faster"), never for a CI within one process, which is marked $^{w}$ where `mark_within` (a study whose cells
    have one trial at some batch sizes and several at others)."""
    if row is None or row.get("status") != "ok":
        return "---"
    text = rf"{number(row['speedup'])}$\times$ {{\scriptsize[{number(row['ci_low'])}, {number(row['ci_high'])}]}}"
    if row.get("verdict") == FASTER:
        return rf"\textbf{{{text}}}"
    return text + (WITHIN_MARK if mark_within and row.get("ci_scope") not in BETWEEN_PROCESSES else "")


def _scopes(speedups: pd.DataFrame) -> set[str]:
    """Where the speedups' intervals come from: {WITHIN}, a subset of BETWEEN_PROCESSES, or both."""
    ok = speedups[speedups["status"] == "ok"] if "status" in speedups else speedups
    return {str(s) for s in ok.get("ci_scope", pd.Series(dtype=object)) if is_measured_text(s)}


def _mixed(speedups: pd.DataFrame) -> bool:
    scopes = _scopes(speedups)
    return WITHIN in scopes and bool(scopes & set(BETWEEN_PROCESSES))


def _of(frame: pd.DataFrame, framework: str, mode: str) -> pd.DataFrame:
    """The rows of one framework in one mode."""
    return frame[(frame["framework"] == framework) & (row_modes(frame) == mode)]


def _time_text(frame: pd.DataFrame, framework: str, mode: str, variant: str) -> str:
    rows = _of(frame, framework, mode)
    if rows.empty:
        return "---"
    if (rows["status"] != "ok").all():
        return FAILED
    match = rows[rows["variant"] == variant]
    return number(match["median_ms"].iloc[0]) if not match.empty else "---"


def _variants_of(frame: pd.DataFrame, framework: str, mode: str | None = None) -> list[str]:
    """The timing variants a framework (in `mode`, when given) was measured in, resident first."""
    rows = frame[frame["framework"] == framework] if mode is None else _of(frame, framework, mode)
    found = set(rows["variant"])
    return [v for v in VARIANTS if v in found] + sorted(found - set(VARIANTS))


def _lookup(speedups: pd.DataFrame, **key: Any) -> dict[str, Any] | None:
    rows = speedups
    for column, value in key.items():
        rows = rows[rows[column] == value]
    return rows.iloc[0].to_dict() if not rows.empty else None


def _table_header(names: list[str]) -> tuple[list[str], int]:
    """The two header rows (a group per framework and mode, named by `names`, then each one's time and speedup) and
    the number of columns."""
    groups, rules, position = [], [], 3
    for name in names:
        groups.append(rf"\multicolumn{{2}}{{c}}{{\textbf{{{escape(name)}}}}}")
        rules.append(rf"\cmidrule(lr){{{position}-{position + 1}}}")
        position += 2
    head = [r"\textbf{BS}", r"\textbf{NumPy ms}"]
    columns = [r"\textbf{ms}", r"\textbf{$\times$ NumPy [95\% CI]}"] * len(names)
    lines = [" & ".join(["", "", *groups]) + r" \\", "".join(rules)] if names else []
    return [*lines, " & ".join(head + columns) + r" \\"], position - 1


def micro_variants(frame: pd.DataFrame) -> list[str]:
    """The variants the frameworks besides NumPy were measured in (resident first), one table each; ["resident"]
    when NumPy is all there is."""
    found = {v for f in set(frame["framework"]) - {NUMPY} for v in _variants_of(frame, f)}
    return [v for v in VARIANTS if v in found] + sorted(found - set(VARIANTS)) or ["resident"]


def micro_table(frame: pd.DataFrame, speedups: pd.DataFrame, variant: str = "resident") -> str:
    """Per operation, precision and batch size: NumPy's median ms per call and, per framework and mode measured in
    `variant` (resident: inputs on the device; transfer: with the host-to-device copy of the input batch), its
    median ms per call and speedup over NumPy [95% CI] (booktabs tabular). One table per variant keeps it within
    the page at 8 pt."""
    names = mode_names(frame_modes(frame))
    pairs = [(f, m) for f, m in names if f != NUMPY and variant in _variants_of(frame, f, m)]
    header, ncols = _table_header([names[pair] for pair in pairs])
    lines = [r"\begin{tabular}{r r " + "r" * (ncols - 2) + "}", r"\toprule", *header, r"\midrule"]
    groups = list(frame.groupby(["operation", "precision"], sort=True))
    mark_within = _mixed(speedups)
    for index, ((operation, precision), group) in enumerate(groups):
        # the operation and precision head their rows, across the table (two columns fewer)
        lines.append(rf"\multicolumn{{{ncols}}}{{l}}{{\texttt{{{escape(operation)}}}, {escape(precision)}}} \\")
        for batch, cells in group.groupby("batch_size", sort=True):
            values = [str(batch), _time_text(cells, NUMPY, primary(NUMPY), "resident")]
            for framework, mode in pairs:
                key = {"framework": framework, "mode": mode, "operation": operation, "precision": precision}
                match = _lookup(speedups, **key, variant=variant, batch_size=batch)
                values += [_time_text(cells, framework, mode, variant), _speedup_text(match, mark_within)]
            lines.append(" & ".join(values) + r" \\")
        if index < len(groups) - 1:
            lines.append(r"\midrule")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def micro_label(variant: str) -> str:
    """The LaTeX label of a variant's table: tab:micro for the resident one (the main table), tab:micro-<variant>
    for the others."""
    return "tab:micro" if variant == "resident" else f"tab:micro-{variant}"


def _at_largest(row: Mapping[str, Any]) -> str:
    """The speedup at the largest batch size over its CI, on two lines."""
    if not is_measured(row.get("speedup_at_largest")):
        return "---"
    return stacked(
        rf"{number(row['speedup_at_largest'])}$\times$ at {int(row['largest_batch'])}",
        rf"{{\scriptsize[{number(row['ci_low_at_largest'])}, {number(row['ci_high_at_largest'])}]}}",
        align="l",
        position="t",
    )


def _crossover_cell(row: Mapping[str, Any]) -> str:
    """Our point crossover over its 95% interval (or "no interval" with one process per cell): a new line in the
    column's wrapping cell, so that "never in 1--4096" may wrap too."""
    result = from_row(row)
    if result.kind == "no data":
        return crossover_text(result)
    interval = interval_text(result)
    return (
        crossover_text(result)
        + r"\newline"
        + (rf"{{\scriptsize {interval}}}" if interval else r"{\scriptsize no interval}")
    )


def _text(value: Any) -> str:
    return escape(value) if is_measured_text(value) else "---"


def _wrapped(width: str) -> str:
    """A column spec whose text wraps, left-aligned, at `width`."""
    return rf">{{\raggedright\arraybackslash}}p{{{width}}}"


def crossover_table(comparison: pd.DataFrame) -> str:
    """Our crossovers (with the speedup at the largest batch size) beside the reference's, the devices, and the
    agreement (booktabs tabular). Short framework names (`crossover_names` spells them out for the caption),
    two-line headers and wrapping text columns keep its eleven columns within the page at 8 pt (nothing scaled)."""
    header = [
        stacked_header("Frame-", "work", align="l"),
        r"\textbf{Op.}",
        r"\textbf{Prec.}",
        r"\textbf{Variant}",
        stacked_header("Cross-", "over", align="l"),
        stacked_header("Speedup at", "largest BS", align="l"),
        r"\textbf{Device}",
        stacked_header("Reference", "series", align="l"),
        stacked_header("Ref.", "crossover", align="l"),
        r"\textbf{Ref.\ device}",
        r"\textbf{Agreement}",
    ]
    text = _wrapped("1.25cm")
    spec = f"l l l l {text} l {text} {_wrapped('1.5cm')} {_wrapped('1.5cm')} {_wrapped('1.9cm')} {_wrapped('1.7cm')}"
    lines = [rf"\begin{{tabular}}{{{spec}}}", r"\toprule", " & ".join(header) + r" \\", r"\midrule"]
    several = _multi_mode(comparison)
    for _, row in comparison.iterrows():
        measured = row["kind"] != "not measured"
        series = SERIES.get(row["reference"]) if is_measured_text(row["reference"]) else None
        values = [
            escape(_short(row, several)),
            rf"\texttt{{{escape(row['operation'])}}}",
            _text(row["precision"]),
            escape(VARIANT_LABELS.get(row["variant"], row["variant"])) if measured else "---",
            _crossover_cell(row) if measured else "not measured",
            _at_largest(row) if measured else "---",
            _text(row["device"]) if measured else "---",
            escape(series.label) if series else "---",
            crossover_text(from_row(row, "published_")) if series else "---",
            _text(row["reference_device"]),
            escape(row["agreement"]),
        ]
        lines.append(" & ".join(values) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def _multi_mode(rows: pd.DataFrame) -> set[str]:
    """The frameworks with more than one mode among a table's rows."""
    return multi_mode(zip(rows["framework"], row_modes(rows), strict=True)) if not rows.empty else set()


def _short(row: Mapping[str, Any], several: set[str]) -> str:
    """A crossover row's short framework name, with its mode where the framework has several ("PT-compiled")."""
    framework = row["framework"]
    return variant_short(framework, cell_mode(row)) if framework in several else short_label(framework)


def crossover_names(comparison: pd.DataFrame) -> str:
    """The caption's key to the crossover table's short framework names, e.g. " Framework: PT for PyTorch, ...",
    with each mode where a framework has several ("PT-compiled for PyTorch compiled with torch.compile")."""
    if comparison.empty:
        return ""
    several = _multi_mode(comparison)
    keys = {}
    for _, row in comparison.iterrows():
        framework, mode = row["framework"], cell_mode(row)
        what = label(framework) + (f" {escape(mode_label(mode))}" if framework in several else "")
        keys.setdefault(_short(row, several), what)
    return " Framework: " + ", ".join(f"{escape(short)} for {escape(what)}" for short, what in keys.items()) + "."


@dataclass
class MicroAnalysis:
    """Every table the micro outputs are made from."""

    frame: pd.DataFrame
    speedups: pd.DataFrame
    crossovers: pd.DataFrame
    published: pd.DataFrame
    published_crossovers: pd.DataFrame
    comparison: pd.DataFrame
    flatness: pd.DataFrame
    baselines: pd.DataFrame
    resamples: int = BOOTSTRAP_RESAMPLES


def analyse_micro(
    cell_paths: Iterable[str | Path],
    reference_csv: str | Path,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    multiplicity: str = DEFAULT_MULTIPLICITY,
) -> MicroAnalysis:
    """Load the cells once and derive every table (the speedups' verdicts adjusted by `multiplicity`)."""
    cells = load_micro_cells(cell_paths)
    speedups = micro_speedups(cells, resamples=resamples, multiplicity=multiplicity)
    crossovers = micro_crossovers(speedups, resamples=resamples)
    published = published_micro(reference_csv)
    published_cx = published_crossovers(published)
    return MicroAnalysis(
        frame=micro_frame(cells),
        speedups=speedups,
        crossovers=crossovers,
        published=published,
        published_crossovers=published_cx,
        comparison=compare_crossovers(crossovers, published_cx),
        flatness=reference_flatness(published),
        baselines=reference_baselines(published),
        resamples=resamples,
    )


def _sci(value: float) -> str:
    """A small number as $m \\times 10^{e}$ (LaTeX math, no package needed)."""
    if not is_measured(value):
        return "---"
    if value == 0:
        return "0"
    mantissa, exponent = f"{float(value):.1e}".split("e")
    return rf"${mantissa}\times10^{{{int(exponent)}}}$"


def _values(series: pd.Series) -> list[Any]:
    return sorted({v for v in series if is_measured_text(v)}, key=str)


def _joined_text(values: Sequence[Any], empty: str = "not recorded") -> str:
    return " / ".join(escape(v) for v in values) if values else empty


def _int_text(values: Sequence[Any]) -> str:
    return " / ".join(str(int(v)) for v in values) if values else "---"


def _cell_counts(frame: pd.DataFrame) -> tuple[int, int, int]:
    cells = frame.drop_duplicates("path")
    ok = int((cells["status"] == "ok").sum())
    return len(cells), ok, len(cells) - ok


@dataclass(frozen=True)
class Naming:
    """How the section's sentences name a series: its framework (with its mode where the framework has several in
    the study, `mode_names`), operation, precision (where the study has several) and variant."""

    names: dict[tuple[str, str], str]
    precisions: bool

    @classmethod
    def of(cls, frame: pd.DataFrame) -> Naming:
        return cls(mode_names(frame_modes(frame)), frame["precision"].nunique() > 1)

    def series(self, row: Mapping[str, Any]) -> str:
        precision = f" {escape(row['precision'])}" if self.precisions else ""
        copy = " with copy" if row["variant"] == "transfer" else ""
        framework = self.names.get((row["framework"], cell_mode(row)), label(row["framework"]))
        return rf"{escape(framework)} \texttt{{{escape(row['operation'])}}}{precision}{copy}"


def micro_macros(analysis: MicroAnalysis) -> dict[str, str]:
    """The section's numbers as macros (names from `macro_name`): sizes, batch range, cell counts, crossover counts
    by kind and by agreement, each crossover (ours per framework/operation/precision/variant, the reference's per
    series/operation), the speedup at the largest batch size, the reference's JAX flatness ratios, NumPy's BLAS and
    thread count, and the worst output error per framework."""
    frame, crossovers, comparison = analysis.frame, analysis.crossovers, analysis.comparison
    total, ok, failed = _cell_counts(frame)
    kinds = crossovers["kind"]
    defs = {
        "fwbMicroDim": _int_text(_values(frame["dim"])),
        "fwbMicroHidden": _int_text(_values(frame["hidden"])),
        "fwbMicroClasses": _int_text(_values(frame["classes"])),
        "fwbMicroBatchMin": str(int(frame["batch_size"].min())),
        "fwbMicroBatchMax": str(int(frame["batch_size"].max())),
        "fwbMicroNumCells": str(total),
        "fwbMicroNumOk": str(ok),
        "fwbMicroNumFailed": str(failed),
        "fwbMicroNumSeries": str(len(crossovers)),
        "fwbMicroNumCrossovers": str(int((kinds == "crossover").sum())),
        "fwbMicroNumAtSmallest": str(int(crossovers["at_smallest"].astype(bool).sum())) if len(crossovers) else "0",
        "fwbMicroNumNever": str(int((kinds == "never").sum())),
        "fwbMicroNumUnverified": str(int(crossovers["unverified_batches"].map(is_measured_text).sum())),
        "fwbMicroBlas": _joined_text(_values(frame.loc[frame["framework"] == NUMPY, "blas"])),
        "fwbMicroNumpyThreads": _int_text(_values(frame.loc[frame["framework"] == NUMPY, "threads"])),
        "fwbMicroErrorBound": " / ".join(_sci(v) for v in _values(frame["error_bound"])) or "---",
    }
    words = comparison["agreement"].astype(str)
    for word in (*AGREEMENTS, NOT_COMPARABLE):
        defs[macro_name("MicroNum", word)] = str(int((words == word).sum()))
    defs["fwbMicroNumNoInterval"] = str(int(words.str.endswith(NO_INTERVAL).sum()))
    defs["fwbMicroTrials"] = _int_text(_values(frame["trials"]))
    defs["fwbMicroNumWithInterval"] = str(int(crossovers["crossover_ci_high"].notna().sum()))
    for _, row in crossovers.iterrows():
        parts = (*_macro_variant(row), row["operation"], row["precision"], row["variant"])
        result = from_row(row)
        defs[macro_name("MicroCrossover", *parts)] = crossover_text(result)
        defs[macro_name("MicroCrossoverInterval", *parts)] = interval_text(result) or "no interval"
        defs[macro_name("MicroShown", *parts)] = escape(row["shown"])
        defs[macro_name("MicroSpeedupAtLargest", *parts)] = _at_largest(row)
    for _, row in analysis.published_crossovers.iterrows():
        defs[macro_name("MicroRefCrossover", row["reference"], row["operation"])] = crossover_text(from_row(row))
    for _, row in analysis.flatness.iterrows():
        for column in ("jax_ratio", "numpy_ratio", "jax_tail_ratio", "numpy_tail_ratio"):
            defs[macro_name("MicroRef", column, row["operation"])] = number(row[column])
    for framework in framework_order(frame["framework"]):
        rows = frame[frame["framework"] == framework]
        errors = rows["max_rel_error"].dropna()
        defs[macro_name("MicroMaxRelError", framework)] = _sci(errors.max()) if len(errors) else "---"
        defs[macro_name("MicroDevice", framework)] = _joined_text(_values(rows["device"]))
    for framework, mode in frame_modes(frame):
        if mode != primary(framework):  # the primary mode's are the framework's own above
            errors = _of(frame, framework, mode)["max_rel_error"].dropna()
            defs[macro_name("MicroMaxRelError", framework, mode)] = _sci(errors.max()) if len(errors) else "---"
    return defs


def _macro_variant(row: Mapping[str, Any]) -> tuple[str, ...]:
    """A series' framework part of a macro name: the framework for its primary mode (fwbMicroCrossoverJaxMatmul...,
    as before modes), the framework and mode otherwise (fwbMicroCrossoverTorchCompileMatmul...)."""
    mode = cell_mode(row)
    return (row["framework"],) if mode == primary(row["framework"]) else (row["framework"], mode)


def _and(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _intro(analysis: MicroAnalysis) -> str:
    published = analysis.published
    low, high = int(published["batch_size"].min()), int(published["batch_size"].max())
    return (
        f"A published report timed matrix and neural-network operations on an {REFERENCE_GPU} machine at batch "
        f"sizes {low} to {high} for NumPy, PyTorch (CPU and CUDA) and JAX, and read off the batch size from which "
        "each framework beats NumPy. This section asks the same question of this study's machine: from which "
        "batch size does each framework compute faster than plain NumPy, and with what confidence?"
    )


def _operations_text(frame: pd.DataFrame) -> str:
    described = {
        "matmul": r"\texttt{matmul}, the product of a $b \times d$ batch with a $d \times d$ matrix",
        "mlp": r"\texttt{mlp}, inference of a fixed multilayer perceptron $d \to h \to d \to c$ with ReLU",
    }
    operations = sorted(set(frame["operation"]))
    parts = [described.get(o, rf"\texttt{{{escape(o)}}}") for o in operations]
    sizes = rf"$d = {_int_text(_values(frame['dim']))}$"
    if "mlp" in operations:
        sizes += rf", $h = {_int_text(_values(frame['hidden']))}$, $c = {_int_text(_values(frame['classes']))}$"
    batches = _and([str(int(b)) for b in sorted(set(frame["batch_size"]))])
    total, ok, _ = _cell_counts(frame)
    return (
        f"\\paragraph{{Method}} {counted(len(operations), 'operation').capitalize()} "
        f"{'is' if len(operations) == 1 else 'are'} "
        f"timed: {'; '.join(parts)}; with {sizes}, at batch sizes $b$ = {batches} ({ok} of "
        f"{plural(total, 'cell')} succeeded). The weights are generated once from the study's seed and every "
        "framework reads the same weight and input bytes."
    )


def _timing_text(frame: pd.DataFrame) -> str:
    compiled = frame[frame["compile_s"].map(is_measured)].drop_duplicates("path")
    names = mode_names(frame_modes(frame))
    text = (
        " Every framework, NumPy included, is timed per call on inputs and weights already on its device, each call "
        "followed by a synchronise: the wall clock of the call, Python dispatch included, for every framework alike."
    )
    for (framework, mode), rows in compiled.groupby(["framework", row_modes(compiled)]):
        seconds = rows["compile_s"].astype(float)
        text += (
            f" {escape(names[(framework, mode)])} compiles before the timed calls, on the exact shapes timed; its "
            f"compile time is reported apart and never timed (median {number(seconds.median())}~s per cell, at most "
            f"{number(seconds.max())}~s)."
        )
    if (frame["variant"] == "transfer").any():
        text += (
            r" The \emph{with copy} variant times the host-to-device copy of the input batch followed by the call "
            "(the weights stay resident): the closest analogue of what the reference probably timed. NumPy computes "
            "on the host, so its time per call is the baseline of both variants."
        )
    else:
        text += " The variant with the host-to-device copy of the input batch was not measured in this study."
    return text


def _threads_text(frame: pd.DataFrame) -> str:
    numpy_rows = frame[frame["framework"] == NUMPY]
    if numpy_rows.empty:
        return " This study has no NumPy cell: no speedup can be computed."
    others = [
        f"{escape(label(f))} {_int_text(_values(frame.loc[frame['framework'] == f, 'threads']))}"
        for f in framework_order(frame["framework"])
        if f != NUMPY
    ]
    pools = f" (the frameworks' own pools: {', '.join(others)})" if others else ""
    return (
        f" Threadpoolctl pins NumPy's BLAS ({_joined_text(_values(numpy_rows['blas']))}) to "
        f"{_int_text(_values(numpy_rows['threads']))} threads{pools}."
    ) + _forced_core_text(numpy_rows)


def _forced_core_text(numpy_rows: pd.DataFrame) -> str:
    """One sentence where the NumPy baseline ran under a forced OpenBLAS core type (the machine sets it; the study
    records it and never changes it), since it slows current NumPy and so favours every framework; else nothing."""
    forced = _values(numpy_rows["blas_core_type"]) if "blas_core_type" in numpy_rows else []
    if not forced:
        return ""
    values = " / ".join(escape(f"OPENBLAS_CORETYPE={value}") for value in forced)
    return (
        f" NumPy ran under {values}, a BLAS core type this machine forces, which slows current NumPy and so "
        "flatters every speedup over it; the study records the setting and does not change it."
    )


def _agreement_text(frame: pd.DataFrame) -> str:
    errors = [
        f"{_sci(rows['max_rel_error'].max())} for {escape(name)}"
        for (f, m), name in mode_names(frame_modes(frame)).items()
        if (rows := _of(frame, f, m))["max_rel_error"].notna().any()
    ]
    if not errors:
        return ""
    bounds = " / ".join(_sci(v) for v in _values(frame["error_bound"])) or "not recorded"
    return (
        " Before any call is timed, each cell's output is compared with NumPy in float64 on the same float32 "
        f"operands: the largest relative error is {_and(errors)} (bound {bounds})."
    )


def _statistics_text(analysis: MicroAnalysis) -> str:
    """How times, speedups, their intervals and the crossovers are defined, for the trials this study has."""
    frame, scopes = analysis.frame, _scopes(analysis.speedups)
    trials = _values(frame["trials"])
    processes = "one fresh process (one trial)" if trials == [1] else f"{_int_text(trials)} fresh processes (trials)"
    text = (
        f" Each cell runs in {processes}; the cells of one operation, precision and batch size run as one job, in "
        "rounds of one trial of every framework and NumPy. A cell's time per call is the geometric mean of its "
        "trials' medians (one trial: its median), and the speedup is NumPy's time per call over the framework's at "
        "the same operation, precision and batch size."
    )
    if scopes & set(BETWEEN_PROCESSES):
        paired = (
            "the geometric mean of the per-round ratios of the trials' medians, NumPy's and the framework's trial of "
            r"the same round paired, with a Student-t 95\% CI on their logs (rounds $-$ 1 degrees of freedom)"
            if PAIRED in scopes
            else r"the ratio of the trials' geometric means with a Welch t 95\% CI"
        )
        text += (
            f" With several trials the process is the unit, as in the inference suite: the speedup is {paired}; "
            "bold and ``faster'' or ``slower'' mean that this interval lies above or below 1 and that the test of "
            "speedup 1 resolves it after the study's adjustment for multiple comparisons within each framework's "
            "family (every operation, variant and batch size against NumPy; Section~\\ref{sec:verdicts})."
        )
    if WITHIN in scopes:
        text += (
            rf" With one trial, the speedup's 95\% CI is a percentile bootstrap of that process's samples "
            f"({analysis.resamples} resamples): it leaves out the variation between processes, so it resolves no "
            "difference and no crossover, and none is claimed from it."
        )
    text += (
        " The crossover is defined as for the reference, from the point estimates: the smallest measured batch size "
        "from which the speedup stays above 1 at every larger measured batch size (no interpolation between batch "
        "sizes), ``never'' when it is not above 1 at the largest."
    )
    if scopes & set(BETWEEN_PROCESSES):
        text += (
            r" Its 95\% interval comes from resampling the whole series: each batch size's log speedup is redrawn "
            f"from its t interval over processes, the batch sizes independently ({analysis.resamples} series), and "
            r"the interval runs from the 2.5\% to the 97.5\% quantile of the resampled crossovers."
        )
    return text


def _precision_text(frame: pd.DataFrame) -> str:
    others = sorted(set(frame["precision"]) - {"fp32"})
    if not others:
        return ""
    return (
        f" NumPy has no {' or '.join(map(escape, others))} arithmetic: at every precision label its cell computes in "
        f"float32, so a {escape(others[0])} speedup compares a framework in {escape(others[0])} with NumPy in float32."
    )


def _modes_text(frame: pd.DataFrame) -> str:
    """What each framework's mode is, since a speedup over NumPy (which calls its routines one by one) folds in
    whatever a compiler gains: each series is named with its mode where its framework has several."""
    pairs = [pair for pair in frame_modes(frame) if pair[0] != NUMPY]
    if not pairs:
        return ""
    described = [f"{escape(label(f))} {escape(DESCRIPTIONS.get((f, m), m))}" for f, m in pairs]
    compiled = [pair for pair in pairs if is_compiled(pair[1])]
    return (
        f" Each framework runs in its execution mode: {_and(described)}"
        + (
            "; NumPy calls its routines eagerly, so the speedups of compiled modes include what their compiler gains"
            if compiled
            else ""
        )
        + "."
    )


def _method(analysis: MicroAnalysis) -> str:
    frame = analysis.frame
    return (
        _operations_text(frame)
        + _modes_text(frame)
        + _timing_text(frame)
        + _threads_text(frame)
        + _agreement_text(frame)
        + _statistics_text(analysis)
        + _precision_text(frame)
    )


def _listed(rows: pd.DataFrame, naming: Naming, what) -> str:
    return _and([f"{naming.series(row)} {what(row)}".rstrip() for _, row in rows.iterrows()])


def _tables_ref(frame: pd.DataFrame) -> str:
    """ "Table~\\ref{tab:micro}", or all the variants' tables ("Tables~\\ref{tab:micro} and~\\ref{...}")."""
    labels = [micro_label(variant) for variant in micro_variants(frame)]
    if len(labels) == 1:
        return f"Table~\\ref{{{labels[0]}}}"
    refs = [f"\\ref{{{name}}}" for name in labels]
    return "Tables~" + ", ".join(refs[:-1]) + " and~" + refs[-1]


def _results(analysis: MicroAnalysis) -> str:
    """How many series cross over (point estimates, with their intervals), what the intervals show, which never
    cross, and the range of speedups at the largest batch: only counts and numbers from the crossovers table."""
    crossovers = analysis.crossovers
    if crossovers.empty:
        return (
            "No framework besides NumPy was measured, so there is no speedup to report "
            f"({_tables_ref(analysis.frame)} gives NumPy's times)."
        )
    naming = Naming.of(analysis.frame)
    crossed = crossovers[crossovers["kind"] == "crossover"]
    modes = ", mode" if _multi_mode(crossovers) else ""
    text = (
        f"Of {plural(len(crossovers), 'speedup series', 'speedup series')} (framework{modes}, operation, "
        f"{'precision, ' if naming.precisions else ''}variant; Figure~\\ref{{fig:micro}}, "
        f"{_tables_ref(analysis.frame)}), "
        f"{len(crossed)} cross{'es' if len(crossed) == 1 else ''} over within the measured batch sizes by their point "
        "estimates"
    )
    if len(crossed):
        text += ": " + _listed(crossed, naming, lambda r: f"from {_with_interval(r)}")
    text += "." + _at_smallest_text(crossed) + _never_text(crossovers, naming) + _unverified_text(crossed, naming)
    return text + _shown_text(crossovers, naming) + _largest_text(crossovers, naming)


def _with_interval(row: Mapping[str, Any]) -> str:
    """A crossover with its 95% interval where it has one: "256 (95\\% interval [64, 1024])"."""
    result = from_row(row)
    interval = interval_text(result)
    return crossover_text(result) + (f" (95\\% interval {interval})" if interval else "")


def _shown_text(crossovers: pd.DataFrame, naming: Naming) -> str:
    """What the speedups' intervals show, series by series; with one process per cell, that they show nothing."""
    measured = crossovers[crossovers["kind"].isin(["crossover", "never"])]
    if measured.empty:
        return ""
    with_interval = measured[measured["crossover_ci_high"].notna()]
    text = ""
    if len(with_interval):
        text += (
            " What the intervals over processes show, batch size by batch size: "
            + "; ".join(f"{naming.series(row)}: {escape(row['shown'])}" for _, row in with_interval.iterrows())
            + "."
        )
    if len(with_interval) < len(measured):
        text += (
            f" {counted(len(measured) - len(with_interval), 'series', 'series').capitalize()} "
            f"{'has' if len(measured) - len(with_interval) == 1 else 'have'} intervals within one process only (one "
            "trial per cell): their crossovers are point estimates without an interval, and no speedup of theirs "
            "counts as resolved."
        )
    return text


def _at_smallest_text(crossed: pd.DataFrame) -> str:
    if crossed.empty:
        return ""
    count = int(crossed["at_smallest"].astype(bool).sum())
    if count == 0:
        return " None of them lies at the smallest batch size measured."
    return (
        f" {counted(count, 'crossover').capitalize()} of {len(crossed)} already lie{'s' if count == 1 else ''} at "
        "the smallest batch size measured."
    )


def _never_text(crossovers: pd.DataFrame, naming: Naming) -> str:
    never = crossovers[crossovers["kind"] == "never"]
    empty = crossovers[crossovers["kind"] == "no data"]
    text = ""
    if len(never):
        one = len(never) == 1
        text += (
            f" {len(never)} never {'does' if one else 'do'} (the speedup at the largest batch size is not above 1): "
            f"{_listed(never, naming, lambda r: _never_interval(r))}."
        )
    if len(empty):
        text += f" {plural(len(empty), 'series', 'series')} {'has' if len(empty) == 1 else 'have'} no successful "
        text += "pair of cells."
    return text


def _never_interval(row: Mapping[str, Any]) -> str:
    interval = interval_text(from_row(row))
    return f"(95\\% interval {interval})" if interval else ""


def _unverified_text(crossed: pd.DataFrame, naming: Naming) -> str:
    unverified = crossed[crossed["unverified_batches"].map(is_measured_text)]
    if unverified.empty:
        return ""
    one = len(unverified) == 1
    at = _listed(unverified, naming, lambda r: f"at {str(r['unverified_batches']).replace('+', ', ')}")
    return (
        f" {counted(len(unverified), 'crossover').capitalize()} {'is' if one else 'are'} unverified ($^{{m}}$): "
        "a cell at a "
        f"larger batch size failed ({at})."
    )


def _largest_text(crossovers: pd.DataFrame, naming: Naming) -> str:
    measured = crossovers[crossovers["speedup_at_largest"].map(is_measured)]
    if measured.empty:
        return ""
    low = measured.loc[measured["speedup_at_largest"].astype(float).idxmin()]
    high = measured.loc[measured["speedup_at_largest"].astype(float).idxmax()]
    if len(measured) == 1:
        return f" At its largest batch size, the speedup is {_at_largest(high)}."
    return (
        f" At the largest batch size of each series, the speedup ranges from {_at_largest(low)} "
        f"({naming.series(low)}) to {_at_largest(high)} ({naming.series(high)})."
    )


def _device_caveat(analysis: MicroAnalysis) -> str:
    frame = analysis.frame
    ours = [
        f"{escape(label(f))} on {_joined_text(_values(frame.loc[frame['framework'] == f, 'device']))}"
        for f in framework_order(frame["framework"])
    ]
    return (
        f"(i) Devices: the reference ran on an {REFERENCE_GPU} (its PyTorch CPU series on that machine's CPU); "
        f"this study ran {_and(ours)}."
    )


def _flatness_caveat(analysis: MicroAnalysis) -> str:
    parts, fixed = [], []
    for _, row in analysis.flatness.iterrows():
        parts.append(
            f"for \\texttt{{{escape(row['operation'])}}} its JAX time per call varies by a factor of "
            f"{number(row['jax_ratio'])} over batch sizes {row['batch_min']}--{row['batch_max']} "
            f"({number(row['jax_tail_ratio'])} from {row['batch_next']} to {row['batch_max']}), its NumPy time by "
            f"{number(row['numpy_ratio'])} ({number(row['numpy_tail_ratio'])})"
        )
        if row["jax_tail_ratio"] * 10 < row["numpy_tail_ratio"]:
            fixed.append((row, row["batch_max"] / row["batch_next"]))
    text = "(ii) The reference's JAX timing: " + "; ".join(parts) + "."
    if fixed:
        operations = _and([rf"\texttt{{{escape(row['operation'])}}}" for row, _ in fixed])
        text += (
            f" For {operations}, a JAX time whose factor of change is under a tenth of NumPy's while the number of "
            f"rows grows {number(max(work for _, work in fixed))}-fold points to a fixed cost inside its timed "
            "region, such as compilation or a host transfer; our with-copy variant includes the transfer, never the "
            "compilation."
        )
    return text


def _baselines_caveat(analysis: MicroAnalysis) -> str:
    parts = []
    for _, row in analysis.baselines.iterrows():
        operation = rf"\texttt{{{escape(row['operation'])}}}"
        if row["rows_with_both"]:
            parts.append(
                f"for {operation} its JAX table's NumPy time is {number(row['ratio_min'])} to "
                f"{number(row['ratio_max'])} times its PyTorch table's at the same batch size"
            )
        else:
            parts.append(f"for {operation} its PyTorch table has no NumPy time, so the JAX table's is used")
    return (
        "(iv) Baselines: the reference's two tables give their own NumPy times; "
        + "; ".join(parts)
        + ". Each reference series is compared with its own table's NumPy time where there is one."
    )


def _modes_caveat(analysis: MicroAnalysis) -> str:
    """(v) Modes, where a framework has several in the study: the reference states none, so its series are compared
    with each framework's primary mode only (micro_reference.reference_for), and the other modes with nothing."""
    names = mode_names(frame_modes(analysis.frame))
    others = [name for (f, m), name in names.items() if f != NUMPY and m != primary(f)]
    if not others:
        return ""
    primaries = [name for (f, m), name in names.items() if f != NUMPY and m == primary(f)]
    return (
        " (v) Modes: the reference does not state whether it compiled anything, so its series are taken as each "
        f"framework's primary mode and compared with {_and([escape(n) for n in primaries])}; "
        f"{_and([escape(n) for n in others])} {'has' if len(others) == 1 else 'have'} no reference series."
    )


def _comparison_text(analysis: MicroAnalysis) -> str:
    words = analysis.comparison["agreement"].astype(str)
    points = words[words.str.endswith(NO_INTERVAL)]
    modes = _modes_caveat(analysis)
    text = (
        "Table~\\ref{tab:micro-crossover} sets our crossovers beside the reference's, both from point estimates "
        "by the same rule (the reference gives no interval)."
    )
    if words.isin(AGREEMENTS).any():
        counts = [f"{int((words == w).sum())} {w}" for w in AGREEMENTS]
        text += (
            " Where ours has a 95\\% interval, it is the same when that interval lies inside the reference's "
            "bracket (from its last batch size below its crossover to its crossover), earlier or later when the "
            "interval lies entirely below or above that bracket, and inconclusive when it overlaps the bracket but "
            f"is wider: {_and(counts)}."
        )
    if len(points):
        by_word = points.str.removesuffix(f", {NO_INTERVAL}").value_counts()
        listed = _and([f"{int(n)} {w}" for w, n in sorted(by_word.items())])
        text += (
            f" {counted(len(points), 'crossover').capitalize()} of ours {'has' if len(points) == 1 else 'have'} no "
            f"interval (one process per cell) and {'is' if len(points) == 1 else 'are'} set against the reference's "
            f"by point estimates only ({listed}): a comparison, not a resolved agreement or difference."
        )
    not_comparable = int((words == NOT_COMPARABLE).sum())
    if not_comparable:
        text += f" {counted(not_comparable, 'series', 'series').capitalize()} {'is' if not_comparable == 1 else 'are'}"
        text += " not comparable (no series on one side)."
    return (
        text
        + f" {'Five' if modes else 'Four'} caveats, computed from the reference's own numbers where it gives them. "
        + _device_caveat(analysis)
        + " "
        + _flatness_caveat(analysis)
        + " (iii) Sizes: the reference does not state the sizes of its matrices or network; ours are given above. "
        + _baselines_caveat(analysis)
        + modes
    )


def _float(kind: str, caption: str, label_: str, body: str) -> list[str]:
    return [
        rf"\begin{{{kind}*}}[tp]",
        r"\centering",
        rf"\caption{{{caption}}}",
        rf"\label{{{label_}}}",
        r"\footnotesize",
        # with 8 pt text the widest table (crossovers, with a mode in its framework names) fits the page unscaled
        r"\setlength{\tabcolsep}{3.5pt}",
        body.rstrip(),
        rf"\end{{{kind}*}}",
    ]


def _figure(figure: str) -> list[str]:
    return [
        r"\begin{figure*}[t]",
        r"\centering",
        rf"\includegraphics[width=\textwidth]{{{figure}}}",
        r"\caption{Micro-benchmarks against batch size, log-log: time per call (top; 95\% CI bars; dashed: "
        r"with the host-to-device copy of the input batch) and speedup over NumPy (bottom; 95\% CI bars, over "
        r"processes where the cells have several trials, else within one process; vertical dotted lines: "
        r"crossovers of the point estimates, labelled with their batch size; hollow squares: the reference's "
        rf"published speedups on the {REFERENCE_GPU}). $\times$: a failed cell.}}",
        r"\label{fig:micro}",
        r"\end{figure*}",
    ]


def _micro_caption(frame: pd.DataFrame, variant: str = "resident", speedups: pd.DataFrame | None = None) -> str:
    if variant == "resident":
        what = "inputs resident on the device"
    elif variant == "transfer":
        what = "with the host-to-device copy of the input batch included in every call"
    else:
        what = f"variant {escape(variant)}"
    scopes = _scopes(speedups) if speedups is not None else set()
    if scopes and scopes <= {WITHIN}:
        ci = (
            r"[95\% CI within one process: one trial per cell, so it leaves out the variation between processes "
            r"and nothing is bold]"
        )
    else:
        ci = r"[95\% CI over processes, paired by round]; bold: faster after the adjustment for multiple comparisons"
        if WITHIN in scopes:
            ci += r"; $^{w}$: a CI within one process (one trial), never bold"
    caption = (
        rf"Micro-benchmarks, {what}: NumPy's time per call (the baseline of every variant; ms, the geometric mean "
        r"of its trials' medians) and, per framework, its time per call and speedup over NumPy "
        + ci
        + r". failed$^\dagger$: the cell failed (its reason is in the suite's tidy table); ---: no cell, or no "
        r"speedup because a cell of the pair failed."
    )
    if set(frame["precision"]) - {"fp32"}:
        caption += r" NumPy computes in float32 at every precision label."
    return caption


CROSSOVER_CAPTION = (
    r"Crossover batch sizes, ours and the reference's alike from point estimates: the smallest measured batch size "
    r"from which the speedup stays above 1 ($\le b$: faster already at the smallest measured batch size $b$; "
    r"$^{m}$: unverified, a cell at a larger batch size failed). Under ours, its 95\% interval from resampling the "
    r"whole series (never: not within the measured batch sizes; no interval: one process per cell), and the "
    rf"speedup at the largest batch size; the reference's ({REFERENCE_STUDY}) beside its device. Agreement: same "
    r"when our interval lies inside the reference's bracket (from its last batch size below its crossover to its "
    r"crossover); earlier or later when it lies entirely below or above; inconclusive when it overlaps but is "
    r"wider; with ``no interval'', the same words for our point crossover's bracket (a comparison of point "
    r"estimates only); not comparable without a series on either side."
)


def micro_section(analysis: MicroAnalysis | None, figure: str = "micro") -> str:
    """The paper's micro-benchmarks section: method, figure, both tables, results and the published-vs-reproduced
    comparison with its caveats; one sentence when the study has no micro suite (`analysis` None)."""
    if analysis is None:  # one sentence, so the paper compiles for any config
        return (
            "\\section{Micro-benchmarks}\n\\label{sec:micro}\n"
            "This study has no micro suite (\\texttt{suites} in its config).\n"
        )
    body = [
        r"\section{Micro-benchmarks}",
        r"\label{sec:micro}",
        _intro(analysis),
        "",
        _method(analysis),
        "",
        *_figure(figure),
        "",
        *[
            line
            for variant in micro_variants(analysis.frame)
            for line in _float(
                "table",
                _micro_caption(analysis.frame, variant, analysis.speedups),
                micro_label(variant),
                micro_table(analysis.frame, analysis.speedups, variant),
            )
        ],
        "",
        r"\paragraph{Results} " + _results(analysis),
        "",
        r"\paragraph{Published against reproduced} " + _comparison_text(analysis),
        "",
        *_float(
            "table",
            CROSSOVER_CAPTION + crossover_names(analysis.comparison),
            "tab:micro-crossover",
            crossover_table(analysis.comparison),
        ),
    ]
    return "\n".join(body) + "\n"


# --------------------------------------------------------------------------------------------------------------------
# Entry point

OUTPUT_KEYS = ("csv", "speedups", "crossovers", "section", "macros", "pdf", "png")


def write_micro_outputs(
    cell_paths: Iterable[str | Path],
    reference_csv: str | Path,
    *,
    outputs: Mapping[str, str | Path],
    resamples: int = BOOTSTRAP_RESAMPLES,
    multiplicity: str = DEFAULT_MULTIPLICITY,
) -> MicroAnalysis:
    """Everything the workflow needs from the micro cells, each file written atomically: the tidy table (csv), the
    speedups, the crossovers beside the reference's (crossovers), the section and its macros (LaTeX), and the
    figure (pdf, png; the section includes it by the pdf's base name)."""
    lacking = [key for key in OUTPUT_KEYS if key not in outputs]
    if lacking:
        raise KeyError(f"write_micro_outputs needs outputs {', '.join(lacking)}")
    analysis = analyse_micro(cell_paths, reference_csv, resamples=resamples, multiplicity=multiplicity)
    atomic_write_text(outputs["csv"], analysis.frame.to_csv(index=False))
    atomic_write_text(outputs["speedups"], analysis.speedups.to_csv(index=False))
    atomic_write_text(outputs["crossovers"], analysis.comparison.to_csv(index=False))
    micro_figure(
        analysis.frame, analysis.speedups, analysis.crossovers, analysis.published, outputs["pdf"], outputs["png"]
    )
    atomic_write_text(outputs["section"], micro_section(analysis, figure=Path(outputs["pdf"]).stem))
    atomic_write_text(outputs["macros"], define_macros(micro_macros(analysis)))
    return analysis
