"""Two results directories compared ratio by ratio (`fwbench compare RUN_A RUN_B`), so that a user can tell a
regression from a change of machine: pyperf's `compare_to` and asv's `compare` for the study's ratios.

What is compared: every ratio of the three ratio tables a study writes, matched between the runs on its key
(`KEY_COLUMNS`): `tables/speedups.csv` (a framework over PyTorch, per model, precision and batch size, in the modes
its row pairs), `tables/mode_gains.csv` (a framework's compiled mode over its eager one) and
`tables/micro_speedups.csv` (a framework over NumPy, per operation, variant and batch size). A ratio is a unitless
number measured against a partner in the same run, so two runs on different machines can still be compared ratio
by ratio; absolute throughputs could not.

A ratio both runs have gets its change and verdict (`fwbench.analysis.compare.change`, whose docstring gives the
verdicts); a ratio one run lacks is listed as missing in it, with why; a ratio neither has is left out.

How a run is read is `fwbench.analysis.compare.runs`; what each run's cells record, and what differs between the two
runs' records, is `fwbench.analysis.compare.run_facts`; the printed comparison, compare.csv, compare.json and the plot
are `fwbench.analysis.compare.report`. This module matches the two runs' ratios and gathers the `Comparison`.

Pure: pandas and numpy.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fwbench.analysis.compare.change import (
    CHANGED,
    DEFAULT_TOLERANCE,
    FLIPPED,
    MISSING_IN_A,
    MISSING_IN_B,
    SAME,
    VERDICTS,
    LogEstimate,
    change_between,
    equivalent,
    finite,
    position,
    side_estimate,
    verdict,
)
from fwbench.analysis.compare.run_facts import HARDWARE, environment_differences
from fwbench.analysis.compare.runs import (
    KEY_COLUMNS,
    SIDE_COLUMNS,
    TABLE_ORDER,
    TABLES,
    CompareError,
    Run,
    label,
    load_run,
)

CHANGE_COLUMNS = ["change", "change_low", "change_high", "change_se_log", "change_df", "change_p_value"]
ROW_COLUMNS = [
    *KEY_COLUMNS,
    "label",
    *(f"{column}_a" for column in SIDE_COLUMNS),
    *(f"{column}_b" for column in SIDE_COLUMNS),
    *CHANGE_COLUMNS,
    "equivalent",
    "verdict",
    "reason",
]


@dataclass
class Comparison:
    """Run B against run A: one row per ratio (ROW_COLUMNS; `verdict` one of VERDICTS, the missing ones included),
    the environment's differences (`environment_differences`), and notes on what could not be compared."""

    run_a: str
    run_b: str
    tolerance: float
    rows: pd.DataFrame
    environment: list[dict[str, Any]]
    environment_compared: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def compared(self) -> pd.DataFrame:
        return self.rows[~self.rows["verdict"].isin([MISSING_IN_A, MISSING_IN_B])]

    def missing(self, verdict_name: str) -> pd.DataFrame:
        return self.rows[self.rows["verdict"] == verdict_name]

    @property
    def has_change(self) -> bool:
        """Whether any ratio changed or flipped: what --fail-on-change fails on."""
        return bool(self.rows["verdict"].isin([CHANGED, FLIPPED]).any())

    def summary(self) -> dict[str, Any]:
        """Counts per verdict, how many `same` rows are shown equivalent, and the median absolute change
        exp(median |log(B/A)|) - 1 over the compared ratios (None without any)."""
        counts = self.rows["verdict"].value_counts()
        compared = self.compared
        changes = np.abs(np.log(compared["change"].to_numpy(dtype=float)))
        return {
            "compared": len(compared),
            **{name: int(counts.get(name, 0)) for name in VERDICTS},
            "same_equivalent": int((compared["verdict"].eq(SAME) & compared["equivalent"].astype(bool)).sum()),
            "median_abs_change": float(np.expm1(np.median(changes))) if len(changes) else None,
            "tolerance": self.tolerance,
            "hardware_differs": any(item["category"] == HARDWARE for item in self.environment),
        }


def _side_of(row: Mapping[str, Any], side: str) -> LogEstimate:
    """One run's side of a merged row (columns suffixed _a or _b) as a LogEstimate."""
    return side_estimate(
        row[f"ratio_{side}"],
        row[f"ci_low_{side}"],
        row[f"ci_high_{side}"],
        se_log=row[f"se_log_{side}"],
        df=row[f"df_{side}"],
        ci_scope=row[f"ci_scope_{side}"],
        run=side.upper(),
    )


def _compared_row(row: Mapping[str, Any], tolerance: float) -> dict[str, Any]:
    """The change, verdict and equivalence of a ratio both runs have."""
    change = change_between(_side_of(row, "a"), _side_of(row, "b"))
    positions = [position(row[f"ratio_{s}"], bool(row[f"resolved_{s}"])) for s in ("a", "b")]
    return {
        "change": change.estimate,
        "change_low": change.low,
        "change_high": change.high,
        "change_se_log": change.se_log,
        "change_df": change.df,
        "change_p_value": change.p_value,
        "equivalent": equivalent(change, tolerance),
        "verdict": verdict(change, *positions, tolerance),
        "reason": change.why_not or "",
    }


def _missing_row(row: Mapping[str, Any], absent_side: str, why: str) -> dict[str, Any]:
    return {"verdict": MISSING_IN_A if absent_side == "a" else MISSING_IN_B, "reason": why, "equivalent": False}


def _why_absent(row: Mapping[str, Any], side: str, run: Run) -> str:
    """Why one run lacks a ratio the other has: no such table, no such row, or a row without a ratio."""
    name = side.upper()
    if row["table"] not in run.tables:
        return f"{name} has no tables/{row['table']}.csv"
    absent = row[f"absent_{side}"]
    if isinstance(absent, str) and absent:
        return f"{name}: {absent}"
    return f"no such row in {name}'s tables/{row['table']}.csv"


def _has(row: Mapping[str, Any], side: str) -> bool:
    absent = row[f"absent_{side}"]
    return isinstance(absent, str) and absent == ""


def compare_rows(run_a: Run, run_b: Run, tolerance: float) -> pd.DataFrame:
    """Every ratio of either run, matched on KEY_COLUMNS: compared where both have it, missing where one lacks it,
    left out where neither does. Rows by table, then key."""
    merged = run_a.ratios.merge(run_b.ratios, on=KEY_COLUMNS, how="outer", suffixes=("_a", "_b"))
    rows = []
    for record in merged.to_dict("records"):
        has_a, has_b = _has(record, "a"), _has(record, "b")
        if has_a and has_b:
            extra = _compared_row(record, tolerance)
        elif has_a or has_b:
            absent = "b" if has_a else "a"
            extra = _missing_row(record, absent, _why_absent(record, absent, run_b if has_a else run_a))
        else:
            continue
        rows.append(record | {"label": label(record)} | extra)
    frame = pd.DataFrame(rows).reindex(columns=ROW_COLUMNS)
    if frame.empty:
        return frame
    order = frame["table"].map(TABLE_ORDER)
    frame = frame.assign(_order=order).sort_values(["_order", *KEY_COLUMNS[1:]], kind="stable")
    return frame.drop(columns="_order").reset_index(drop=True)


def _table_notes(run_a: Run, run_b: Run) -> list[str]:
    notes = []
    for kind in TABLES:
        if (kind.name in run_a.tables) != (kind.name in run_b.tables):
            only, lacks = ("A", "B") if kind.name in run_a.tables else ("B", "A")
            notes.append(f"tables/{kind.filename} is in {only} only: its ratios are listed as missing in {lacks}")
    for name, run in (("A", run_a), ("B", run_b)):
        if not run.cells:
            notes.append(f"{name} ({run.path}) has no cells/**/*.json: its environment is not compared")
    return notes


def compare_runs(
    dir_a: str | os.PathLike, dir_b: str | os.PathLike, tolerance: float = DEFAULT_TOLERANCE
) -> Comparison:
    """Run B (`dir_b`) against run A (`dir_a`): every ratio's change and verdict, and what differs in their
    environment. Raises CompareError (a ValueError) naming the file that stops it."""
    if not (finite(tolerance) and tolerance >= 0):
        raise CompareError(f"tolerance {tolerance!r}: expected a fraction >= 0 (0.05 for ±5%)")
    run_a, run_b = load_run(dir_a), load_run(dir_b)
    both_have_cells = bool(run_a.cells and run_b.cells)
    environment = environment_differences(run_a.cells, run_b.cells) if both_have_cells else []
    rows = compare_rows(run_a, run_b, tolerance)
    notes = _table_notes(run_a, run_b)
    return Comparison(str(dir_a), str(dir_b), float(tolerance), rows, environment, both_have_cells, notes)
