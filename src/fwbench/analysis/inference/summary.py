"""Reading a ratio table back (`ratios.speedups` or `ratios.mode_gains`, or their CSV files): which rows are
refused, cross nodes, set an eager against a compiled program, pair other modes than their column, are paired or
resolved; and the summary of a set of ratios (`geometric_summary`), their geometric mean with an interval over
models.

Every table, figure and macro of the paper reads ratio tables through these selectors, so they live apart from the
code that computes the tables; each one tolerates a table written before its column existed (a CSV round trip
turns booleans into "True"/"False" and None into NaN)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fwbench.analysis.common import verdicts
from fwbench.analysis.common.verdicts import DEFAULT_MULTIPLICITY
from fwbench.analysis.inference.ratios import PAIRED
from fwbench.study.modes import is_compiled


def ratios_for(ratios: pd.DataFrame, framework: str) -> pd.DataFrame:
    """The ratios of one framework against the baseline. A speedups table without a `numerator` column (written
    before there were more than two frameworks) holds JAX's."""
    if "numerator" not in ratios:
        return ratios if framework == "jax" else ratios.iloc[0:0]
    return ratios[ratios["numerator"] == framework]


def _flag(ratios: pd.DataFrame, column: str) -> pd.Series:
    """A boolean column of a speedups table read back from CSV ("True"/"False" or bools), all False when the table
    was written before the column existed."""
    if column not in ratios:
        return pd.Series(False, index=ratios.index)
    return ratios[column].astype(str) == "True"


def refused(ratios: pd.DataFrame) -> pd.Series:
    """Which rows of a speedups table are refused ratios (`speedups`); none in a table from before refusals."""
    if "refused" not in ratios:
        return pd.Series(False, index=ratios.index)
    return ratios["refused"].map(lambda value: isinstance(value, str) and value != "")


def node_differs(ratios: pd.DataFrame) -> pd.Series:
    """Which kept (not refused) ratios compare cells from different nodes of one device model."""
    return _flag(ratios, "node_differs") & ~refused(ratios)


def mixed_modes(ratios: pd.DataFrame) -> pd.Series:
    """Which kept ratios set an eager program against a compiled one (none in a table from before modes)."""
    return _flag(ratios, "mixed_modes") & ~refused(ratios)


def _has_modes(ratios: pd.DataFrame) -> bool:
    return {"numerator", "numerator_mode", "denominator_mode"} <= set(ratios.columns)


def _stands_in(ratios: pd.DataFrame) -> pd.Series:
    if "stand_in" not in ratios:
        return pd.Series(False, index=ratios.index)
    return ratios["stand_in"].map(lambda value: isinstance(value, str) and value != "")


def pairings(ratios: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """Per framework, the (numerator mode, PyTorch mode) its ratio column pairs: the modes of its ratios where both
    sides ran in their ratio modes, or, where a stand-in is all there is (no compiled PyTorch cell in the whole
    study), the pairing most of its ratios have. Empty for a table from before modes."""
    if not _has_modes(ratios) or ratios.empty:
        return {}
    framework = ratios["numerator"]
    pairs = pd.Series(list(zip(ratios["numerator_mode"], ratios["denominator_mode"], strict=True)), ratios.index)
    intended = pairs[~_stands_in(ratios)]
    out = {}
    for name in framework.unique():
        mine = intended[framework[intended.index] == name]
        mine = mine if not mine.empty else pairs[framework == name]
        out[str(name)] = mine.value_counts().index[0]
    return out


def off_pairing(ratios: pd.DataFrame) -> pd.Series:
    """Which ratios pair other modes than their column (`pairings`): a stand-in where the ratio mode's cell is
    missing or failed. Tables mark them and summaries leave them out; none in a table from before modes."""
    columns = pairings(ratios)
    if not columns:
        return pd.Series(False, index=ratios.index)
    framework = ratios["numerator"]
    return pd.Series(
        [
            (num, den) != columns.get(str(f))
            for f, num, den in zip(framework, ratios["numerator_mode"], ratios["denominator_mode"], strict=True)
        ],
        index=ratios.index,
        dtype=bool,
    )


def against_eager_baseline(ratios: pd.DataFrame) -> pd.Series:
    """Which stand-ins pair the framework's own column mode with eager PyTorch where the column pairs compiled
    PyTorch: the model and batch size have no compiled PyTorch cell (a model outside `mode_scope.models`, or a
    compiled cell that failed). These form a family of their own, "against eager PyTorch", summarised apart from the
    column's compiled pairs, never mixed into them nor dropped; none in a table from before modes."""
    columns = pairings(ratios)
    if not columns:
        return pd.Series(False, index=ratios.index)
    modes = zip(ratios["numerator"], ratios["numerator_mode"], ratios["denominator_mode"], strict=True)
    return pd.Series(
        [
            str(f) in columns
            and num == columns[str(f)][0]
            and is_compiled(columns[str(f)][1])
            and not is_compiled(str(den))
            for f, num, den in modes
        ],
        index=ratios.index,
        dtype=bool,
    ) & ~refused(ratios)


def paired(ratios: pd.DataFrame) -> pd.Series:
    """Which ratios have a paired interval over interleaved rounds: the only ones a test can resolve."""
    if "ci_scope" not in ratios:
        return pd.Series(False, index=ratios.index)
    return ratios["ci_scope"] == PAIRED


def resolved_adjusted(ratios: pd.DataFrame) -> pd.Series:
    """The adjusted verdict of each ratio (`adjust_verdicts`): resolved after the family's adjustment, from a paired
    interval. A table from before the adjusted column has only each ratio's own verdict, which stands in."""
    column = "resolved_adjusted" if "resolved_adjusted" in ratios else "resolved"
    return _flag(ratios, column) & paired(ratios)


def multiplicity_of(ratios: pd.DataFrame, default: str = DEFAULT_MULTIPLICITY) -> str:
    """The adjustment a ratio table's verdicts were made with (its `multiplicity` column); "none" for a table from
    before the column, whose only verdicts are each ratio's own; `default` (the config's) for a table without rows."""
    if ratios.empty:
        return default
    if "multiplicity" not in ratios or "resolved_adjusted" not in ratios:
        return "none"
    values = ratios["multiplicity"].dropna().astype(str)
    return values.iloc[0] if len(values) else default


def quoted_interval(row: pd.Series) -> tuple[float, float, bool]:
    """The interval a ratio picked from its family (the largest difference, an extreme) is quoted with: its
    simultaneous interval where it has one, else its own 95% interval; the flag says which (True: simultaneous)."""
    low, high = row.get("ci_low_simultaneous"), row.get("ci_high_simultaneous")
    if low is not None and high is not None and pd.notna(low) and pd.notna(high):
        return float(low), float(high), True
    return float(row["ci_low"]), float(row["ci_high"]), False


@dataclass(frozen=True)
class Summary:
    """The summary of a set of ratios: their geometric mean (the mean of the log ratios, exponentiated: inverting
    every ratio inverts it exactly) with an interval that takes the model as the unit.

    `kind` says what `low` and `high` are: "models", a 95% t interval over models (cluster-robust, CR1, on the log
    ratios with the model as the cluster and models - 1 degrees of freedom: ratios of one model at several batch
    sizes are not independent, and the spread between models carries each ratio's own uncertainty too); "range",
    the smallest and largest ratio of a single model, descriptive, no interval; "one", a single ratio and its own
    95% interval; "none", no ratio."""

    estimate: float
    low: float
    high: float
    kind: str
    pairs: int
    models: int
    df: float


def geometric_summary(ratios: pd.DataFrame, cluster: str = "model") -> Summary:
    """The summary (`Summary`) of the finite positive ratios of `ratios` (a speedups or mode-gains table)."""
    nan = math.nan
    finite = ratios[pd.to_numeric(ratios["ratio"], errors="coerce").gt(0)] if len(ratios) else ratios
    if finite.empty:
        return Summary(nan, nan, nan, "none", 0, 0, nan)
    logs = np.log(finite["ratio"].astype(float).to_numpy())
    groups = finite[cluster].astype(str).to_numpy() if cluster in finite else np.arange(len(finite)).astype(str)
    models = len(set(groups))
    mean = float(logs.mean())
    estimate = math.exp(mean)
    if len(logs) == 1:
        row = finite.iloc[0]
        return Summary(estimate, float(row["ci_low"]), float(row["ci_high"]), "one", 1, 1, nan)
    if models < 2:
        return Summary(estimate, float(np.exp(logs.min())), float(np.exp(logs.max())), "range", len(logs), 1, nan)
    residuals = pd.Series(logs - mean).groupby(groups).sum().to_numpy()
    se = math.sqrt(models / (models - 1) * float((residuals**2).sum())) / len(logs)
    low, high = verdicts.interval(mean, se, models - 1)
    return Summary(estimate, low, high, "models", len(logs), models, float(models - 1))
