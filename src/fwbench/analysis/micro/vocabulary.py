"""The micro suite's shared words: its baseline (NumPy), the timing variants, where a speedup's interval comes from
and what it shows, and how each series is named; with the checks and integer columns of the suite's tables.

Cells are keyed by framework and execution mode (fwbench.study.modes: a config may measure PyTorch both eagerly and
compiled in this suite), and every table, series, macro and label of the suite keeps the two apart; a mode is named
wherever its framework has another one in the study (`mode_names`). The reading, the speedups, the crossovers, the
reference and the report all write and read tables of the same conventions, so those live here, below them all.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import FRAMEWORK_LABELS, ordered_variants
from fwbench.analysis.common.partners import cell_mode, variant_names

NUMPY = "numpy"
VARIANTS = ("resident", "transfer")
LABELS = {**FRAMEWORK_LABELS, NUMPY: "NumPy"}
VARIANT_LABELS = {"resident": "resident", "transfer": "with copy"}
CONFIDENCE = 0.95
# Where an interval's variation comes from (the words of the inference suite's ci_scope,
# fwbench.analysis.inference.ratios): NumPy's and the framework's trials paired by round; trials of both, not paired;
# one process's samples only.
PAIRED, UNPAIRED, WITHIN = "paired_rounds", "unpaired_trials", "within_process"
BETWEEN_PROCESSES = (PAIRED, UNPAIRED)
# A speedup's verdict from its 95% interval; only an interval over processes resolves anything.
FASTER, SLOWER, NOT_RESOLVED, WITHIN_ONLY = "faster", "slower", "not resolved", "within one process"


def label(framework: str) -> str:
    return LABELS.get(framework, framework)


def series_order(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Distinct (framework, mode) pairs, NumPy first, then the study's frameworks in the paper's order, each
    framework's modes eager first."""
    pairs = {(str(f), str(m)) for f, m in pairs}
    numpy = sorted(p for p in pairs if p[0] == NUMPY)
    return numpy + ordered_variants(pairs - set(numpy))


def mode_names(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(framework, mode) -> its name in the section, tables and figure: the framework alone where it has one mode in
    the study ("JAX/Flax", "NumPy"), with the mode where it has several ("PyTorch (eager)", "PyTorch (compiled)")."""
    pairs = series_order(pairs)
    names = variant_names(pairs)
    return {(f, m): label(f) if f == NUMPY and names[(f, m)] == f else names[(f, m)] for f, m in pairs}


def row_modes(frame: pd.DataFrame) -> pd.Series:
    """Each row's mode; a table from before modes (no `mode` column) has each framework's primary one."""
    if "mode" in frame:
        return frame["mode"].astype(str)
    return pd.Series([cell_mode({"framework": f}) for f in frame["framework"]], index=frame.index, dtype=object)


def frame_modes(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """The (framework, mode) pairs of a micro table, in `series_order`."""
    return series_order(zip(frame["framework"], row_modes(frame), strict=True))


def is_measured(value: Any) -> bool:
    return value is not None and not pd.isna(value) and math.isfinite(float(value))


def is_measured_text(value: Any) -> bool:
    return value is not None and not (not isinstance(value, str) and pd.isna(value)) and str(value) != ""


def one_value(values: pd.Series) -> str | None:
    found = sorted({str(v) for v in values if is_measured_text(v)})
    return " / ".join(found) if found else None


INTEGER_COLUMNS = {
    "batch_size",
    "n_samples",
    "trials",
    "noisy_trials",
    "numpy_trials",
    "pairs",
    "dim",
    "hidden",
    "classes",
    "flops_per_row",
    "threads",
    *(
        f"{prefix}{name}_batch"
        for prefix in ("", "published_")
        for name in ("crossover", "below", "smallest", "largest")
    ),
}


def integers(frame: pd.DataFrame) -> pd.DataFrame:
    """Counts and batch sizes as nullable integers: a failed cell's missing value must not turn a column of counts
    into floats (2000.0) in the CSV."""
    return frame.astype({column: "Int64" for column in INTEGER_COLUMNS & set(frame.columns)})
