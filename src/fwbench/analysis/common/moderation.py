"""Launch-to-launch variances moderated across a table's ratios (empirical Bayes; Smyth 2004, limma's eBayes).

A ratio's interval is over its launches (fwbench.analysis.inference.ratios.ratio_interval): with the default 3 launches,
its variance has 2 degrees of freedom and its t quantile is 4.30, so even a ratio whose launches agree to 2% gets an
interval of ±5% or more, and one whose three launches happened to agree closely gets one far too narrow. Every ratio
of a table is measured the same way on the same machine, so their launch variances say something about each other:
each is taken as a draw from one scaled inverse-chi-squared prior (d0 degrees of freedom around s0²), estimated from
all of them by the method of moments on their logs, and each ratio's variance is replaced by its posterior mean

    s̃² = (d0 s0² + d s²) / (d0 + d)   with   d0 + d   degrees of freedom.

The data decide how much is pooled: variances as spread as chance alone would make them give d0 = ∞ (one pooled
variance, with the table's total degrees of freedom); variances more spread than that give a small d0 and leave
each ratio near its own. The moderated t has an exact t distribution under the prior (Smyth 2004, Theorem 2). But
the prior is estimated from some 20 ratios, and where launch effects differ between ratios more than the prior's
shape allows, plain shrinkage pulls the noisiest ratios' variances down and their intervals cover less (simulated,
20 ratios of 3 launches with launch effects spread by e^±0.5 or in two clusters of 1% and 8%: 93.4-94.0% overall,
84-88% for the noisiest fifth). So a ratio's variance is the posterior mean or its own sample variance, whichever
is larger: moderation lends a ratio whose launches happened to agree the table's noise and the degrees of freedom
that come with it, and never lends a noisy ratio the table's quiet. In the same simulations every case covers at
least 94.9% overall and 89-91% for the noisiest fifth, at nearly the plain method's width (tests/test_moderation.py
checks both). Fewer than MIN_RATIOS paired ratios: nothing is moderated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from fwbench.analysis.common import verdicts

LAUNCH_VARIANCES = ("moderated", "own")  # analysis.launch_variance
DEFAULT_LAUNCH_VARIANCE = "moderated"
MIN_RATIOS = 6  # below this many variances the prior cannot be estimated: each ratio keeps its own
METHOD = "launch variance moderated across the table's {n} paired ratios (empirical Bayes, d0 = {d0})"


def launch_variance_setting(analysis: Mapping[str, Any] | None) -> str:
    """The launch variance the config's `analysis` names (moderated when it names none)."""
    return str((analysis or {}).get("launch_variance") or DEFAULT_LAUNCH_VARIANCE)


@dataclass(frozen=True)
class Prior:
    """The prior of the launch variances: d0 degrees of freedom (math.inf: one common variance) around s0sq."""

    d0: float
    s0sq: float
    ratios: int
    total_df: float

    def posterior(self, variance: float, df: float) -> tuple[float, float]:
        """(moderated variance, its degrees of freedom) of one ratio with sample `variance` on `df` df: the
        posterior mean, but never below the ratio's own variance (see the module's note), on d0 + df degrees of
        freedom, never more than the table's total (an infinite d0 pools every ratio, no more)."""
        if math.isinf(self.d0):
            return max(self.s0sq, variance), self.total_df
        moderated = (self.d0 * self.s0sq + df * variance) / (self.d0 + df)
        return max(moderated, variance), min(self.d0 + df, self.total_df)

    def label(self) -> str:
        return METHOD.format(n=self.ratios, d0="inf" if math.isinf(self.d0) else f"{self.d0:.1f}")


def trigamma_inverse(value: float) -> float:
    """x with trigamma(x) = value (value > 0): limma's Newton iteration, from x = 0.5 + 1/value."""
    if value > 1e7:
        return 1.0 / math.sqrt(value)
    if value < 1e-6:
        return 1.0 / value
    x = 0.5 + 1.0 / value
    for _ in range(50):
        tri = float(special.polygamma(1, x))
        step = tri * (1.0 - tri / value) / float(special.polygamma(2, x))
        x += step
        if -step / x < 1e-8:
            break
    return x


def estimate_prior(variances: Sequence[float], dfs: Sequence[float]) -> Prior | None:
    """The prior (d0, s0²) from sample variances on their degrees of freedom, by Smyth's method of moments on the
    log variances; None with fewer than MIN_RATIOS usable ones (finite, positive, df >= 1)."""
    s2, d = np.asarray(variances, np.float64), np.asarray(dfs, np.float64)
    usable = np.isfinite(s2) & np.isfinite(d) & (d >= 1)
    s2, d = s2[usable], d[usable]
    if s2.size < MIN_RATIOS:
        return None
    positive = s2[s2 > 0]
    floor = 1e-6 * float(np.median(positive)) if positive.size else 1e-12
    s2 = np.maximum(s2, floor)  # two launches that agreed to the last digit: not a zero variance
    e = np.log(s2) - special.digamma(d / 2) + np.log(d / 2)
    e_mean = float(e.mean())
    spread = float(((e - e_mean) ** 2).sum() / (e.size - 1) - special.polygamma(1, d / 2).mean())
    total = float(d.sum())
    if spread <= 0:
        return Prior(math.inf, math.exp(e_mean), int(s2.size), total)
    d0 = 2.0 * trigamma_inverse(spread)
    s0sq = math.exp(e_mean + float(special.digamma(d0 / 2)) - math.log(d0 / 2))
    return Prior(d0, s0sq, int(s2.size), total)


def moderate(frame, paired_scope: str):
    """A ratio table (fwbench.analysis.inference.ratios: ratio, ci_low, ci_high, ci_scope, pairs, se_log, df,
    p_value, resolved, method) with the paired ratios' intervals recomputed from moderated launch variances; other rows,
    and a table with fewer than MIN_RATIOS paired ratios, unchanged. `df_own` keeps each ratio's own degrees of freedom
    and `ci_low_own`/`ci_high_own` its own interval, so the moderation is visible beside what it replaced."""
    frame = frame.copy()
    for column in ("ci_low_own", "ci_high_own", "df_own"):
        frame[column] = frame.get(column, np.nan)
    rows = frame.index[
        (frame["ci_scope"] == paired_scope)
        & np.isfinite(frame["se_log"].astype(float))
        & np.isfinite(frame["df"].astype(float))
        & (frame["pairs"].astype(float) >= 2)
    ]
    pairs = frame.loc[rows, "pairs"].astype(float)
    prior = estimate_prior(frame.loc[rows, "se_log"].astype(float) ** 2 * pairs, frame.loc[rows, "df"].astype(float))
    if prior is None:
        return frame
    # Computed row by row, written column by column: a pandas write per row and column took 90% of the time of
    # the ratio table (`speedups`), 2 ms a row.
    before = frame.loc[rows, ["pairs", "ratio", "se_log", "df", "ci_low", "ci_high", "method"]]
    moderated = []
    for row in before.to_dict("records"):
        n, log_ratio = float(row["pairs"]), math.log(float(row["ratio"]))
        variance, df = prior.posterior(float(row["se_log"]) ** 2 * n, float(row["df"]))
        se = math.sqrt(variance / n)
        low, high = verdicts.interval(log_ratio, se, df)
        moderated.append((low, high, se, df, verdicts.p_value(log_ratio, se, df), bool(low > 1 or high < 1)))
    frame.loc[rows, ["ci_low_own", "ci_high_own", "df_own"]] = before[["ci_low", "ci_high", "df"]].to_numpy()
    columns = ("ci_low", "ci_high", "se_log", "df", "p_value", "resolved")
    for column, values in zip(columns, zip(*moderated, strict=True), strict=True):
        frame.loc[rows, column] = list(values)
    frame.loc[rows, "method"] = [f"{method}; {prior.label()}" for method in before["method"]]
    return frame
