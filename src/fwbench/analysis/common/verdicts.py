"""Verdicts from estimates on the log scale: the tests behind every "resolved", "reproduced" and "depends on".

A ratio's interval is a Student-t interval on the log of the ratio (fwbench.trackers.stats): its estimate, standard
error and degrees of freedom are enough to test it at any level. Three kinds of claim are drawn from them here, one
definition each, so that every table, macro and sentence says the same thing:

- **Different from 1** (a framework is faster or slower): a two-sided t test. Many such tests feed one sentence ("faster
  in k, slower in m"), so their p-values are adjusted within a family (Holm: family-wise error; Benjamini-Hochberg:
  false discovery rate), and the most extreme ratio is quoted with a simultaneous interval (Bonferroni), against the
  winner's curse.
- **Equivalent to a published figure** (reproduced): two one-sided tests (TOST) that the log ratio lies within a
  stated margin of the published one; failing to find a difference is never evidence of sameness.
- **A difference between two ratios** (the direction depends on the batch size): a Welch t test on the difference of
  their logs, never a difference in significance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

ALPHA = 0.05
MULTIPLICITY_METHODS = ("holm", "bh", "none")
DEFAULT_MULTIPLICITY = "holm"  # analysis.multiplicity's default (workflow/schemas/config.schema.yaml)
# The verdicts of a family of tests (`adjust_verdicts`, one row per ratio): `family` (one suite and framework pair,
# e.g. "inference jax/torch"; the compiled-over-eager gains one family per framework; the micro suite one per
# framework and mode against NumPy), `multiplicity` (analysis.multiplicity: holm, bh or none), `family_size` (the
# family's tests: its paired ratios), `p_adjusted` and `resolved_adjusted` (adjusted p < 0.05: what bold type, counts
# and "the largest difference" use; `resolved` stays the ratio's own 95% interval's verdict), and the simultaneous
# (Bonferroni, 1 - 0.05 / family_size) interval a selected ratio is quoted with.
VERDICT_COLUMNS = [
    "family",
    "multiplicity",
    "family_size",
    "p_adjusted",
    "resolved_adjusted",
    "ci_low_simultaneous",
    "ci_high_simultaneous",
]


def _t_cdf(x: float, df: float) -> float:
    from scipy import special

    return float(special.stdtr(df, x))


def _t_quantile(df: float, probability: float) -> float:
    from scipy import special

    return float(special.stdtrit(df, probability))


def _usable(se: float | None, df: float | None) -> bool:
    return se is not None and df is not None and math.isfinite(se) and math.isfinite(df) and se >= 0 and df > 0


def p_value(log_estimate: float, se: float | None, df: float | None) -> float:
    """Two-sided p-value of the hypothesis log ratio = 0 (ratio 1); NaN without a t interval behind it."""
    if not _usable(se, df) or not math.isfinite(log_estimate):
        return math.nan
    if se == 0:
        return 0.0 if log_estimate != 0 else 1.0
    return min(1.0, 2.0 * _t_cdf(-abs(log_estimate) / se, df))


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error); NaN entries stay NaN and are not counted."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    index = np.flatnonzero(np.isfinite(p))
    m = index.size
    if m == 0:
        return out
    order = index[np.argsort(p[index], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


def benjamini_hochberg(pvalues: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (false discovery rate); NaN entries stay NaN and are not counted."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    index = np.flatnonzero(np.isfinite(p))
    m = index.size
    if m == 0:
        return out
    order = index[np.argsort(p[index], kind="stable")]
    scaled = np.minimum(1.0, p[order] * m / np.arange(1, m + 1))
    out[order] = np.minimum.accumulate(scaled[::-1])[::-1]
    return out


def adjust(pvalues: Sequence[float], method: str) -> np.ndarray:
    """Adjusted p-values of one family by `method` (holm, bh, or none: the p-values as they are)."""
    if method == "holm":
        return holm(pvalues)
    if method == "bh":
        return benjamini_hochberg(pvalues)
    if method == "none":
        return np.asarray(pvalues, dtype=np.float64)
    raise ValueError(f"unknown multiplicity method {method!r}, expected one of {MULTIPLICITY_METHODS}")


def interval(log_estimate: float, se: float, df: float, level: float = 1 - ALPHA) -> tuple[float, float]:
    """The two-sided t interval of the ratio at `level`, exponentiated."""
    half = _t_quantile(df, 0.5 + level / 2.0) * se
    return math.exp(log_estimate - half), math.exp(log_estimate + half)


def simultaneous_interval(
    log_estimate: float, se: float, df: float, family_size: int, alpha: float = ALPHA
) -> tuple[float, float]:
    """A Bonferroni interval (level 1 - alpha / family_size): with the family's others it covers every true ratio
    at once with probability >= 1 - alpha, so it stays honest for the one picked as the most extreme."""
    return interval(log_estimate, se, df, 1.0 - alpha / max(1, family_size))


@dataclass(frozen=True)
class Equivalence:
    """Two one-sided tests that a log ratio lies within `margin_log` of `center_log`: `p` is the larger of the two
    one-sided p-values; equivalent when p < alpha, i.e. when the (1 - 2 alpha) interval lies inside the margin."""

    p: float
    equivalent: bool


def tost(
    log_estimate: float, se: float | None, df: float | None, center_log: float, margin_log: float, alpha: float = ALPHA
) -> Equivalence:
    if not _usable(se, df) or not math.isfinite(log_estimate):
        return Equivalence(math.nan, False)
    distance_low = log_estimate - (center_log - margin_log)
    distance_high = (center_log + margin_log) - log_estimate
    if se == 0:
        inside = distance_low > 0 and distance_high > 0
        return Equivalence(0.0 if inside else 1.0, inside)
    p_low = 1.0 - _t_cdf(distance_low / se, df)  # H0: log ratio <= center - margin
    p_high = 1.0 - _t_cdf(distance_high / se, df)  # H0: log ratio >= center + margin
    p = max(p_low, p_high)
    return Equivalence(p, p < alpha)


@dataclass(frozen=True)
class Difference:
    """The ratio of two ratios (a / b) from independent estimates, with a Welch t interval and p-value."""

    estimate: float
    low: float
    high: float
    p: float


def difference(
    log_a: float, se_a: float, df_a: float, log_b: float, se_b: float, df_b: float, level: float = 1 - ALPHA
) -> Difference:
    """Whether two log ratios differ (e.g. one framework pair at two batch sizes, measured in separate groups): the
    difference of the logs with the Welch-Satterthwaite degrees of freedom."""
    diff = log_a - log_b
    variance = se_a**2 + se_b**2
    if variance == 0:
        return Difference(math.exp(diff), math.exp(diff), math.exp(diff), 0.0 if diff else 1.0)
    df = variance**2 / ((se_a**4 / df_a if se_a else 0.0) + (se_b**4 / df_b if se_b else 0.0))
    se = math.sqrt(variance)
    low, high = interval(diff, se, df, level)
    return Difference(math.exp(diff), low, high, p_value(diff, se, df))


def multiplicity_setting(analysis: Mapping[str, Any] | None) -> str:
    """The multiplicity adjustment the config's `analysis` names (holm when it names none)."""
    return str((analysis or {}).get("multiplicity") or DEFAULT_MULTIPLICITY)


def adjust_verdicts(
    frame: pd.DataFrame, families: list[str], multiplicity: str = DEFAULT_MULTIPLICITY, estimate: str = "ratio"
) -> pd.DataFrame:
    """`frame` (rows with the ratio in column `estimate`, and `p_value`, `se_log`, `df`) with VERDICT_COLUMNS: each
    row's `family`, the family's tests (the rows with a p-value: paired ratios) adjusted together by `multiplicity`
    (`adjust`), `resolved_adjusted` where the adjusted p-value is below 0.05, and the simultaneous interval of every
    tested row
    (Bonferroni over the family's tests; its own 95% interval with `multiplicity` none). Rows without a test (a
    within-process or unpaired interval, a refused ratio) get NaN and are never resolved."""
    if multiplicity not in MULTIPLICITY_METHODS:
        raise ValueError(f"unknown multiplicity {multiplicity!r}, expected one of {MULTIPLICITY_METHODS}")
    family = np.asarray(families, dtype=object)
    pvalues = pd.to_numeric(frame["p_value"], errors="coerce").to_numpy(dtype=float)
    logs = np.log(pd.to_numeric(frame[estimate], errors="coerce").to_numpy(dtype=float))
    se = pd.to_numeric(frame["se_log"], errors="coerce").to_numpy(dtype=float)
    df = pd.to_numeric(frame["df"], errors="coerce").to_numpy(dtype=float)
    adjusted, low, high = (np.full(len(frame), math.nan) for _ in range(3))
    size = np.zeros(len(frame), dtype=int)
    for name in dict.fromkeys(family):
        rows = np.flatnonzero(family == name)
        tested = rows[np.isfinite(pvalues[rows])]
        adjusted[rows] = adjust(pvalues[rows], multiplicity)
        size[rows] = len(tested)
        width = 1 if multiplicity == "none" else len(tested)
        for index in tested:
            low[index], high[index] = simultaneous_interval(logs[index], se[index], df[index], width)
    return frame.assign(
        family=family,
        multiplicity=multiplicity,
        family_size=size,
        p_adjusted=adjusted,
        resolved_adjusted=adjusted < ALPHA,
        ci_low_simultaneous=low,
        ci_high_simultaneous=high,
    )
