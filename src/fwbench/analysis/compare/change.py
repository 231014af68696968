"""The change of one ratio between two runs and its verdict: the arithmetic of `fwbench compare`, on one ratio.

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

It exists apart from reading the runs (`fwbench.analysis.compare.runs`) and matching them
(`fwbench.analysis.compare.ratios`) so that the arithmetic of a verdict can be read, and tested, on its own.

Pure: pandas and scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fwbench.analysis.common import verdicts
from fwbench.analysis.compare.runs import WITHIN

DEFAULT_TOLERANCE = 0.05
# A change exactly at the tolerance (2.1 over 2.0 at 5%) is within it, whatever the last bit of its floating point.
BOUNDARY = 1e-12
LEVEL = 0.95
SAME, CHANGED, FLIPPED, NO_INTERVAL = "same", "changed", "flipped", "no interval"
MISSING_IN_A, MISSING_IN_B = "missing in A", "missing in B"
VERDICTS = (SAME, CHANGED, FLIPPED, NO_INTERVAL, MISSING_IN_A, MISSING_IN_B)


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


def position(ratio: float, resolved: bool) -> int:
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
