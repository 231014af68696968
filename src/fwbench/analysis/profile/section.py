"""The section "Where the time goes"'s floats: the stacked-bar figure (`profile_figure_float`) and the table of each
cell's profiled and timed step time and its two largest categories (`profile_table_float`), each with its caption
and the note under it. The section's prose is the template's (report/templates/profile.tex.j2, from
fwbench.analysis.profile.findings), set before these floats by fwbench.analysis.paper.profile_section."""

from __future__ import annotations

import math

import pandas as pd

from fwbench.analysis.common.latex import (
    escape,
    figure_float,
    number,
    stacked,
    stacked_header,
    table_float,
    variant_label,
)
from fwbench.analysis.common.names import model_name
from fwbench.analysis.profile.categories import short_label
from fwbench.analysis.profile.tables import category_times, cell_rows, row_key


def _percent(value: float) -> str:
    """A signed percentage ("+45.0\\%", "$-$3.00\\%")."""
    text = number(abs(value) * 100)
    return ("$-$" if value < 0 else "+") + text + r"\%"


def profile_figure_float(figure: str, panels: int) -> list[str]:
    """The figure float: across the page where it has several panels, one column wide for a single panel (the
    figure draws up to three panels side by side)."""
    return figure_float(
        figure,
        "Where the time goes: each profiled cell's time per step, stacked by operation category, one bar per "
        "framework and execution mode.",
        "fig:profile",
        [
            "Times under each framework's profiler; framework overhead, the step time no operation accounts for, is "
            "the last category. One panel per model, batch size and precision, each on its own scale. Black "
            "diamonds: the timed median step of the cell's trials."
        ],
        wide=panels > 1,
    )


def _largest(times: dict[str, float], total: float, rank: int) -> str:
    ordered = sorted(times.items(), key=lambda item: -item[1])
    if len(ordered) <= rank or ordered[rank][1] <= 0:
        return "---"
    category, ms = ordered[rank]
    share = ms / total if total > 0 else math.nan
    return stacked(
        escape(short_label(category)), f"{number(ms)}~ms ({number(share * 100)}\\%)", align="l", position="t"
    )


def _variant_lines(label: str) -> list[str]:
    """ "TensorFlow/Keras (XLA)" on two lines, framework then mode, so the table fits the page's width."""
    name, _, mode = label.partition(" (")
    return [escape(name), escape(f"({mode}")] if mode else [escape(label)]


def cell_table(table: pd.DataFrame) -> str:
    """The tabular: per profiled cell, its profiled and timed step time, the profiler's overhead and its two
    largest categories (ms per step and share)."""
    times = category_times(table)
    header = [
        stacked_header("Model", "(prec., batch)", align="l"),
        r"\textbf{Variant}",
        stacked_header("Profiled", "(ms)"),
        stacked_header("Timed", "(ms)"),
        stacked_header("Over-", "head"),
        stacked_header("Largest", "category", align="l"),
        stacked_header("Second", "category", align="l"),
    ]
    lines = [r"\begin{tabular}{llrrrll}", r"\toprule", " & ".join(header) + r" \\", r"\midrule"]
    for _, row in cell_rows(table).iterrows():
        key = row_key(row)
        total = float(row["attributed_ms"])
        overhead = row["profiler_overhead"]
        values = [
            stacked(
                escape(model_name(row["model"])),
                f"{escape(row['precision'])}, {int(row['batch_size'])}",
                align="l",
                position="t",
            ),
            stacked(*_variant_lines(variant_label(row["framework"], row["mode"])), align="l", position="t"),
            number(float(row["profiled_step_ms"])),
            number(float(row["timed_step_ms"])) if pd.notna(row["timed_step_ms"]) else "---",
            _percent(float(overhead)) if pd.notna(overhead) else "---",
            _largest(times[key], total, 0),
            _largest(times[key], total, 1),
        ]
        lines.append(" & ".join(values) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)


def profile_table_float(table: pd.DataFrame) -> list[str]:
    return table_float(
        "Profiled against timed: each profiled cell's time per step under the profiler and timed, the profiler's "
        "overhead, and the cell's two largest operation categories.",
        "tab:profile",
        cell_table(table),
        [
            r"Profiled: the wall time per step under the profiler; timed: the median step of the cell's trials; "
            r"overhead: profiled over timed, minus one. Categories: ms per step with their share of the categories' "
            r"sum (op\_profile.csv; the ten most expensive operations of each cell are in op\_profile\_top.csv). "
            r"Conv.: convolution; Matmul/dense: matrix multiply and dense; Norm.: normalisation; Pool./reduce: "
            r"pooling and reduction; Data movement: data movement and layout; Overhead/other: framework overhead and "
            r"other."
        ],
        setup=[r"\setlength{\tabcolsep}{3.5pt}"],
    )
