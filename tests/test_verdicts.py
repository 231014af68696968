"""fwbench.analysis.common.verdicts: p-values from t intervals, Holm and Benjamini-Hochberg, equivalence,
differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fwbench.analysis.common import verdicts
from fwbench.trackers.stats import geometric_mean_interval, paired_ratio_interval, welch_ratio_interval


def test_an_interval_keeps_what_a_verdict_needs():
    """The t intervals keep their log-scale standard error and df: the 95% interval rebuilt from them is theirs, and
    its p-value is below 0.05 exactly when it excludes 1."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        a, b = np.exp(rng.normal(0, 0.1, 3)), np.exp(rng.normal(0.05, 0.1, 3))
        ci = paired_ratio_interval(a, b)
        assert ci.df == 2
        low, high = verdicts.interval(math.log(ci.estimate), ci.se_log, ci.df)
        assert (low, high) == pytest.approx((ci.low, ci.high), rel=1e-9)
        p = verdicts.p_value(math.log(ci.estimate), ci.se_log, ci.df)
        assert (p < 0.05) == (ci.low > 1 or ci.high < 1)
    welch = welch_ratio_interval([1.0, 1.1, 0.9], [2.0, 2.2, 1.9, 2.1])
    assert welch.se_log > 0 and 2 <= welch.df <= 5
    assert geometric_mean_interval([1.0, 2.0]).df == 1


def test_holm_and_benjamini_hochberg_by_hand():
    p = [0.01, 0.04, 0.03, 0.005, math.nan]
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.04 -> running max
    assert verdicts.holm(p)[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert math.isnan(verdicts.holm(p)[4])
    # BH: sorted 0.005, 0.01, 0.03, 0.04 times 4/1, 4/2, 4/3, 4/4 -> 0.02, 0.02, 0.04, 0.04 -> running min from the top
    assert verdicts.benjamini_hochberg(p)[:4] == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert list(verdicts.adjust([0.2, 0.01], "none")) == [0.2, 0.01]
    with pytest.raises(ValueError, match="unknown multiplicity method"):
        verdicts.adjust([0.1], "sidak")


def test_adjusted_verdicts_keep_the_family_wise_error_rate_on_null_comparisons():
    """24 ratios with no real difference, each from 3 paired rounds: the unadjusted tests resolve at least one in most
    studies (1 - 0.95^24 = 71%), Holm in at most 5% (and BH too, when every null is true)."""
    rng = np.random.default_rng(1)
    studies, family = 2000, 24
    unadjusted = holm_any = bh_any = 0
    for _ in range(studies):
        logs = rng.normal(0.0, 0.05, size=(family, 3))
        estimates, se = logs.mean(axis=1), logs.std(axis=1, ddof=1) / math.sqrt(3)
        p = [verdicts.p_value(e, s, 2) for e, s in zip(estimates, se, strict=True)]
        unadjusted += min(p) < 0.05
        holm_any += verdicts.holm(p).min() < 0.05
        bh_any += verdicts.benjamini_hochberg(p).min() < 0.05
    assert unadjusted / studies > 0.6
    assert holm_any / studies <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / studies)
    assert bh_any / studies <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / studies)


def test_a_wide_interval_is_never_equivalent_and_a_narrow_one_inside_the_margin_is():
    margin = math.log(1.10)
    wide = verdicts.tost(math.log(1.0), se=0.5, df=2, center_log=0.0, margin_log=margin)
    assert not wide.equivalent and wide.p > 0.05
    narrow = verdicts.tost(math.log(1.02), se=0.005, df=4, center_log=0.0, margin_log=margin)
    assert narrow.equivalent
    off = verdicts.tost(math.log(1.3), se=0.005, df=4, center_log=0.0, margin_log=margin)
    assert not off.equivalent
    assert not verdicts.tost(0.0, None, None, 0.0, margin).equivalent, "no interval, no equivalence"
    # equivalent exactly when the 90% interval lies inside the margin
    low, high = verdicts.interval(math.log(1.02), 0.03, 4, level=0.90)
    inside = math.log(low) > -margin and math.log(high) < margin
    assert verdicts.tost(math.log(1.02), 0.03, 4, 0.0, margin).equivalent == inside


def test_a_difference_between_ratios_is_tested_not_read_off_their_significance():
    """One ratio resolved (0.80, tight), the other not (0.90, wide): their difference is not resolved."""
    resolved = (math.log(0.80), 0.02, 2.0)
    unresolved = (math.log(0.90), 0.08, 2.0)
    assert verdicts.p_value(*resolved) < 0.05 and verdicts.p_value(*unresolved) > 0.05
    diff = verdicts.difference(*resolved, *unresolved)
    assert diff.estimate == pytest.approx(0.8 / 0.9) and diff.low < 1 < diff.high and diff.p > 0.05


def test_the_simultaneous_interval_is_wider_than_the_single_one():
    single = verdicts.interval(math.log(0.5), 0.05, 2)
    joint = verdicts.simultaneous_interval(math.log(0.5), 0.05, 2, family_size=20)
    assert joint[0] < single[0] and joint[1] > single[1]
