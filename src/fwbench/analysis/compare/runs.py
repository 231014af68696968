"""One results directory as `fwbench compare` reads it: the ratios of the three ratio tables a study writes, each
row on one key (`KEY_COLUMNS`), and its cells' results (for their provenance).

The tables are `tables/speedups.csv` (a framework over PyTorch, per model, precision and batch size, in the modes its
row pairs), `tables/mode_gains.csv` (a framework's compiled mode over its eager one) and `tables/micro_speedups.csv`
(a framework over NumPy, per operation, variant and batch size). Each is read into one shape (`read_table`: the key,
each side's ratio, interval, standard error and degrees of freedom, and why a row holds no ratio), so that the
comparison matches rows of any table alike; a table from before modes, or before three frameworks, reads as what it
then held. A file that cannot be read stops the comparison with a CompareError naming it.

It exists apart from the change of a ratio (`fwbench.analysis.compare.change`) and the matching of two runs
(`fwbench.analysis.compare.ratios`) so that a table's format changes here alone.

Pure: pandas and numpy.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fwbench.analysis.compare.run_facts import side_text
from fwbench.study import modes as execution_modes

# Where a ratio's interval comes from (the `ci_scope` words of fwbench.analysis.inference.ratios and micro).
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


class CompareError(ValueError):
    """A run cannot be compared: not a results directory, or a file in it that cannot be read. The message names
    the file; the command line prints it and exits 2."""


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


def label(row: Mapping[str, Any]) -> str:
    """How a ratio is named in print and in the plot: "small_cnn fp32 bs1: jax/jit over torch/eager"."""
    subject = f"{row['operation']} {row['variant']}" if row["table"] == "micro_speedups" else row["model"]
    numerator = side_text(row["numerator"], row["numerator_mode"])
    denominator = side_text(row["denominator"], row["denominator_mode"])
    return f"{subject} {row['precision']} bs{row['batch_size']}: {numerator} over {denominator}"
