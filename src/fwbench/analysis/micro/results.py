"""The micro section's two results paragraphs, made only of counts and numbers from the crossovers tables: how many
series cross over (point estimates, with their intervals), what the intervals show, which never cross, and the
speedups at the largest batch size (`results`); then the published crossovers against ours, with caveats computed
from the reference's own numbers (`comparison_text`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import escape, number
from fwbench.analysis.common.partners import cell_mode
from fwbench.analysis.micro.analysis import MicroAnalysis
from fwbench.analysis.micro.crossovers import crossover_text, from_row, interval_text
from fwbench.analysis.micro.figure import framework_order
from fwbench.analysis.micro.reference import AGREEMENTS, NO_INTERVAL, NOT_COMPARABLE, REFERENCE_GPU
from fwbench.analysis.micro.tables import at_largest, micro_label, micro_variants, multi_mode_frameworks
from fwbench.analysis.micro.text import and_list, counted, distinct, joined_text, plural
from fwbench.analysis.micro.vocabulary import NUMPY, frame_modes, is_measured, is_measured_text, label, mode_names
from fwbench.study.modes import primary


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


def _listed(rows: pd.DataFrame, naming: Naming, what) -> str:
    return and_list([f"{naming.series(row)} {what(row)}".rstrip() for _, row in rows.iterrows()])


def _tables_ref(frame: pd.DataFrame) -> str:
    """ "Table~\\ref{tab:micro}", or all the variants' tables ("Tables~\\ref{tab:micro} and~\\ref{...}")."""
    labels = [micro_label(variant) for variant in micro_variants(frame)]
    if len(labels) == 1:
        return f"Table~\\ref{{{labels[0]}}}"
    refs = [f"\\ref{{{name}}}" for name in labels]
    return "Tables~" + ", ".join(refs[:-1]) + " and~" + refs[-1]


def results(analysis: MicroAnalysis) -> str:
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
    modes = ", mode" if multi_mode_frameworks(crossovers) else ""
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
        return f" At its largest batch size, the speedup is {at_largest(high)}."
    return (
        f" At the largest batch size of each series, the speedup ranges from {at_largest(low)} "
        f"({naming.series(low)}) to {at_largest(high)} ({naming.series(high)})."
    )


def _device_caveat(analysis: MicroAnalysis) -> str:
    frame = analysis.frame
    ours = [
        f"{escape(label(f))} on {joined_text(distinct(frame.loc[frame['framework'] == f, 'device']))}"
        for f in framework_order(frame["framework"])
    ]
    return (
        f"(i) Devices: the reference ran on an {REFERENCE_GPU} (its PyTorch CPU series on that machine's CPU); "
        f"this study ran {and_list(ours)}."
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
        operations = and_list([rf"\texttt{{{escape(row['operation'])}}}" for row, _ in fixed])
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
    with each framework's primary mode only (fwbench.analysis.micro.reference.reference_for), and the other modes
    with nothing."""
    names = mode_names(frame_modes(analysis.frame))
    others = [name for (f, m), name in names.items() if f != NUMPY and m != primary(f)]
    if not others:
        return ""
    primaries = [name for (f, m), name in names.items() if f != NUMPY and m == primary(f)]
    return (
        " (v) Modes: the reference does not state whether it compiled anything, so its series are taken as each "
        f"framework's primary mode and compared with {and_list([escape(n) for n in primaries])}; "
        f"{and_list([escape(n) for n in others])} {'has' if len(others) == 1 else 'have'} no reference series."
    )


def comparison_text(analysis: MicroAnalysis) -> str:
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
            f"is wider: {and_list(counts)}."
        )
    if len(points):
        by_word = points.str.removesuffix(f", {NO_INTERVAL}").value_counts()
        listed = and_list([f"{int(n)} {w}" for w, n in sorted(by_word.items())])
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
