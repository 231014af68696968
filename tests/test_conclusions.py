"""Generated conclusions: sentences counted from the data with their intervals; limitations from what the study
lacked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fwbench.analysis import conclusions as cc
from fwbench.analysis.published import COLUMNS as PUBLISHED_COLUMNS
from tests.test_published import _epochs
from tests.test_published import _ratio as _published_ratio


def _ratio(model, batch, ratio, lo, hi, numerator="jax"):
    """A speedups row (tests/test_published.py's) with no deviation between its cells."""
    return _published_ratio(model, batch, ratio, lo, hi, numerator) | {"deviation_differs": False}


RATIOS = pd.DataFrame(
    [
        _ratio("resnet50", 1, 1.5, 1.2, 1.8),
        _ratio("resnet50", 32, 0.5, 0.4, 0.6),
        _ratio("vit_b_16", 1, 1.3, 1.1, 1.5),
        _ratio("vit_b_16", 32, 0.9, 0.7, 1.2),
    ]
)


def test_median_ci_contains_the_median_and_is_reproducible():
    values = np.array([0.5, 0.9, 1.3, 1.5, 2.0])
    lo, hi = cc.median_ci(values)
    assert lo <= 1.3 <= hi and (lo, hi) == cc.median_ci(values)
    assert all(np.isnan(cc.median_ci(np.array([1.0]))))


def test_inference_sentences_count_resolved_pairs_and_the_batch_pattern():
    (sentence,) = cc.inference_sentences(RATIOS, ["torch", "jax"])
    assert "faster than PyTorch in 2 and slower in 1 of 4 model and batch-size pairs (3 resolved" in sentence
    assert "largest resolved difference is 0.500 [0.400, 0.600] on resnet50 at batch 32" in sentence
    assert "depends on the batch size" in sentence and "at batch 1 faster in 2 and slower in 0 of 2" in sentence
    median = float(np.exp(np.median(np.log(RATIOS["ratio"]))))
    assert f"median JAX/PyTorch throughput ratio is {median:.3g}" in sentence.replace("{,}", ",")


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
    items = cc.limitations(_inference(), None, empty, LEDGER, CONFIG)
    text = "; ".join(items)
    assert "every cell ran on a CPU (AMD EPYC)" in text
    assert "3 processes" in text and "2 degrees of freedom" in text
    assert "49.0" in text and "synthetic" in text and "only fp32" in text
    assert "energy was not measured: no RAPL here" in text and "device memory" not in text
    assert "could not check device to itself" in text
    gpu = cc.limitations(
        _inference(platform="gpu", trials=1, noisy=True, energy_j_per_image=2.0),
        None,
        empty,
        LEDGER.iloc[:0],
        {**CONFIG, "dataset": {"image_size": 224, "source": "huggingface"}},
    )
    text = "; ".join(gpu)
    assert "CPU" not in text and "single process" in text and "1 of 1 inference cells were noisy" in text
    assert "energy" not in text and "px" not in text


@pytest.mark.parametrize("trained", [True, False])
def test_the_section_is_generated_from_its_inputs(trained):
    epochs = _epochs({"torch": (1.0, 1.0), "jax": (2.0, 2.0)}, time_to_target_s={"torch": 2.0, "jax": None})
    agreement = pd.DataFrame([{"rel_diff_loss_after_step": 3e-7, "flagged": False}])
    config = {**CONFIG, "suites": ["inference", "training"] if trained else ["inference"]}
    text = cc.conclusions_section(
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
