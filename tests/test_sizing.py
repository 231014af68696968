"""How many launches a study needs for a ratio interval of a given half-width (fwbench.study.sizing), checked
against the t quantiles, a simulation of the study's paired interval, and the first GPU run's spread."""

from __future__ import annotations

import io
import json
import math
import tarfile

import numpy as np
import pytest
from scipy import stats

from fwbench.study.sizing import FLOOR, launches_for_half_width, pooled_cv, ratio_half_width
from tests.conftest import REPO

H200_SMOKE = REPO / "docs" / "runs" / "2026-11-27-gpu-smoke-h200" / "study.tar.xz"


def test_the_half_width_is_t_times_the_paired_spread_over_root_n():
    for n in (2, 3, 5, 10):
        expected = stats.t.ppf(0.975, n - 1) * 0.02 * math.sqrt(2) / math.sqrt(n)
        assert ratio_half_width(0.02, n) == pytest.approx(expected)
    assert ratio_half_width(0.02, 1) == math.inf


def test_a_one_and_a_half_percent_spread_needs_five_launches_for_three_percent():
    """The issue's figure: about 1.5% between launches calls for 4 to 7 launches for ±3%. Five here (4 give 3.4%,
    5 give 2.6%); read as the spread of the per-launch ratio itself (1.5% / sqrt(2) per framework), four."""
    assert launches_for_half_width(0.015, 0.03) == 5
    assert ratio_half_width(0.015, 4) > 0.03 >= ratio_half_width(0.015, 5)
    assert launches_for_half_width(0.015 / math.sqrt(2), 0.03) == 4
    assert 4 <= launches_for_half_width(0.015) <= 7


def test_never_fewer_than_the_floor_and_more_for_wider_spreads():
    assert launches_for_half_width(0.0005) == FLOOR == 3
    assert launches_for_half_width(0.0005, floor=2) == 2
    assert [launches_for_half_width(cv) for cv in (0.01, 0.02, 0.03)] == sorted(
        launches_for_half_width(cv) for cv in (0.01, 0.02, 0.03)
    )
    assert launches_for_half_width(0.03, 0.03) > launches_for_half_width(0.02, 0.03)
    with pytest.raises(ValueError, match="more than 100 launches"):
        launches_for_half_width(0.5, 0.01)


def test_the_median_half_width_of_simulated_studies_meets_the_target():
    """Paired launches of two frameworks, each with a 1.5% spread: over the sized count the median of the study's
    own intervals' half-widths (Student-t on the per-launch log ratios) is within the target, and at every count the
    formula's half-width is at least the simulated median's (conservative: the sample spread's median is below the
    true one; one launch fewer, 4, is on the target's edge, 3.0%)."""
    rng = np.random.default_rng(0)
    cv, target = 0.015, 0.03
    n = launches_for_half_width(cv, target)

    def median_half_width(launches):
        logs = rng.normal(0.0, cv, (4000, launches)) - rng.normal(0.0, cv, (4000, launches))
        return float(np.median(stats.t.ppf(0.975, launches - 1) * logs.std(axis=1, ddof=1) / math.sqrt(launches)))

    assert median_half_width(n) <= target
    for launches in (3, 4, 5, 8):
        assert median_half_width(launches) <= ratio_half_width(cv, launches)
    assert median_half_width(n - 1) == pytest.approx(target, abs=0.001)


def test_the_spread_is_pooled_on_each_cells_degrees_of_freedom():
    assert pooled_cv([(0.01, 2), (0.02, 3)]) == pytest.approx(math.sqrt((1 * 0.01**2 + 2 * 0.02**2) / 3))
    assert pooled_cv([(0.01, 2), (0.5, 1)]) == pytest.approx(0.01), "one launch carries no spread"
    with pytest.raises(ValueError, match="no cell measured in more than one launch"):
        pooled_cv([(0.01, 1)])


def test_the_first_gpu_runs_cells_pool_to_a_spread_that_calls_for_four_to_seven_launches():
    """The H200 smoke study's nine cells (two launches each, docs/runs/2026-11-27-gpu-smoke-h200): their spreads pool
    to 1.2% between launches (compiled ResNet-50 alone 3.2%, its cold launch against its warm one), which calls for
    4 launches for ±3%; the 2 it ran give about ±15%."""
    spreads = []
    with tarfile.open(H200_SMOKE) as archive:
        for member in archive.getmembers():
            if "/cells/inference/" in member.name and member.name.endswith(".json"):
                metrics = json.load(io.TextIOWrapper(archive.extractfile(member)))["metrics"]
                spreads.append((metrics["trial_spread"]["throughput_cv"], len(metrics["trials"])))
    assert len(spreads) == 9
    cv = pooled_cv(spreads)
    assert cv == pytest.approx(0.0119, abs=0.0005)
    assert launches_for_half_width(cv, 0.03) == 4 and 4 <= launches_for_half_width(cv, 0.03) <= 7
    assert ratio_half_width(cv, 2) == pytest.approx(0.151, abs=0.005)
