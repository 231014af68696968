"""Two results directories compared ratio by ratio (`fwbench compare RUN_A RUN_B`), so that a user can tell a
regression from a change of machine: pyperf's `compare_to` and asv's `compare` for the study's ratios.

What is compared: every ratio of the three ratio tables a study writes, matched between the runs on its key
(`KEY_COLUMNS`): `tables/speedups.csv` (a framework over PyTorch, per model, precision and batch size, in the modes
its row pairs), `tables/mode_gains.csv` (a framework's compiled mode over its eager one) and
`tables/micro_speedups.csv` (a framework over NumPy, per operation, variant and batch size). A ratio is a unitless
number measured against a partner in the same run, so two runs on different machines can still be compared ratio
by ratio; absolute throughputs could not.

The change of one ratio is B's over A's. The two runs are independent, so on the log scale the change is the
difference of two independent log ratios: its standard error is sqrt(se_a^2 + se_b^2) and its degrees of freedom
are Welch-Satterthwaite's from each side's (`fwbench.analysis.common.verdicts.difference`), giving a 95% t interval. A
side whose row lacks `se_log` gets it back from its 95% interval and its degrees of freedom (a paired interval's are its
pairs - 1); a side with neither (a bootstrap within one process) gets no change interval, and the row says why:
an interval is never invented.

Verdicts (`verdict`), one per row; a run's own verdict on a ratio is its table's (`resolved`: the paired 95% interval
excludes 1; in the micro table, an interval over processes excludes 1):

- `same`: the change's 95% interval includes 1, or the change is within the tolerance (±5% by default, on the log
  scale: between 1/1.05 and 1.05). Not evidence of sameness by itself: the `equivalent` column says where two
  one-sided tests show the change within the tolerance (its 90% interval inside it).
- `changed`: the change's interval excludes 1 and the change is beyond the tolerance (asv's and pyperf's rule: a
  change must be both resolved and large enough to report).
- `flipped`: both runs resolve the ratio, on opposite sides of 1: the study's conclusion about it turned around,
  whatever the size of the change.
- `no interval`: neither of the above can be judged, because a side has no standard error (see above).
- `missing in A`, `missing in B`: the ratio is in one run only (its table, its row, or a finite ratio: a refused
  ratio or a micro row without a speedup counts as missing, with its reason). A ratio that neither run has is left
  out.

The verdicts are per ratio, each at 95%, not adjusted for the number of ratios compared: over many unchanged ratios
a few percent of them may come out `changed` by chance unless the tolerance absorbs them. The change interval holds
only the noise each run measured; a drift of the machine that moves a whole run is in neither, which is what the
tolerance allows for.

What each run's cells record, and what differs between the two runs' records, is `fwbench.analysis.compare.run_facts`;
the printed comparison, compare.csv, compare.json and the plot are `fwbench.analysis.compare.report`. This module
reads the runs and judges the ratios, so that the arithmetic of a verdict can be read, and tested, on its own.

Pure: pandas, numpy and scipy.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fwbench.analysis.common import verdicts
from fwbench.analysis.compare.run_facts import HARDWARE, environment_differences, side_text
from fwbench.study import modes as execution_modes

DEFAULT_TOLERANCE = 0.05
# A change exactly at the tolerance (2.1 over 2.0 at 5%) is within it, whatever the last bit of its floating point.
BOUNDARY = 1e-12
LEVEL = 0.95
SAME, CHANGED, FLIPPED, NO_INTERVAL = "same", "changed", "flipped", "no interval"
MISSING_IN_A, MISSING_IN_B = "missing in A", "missing in B"
VERDICTS = (SAME, CHANGED, FLIPPED, NO_INTERVAL, MISSING_IN_A, MISSING_IN_B)
# Where a ratio's interval comes from (the `ci_scope` words of fwbench.analysis.inference.aggregate and micro).
PAIRED, UNPAIRED, WITHIN = "paired_rounds", "unpaired_trials", "within_process"

# One row's identity, the same columns for every table (empty where a table has no such axis): which table, what
# was measured (a model, or a micro operation and its variant), at which precision and batch size, and which
# framework in which mode over which.
KEY_COLUMNS = [
    "table",
    "model",
    "operation",
    "variant",
    "precision",
    "batch_size",
    "numerator",
    "numerator_mode",
    "denominator",
    "denominator_mode",
]
# What each run's side of a row holds, suffixed _a and _b in the comparison.
SIDE_COLUMNS = ["ratio", "ci_low", "ci_high", "ci_scope", "se_log", "df", "resolved"]
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


class CompareError(ValueError):
    """A run cannot be compared: not a results directory, or a file in it that cannot be read. The message names
    the file; the command line prints it and exits 2."""


# --------------------------------------------------------------------------------------------------------------------
# Reading one run's ratio tables


@dataclass(frozen=True)
class TableKind:
    """One ratio table of a results directory: its file under tables/, the column holding its ratio, the columns a
    file must have, and how its rows map onto KEY_COLUMNS."""

    name: str
    filename: str
    estimate: str
    required: tuple[str, ...]
    keys: Callable[[pd.DataFrame], dict[str, pd.Series]]


def _text(frame: pd.DataFrame, column: str, default: str = "") -> pd.Series:
    """A key column as text, `default` where the table has no such column or the cell is empty."""
    if column not in frame:
        return pd.Series(default, index=frame.index, dtype=object)
    return frame[column].map(lambda value: default if _empty(value) else str(value))


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or str(value) == ""


def _mode(frame: pd.DataFrame, mode_column: str, framework: pd.Series) -> pd.Series:
    """A mode column, a table from before modes reading as each framework's primary mode (what it then ran in)."""
    recorded = _text(frame, mode_column)
    primary = framework.map(lambda f: execution_modes.primary(f) if f in execution_modes.MODES else "")
    return recorded.where(recorded != "", primary)


def _speedup_keys(frame: pd.DataFrame) -> dict[str, pd.Series]:
    # A table from before there were three frameworks has no numerator column: it holds JAX over PyTorch.
    numerator, denominator = _text(frame, "numerator", "jax"), _text(frame, "denominator", "torch")
    return {
        "model": _text(frame, "model"),
        "numerator": numerator,
        "numerator_mode": _mode(frame, "numerator_mode", numerator),
        "denominator": denominator,
        "denominator_mode": _mode(frame, "denominator_mode", denominator),
    }


def _gain_keys(frame: pd.DataFrame) -> dict[str, pd.Series]:
    framework = _text(frame, "framework")
    return {
        "model": _text(frame, "model"),
        "numerator": framework,
        "numerator_mode": _text(frame, "mode"),
        "denominator": framework,
        "denominator_mode": _text(frame, "baseline_mode"),
    }


def _micro_keys(frame: pd.DataFrame) -> dict[str, pd.Series]:
    framework = _text(frame, "framework")
    return {
        "operation": _text(frame, "operation"),
        "variant": _text(frame, "variant"),
        "numerator": framework,
        "numerator_mode": _mode(frame, "mode", framework),
        "denominator": pd.Series("numpy", index=frame.index, dtype=object),
    }


TABLES = (
    TableKind(
        "speedups",
        "speedups.csv",
        "ratio",
        ("model", "precision", "batch_size", "ratio", "ci_low", "ci_high"),
        _speedup_keys,
    ),
    TableKind(
        "mode_gains",
        "mode_gains.csv",
        "ratio",
        ("model", "precision", "batch_size", "framework", "mode", "baseline_mode", "ratio", "ci_low", "ci_high"),
        _gain_keys,
    ),
    TableKind(
        "micro_speedups",
        "micro_speedups.csv",
        "speedup",
        ("framework", "mode", "operation", "precision", "variant", "batch_size", "speedup", "ci_low", "ci_high"),
        _micro_keys,
    ),
)
TABLE_ORDER = {kind.name: rank for rank, kind in enumerate(TABLES)}


def _read_csv(path: Path) -> pd.DataFrame:
    """A table as written, or a CompareError naming the file when it cannot be parsed."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise CompareError(f"{path}: empty file, not a table (regenerate it, or remove it to leave it out)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise CompareError(f"{path}: not a valid CSV table ({_one_line(exc)})") from None
    except OSError as exc:
        raise CompareError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _numbers(frame: pd.DataFrame, column: str, path: Path) -> pd.Series:
    """A numeric column; a value that is there but is not a number means the file is damaged."""
    if column not in frame:
        return pd.Series(math.nan, index=frame.index, dtype=float)
    values = pd.to_numeric(frame[column], errors="coerce")
    bad = values.isna() & frame[column].notna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        shown = frame[column].iloc[row]
        raise CompareError(f"{path}: column {column!r} holds {shown!r} in data row {row + 1}, not a number")
    return values.astype(float)


def _resolved(frame: pd.DataFrame, low: pd.Series, high: pd.Series) -> pd.Series:
    """Each ratio's own verdict in its run: the table's `resolved` (inference: the paired 95% interval excludes 1);
    a table without it (micro) resolves a ratio whose interval over processes excludes 1."""
    if "resolved" in frame:
        return frame["resolved"].astype(str) == "True"
    scope = _text(frame, "ci_scope")
    return scope.isin([PAIRED, UNPAIRED]) & ((low > 1) | (high < 1))


def _absent_reason(frame: pd.DataFrame, ratio: pd.Series) -> pd.Series:
    """Why a row holds no ratio ("" where it does): a refused ratio's reason, a micro row's missing reason."""
    refused = _text(frame, "refused").map(lambda text: f"refused: {text}" if text else "")
    reason = _text(frame, "reason").map(lambda text: text or "no ratio in the row")
    why = refused.where(refused != "", reason)
    has_ratio = ratio.gt(0) & np.isfinite(ratio)
    return why.where(~has_ratio, "")


def read_table(path: Path, kind: TableKind) -> pd.DataFrame:
    """One ratio table in the comparison's shape: KEY_COLUMNS, SIDE_COLUMNS and `absent` (why a row holds no ratio,
    "" where it does). Raises CompareError naming the file when it is not a table of this kind."""
    frame = _read_csv(path)
    missing = [column for column in kind.required if column not in frame]
    if missing:
        raise CompareError(f"{path}: not a {kind.name} table, no column {', '.join(map(repr, missing))}")
    ratio, low, high = (_numbers(frame, c, path) for c in (kind.estimate, "ci_low", "ci_high"))
    batch = _numbers(frame, "batch_size", path)
    keys = {"operation": "", "variant": "", "model": "", "denominator_mode": ""} | kind.keys(frame)
    out = pd.DataFrame(
        {
            "table": kind.name,
            **keys,
            "precision": _text(frame, "precision"),
            "batch_size": batch.round().astype("Int64"),
            "ratio": ratio,
            "ci_low": low,
            "ci_high": high,
            "ci_scope": _text(frame, "ci_scope"),
            "se_log": _numbers(frame, "se_log", path),
            "df": _df(frame, path),
            "resolved": _resolved(frame, low, high),
            "absent": _absent_reason(frame, ratio),
        },
        index=frame.index,
    )[[*KEY_COLUMNS, *SIDE_COLUMNS, "absent"]]
    duplicated = out.duplicated(KEY_COLUMNS, keep=False)
    if duplicated.any():
        raise CompareError(f"{path}: two rows for one ratio ({label(out[duplicated].iloc[0])})")
    return out


def _df(frame: pd.DataFrame, path: Path) -> pd.Series:
    """The interval's degrees of freedom; a paired interval in a table from before the `df` column has pairs - 1."""
    df = _numbers(frame, "df", path)
    pairs = _numbers(frame, "pairs", path)
    paired = _text(frame, "ci_scope") == PAIRED
    derived = (pairs - 1).where(paired & (pairs >= 2))
    return df.where(df.notna(), derived)


# --------------------------------------------------------------------------------------------------------------------
# One run


@dataclass(frozen=True)
class Run:
    """One results directory: its ratios (`read_table`, every table it has), which tables it has, and its cells'
    results (for their provenance)."""

    path: Path
    ratios: pd.DataFrame
    tables: tuple[str, ...]
    cells: list[dict[str, Any]]


def _read_cell(path: Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            result = json.load(handle)
    except json.JSONDecodeError as exc:
        raise CompareError(f"{path}: not valid JSON ({_one_line(exc)})") from None
    except UnicodeDecodeError:
        raise CompareError(f"{path}: not valid JSON (not UTF-8 text)") from None
    except OSError as exc:
        raise CompareError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not isinstance(result, dict) or not isinstance(result.get("provenance"), dict):
        raise CompareError(f"{path}: not a cell result (no `provenance` object)")
    return result


def load_run(directory: str | os.PathLike) -> Run:
    """A results directory as the comparison reads it. Raises CompareError when it is not one (no ratio table under
    tables/) or when a table or cell file in it cannot be read, naming the file."""
    path = Path(directory)
    if not path.is_dir():
        raise CompareError(f"{path}: no such directory")
    kinds = [kind for kind in TABLES if (path / "tables" / kind.filename).is_file()]
    if not kinds:
        names = ", ".join(f"tables/{kind.filename}" for kind in TABLES)
        raise CompareError(f"{path} is not a results directory: it has none of {names}")
    frames = [read_table(path / "tables" / kind.filename, kind) for kind in kinds]
    cells = [_read_cell(cell) for cell in sorted((path / "cells").rglob("*.json"))]
    return Run(path, pd.concat(frames, ignore_index=True), tuple(kind.name for kind in kinds), cells)


# --------------------------------------------------------------------------------------------------------------------
# The change of one ratio


@dataclass(frozen=True)
class LogEstimate:
    """One run's ratio on the log scale with its standard error and degrees of freedom, or why it has none."""

    log: float
    se: float | None
    df: float | None
    why_not: str | None = None


def finite(value: Any) -> bool:
    """Whether a value is a finite number: not None, NaN or infinite (shared with compare_report)."""
    return value is not None and not pd.isna(value) and math.isfinite(float(value))


def _t_quantile(df: float, probability: float) -> float:
    from scipy import special

    return float(special.stdtrit(df, probability))


def side_estimate(
    ratio: float,
    ci_low: float | None,
    ci_high: float | None,
    se_log: float | None,
    df: float | None,
    ci_scope: str | None,
    run: str,
) -> LogEstimate:
    """A side of a change: its recorded se_log and df; else the standard error its 95% t interval implies,
    (log high - log low) / (2 t_{0.975, df}), where its df is known; else none, with the reason (`run` names it)."""
    log = math.log(ratio)
    if ci_scope == WITHIN:
        why = f"{run}'s interval is a bootstrap within one process per cell: no standard error over processes"
        return LogEstimate(log, None, None, why)
    if not finite(df) or float(df) <= 0:
        return LogEstimate(log, None, None, f"{run}'s interval ({ci_scope or 'of unknown kind'}) records no df")
    if finite(se_log) and float(se_log) >= 0:
        return LogEstimate(log, float(se_log), float(df))
    if finite(ci_low) and finite(ci_high) and 0 < float(ci_low) <= float(ci_high):
        half = (math.log(float(ci_high)) - math.log(float(ci_low))) / 2.0
        return LogEstimate(log, half / _t_quantile(float(df), 0.5 + LEVEL / 2.0), float(df))
    return LogEstimate(log, None, None, f"{run}'s row has degrees of freedom but neither se_log nor an interval")


@dataclass(frozen=True)
class Change:
    """B's ratio over A's with its 95% interval (NaN, and `why_not` says why, when a side has no standard error)."""

    estimate: float
    low: float
    high: float
    se_log: float
    df: float
    p_value: float
    why_not: str | None = None

    @property
    def has_interval(self) -> bool:
        return self.why_not is None

    @property
    def resolved(self) -> bool:
        return self.has_interval and (self.low > 1.0 or self.high < 1.0)


def change_between(a: LogEstimate, b: LogEstimate) -> Change:
    """The change B/A: exp(log b - log a), with the Welch t interval of the difference of two independent logs
    (se = sqrt(se_a^2 + se_b^2), Welch-Satterthwaite df)."""
    estimate = math.exp(b.log - a.log)
    nan = math.nan
    why_not = a.why_not or b.why_not
    if why_not is not None or a.se is None or b.se is None or a.df is None or b.df is None:
        return Change(estimate, nan, nan, nan, nan, nan, why_not or "no standard error")
    difference = verdicts.difference(b.log, b.se, b.df, a.log, a.se, a.df, level=LEVEL)
    se = math.sqrt(a.se**2 + b.se**2)
    df = _welch_df(a, b)
    return Change(estimate, difference.low, difference.high, se, df, difference.p)


def _welch_df(a: LogEstimate, b: LogEstimate) -> float:
    """Welch-Satterthwaite's degrees of freedom of the difference (inf when neither side varies)."""
    assert a.se is not None and b.se is not None and a.df is not None and b.df is not None
    denominator = (a.se**4 / a.df if a.se else 0.0) + (b.se**4 / b.df if b.se else 0.0)
    return (a.se**2 + b.se**2) ** 2 / denominator if denominator else math.inf


def tolerance_log(tolerance: float) -> float:
    """The tolerance as a bound on |log change|: ±5% reads as a change between 1/1.05 and 1.05."""
    return math.log1p(tolerance)


def equivalent(change: Change, tolerance: float) -> bool:
    """Whether two one-sided tests at 5% show the change within ±tolerance (its 90% interval inside the band)."""
    if not change.has_interval or tolerance <= 0:
        return False
    margin = tolerance_log(tolerance)
    return verdicts.tost(math.log(change.estimate), change.se_log, change.df, 0.0, margin).equivalent


def _side(ratio: float, resolved: bool) -> int:
    """Where a run puts a ratio: +1 resolved above 1, -1 resolved below, 0 not resolved."""
    if not resolved:
        return 0
    return 1 if ratio > 1.0 else -1


def verdict(change: Change, side_a: int, side_b: int, tolerance: float) -> str:
    """The row's verdict (the module's docstring): FLIPPED, NO_INTERVAL, CHANGED or SAME."""
    if side_a and side_b and side_a != side_b:
        return FLIPPED
    if not change.has_interval:
        return NO_INTERVAL
    beyond = abs(math.log(change.estimate)) > tolerance_log(tolerance) + BOUNDARY
    if change.resolved and beyond:
        return CHANGED
    return SAME


# --------------------------------------------------------------------------------------------------------------------
# The comparison


def label(row: Mapping[str, Any]) -> str:
    """How a ratio is named in print and in the plot: "small_cnn fp32 bs1: jax/jit over torch/eager"."""
    subject = f"{row['operation']} {row['variant']}" if row["table"] == "micro_speedups" else row["model"]
    numerator = side_text(row["numerator"], row["numerator_mode"])
    denominator = side_text(row["denominator"], row["denominator_mode"])
    return f"{subject} {row['precision']} bs{row['batch_size']}: {numerator} over {denominator}"


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
    positions = [_side(row[f"ratio_{s}"], bool(row[f"resolved_{s}"])) for s in ("a", "b")]
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
