"""The paper's section "Where the time goes" (`profile_section`): how the cells were profiled (what, how many steps,
in which process, with which profiler, on what time basis, into which categories, and how far the profiled step
lies from the timed median), the stacked-bar figure, a table of each cell's profiled and timed step time and its two
largest categories, and the sentences that attribute the resolved ratios beyond 1.25x (fwbench.analysis.profile.
sentences). Every number is read from the op-profile tables; with no profiled cell the section is one sentence, so
the paper builds for any study."""

from __future__ import annotations

import math

import pandas as pd

from fwbench.analysis.common.latex import (
    escape,
    figure_float,
    join_words,
    label,
    number,
    ordered_frameworks,
    stacked,
    stacked_header,
    table_float,
    variant_label,
)
from fwbench.analysis.common.names import model_name, models_in_text
from fwbench.analysis.profile.categories import category_phrase, ordered_categories, short_label
from fwbench.analysis.profile.sentences import THRESHOLD, ratio_sentences
from fwbench.analysis.profile.tables import PANEL_KEYS, category_times, cell_rows, row_key
from fwbench.study.modes import TORCH_COMPILED_MODES

TITLE = r"\section{Where the time goes}"
LABEL = r"\label{sec:profile}"
PLATFORMS = {"cpu": "the CPU", "cuda": "the GPU"}
NO_PROFILE = "No inference cell was profiled in this study, so its step time is not split by operation here."


def _int_list(values) -> str:
    return join_words([str(int(v)) for v in sorted(set(values))])


def _percent(value: float) -> str:
    """A signed percentage ("+45.0\\%", "$-$3.00\\%")."""
    text = number(abs(value) * 100)
    return ("$-$" if value < 0 else "+") + text + r"\%"


def _what_text(cells: pd.DataFrame) -> str:
    models = sorted(set(cells["model"]))
    variants = sorted({(f, m) for f, m in zip(cells["framework"], cells["mode"], strict=True)})
    count = len(cells)
    return (
        f"{count} inference cell{'' if count == 1 else 's'} {'was' if count == 1 else 'were'} profiled "
        f"({len(models)} model{'' if len(models) == 1 else 's'}: {escape(join_words(models_in_text(models)))}; "
        "batch size "
        f"{_int_list(cells['batch_size'])}; {len(variants)} framework and mode variant"
        f"{'' if len(variants) == 1 else 's'}), after the cell's timed trials: {_where_text(cells)}; each "
        "was warmed up on the profiled shape, then "
        f"{_int_list(cells['steps'])} steps ran under the framework's own profiler"
    )


def _where_text(cells: pd.DataFrame) -> str:
    """Where the passes ran: in the last launch's warm worker (the timed program), or in a process of their own."""
    where = cells["profiled_in"]
    in_worker, alone = int((where == "worker").sum()), int((where != "worker").sum())
    parts = []
    if in_worker:
        parts.append(
            f"{_count(in_worker, len(cells))} in the warm worker of the cell's last launch, once every worker of that "
            "launch had ended its timed blocks (the model, weights and compiled program that were timed)"
        )
    if alone:
        compiled = cells[where != "worker"]
        why = (
            " (PyTorch compiled on the CPU: Inductor's C++ kernels are compiled again to record themselves)"
            if set(compiled["mode"]) <= set(TORCH_COMPILED_MODES) and set(compiled["platform"]) == {"cpu"}
            else ""
        )
        parts.append(
            f"{_count(alone, len(cells))} in a process of its own, where the model is built and compiled as for the "
            f"timed trials{why}"
        )
    return "; ".join(parts)


def _count(part: int, whole: int) -> str:
    return "all" if part == whole else ("one" if part == 1 else str(part))


def _profilers_text(cells: pd.DataFrame) -> str:
    parts = []
    for framework in ordered_frameworks(cells["framework"]):
        mine = cells[cells["framework"] == framework]
        names = join_words([_tt(p) for p in sorted(set(mine["profiler"]))])
        parts.append(f"{names} for {escape(label(framework))}")
    return " (" + "; ".join(parts) + ")."


def _tt(text: str) -> str:
    return rf"\texttt{{{escape(text)}}}"


def _basis_text(cells: pd.DataFrame) -> str:
    """The time basis of the operation times, each with the platform and the profilers that reported it, in the
    paper's order of frameworks."""
    groups: dict[tuple[str, str], list[str]] = {}
    for framework in ordered_frameworks(cells["framework"]):
        mine = cells[cells["framework"] == framework]
        for profiler, platform, basis in zip(mine["profiler"], mine["platform"], mine["time_basis"], strict=True):
            basis = basis if isinstance(basis, str) and basis else "not recorded"
            names = groups.setdefault((basis, str(platform)), [])
            if str(profiler) not in names:
                names.append(str(profiler))
    parts = [
        f"{escape(basis)} on {PLATFORMS.get(platform, escape(platform))} ({join_words([_tt(p) for p in profilers])})"
        for (basis, platform), profilers in groups.items()
    ]
    return f" The operation times are {'; '.join(parts)}."


def _categories_text(table: pd.DataFrame, unmapped: pd.DataFrame | None) -> str:
    categories = ordered_categories(table["category"])
    names = "; ".join(category_phrase(c) for c in categories)
    text = (
        f" A mapping table per framework puts each operation, kernel or fusion under the name its profiler reports in "
        f"one of {len(categories)} categories ({names}); the part of the profiled step that no operation accounts "
        f"for is framework overhead and counts in the last."
    )
    if unmapped is not None:
        count = int(unmapped["name"].nunique()) if len(unmapped) else 0
        text += (
            f" {count} operation name{'' if count == 1 else 's'} {'was' if count == 1 else 'were'} in no mapping "
            r"table and counted as other (listed in \texttt{op\_profile\_unmapped.csv})."
            if count
            else " Every operation name was in a mapping table."
        )
    return text


def _overhead_text(cells: pd.DataFrame) -> str:
    overhead = pd.to_numeric(cells["profiler_overhead"], errors="coerce").dropna()
    lead = (
        " The profiled step time (the wall time per step under the profiler) is set beside the timed median step of "
        "the cell's trials, so the profiler's own overhead is visible"
    )
    if overhead.empty:
        return lead + ": the tidy table has no timed median for these cells."
    if len(overhead) == 1:
        return lead + f": profiled over timed minus one is {_percent(float(overhead.iloc[0]))} (1 cell)."
    return (
        lead + f": profiled over timed minus one ranges from {_percent(float(overhead.min()))} to "
        f"{_percent(float(overhead.max()))} (median {_percent(float(overhead.median()))}) over "
        f"{len(overhead)} cells."
    )


def method_text(table: pd.DataFrame, unmapped: pd.DataFrame | None = None) -> str:
    cells = cell_rows(table)
    return (
        r"\paragraph{Method} "
        + _what_text(cells)
        + _profilers_text(cells)
        + _basis_text(cells)
        + _categories_text(table, unmapped)
        + _overhead_text(cells)
    )


def _figure(figure: str, panels: int) -> list[str]:
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


def _table(table: pd.DataFrame) -> list[str]:
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


def failed_text(failed: list[tuple[str, str]]) -> str:
    """One sentence naming the cells whose profiling process failed, with why (empty when none did)."""
    if not failed:
        return ""
    named = "; ".join(f"\\texttt{{{escape(label)}}} ({escape(reason)})" for label, reason in failed)
    cells = f"{len(failed)} cell{'s' if len(failed) > 1 else ''}"
    return f"The profiling process failed for {cells}, whose timed results stand: {named}."


def profile_section(
    table: pd.DataFrame,
    ratios: pd.DataFrame,
    unmapped: pd.DataFrame | None = None,
    figure: str = "op_profile",
    failed: list[tuple[str, str]] | None = None,
) -> str:
    """The LaTeX of the section from the op-profile table (`tables.op_profile_table`), the speedups table and the
    unmapped names (`tables.op_profile_unmapped_table`); `figure`: the figure's base name for \\includegraphics.
    With no profiled cell, one sentence."""
    if table.empty:
        return "\n".join([TITLE, LABEL, NO_PROFILE, *filter(None, [failed_text(failed or [])])]) + "\n"
    body = [
        TITLE,
        LABEL,
        "Figure~\\ref{fig:profile} splits each profiled cell's step into operation categories and "
        "Table~\\ref{tab:profile} sets its profiled step time beside the timed one; the sentences after them name, "
        f"for each resolved ratio between frameworks beyond {number(THRESHOLD)}$\\times$ either way, the categories "
        "that account for most of the difference.",
        "",
        method_text(table, unmapped),
        "",
        *_figure(figure, len(cell_rows(table).drop_duplicates(PANEL_KEYS))),
        "",
        *_table(table),
        "",
        r"\paragraph{Where the ratios come from} " + " ".join(ratio_sentences(ratios, table)),
        *filter(None, [failed_text(failed or [])]),
    ]
    return "\n".join(body) + "\n"
