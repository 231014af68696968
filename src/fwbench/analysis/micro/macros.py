"""The micro section's numbers as LaTeX macros (`micro_macros`): the text quotes every number through one of them,
so nothing in it is typed by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fwbench.analysis.common.latex import escape, macro_name, number
from fwbench.analysis.common.partners import cell_mode
from fwbench.analysis.micro.analysis import MicroAnalysis
from fwbench.analysis.micro.crossovers import crossover_text, from_row, interval_text
from fwbench.analysis.micro.figure import framework_order
from fwbench.analysis.micro.reference import AGREEMENTS, NO_INTERVAL, NOT_COMPARABLE
from fwbench.analysis.micro.tables import at_largest, of
from fwbench.analysis.micro.text import cell_counts, distinct, int_text, joined_text, sci
from fwbench.analysis.micro.vocabulary import NUMPY, frame_modes, is_measured_text
from fwbench.study.modes import primary


def micro_macros(analysis: MicroAnalysis) -> dict[str, str]:
    """The section's numbers as macros (names from `macro_name`): sizes, batch range, cell counts, crossover counts
    by kind and by agreement, each crossover (ours per framework/operation/precision/variant, the reference's per
    series/operation), the speedup at the largest batch size, the reference's JAX flatness ratios, NumPy's BLAS and
    thread count, and the worst output error per framework."""
    frame, crossovers, comparison = analysis.frame, analysis.crossovers, analysis.comparison
    total, ok, failed = cell_counts(frame)
    kinds = crossovers["kind"]
    defs = {
        "fwbMicroDim": int_text(distinct(frame["dim"])),
        "fwbMicroHidden": int_text(distinct(frame["hidden"])),
        "fwbMicroClasses": int_text(distinct(frame["classes"])),
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
        "fwbMicroBlas": joined_text(distinct(frame.loc[frame["framework"] == NUMPY, "blas"])),
        "fwbMicroNumpyThreads": int_text(distinct(frame.loc[frame["framework"] == NUMPY, "threads"])),
        "fwbMicroErrorBound": " / ".join(sci(v) for v in distinct(frame["error_bound"])) or "---",
    }
    words = comparison["agreement"].astype(str)
    for word in (*AGREEMENTS, NOT_COMPARABLE):
        defs[macro_name("MicroNum", word)] = str(int((words == word).sum()))
    defs["fwbMicroNumNoInterval"] = str(int(words.str.endswith(NO_INTERVAL).sum()))
    defs["fwbMicroTrials"] = int_text(distinct(frame["trials"]))
    defs["fwbMicroNumWithInterval"] = str(int(crossovers["crossover_ci_high"].notna().sum()))
    for _, row in crossovers.iterrows():
        parts = (*_macro_variant(row), row["operation"], row["precision"], row["variant"])
        result = from_row(row)
        defs[macro_name("MicroCrossover", *parts)] = crossover_text(result)
        defs[macro_name("MicroCrossoverInterval", *parts)] = interval_text(result) or "no interval"
        defs[macro_name("MicroShown", *parts)] = escape(row["shown"])
        defs[macro_name("MicroSpeedupAtLargest", *parts)] = at_largest(row)
    for _, row in analysis.published_crossovers.iterrows():
        defs[macro_name("MicroRefCrossover", row["reference"], row["operation"])] = crossover_text(from_row(row))
    for _, row in analysis.flatness.iterrows():
        for column in ("jax_ratio", "numpy_ratio", "jax_tail_ratio", "numpy_tail_ratio"):
            defs[macro_name("MicroRef", column, row["operation"])] = number(row[column])
    for framework in framework_order(frame["framework"]):
        rows = frame[frame["framework"] == framework]
        errors = rows["max_rel_error"].dropna()
        defs[macro_name("MicroMaxRelError", framework)] = sci(errors.max()) if len(errors) else "---"
        defs[macro_name("MicroDevice", framework)] = joined_text(distinct(rows["device"]))
    for framework, mode in frame_modes(frame):
        if mode != primary(framework):  # the primary mode's are the framework's own above
            errors = of(frame, framework, mode)["max_rel_error"].dropna()
            defs[macro_name("MicroMaxRelError", framework, mode)] = sci(errors.max()) if len(errors) else "---"
    return defs


def _macro_variant(row: Mapping[str, Any]) -> tuple[str, ...]:
    """A series' framework part of a macro name: the framework for its primary mode (fwbMicroCrossoverJaxMatmul...,
    as before modes), the framework and mode otherwise (fwbMicroCrossoverTorchCompileMatmul...)."""
    mode = cell_mode(row)
    return (row["framework"],) if mode == primary(row["framework"]) else (row["framework"], mode)
