"""Generated conclusions: sentences counted from the data with their intervals; limitations from what the study
lacked."""

from __future__ import annotations

import math

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


def _section(ratios, config=None, inference=None):
    return conclusions_section(
        ratios=ratios,
        inference=_inference() if inference is None else inference,
        epochs=None,
        agreement=None,
        published=pd.DataFrame(columns=PUBLISHED_COLUMNS),
        ledger=LEDGER,
        config=config or CONFIG,
    )


def training_paragraph(epochs, agreement=None, target=None, config=None) -> str:
    """The conclusions' Training paragraph for `epochs` (a study of no inference ratio), as the template says it."""
    config = {**CONFIG, "suites": ["inference", "training"], "training": {"target_top1": target}, **(config or {})}
    text = conclusions_section(
        ratios=pd.DataFrame(),
        inference=_inference(),
        epochs=epochs,
        agreement=agreement,
        published=pd.DataFrame(columns=PUBLISHED_COLUMNS),
        ledger=LEDGER,
        config=config,
    )
    return text.split("\\paragraph{Training}")[1].split("\\paragraph")[0].strip()


def test_a_study_whose_pytorch_cells_all_failed_says_there_is_no_ratio():
    """No PyTorch cell succeeded (e.g. one crash in the worker serving every batch size): the speedups table is
    empty, without even its columns, and the conclusions say there is no ratio, and that the cell failed."""
    config = {**CONFIG, "frameworks": ["torch", "jax", "tensorflow"]}
    text = _section(pd.DataFrame(), config, _inference(status="failed"))
    assert "We measured the inference throughput of PyTorch, JAX and TensorFlow; the study has no ratio" in text
    assert "The one cell failed." in text and "One cell failed (Appendix~\\ref{sec:failures})." in text
    assert "depends on the batch size" not in text


def test_the_inference_paragraph_says_the_abstracts_findings_and_the_batch_size_test():
    """The conclusions restate the abstract's findings (the same template, the same counts), then say whether the
    ratio depends on the batch size from the test of the difference, each direction change named once."""
    text = _section(RATIOS)
    inference = text.split("\\paragraph{Inference}")[1].split("\\paragraph")[0]
    from fwbench.analysis.paper.abstract import abstract

    said = abstract(RATIOS, _inference(), None, ["torch", "jax"])
    assert said.split(". ")[0] in inference, "the abstract's first finding, word for word"
    assert "JAX was slower on one of two ResNet-50 comparisons and faster on one" in inference
    # the largest resolved difference with its simultaneous interval over the family's 4 tests
    strongest = RATIOS.iloc[1]
    low, high = strongest["ci_low_simultaneous"], strongest["ci_high_simultaneous"]
    assert low < 0.4 and high > 0.6
    assert f"ResNet-50 at batch 32, was 0.50$\\times$ [{low:.2f}, {high:.2f}] of PyTorch" in inference
    (effect,) = findings.batch_effects(RATIOS, ["torch", "jax"], "holm")
    assert effect.tested == 2 and effect.sizes == (1, 32)
    assert [s.model for s in effect.shifts if s.reverses] == ["ResNet-50"], "only ResNet-50's ratios resolve both ways"
    assert "JAX's ratio at batch 32 is" in inference and "its ratio at batch 1 on both models" in inference
    assert inference.count("changes direction") == 1 and "changes direction on ResNet-50." in inference


def test_a_single_model_gets_a_range_not_an_interval():
    ratios = _table([_ratio("resnet50", 1, 1.5, 1.2, 1.8), _ratio("resnet50", 32, 0.5, 0.4, 0.6)])
    text = _section(ratios)
    assert "ResNet-50 comparisons and faster on one (0.50--1.5$\\times$)" in text and "typically" not in text


def test_a_difference_in_significance_is_not_a_claim_about_the_batch_size():
    """At batch 1 the ratio is resolved (its own CI excludes 1), at batch 32 it is not: the old rule read a pattern
    off that; the test of the difference between the two log ratios does not resolve it, so nothing is claimed."""
    rows = [_ratio("resnet50", 1, 1.3, 1.05, 1.61), _ratio("resnet50", 32, 1.1, 0.9, 1.35)]
    ratios = _table(rows, "none")
    assert bool(ratios.iloc[0]["resolved_adjusted"]) and not bool(ratios.iloc[1]["resolved_adjusted"])
    (difference,) = findings.batch_differences(ratios, "none")
    assert difference.p_adjusted > 0.05 and difference.difference.low < 1 < difference.difference.high
    (effect,) = findings.batch_effects(ratios, ["torch", "jax"], "none")
    assert effect.shifts == () and effect.only == "ResNet-50"
    text = _section(ratios)
    assert "depends" not in text and "changes direction" not in text
    assert "JAX's ratio on ResNet-50 does not differ resolvedly between batch 1 and 32." in text
    # without a paired interval at two batch sizes nothing is said at all
    assert findings.batch_effects(ratios.iloc[:1], ["torch", "jax"], "none") == []


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
    kinds = {item.kind: item.values for item in items}
    assert kinds["cpu"] == {"names": ["AMD EPYC"]} and kinds["trials"] == {"processes": 3}
    assert kinds["resolution"]["factor"] == 49.0 and "synthetic" in kinds and "precisions" in kinds
    assert kinds["energy"] == {"reasons": ["no RAPL here"]} and "memory" not in kinds
    assert kinds["ledger"] == {"controls": ["device to itself"]}
    text = _section(RATIOS).split("\\paragraph{Limitations}")[1]
    assert "Every cell ran on an AMD EPYC CPU" in text and "three processes" in text
    assert "two degrees of freedom" in text and "49$\\times$ fewer pixels" in text and "synthetic" in text
    assert "Only FP32 was measured" in text and "Energy was not measured: no RAPL here." in text
    assert "Device memory" not in text and "The ledger could not check device to itself." in text
    gpu = limitations(
        _inference(platform="gpu", trials=1, noisy=True, energy_j_per_image=2.0),
        None,
        empty,
        LEDGER.iloc[:0],
        {**CONFIG, "dataset": {"image_size": 224, "source": "huggingface"}},
    )
    assert [item.kind for item in gpu] == ["trials", "precisions", "noisy"]
    assert gpu[2].values == {"cells": 1, "of": 1}


def test_a_limitation_without_a_sentence_is_an_error_naming_the_template(monkeypatch):
    """A kind of limitation the template has no sentence for fails the build, naming the template: never a gap."""
    from fwbench.analysis.paper import conclusions
    from fwbench.analysis.paper.limitations import Limitation
    from fwbench.analysis.paper.templates import TemplateValueError

    monkeypatch.setattr(conclusions, "limitations", lambda *args: [Limitation("sunspots")])
    with pytest.raises(TemplateValueError, match="conclusions.tex.j2"):
        _section(RATIOS)


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
    assert ("agree to 3.0\\ensuremath{\\times 10^{-7}}" in text) is trained
    if trained:
        # a table without modes holds each framework's primary one: JAX's jit against eager PyTorch, said so
        took = "the last epoch took eager PyTorch 1.0~s. JAX took 2.0~s, 0.50$\\times$ eager PyTorch's speed."
        assert took in text
        assert "This sets a compiled program against an eager one, for want of a cell in the ratio mode." in text
        assert "reached by PyTorch in 2.0~s and JAX not within the run" in text


def test_the_conclusions_count_the_published_comparison_as_its_section_does(tmp_path):
    """The conclusions and the published section say the verdicts and the modes through the same macros
    (published_macros.tex.j2): the same sentence in both, from the same rows; a study whose cells ran in another mode
    than the published one says how many rows, in both."""
    from fwbench.analysis.paper.published_section import published_section
    from fwbench.analysis.published.matching import compare
    from tests.test_published import _cell, _published_row, _sources
    from tests.test_published import _ratio as _published_ratio

    sources = _sources(
        tmp_path, [_published_row("resnet50", "pytorch", 1, 500.0), _published_row("resnet50", "jax", 1, 750.0)]
    )
    cells = [_cell("torch", "resnet50", 1, 80.0) | {"mode": "compile"}, _cell("jax", "resnet50", 1, 100.0)]
    speedups = pd.DataFrame([_published_ratio("resnet50", 1, 1.25, 1.2, 1.3, df=2) | {"denominator_mode": "compile"}])
    rows = compare(sources, inference=pd.DataFrame(cells), speedups=speedups, training=None, image_size=32)
    text = conclusions_section(
        ratios=RATIOS,
        inference=_inference(),
        epochs=None,
        agreement=None,
        published=rows,
        ledger=LEDGER,
        config=CONFIG,
    )
    said = text.split("\\paragraph{Against published figures}")[1].split("\\paragraph")[0]
    section = published_section(rows, sources, None)
    counted = "The one published ratio that matches cells of this study differs (ours lower)."
    modes = "This study's cells ran in the same modes, except in one row (marked $^{\\ddagger}$ in the tables)"
    for where in (said, section):
        assert counted in where and modes in where and "It compares ratios across device classes" in where
    assert "Reproduced means equivalent within a factor of 1.1" in said
    assert "No published figure matches" not in said and "No published figure matches" in _section(RATIOS)
