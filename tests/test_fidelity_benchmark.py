"""benchmarks/fidelity.py's verdict on the harness against a user's own loop: each ratio's interval over rounds
against the 3% target (docs/harness-performance.md quotes it)."""

from __future__ import annotations

import math

import pytest

from tests.conftest import benchmark_script


@pytest.fixture(scope="module")
def fidelity():
    return benchmark_script("fidelity")


@pytest.mark.parametrize(
    ("ratios", "verdict"),
    [
        ([0.98, 1.01, 0.99, 1.0, 1.02, 0.97], "within 3%"),  # the interval inside 0.97-1.03
        ([0.90, 0.92, 0.88, 0.91], "biased"),  # the interval below 1
        ([1.06, 1.08, 1.05, 1.07], "biased"),  # above
        ([0.8, 1.2, 0.9, 1.1], "cannot tell"),  # 1 inside, and so is more than 3% on either side
        ([0.96, 0.99, 0.97, 0.98, 0.99, 1.0], "biased"),  # below 1, and not shown within 3%
        ([0.985, 0.99, 0.988, 0.992, 0.987], "within 3%"),  # below 1 too, but by less than the target
    ],
)
def test_each_interval_says_what_it_shows(fidelity, ratios, verdict):
    mean, low, high, said = fidelity.interval(ratios)
    assert said == verdict, (mean, low, high)
    assert low < mean < high and mean == pytest.approx(math.exp(sum(map(math.log, ratios)) / len(ratios)))


def test_one_round_tells_nothing(fidelity):
    mean, low, high, said = fidelity.interval([0.9])
    assert mean == pytest.approx(0.9) and math.isnan(low) and math.isnan(high) and said == "cannot tell"
