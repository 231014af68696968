"""Moderated launch variances (fwbench.analysis.common.moderation): the prior's estimate, the posterior, the table it
rewrites, and the coverage of its intervals by simulation (launch effects of unequal size across ratios)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from fwbench.analysis.common import moderation
from fwbench.analysis.inference.ratios import PAIRED, UNPAIRED, speedups

RATIOS, LAUNCHES = 20, 3


def _coverage(sigmas, reps: int, seed: int) -> tuple[float, float, float]:
    """(coverage of all ratios' 95% intervals, coverage of the noisiest fifth, median half-width) over `reps`
    simulated tables of len(sigmas) ratios, each the mean of LAUNCHES launch log ratios with launch effects of sd
    sigma (true log ratio 0)."""
    rng = np.random.default_rng(seed)
    sigmas = np.asarray(sigmas)
    noisy = sigmas >= np.quantile(sigmas, 0.8)
    covered, covered_noisy, halves = [], [], []
    for _ in range(reps):
        launches = rng.normal(0.0, 1.0, (sigmas.size, LAUNCHES)) * sigmas[:, None]
        means, variances = launches.mean(axis=1), launches.var(axis=1, ddof=1)
        prior = moderation.estimate_prior(variances, np.full(sigmas.size, LAUNCHES - 1.0))
        for index in range(sigmas.size):
            variance, df = prior.posterior(variances[index], LAUNCHES - 1.0)
            # Student's t quantile as scipy.stats.t.ppf computes it, without its per-call checks (8 s of the module)
            half = special.stdtrit(df, 0.975) * math.sqrt(variance / LAUNCHES)
            covered.append(abs(means[index]) <= half)
            halves.append(half)
            if noisy[index]:
                covered_noisy.append(abs(means[index]) <= half)
    return float(np.mean(covered)), float(np.mean(covered_noisy)), float(np.median(halves))


@pytest.mark.parametrize(
    "name, sigmas",
    [
        ("equal launch effects", np.full(RATIOS, 0.03)),
        ("spread by e^±0.5", 0.03 * np.exp(np.random.default_rng(7).normal(0.0, 0.5, RATIOS))),
        ("spread by e^±1", 0.03 * np.exp(np.random.default_rng(8).normal(0.0, 1.0, RATIOS))),
        ("two clusters, 1% and 8%", np.r_[np.full(RATIOS // 2, 0.01), np.full(RATIOS // 2, 0.08)]),
    ],
)
def test_coverage_at_least_94_percent_and_narrower_than_each_ratio_alone(name, sigmas):
    covered, _, half = _coverage(sigmas, reps=400, seed=11)
    assert covered >= 0.94, f"{name}: coverage {covered:.3f}"
    own_half = stats.t.ppf(0.975, LAUNCHES - 1) * np.median(sigmas) / math.sqrt(LAUNCHES)
    assert half < own_half, f"{name}: moderated half-width {half:.4f} not below the own interval's {own_half:.4f}"


def test_the_noisiest_ratios_lose_some_coverage_as_documented():
    """The price of borrowing strength: under strongly unequal launch effects the noisiest fifth of the ratios is
    covered less than 95% (the module's note states the figure); with equal effects it is not."""
    _, noisy_equal, _ = _coverage(np.full(RATIOS, 0.03), reps=300, seed=3)
    _, noisy_spread, _ = _coverage(np.r_[np.full(10, 0.01), np.full(10, 0.08)], reps=300, seed=3)
    assert noisy_equal >= 0.94
    assert 0.8 <= noisy_spread < 0.94


def test_prior_recovers_a_common_variance_and_a_known_spread():
    rng = np.random.default_rng(0)
    equal = rng.chisquare(2, 2000) / 2 * 0.04**2
    common = moderation.estimate_prior(equal, np.full(2000, 2.0))
    assert math.isinf(common.d0) or common.d0 > 30  # no spread beyond chance: (nearly) one pooled variance
    assert common.s0sq == pytest.approx(0.04**2, rel=0.1)
    # variances drawn from the model itself: s0² / (chi2_d0 / d0), then chi2_2 / 2 noise around each
    d0, s0sq = 6.0, 0.03**2
    truth = s0sq * d0 / rng.chisquare(d0, 4000)
    sample = truth * rng.chisquare(2, 4000) / 2
    prior = moderation.estimate_prior(sample, np.full(4000, 2.0))
    assert prior.d0 == pytest.approx(d0, rel=0.25)
    assert prior.s0sq == pytest.approx(s0sq, rel=0.15)


def test_trigamma_inverse_inverts():
    for x in (0.05, 0.7, 3.0, 40.0):
        assert moderation.trigamma_inverse(float(special.polygamma(1, x))) == pytest.approx(x, rel=1e-6)


def test_posterior_shrinks_towards_the_prior_and_adds_its_degrees_of_freedom():
    prior = moderation.Prior(d0=4.0, s0sq=1.0, ratios=10, total_df=20.0)
    assert prior.posterior(0.5, 2.0) == pytest.approx(((4 * 1 + 2 * 0.5) / 6, 6.0))
    assert prior.posterior(3.0, 2.0) == pytest.approx((3.0, 6.0))  # never below the ratio's own variance
    pooled = moderation.Prior(d0=math.inf, s0sq=2.0, ratios=10, total_df=20.0)
    assert pooled.posterior(1.0, 2.0) == (2.0, 20.0)
    assert pooled.posterior(9.0, 2.0) == (9.0, 20.0)
    assert moderation.estimate_prior([1.0, 2.0, 3.0], [2, 2, 2]) is None  # too few ratios to estimate a prior


def _table(ses, scope=PAIRED):
    rows = []
    for index, se in enumerate(ses):
        rows.append(
            {
                "model": f"m{index}",
                "ratio": 1.02,
                "ci_low": math.exp(math.log(1.02) - 4.303 * se),
                "ci_high": math.exp(math.log(1.02) + 4.303 * se),
                "ci_scope": scope,
                "pairs": 3,
                "resolved": False,
                "method": "geometric mean of 3 per-launch ratios",
                "se_log": se,
                "df": 2.0,
                "p_value": 0.5,
            }
        )
    return pd.DataFrame(rows)


def test_moderate_rewrites_paired_rows_and_keeps_their_own_interval():
    table = _table([0.004, 0.006, 0.005, 0.007, 0.005, 0.006, 0.004, 0.0055])
    table.loc[7, "ci_scope"] = UNPAIRED
    out = moderation.moderate(table, PAIRED)
    paired = out[out["ci_scope"] == PAIRED]
    assert (paired["df"] > 2).all() and (paired["df_own"] == 2).all()
    assert (paired["ci_low_own"] == table.loc[paired.index, "ci_low"]).all()
    assert ((paired["ci_high"] - paired["ci_low"]) < (paired["ci_high_own"] - paired["ci_low_own"])).all()
    assert paired["resolved"].all()  # 2% with launches agreeing to about half a percent: resolved once moderated
    assert paired["method"].str.contains("moderated across the table's 7 paired ratios").all()
    assert out.loc[7, "ci_low"] == table.loc[7, "ci_low"] and math.isnan(out.loc[7, "df_own"])


def test_moderate_leaves_a_small_table_alone():
    table = _table([0.004, 0.006, 0.005])
    out = moderation.moderate(table, PAIRED)
    assert (out["ci_low"] == table["ci_low"]).all() and out["df_own"].isna().all()


def test_speedups_refuses_an_unknown_launch_variance():
    with pytest.raises(ValueError, match="analysis.launch_variance"):
        speedups([], launch_variance="pooled")
