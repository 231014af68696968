"""The micro suite's LaTeX tables with their captions and notes: per timing variant, NumPy's time per call and each
framework's time and speedup over NumPy by batch size (`micro_table`), and our crossovers beside the reference's
(`crossover_table`). Every series is a framework in one execution mode, named with its mode wherever its framework
has another one in the study (`mode_names`); the notes under the tables say what bold and each mark mean for the
intervals this study has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import (
    escape,
    mode_label,
    number,
    short_label,
    stacked,
    stacked_header,
    variant_short,
)
from fwbench.analysis.common.partners import cell_mode, multi_mode
from fwbench.analysis.micro.crossovers import crossover_text, from_row, interval_text
from fwbench.analysis.micro.reference import REFERENCE_STUDY, SERIES
from fwbench.analysis.micro.vocabulary import (
    BETWEEN_PROCESSES,
    FASTER,
    NUMPY,
    VARIANT_LABELS,
    VARIANTS,
    WITHIN,
    frame_modes,
    is_measured,
    is_measured_text,
    label,
    mode_names,
    row_modes,
)
from fwbench.study.modes import primary

FAILED = r"failed$^\dagger$"
WITHIN_MARK = r"$^{w}$"


def _speedup_text(row: Mapping[str, Any] | None, mark_within: bool = False) -> str:
    """Speedup with its 95% CI; bold when the CI over processes lies above 1 (faster than NumPy, resolved: verdict
    "faster"), never for a CI within one process, which is marked $^{w}$ where `mark_within` (a study whose cells
    have one trial at some batch sizes and several at others)."""
    if row is None or row.get("status") != "ok":
        return "---"
    lines = interval_lines(row["ci_low"], row["ci_high"])
    speedup = rf"{number(row['speedup'])}$\times$"
    text = f"{speedup} {lines[0]}" if len(lines) == 1 else stacked(speedup, *lines, align="r", position="t")
    if row.get("verdict") == FASTER:
        return rf"\textbf{{{text}}}"
    return text + (WITHIN_MARK if mark_within and row.get("ci_scope") not in BETWEEN_PROCESSES else "")


def ci_scopes(speedups: pd.DataFrame) -> set[str]:
    """Where the speedups' intervals come from: {WITHIN}, a subset of BETWEEN_PROCESSES, or both."""
    ok = speedups[speedups["status"] == "ok"] if "status" in speedups else speedups
    return {str(s) for s in ok.get("ci_scope", pd.Series(dtype=object)) if is_measured_text(s)}


def _mixed(speedups: pd.DataFrame) -> bool:
    scopes = ci_scopes(speedups)
    return WITHIN in scopes and bool(scopes & set(BETWEEN_PROCESSES))


def of(frame: pd.DataFrame, framework: str, mode: str) -> pd.DataFrame:
    """The rows of one framework in one mode."""
    return frame[(frame["framework"] == framework) & (row_modes(frame) == mode)]


def _time_text(frame: pd.DataFrame, framework: str, mode: str, variant: str) -> str:
    rows = of(frame, framework, mode)
    if rows.empty:
        return "---"
    if (rows["status"] != "ok").all():
        return FAILED
    match = rows[rows["variant"] == variant]
    return number(match["median_ms"].iloc[0]) if not match.empty else "---"


def _variants_of(frame: pd.DataFrame, framework: str, mode: str | None = None) -> list[str]:
    """The timing variants a framework (in `mode`, when given) was measured in, resident first."""
    rows = frame[frame["framework"] == framework] if mode is None else of(frame, framework, mode)
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


# The most characters of a speedup and its batch size on one line of the crossover table ("0.0663x at 4096");
# "0.00171x at 4096" was 2.8 pt too wide for the page at 8 pt.
ONE_LINE_SPEEDUP_CHARS = 10


def at_largest(row: Mapping[str, Any]) -> str:
    """The speedup at the largest batch size over its CI, on two lines; the batch size on a line of its own where
    the speedup's line would take more than ONE_LINE_SPEEDUP_CHARS."""
    if not is_measured(row.get("speedup_at_largest")):
        return "---"
    speedup, batch = number(row["speedup_at_largest"]), str(int(row["largest_batch"]))
    where = rf"{speedup}$\times$ at {batch}"
    head = [where] if len(speedup + batch) <= ONE_LINE_SPEEDUP_CHARS else [rf"{speedup}$\times$", f"at {batch}"]
    return stacked(
        *head,
        *interval_lines(row["ci_low_at_largest"], row["ci_high_at_largest"]),
        align="l",
        position="t",
    )


# The most characters of a CI's two ends on one line: "[0.00117, 0.00250]" fits the crossover table's page width
# at 8 pt, "[0.000553, 0.00448]" was 3.8 pt too wide (tests/test_micro_analysis.py sets both).
ONE_LINE_CHARS = 14


def interval_lines(low: float, high: float) -> list[str]:
    """A CI as small type, "[0.0342, 0.0837]" on one line, or its two ends on two lines where either is written in
    powers of ten (an interval over two processes under load once spanned 7.37e-19 to 1.32e15, 24 pt wider than
    its column) or both take more than ONE_LINE_CHARS."""
    low_text, high_text = number(low), number(high)
    if "ensuremath" not in low_text + high_text and len(low_text + high_text) <= ONE_LINE_CHARS:
        return [rf"{{\scriptsize[{low_text}, {high_text}]}}"]
    return [rf"{{\scriptsize[{low_text},}}", rf"{{\scriptsize\phantom{{[}}{high_text}]}}"]


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
    agreement (booktabs tabular). Short framework names (`crossover_names` spells them out in the note),
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
    several = multi_mode_frameworks(comparison)
    for _, row in comparison.iterrows():
        measured = row["kind"] != "not measured"
        series = SERIES.get(row["reference"]) if is_measured_text(row["reference"]) else None
        values = [
            escape(_short(row, several)),
            rf"\texttt{{{escape(row['operation'])}}}",
            _text(row["precision"]),
            escape(VARIANT_LABELS.get(row["variant"], row["variant"])) if measured else "---",
            _crossover_cell(row) if measured else "not measured",
            at_largest(row) if measured else "---",
            _text(row["device"]) if measured else "---",
            escape(series.label) if series else "---",
            crossover_text(from_row(row, "published_")) if series else "---",
            _text(row["reference_device"]),
            escape(row["agreement"]),
        ]
        lines.append(" & ".join(values) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def multi_mode_frameworks(rows: pd.DataFrame) -> set[str]:
    """The frameworks with more than one mode among a table's rows."""
    return multi_mode(zip(rows["framework"], row_modes(rows), strict=True)) if not rows.empty else set()


def _short(row: Mapping[str, Any], several: set[str]) -> str:
    """A crossover row's short framework name, with its mode where the framework has several ("PT-compiled")."""
    framework = row["framework"]
    return variant_short(framework, cell_mode(row)) if framework in several else short_label(framework)


def crossover_names(comparison: pd.DataFrame) -> str:
    """The note's key to the crossover table's short framework names, e.g. " Framework: PT for PyTorch, ...",
    with each mode where a framework has several ("PT-compiled for PyTorch compiled with torch.compile")."""
    if comparison.empty:
        return ""
    several = multi_mode_frameworks(comparison)
    keys = {}
    for _, row in comparison.iterrows():
        framework, mode = row["framework"], cell_mode(row)
        what = label(framework) + (f" {escape(mode_label(mode))}" if framework in several else "")
        keys.setdefault(_short(row, several), what)
    return " Framework: " + ", ".join(f"{escape(short)} for {escape(what)}" for short, what in keys.items()) + "."


def _variant_words(variant: str) -> str:
    if variant == "resident":
        return "inputs resident on the device"
    if variant == "transfer":
        return "with the host-to-device copy of the input batch included in every call"
    return f"variant {escape(variant)}"


def micro_caption(variant: str = "resident") -> str:
    """A variant's table in a line or two: what it sets beside what (its note, `micro_note`, says how to read it)."""
    return (
        rf"Micro-benchmarks, {_variant_words(variant)}: time per call of NumPy and of each framework, and each "
        r"framework's speedup over NumPy with its 95\% CI."
    )


def micro_note(frame: pd.DataFrame, speedups: pd.DataFrame | None = None) -> str:
    """The note under a variant's table: NumPy's column, the intervals this study has and what bold, each mark and
    a dash mean."""
    scopes = ci_scopes(speedups) if speedups is not None else set()
    if scopes and scopes <= {WITHIN}:
        ci = (
            r"[95\% CI within one process: one trial per cell, so it leaves out the variation between processes "
            r"and nothing is bold]"
        )
    else:
        ci = r"[95\% CI over processes, paired by round]; bold: faster after the adjustment for multiple comparisons"
        if WITHIN in scopes:
            ci += r". A CI marked $^{w}$ is within one process (one trial), never bold"
    note = (
        r"NumPy ms: NumPy's time per call, the baseline of every variant (the geometric mean of its trials' medians). "
        r"Under each framework, its time per call (ms) and speedup over NumPy "
        + ci
        + r". A cell marked failed$^\dagger$ failed (its reason is in the suite's tidy table); ---: no cell, or no "
        r"speedup because a cell of the pair failed."
    )
    if set(frame["precision"]) - {"fp32"}:
        note += r" NumPy computes in float32 at every precision label."
    return note


CROSSOVER_CAPTION = (
    rf"Crossover batch sizes, ours beside the reference's ({REFERENCE_STUDY}): from which batch size each framework "
    r"is faster than NumPy, our speedup at the largest batch size, the devices, and whether the two agree."
)
CROSSOVER_NOTE = (
    r"Ours and the reference's crossovers alike come from point estimates: the smallest measured batch size from "
    r"which the speedup stays above 1. A crossover $\le b$ is faster already at the smallest measured batch size "
    r"$b$; $^{m}$ marks one unverified, since a cell at a larger batch size failed. Under ours, its 95\% interval "
    r"from resampling the series (never: beyond the measured batch sizes; no interval: one process per cell) and the "
    rf"speedup at the largest batch size. The reference's ({REFERENCE_STUDY}) stand beside its device. Agreement: "
    r"same when our interval lies inside the reference's bracket, from its last batch size below its crossover to "
    r"its crossover. Earlier or later when it lies entirely below or above; inconclusive when it overlaps but is "
    r"wider; not comparable without a series on either side. With ``no interval'', the same words compare our point "
    r"crossover's bracket: point estimates only."
)
