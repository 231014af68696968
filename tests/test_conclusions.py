"""Generated conclusions: sentences counted from the data with their intervals; limitations from what the study
lacked."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fwbench.analysis.common import verdicts
from fwbench.analysis.common.verdicts import adjust_verdicts
from fwbench.analysis.paper import findings
from fwbench.analysis.paper.conclusions import conclusions_section
from fwbench.analysis.paper.limitations import limitations
from fwbench.analysis.published.matching import COLUMNS as PUBLISHED_COLUMNS
from tests.test_published import _epochs

T975 = {2: 4.302652729911275, 4: 2.7764451051977987}


def _ratio(model, batch, ratio, lo, hi, numerator="jax", df=2):
    """A speedups row with a paired t interval [lo, hi] of `df` degrees of freedom (its log-scale standard error and
    p-value as the ratio table records them) and no deviation between its cells."""
    se = math.log(hi / lo) / (2 * T975[df])
    return {
        "model": model,
        "precision": "fp32",
        "batch_size": batch,
        "ratio": ratio,
        "ci_low": lo,
        "ci_high": hi,
        "ci_scope": "paired_rounds",
        "pairs": df + 1,
        "resolved": lo > 1 or hi < 1,
        "se_log": se,
        "df": df,
        "p_value": verdicts.p_value(math.log(ratio), se, df),
        "numerator": numerator,
        "denominator": "torch",
        "deviation_differs": False,
    }


def _table(rows, method="holm"):
    """A speedups table of `rows` with the verdicts of their family (`verdicts.adjust_verdicts`)."""
    frame = pd.DataFrame(rows)
    return adjust_verdicts(frame, [f"inference {n}/torch" for n in frame["numerator"]], method)


RATIOS = _table(
    [
        _ratio("resnet50", 1, 1.5, 1.2, 1.8),
        _ratio("resnet50", 32, 0.5, 0.4, 0.6),
        _ratio("vit_b_16", 1, 1.3, 1.1, 1.5),
        _ratio("vit_b_16", 32, 0.9, 0.7, 1.2),
    ]
)


def test_a_study_whose_pytorch_cells_all_failed_says_there_is_no_ratio():
    """No PyTorch cell succeeded (e.g. one crash in the worker serving every batch size): the speedups table is
    empty, without even its columns, and each framework's sentence says it has no ratio."""
    sentences = findings.inference_sentences(pd.DataFrame(), ["torch", "jax", "tensorflow"])
    assert sentences == [
        "JAX/Flax has no ratio to PyTorch in this study.",
        "TensorFlow/Keras has no ratio to PyTorch in this study.",
    ]


def test_inference_sentences_count_the_adjusted_verdicts_and_quote_the_geometric_mean():
    (sentence,) = findings.inference_sentences(RATIOS, ["torch", "jax"])
    assert (
        "faster than PyTorch in 2 and slower in 1 of 4 model and batch-size pairs (3 resolved by the paired test "
        "after Holm's adjustment within each framework pair)" in sentence
    )
    geomean = math.exp(np.log(RATIOS["ratio"]).mean())
    assert f"geometric mean of the JAX/PyTorch throughput ratios is {geomean:.3g} (95\\% CI [" in sentence
    assert "across 2 models)" in sentence and "bootstrap" not in sentence and "median" not in sentence
    # the largest resolved difference, quoted with its simultaneous interval over the family's 4 tests
    strongest = RATIOS.iloc[1]
    low, high = strongest["ci_low_simultaneous"], strongest["ci_high_simultaneous"]
    assert low < 0.4 and high > 0.6
    assert (
        f"the largest resolved difference is 0.500 [{low:.3f}, {high:.3f}] (a simultaneous 95\\% CI over the 4 tests "
        "of its family) on ResNet-50 at batch 32" in sentence
    )
    # the batch size: a test of the difference of the log ratios, with its own interval
    assert (
        "JAX/Flax's ratio depends on the batch size (a test of the difference of the log ratios, Holm-adjusted over "
        "the models): on ResNet-50 its ratio at batch 32 is 0.333$\\times$ that at batch 1 (95\\% CI [" in sentence
    )
    assert sentence.count("the direction reverses") == 1, "only resnet50's two ratios are resolved both ways"


def test_a_difference_in_significance_is_not_a_claim_about_the_batch_size():
    """At batch 1 the ratio is resolved (its own CI excludes 1), at batch 32 it is not: the old rule read a pattern
    off that; the test of the difference between the two log ratios does not resolve it, so nothing is claimed."""
    rows = [_ratio("resnet50", 1, 1.3, 1.05, 1.61), _ratio("resnet50", 32, 1.1, 0.9, 1.35)]
    ratios = _table(rows, "none")
    assert bool(ratios.iloc[0]["resolved_adjusted"]) and not bool(ratios.iloc[1]["resolved_adjusted"])
    (difference,) = findings.batch_differences(ratios, "none")
    assert difference.p_adjusted > 0.05 and difference.difference.low < 1 < difference.difference.high
    text = findings.batch_sentence(ratios, "JAX/Flax", "none")
    assert "depends" not in text
    assert "JAX/Flax's ratio on ResNet-50 does not differ resolvedly between batch 1 and 32 (a test of the" in text
    # without a paired interval at two batch sizes nothing is said at all
    assert findings.batch_sentence(ratios.iloc[:1], "JAX/Flax", "none") == ""


def test_a_single_model_gets_a_range_not_an_interval():
    ratios = _table([_ratio("resnet50", 1, 1.5, 1.2, 1.8), _ratio("resnet50", 32, 0.5, 0.4, 0.6)])
    (sentence,) = findings.inference_sentences(ratios, ["torch", "jax"])
    assert "is 0.866 (one model: range 0.500--1.50, no interval)" in sentence


def _inference(**overrides):
    row = {
        "status": "ok",
        "platform": "cpu",
        "cpu_model": "AMD EPYC",
        "trials": 3,
        "noisy": False,
        "energy_missing": "no RAPL here",
        "energy_j_per_image": None,
        "device_memory_missing": None,
        "device_peak_bytes": 1.0,
    }
    return pd.DataFrame([row | overrides])


CONFIG = {
    "frameworks": ["torch", "jax"],
    "suites": ["inference"],
    "models": ["resnet50"],
    "precisions": ["fp32"],
    "dataset": {"image_size": 32, "source": "synthetic"},
    "training": {"target_top1": 0.5},
    "fallbacks": {},
}
LEDGER = pd.DataFrame([{"control": "Device to itself", "status": "not measured", "measured": "", "where": ""}])


def test_limitations_come_from_the_results():
    empty = pd.DataFrame(columns=PUBLISHED_COLUMNS)
    items = limitations(_inference(), None, empty, LEDGER, CONFIG)
    text = "; ".join(items)
    assert "every cell ran on a CPU (AMD EPYC)" in text
    assert "3 processes" in text and "2 degrees of freedom" in text
    assert "49.0" in text and "synthetic" in text and "only fp32" in text
    assert "energy was not measured: no RAPL here" in text and "device memory" not in text
    assert "could not check device to itself" in text
    gpu = limitations(
        _inference(platform="gpu", trials=1, noisy=True, energy_j_per_image=2.0),
        None,
        empty,
        LEDGER.iloc[:0],
        {**CONFIG, "dataset": {"image_size": 224, "source": "huggingface"}},
    )
    text = "; ".join(gpu)
    assert "CPU" not in text and "single process" in text and "1 of 1 inference cells had a noisy trial" in text
    assert "energy" not in text and "px" not in text


@pytest.mark.parametrize("trained", [True, False])
def test_the_section_is_generated_from_its_inputs(trained):
    epochs = _epochs({"torch": (1.0, 1.0), "jax": (2.0, 2.0)}, time_to_target_s={"torch": 2.0, "jax": None})
    agreement = pd.DataFrame([{"rel_diff_loss_after_step": 3e-7, "flagged": False}])
    config = {**CONFIG, "suites": ["inference", "training"] if trained else ["inference"]}
    text = conclusions_section(
        ratios=RATIOS,
        inference=_inference(),
        epochs=epochs if trained else None,
        agreement=agreement if trained else None,
        published=pd.DataFrame(columns=PUBLISHED_COLUMNS),
        ledger=LEDGER,
        config=config,
    )
    assert r"\label{sec:conclusions}" in text and "No published figure matches" in text
    assert ("agree to 3.0e-07" in text) is trained
    if trained:
        # a table without modes holds each framework's primary one: JAX's jit against eager PyTorch, said so
        took = "the last epoch took eager PyTorch 1.00~s and JAX/Flax 2.00~s (0.500$\\times$ eager PyTorch's speed; "
        assert took in text
        assert "a compiled program against an eager one, for want of a cell in the ratio mode)" in text
        assert "reached by PyTorch in 2.00~s and JAX/Flax not within the run" in text
