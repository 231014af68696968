"""The fairness ledger: every control the study claims, with the value this study measured for it and whether it
held, read from the cells' own records (never from the configuration's intent).

A reader of a framework comparison needs to know which of its fairness claims were checked in this run, not in a
test suite somewhere else: so each row cites what the cells recorded (digests, settings, thread counts, compile
times, flags) or what the study's parity rule measured, and says "held", "did not hold" with where, or "not
measured" with why (a CPU has no NVML to list other processes, a cell from before fwbench recorded a digest).

Cells are (framework, execution mode) variants (fwbench.study.modes): PyTorch eager and PyTorch compiled are two cells
of one comparison, named apart in every row, and three controls are about the modes: that the ratios between frameworks
pair compiled with compiled (or say where they do not), that kernel autotuning was alike in every cell, and that no
compiled cell recompiled or broke its graph while timed.

The rows are checked by the kind of control, each kind in a module of its own (`input_checks`, `mode_checks`,
`cache_checks`, `placement_checks`, `block_checks`, `outcome_checks`, on the words of `rows`); this module gathers
them in the order the paper prints them, writes the ledger as the paper's table and counts it for the prose
(`ledger_counts`), so that how the ledger is shown changes here without touching what any row checks. The prose is
report/templates/ledger.tex.j2's, rendered by fwbench.analysis.paper.ledger_section.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import escape, table_float
from fwbench.analysis.common.names import with_display_names
from fwbench.analysis.fairness.block_checks import block_order_row, idle_row, load_row, steal_row
from fwbench.analysis.fairness.cache_checks import launch_cache_row
from fwbench.analysis.fairness.input_checks import (
    blas_core_row,
    inputs_row,
    precision_row,
    threads_row,
    versions_row,
    weights_row,
)
from fwbench.analysis.fairness.mode_checks import autotune_row, compile_row, pairing_row, recompile_row
from fwbench.analysis.fairness.outcome_checks import deviations_row, failures_row, flag_row, noise_row
from fwbench.analysis.fairness.placement_checks import device_row, isolation_row, node_row, order_row
from fwbench.analysis.fairness.rows import COLUMNS, HELD, NOT_HELD, NOT_MEASURED

WHERE_CHARS = 240  # characters of a row's "where" the paper's table prints (ledger.csv keeps all)


def ledger(
    results: Iterable[dict[str, Any]],
    parity: pd.DataFrame,
    inference: pd.DataFrame,
    speedups: pd.DataFrame | None = None,
    config: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Every row of the ledger (COLUMNS), in the order the paper prints them (a row that does not apply to the study,
    such as the NumPy baseline's BLAS without NumPy cells, left out). `speedups`: the inference ratios
    (speedups.csv), whose `mixed_modes` the pairing control reads; `config`: the study's (its ratio_modes)."""
    results = list(results)
    parity_inputs = bool(parity["same_inputs"].astype(bool).all()) if len(parity) else None
    rows = [
        weights_row(results, parity),
        inputs_row(results, parity_inputs),
        precision_row(results),
        threads_row(results),
        blas_core_row(results),
        versions_row(results),
        compile_row(results),
        launch_cache_row(results),
        pairing_row(results, speedups, config),
        autotune_row(results),
        device_row(results, inference),
        node_row(results),
        order_row(results),
        block_order_row(results),
        steal_row(results),
        load_row(results),
        idle_row(results),
        deviations_row(results),
        noise_row(results),
        # only the micro suite still times a loop to a CI target; inference cells are measured in blocks
        flag_row("CI target reached", results, "ci_not_reached", "stopped before their CI target", ("micro",)),
        recompile_row(results),
        isolation_row(results),
        failures_row(results),
    ]
    return pd.DataFrame([row for row in rows if row is not None], columns=COLUMNS)


def ledger_table(rows: pd.DataFrame) -> str:
    """The ledger as a full-width LaTeX table: control, status, what was measured and where it did not hold."""
    lines = [
        # Ragged right: cell names and digests do not justify well in narrow columns.
        r"\begin{tabular}{@{}"
        + "".join(rf">{{\raggedright\arraybackslash}}p{{{width}\textwidth}}" for width in (0.16, 0.08, 0.37, 0.28))
        + "@{}}",
        r"\toprule",
        r"Control & Status & Measured in this study & Where it did not hold, or why not measured \\",
        r"\midrule",
    ]
    for row in rows.itertuples():
        status = r"\textbf{" + escape(row.status) + "}" if row.status == NOT_HELD else escape(row.status)
        # the models by their display names, as the paper names them (ledger.csv keeps the identifiers)
        where = escape(_shortened(with_display_names(row.where or "")))
        measured = escape(with_display_names(row.measured))
        lines.append(f"{escape(row.control)} & {status} & {measured} & {where} \\\\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    float_lines = table_float(
        "Fairness ledger: every control of the comparison with what this study measured for it.",
        "tab:ledger",
        "\n".join(lines),
        [
            "From the cells' own records and the study's parity rule. ``Did not hold'' names where; ``not measured'' "
            "says why."
        ],
        placement="t",
        size=r"\scriptsize",  # IEEEtran's 7 pt, the paper check's least: 23 controls fit one page
    )
    return "\n".join(float_lines) + "\n"


def _shortened(where: str, limit: int = WHERE_CHARS) -> str:
    """A row's "where" as the table prints it: at most `limit` characters, cut after a whole item, the rest in
    ledger.csv (a table* float must fit one page)."""
    if len(where) <= limit:
        return where
    cut = max(where.rfind("; ", 0, limit), where.rfind(", ", 0, limit))
    return (where[:cut] if cut > 0 else where[:limit]) + "; more in ledger.csv"


@dataclass(frozen=True)
class LedgerCounts:
    """The ledger as the prose says it (report/templates/ledger_macros.tex.j2, in the ledger's section and the
    conclusions): how many controls, how many held, and the names of those that did not hold and of those that could
    not be measured, each as it reads inside a sentence (`control_in_sentence`)."""

    total: int
    held: int
    not_held: tuple[str, ...]
    missing: tuple[str, ...]


def ledger_counts(rows: pd.DataFrame) -> LedgerCounts:
    """The ledger's rows counted by status, in the table's order."""

    def names(status: str) -> tuple[str, ...]:
        return tuple(control_in_sentence(c) for c in rows[rows["status"] == status]["control"].tolist())

    return LedgerCounts(
        total=len(rows),
        held=int((rows["status"] == HELD).sum()),
        not_held=names(NOT_HELD),
        missing=names(NOT_MEASURED),
    )


def control_in_sentence(control: str) -> str:
    """A control's name inside a sentence: its first letter lowered unless it begins an abbreviation ("CI target
    reached" stays)."""
    return control[:1].lower() + control[1:] if control[1:2].islower() else control
