"""How this study's speed ratio stands to a published one: the verdicts, their fixed vocabulary (the `verdict`,
`direction` and `ours_vs_published` columns of published.csv), the equivalence margin, and the counts of verdicts
over the matched rows.

Verdicts (`judge`; the `verdict` column's vocabulary, VERDICTS). Only a ratio with a paired t interval over
interleaved rounds (its log-scale standard error and degrees of freedom, speedups.csv's se_log and df) is tested:

- **reproduced**: two one-sided tests at 5% (fwbench.analysis.common.verdicts.tost) show this study's ratio within the
  equivalence margin m of the published one (its 90% interval inside published x [1/(1+m), 1+m]; m is the config's
  `analysis.equivalence_margin`, recorded per row). The only verdict that counts as agreement.
- **different**: this study's 95% interval excludes the published ratio (and equivalence is not shown); which side
  (ours higher or lower) is recorded.
- **inconclusive**: the 95% interval contains the published ratio but is too wide to show equivalence. Failing to
  find a difference is never evidence of sameness.
- **direction only**: no usable interval (a training run, one run each; a within-process interval from one trial;
  trials not interleaved; the cells' throughputs divided): only whether the ratio lies on the same side of 1 as the
  published one, said separately, and never counted as agreement.
- **failed**: a cell failed here, or the ratio was refused (cells on different device models).

The `direction` column says on which side of 1 this study's ratio lies against the published one: from the 95%
interval where there is one (`not resolved` where it contains 1), from the point estimate otherwise. A verdict on a
ratio published on another class of device (a GPU there, a CPU here) says so (`across_classes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from fwbench.analysis.common import verdicts
from fwbench.analysis.inference.ratios import PAIRED, UNPAIRED
from fwbench.analysis.inference.ratios import WITHIN as WITHIN_PROCESS

# Verdicts (the `verdict` column's fixed vocabulary), in the order the text counts them; only REPRODUCED is agreement.
REPRODUCED = "reproduced"
DIFFERENT = "different"
INCONCLUSIVE = "inconclusive"
DIRECTION_ONLY = "direction only"
FAILED = "failed"
VERDICTS = (REPRODUCED, DIFFERENT, INCONCLUSIVE, DIRECTION_ONLY, FAILED)
AGREES = (REPRODUCED,)
# Verdicts drawn from an interval (the paper's table prints it beside them).
TESTED = (REPRODUCED, DIFFERENT, INCONCLUSIVE)
# The `direction` column: this study's ratio on the same side of 1 as the published one, the other side, or (with an
# interval) an interval that contains 1.
SAME, OPPOSITE, UNRESOLVED = "same", "opposite", "not resolved"
# The `ours_vs_published` column of a DIFFERENT row.
HIGHER, LOWER = "higher", "lower"
# analysis.equivalence_margin's default (workflow/schemas/config.schema.yaml).
DEFAULT_MARGIN = 0.1
ALPHA = verdicts.ALPHA
ONE_RUN = "one run"  # the ci_scope of a training ratio: one run per framework
# A matched pair of cells whose modes the speedups table does not pair (it pairs the ratio modes: compiled PyTorch
# where there is one, while the published baseline ran eagerly): its ratio is that of the two cells' throughputs,
# without a paired interval, and judged by its direction alone.
UNPAIRED_SCOPE = "cells' throughputs (the ratio table pairs other modes)"


def finite(value) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def factor(margin: float) -> str:
    """The margin as the factor either way that the text names: 0.1 -> "1.1"."""
    return f"{1.0 + float(margin):.4g}"


@dataclass(frozen=True)
class Judgement:
    """How this study's ratio stands to a published one (`judge`): the verdict (VERDICTS), the direction (SAME,
    OPPOSITE, UNRESOLVED; None without a ratio), which side a DIFFERENT ratio lies on (HIGHER, LOWER), the
    equivalence test's p and the 90% interval it used (NaN without an interval), and the human text."""

    verdict: str
    direction: str | None = None
    ours_vs_published: str | None = None
    tost_p: float = math.nan
    ci90_low: float = math.nan
    ci90_high: float = math.nan
    text: str = "failed here"

    def columns(self) -> dict:
        return {
            "verdict": self.verdict,
            "direction": self.direction,
            "ours_vs_published": self.ours_vs_published,
            "tost_p": self.tost_p,
            "ci90_low": self.ci90_low,
            "ci90_high": self.ci90_high,
            "verdict_text": self.text,
            "agrees": self.verdict in AGREES,
        }


def _no_interval_why(scope: str | None) -> str:
    """Why a ratio has no interval to test (a direction-only verdict's parenthesis)."""
    return {
        ONE_RUN: "one run each",
        WITHIN_PROCESS: "one trial each: a within-process interval only",
        UNPAIRED: "trials not interleaved",
        UNPAIRED_SCOPE: "the cells' throughputs divided",
        PAIRED: "no standard error recorded",
    }.get(scope, "no paired interval")


def _direction_text(direction: str) -> str:
    return {SAME: "same direction", OPPOSITE: "opposite direction", UNRESOLVED: "direction not resolved here"}[
        direction
    ]


def judge(
    published: float,
    ratio: float | None,
    *,
    scope: str | None,
    ci_low: float | None = None,
    ci_high: float | None = None,
    se_log: float | None = None,
    df: float | None = None,
    margin: float = DEFAULT_MARGIN,
    alpha: float = ALPHA,
) -> Judgement:
    """This study's ratio against a published one (the module's docstring defines the verdicts). Only a paired
    interval over interleaved rounds with its log-scale standard error and degrees of freedom is tested: two
    one-sided tests at `alpha` that the log ratio lies within log(1 + margin) of the published one's (reproduced),
    else the (1 - alpha) interval excludes the published ratio (different: ours higher or lower) or contains it
    (inconclusive). Any other ratio is judged by its direction alone and never agrees."""
    if not finite(ratio) or ratio <= 0:
        return Judgement(FAILED)
    if not finite(published) or published <= 0:
        return Judgement(FAILED, text="no positive published ratio")
    published_faster = published > 1
    if scope != PAIRED or not (finite(se_log) and finite(df) and float(df) > 0 and float(se_log) >= 0):
        direction = SAME if (ratio > 1) == published_faster else OPPOSITE
        why = _no_interval_why(scope)
        return Judgement(DIRECTION_ONLY, direction, text=f"direction only, no interval ({why}): {direction} direction")
    log_ratio, se, dof = math.log(ratio), float(se_log), float(df)
    if finite(ci_low) and finite(ci_high):
        low, high = float(ci_low), float(ci_high)
    else:
        low, high = verdicts.interval(log_ratio, se, dof, 1 - alpha)
    test = verdicts.tost(log_ratio, se, dof, math.log(published), math.log1p(margin), alpha)
    ci90 = verdicts.interval(log_ratio, se, dof, 1 - 2 * alpha)
    direction = UNRESOLVED if low <= 1 <= high else SAME if (low > 1) == published_faster else OPPOSITE
    common = {"direction": direction, "tost_p": test.p, "ci90_low": ci90[0], "ci90_high": ci90[1]}
    p = f"TOST p = {test.p:.2g}"
    if test.equivalent:
        return Judgement(REPRODUCED, **common, text=f"reproduced within a factor of {factor(margin)} ({p})")
    if low <= published <= high:
        text = (
            f"inconclusive: the 95% CI contains the published ratio but is too wide to show it within a factor of "
            f"{factor(margin)} ({p})"
        )
        return Judgement(INCONCLUSIVE, **common, text=text)
    side = HIGHER if low > published else LOWER
    text = f"different: ours {side} than published (the 95% CI excludes it); {_direction_text(direction)}"
    return Judgement(DIFFERENT, **common, ours_vs_published=side, text=text)


def across_classes(published_kind: str, ours_kind: str) -> str:
    """The verdict text's note on a ratio compared across device classes ("" within one class)."""
    if str(published_kind).lower() == str(ours_kind).lower():
        return ""
    return f"across device classes ({str(published_kind).upper()} there, {str(ours_kind).upper()} here)"


def margin_of(rows: pd.DataFrame) -> float:
    """The equivalence margin the rows were judged at (DEFAULT_MARGIN for rows that record none)."""
    recorded = pd.to_numeric(rows.get("margin", pd.Series(dtype=float)), errors="coerce").dropna()
    return float(recorded.iloc[0]) if len(recorded) else DEFAULT_MARGIN


def verdict_counts(rows: pd.DataFrame) -> dict[str, int]:
    """How many matched rows fall under each verdict (VERDICTS, in order; a value outside them under itself). Only
    REPRODUCED counts as agreement: a direction-only row is counted under DIRECTION_ONLY whatever its direction."""
    counts = dict.fromkeys(VERDICTS, 0)
    for value in rows["verdict"].astype(str):
        counts[value] = counts.get(value, 0) + 1
    return counts


def agreeing(rows: pd.DataFrame) -> pd.Series:
    """Which rows agree with their published figure: the reproduced ones, and no other (whatever `agrees` says in a
    table read back)."""
    return rows["verdict"].astype(str) == REPRODUCED
