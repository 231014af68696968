"""The Results' inference findings (fwbench.analysis.inference.findings, report/templates/inference_results.tex.j2):
the values per framework pair against each PyTorch, what is left out of the counts, the highest throughput and the
compiled-over-eager gain, and the section the template renders from them, for a compiled and an eager family, a
one-framework study, a study with nothing resolved, one with a failed cell, one without rows and a GPU study; the
method's modes sentence and the failure summary, also templates'.

Hand-built ratio tables (the verdicts adjusted as the ratio table adjusts them) and tidy rows, no subprocess."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from fwbench.analysis.common.names import identifiers
from fwbench.analysis.common.verdicts import adjust_verdicts
from fwbench.analysis.failures.report import failure_tally, study_cells
from fwbench.analysis.inference import findings, mode_macros
from fwbench.analysis.inference.findings import inference_results
from fwbench.analysis.paper import structure_check
from fwbench.analysis.paper.abstract import words
from fwbench.analysis.paper.failures import failure_summary
from fwbench.analysis.paper.inference import inference_results_section, modes_sentence
from tests.test_conclusions import _ratio as conclusions_ratio
from tests.test_conclusions import _table

MODES = {"torch": "compile", "jax": "jit", "tensorflow": "xla"}


def _ratio(model, batch, ratio, lo, hi, numerator="jax", baseline="compile", scope="paired_rounds", **extra):
    """A speedups row (tests/test_conclusions.py's, a paired t interval [lo, hi] with 2 degrees of freedom) against
    PyTorch in `baseline`, with the modes each side ran in; a `scope` other than paired rounds resolves nothing."""
    row = conclusions_ratio(model, batch, ratio, lo, hi, numerator)
    if scope != "paired_rounds":
        row |= {"ci_scope": scope, "resolved": False, "se_log": math.nan, "df": math.nan, "p_value": math.nan}
    return row | {
        "numerator_mode": MODES[numerator],
        "denominator_mode": baseline,
        "mixed_modes": baseline == "eager",
        "stand_in": "torch: eager for compile" if baseline == "eager" else "",
        "refused": False,
        **extra,
    }


def _cell(framework, mode, model, batch, throughput, status="ok", **extra):
    return {
        "framework": framework,
        "mode": mode,
        "model": model,
        "precision": "fp32",
        "batch_size": batch,
        "status": status,
        "throughput_img_s": throughput if status == "ok" else math.nan,
        "compile_s": 12.0 if (framework, mode) == ("torch", "compile") else math.nan,
    } | extra


# The default study's shape: PyTorch compiled for the small CNN only, so ResNet-50's ratios stand against eager
# PyTorch and are summarised apart.
RATIOS = _table(
    [
        _ratio("small_cnn", 1, 1.4, 1.3, 1.5),
        _ratio("small_cnn", 32, 0.55, 0.5, 0.6),
        _ratio("small_cnn", 1, 0.64, 0.58, 0.7, "tensorflow"),
        _ratio("small_cnn", 32, 0.85, 0.8, 0.9, "tensorflow"),
        _ratio("resnet50", 1, 0.44, 0.4, 0.47, baseline="eager"),
        _ratio("resnet50", 32, 0.25, 0.23, 0.27, baseline="eager"),
        _ratio("resnet50", 1, 0.77, 0.73, 0.81, "tensorflow", baseline="eager"),
        _ratio("resnet50", 32, 0.29, 0.27, 0.31, "tensorflow", baseline="eager"),
    ]
)
FRAME = pd.DataFrame(
    [
        _cell("torch", "eager", "small_cnn", 32, 3000.0),
        _cell("torch", "compile", "small_cnn", 32, 3990.0),
        _cell("jax", "jit", "small_cnn", 32, 2200.0),
        _cell("tensorflow", "xla", "small_cnn", 32, 3380.0),
        _cell("torch", "eager", "resnet50", 32, 30.0),
        _cell("jax", "jit", "resnet50", 32, 7.5),
        _cell("tensorflow", "xla", "resnet50", 32, 8.7),
    ]
)
GAINS = pd.DataFrame(
    [
        {"model": "small_cnn", "batch_size": b, "framework": "torch", "mode": "compile", "baseline_mode": "eager"}
        | _ratio("small_cnn", b, r, lo, hi)
        for b, r, lo, hi in ((1, 1.1, 0.9, 1.3), (32, 1.3, 1.2, 1.4))
    ]
).drop(columns=["numerator", "denominator", "numerator_mode", "denominator_mode", "stand_in", "mixed_modes"])
GAINS = adjust_verdicts(GAINS, ["inference torch compiled/eager"] * len(GAINS))
CONFIG = {"frameworks": ["torch", "jax", "tensorflow"], "fallbacks": {}}


def _sentences(text: str) -> list[int]:
    return [words(sentence) for sentence in structure_check.sentences(text)]


def _no_identifier(text: str) -> list[str]:
    """The configuration identifiers in `text`, read as the PDF shows them (an escaped underscore is one)."""
    return sorted(name for name in identifiers() if name in text.replace("\\_", "_"))


def test_the_findings_count_each_framework_against_compiled_and_apart_against_eager_pytorch():
    results = inference_results(FRAME, RATIOS, GAINS, CONFIG)
    compiled, eager = results.groups
    assert (compiled.baseline, compiled.stand_in, compiled.mixed) == ("compiled PyTorch", False, False)
    assert compiled.models == ("small CNN",) and eager.models == ("ResNet-50",)
    assert not compiled.every_model and eager.baseline == "eager PyTorch" and eager.stand_in and eager.mixed
    jax, tf = compiled.findings
    assert (jax.framework, tf.framework) == ("JAX", "TensorFlow")
    assert (jax.tally.comparisons, jax.tally.faster, jax.tally.slower, jax.tally.unresolvable) == (2, 1, 1, 0)
    assert jax.tally.typical == pytest.approx(math.sqrt(1.4 * 0.55)) and (jax.tally.low, jax.tally.high) == (0.55, 1.4)
    assert (tf.tally.faster, tf.tally.slower) == (0, 2)
    assert [(f.framework, f.tally.slower) for f in eager.findings] == [("JAX", 2), ("TensorFlow", 2)]
    assert results.missing == () and results.stand_ins_left_out == 0 and results.deviating == 0
    assert results.peak == findings.Peak("compiled PyTorch", "small CNN", 32, 3990.0)
    assert results.gain.frameworks == ("PyTorch",) and results.gain.compile_median == 12.0
    assert (results.gain.tally.comparisons, results.gain.tally.faster, results.gain.tally.slower) == (2, 1, 0)


def test_the_section_says_the_findings_in_sentences_a_reader_holds():
    text = inference_results_section(FRAME, RATIOS, GAINS, CONFIG)
    first, gain = text.strip().split("\n\n")
    assert first.startswith(
        "Against compiled PyTorch, on the small CNN, JAX was slower on one of two comparisons and faster on one"
    )
    assert "TensorFlow was slower on both comparisons (0.64--0.85$\\times$)." in first
    assert (
        "Against eager PyTorch, on ResNet-50, where PyTorch has no compiled cell to pair with, JAX was slower" in first
    )
    assert "These ratios set a compiled program against an eager one." in first
    assert "The highest throughput was compiled PyTorch's 4{,}000~images/s, on the small CNN at batch 32." in first
    assert "workarounds" not in first and "stood in" not in first, "no note where nothing was left out"
    assert gain.startswith("Fig.~\\ref{fig:mode-gain} sets compiled against eager PyTorch on the same model")
    assert "Compiling was faster on one of two comparisons, with one unresolved (1.1--1.3$\\times$)." in gain
    assert "took 12~s per process in the median (at most 12~s)" in gain
    assert max(_sentences(text)) <= structure_check.MAX_SENTENCE_WORDS and _no_identifier(text) == []


def test_the_checks_fail_a_section_with_identifiers_or_a_long_sentence(monkeypatch):
    """Negative controls: with the display names undone the identifiers reach the text, and the section's findings
    said in one sentence run over the limit."""
    monkeypatch.setattr(findings, "model_name", str)
    text = inference_results_section(FRAME, RATIOS, GAINS, CONFIG)
    assert _no_identifier(text) == ["resnet50", "small_cnn"]
    joined = text.replace(". ", "; ").replace(".\n", ";\n")
    assert structure_check.long_sentences(joined, "inference_results.tex"), "one long sentence must fail the check"


def test_a_one_framework_study_has_no_ratio_and_says_its_peak():
    alone = FRAME[FRAME["framework"] == "torch"]
    results = inference_results(alone, RATIOS.iloc[0:0], None, {"frameworks": ["torch"], "fallbacks": {}})
    assert results.groups == () and results.missing == () and results.gain.tally.comparisons == 0
    text = inference_results_section(alone, pd.DataFrame(), None, {"frameworks": ["torch"], "fallbacks": {}})
    assert text.startswith("No framework is compared with PyTorch in this study. The highest throughput was")
    assert "No framework ran both eagerly and compiled on the same model and batch size" in text
    # a study without PyTorch has no ratio either, whatever its table holds
    jax = inference_results(FRAME[FRAME["framework"] == "jax"], RATIOS, None, {"frameworks": ["jax"]})
    assert jax.groups == () and jax.peak.variant == "JAX"


def test_a_study_with_nothing_resolved_says_so_per_framework():
    rows = [_ratio(m, b, 1.02, 0.9, 1.15) for m in ("small_cnn", "resnet50") for b in (1, 32)]
    results = inference_results(FRAME, _table(rows), None, {"frameworks": ["torch", "jax"], "fallbacks": {}})
    (group,) = results.groups
    assert group.every_model and (group.findings[0].tally.faster, group.findings[0].tally.slower) == (0, 0)
    text = inference_results_section(FRAME, _table(rows), None, {"frameworks": ["torch", "jax"], "fallbacks": {}})
    assert "Against compiled PyTorch, JAX showed no resolved difference on any of the four comparisons" in text
    # a ratio from a single launch has no paired interval and cannot resolve: said as such
    within = _table([_ratio("small_cnn", b, 1.5, 1.4, 1.6, scope="within_process") for b in (1, 32)])
    said = inference_results_section(FRAME, within, None, {"frameworks": ["torch", "jax"], "fallbacks": {}})
    assert "JAX has no paired interval on both comparisons, so none is resolved" in said


def test_a_failed_cell_leaves_its_framework_without_a_ratio_and_out_of_the_peak():
    failed = pd.concat([FRAME, pd.DataFrame([_cell("jax", "jit", "small_cnn", 1, 9e9, status="failed")])])
    ratios = RATIOS[RATIOS["numerator"] == "jax"]
    results = inference_results(failed, ratios, None, CONFIG)
    assert results.missing == ("TensorFlow",) and results.peak.throughput == 3990.0
    text = inference_results_section(failed, ratios, None, CONFIG)
    assert "TensorFlow has no comparison with PyTorch: none of its cells paired with one." in text


def test_a_study_without_rows_renders():
    empty = pd.DataFrame(columns=list(FRAME.columns))
    results = inference_results(empty, pd.DataFrame(), None, CONFIG)
    assert results.groups == () and results.peak is None and results.gain.compile_median is None
    text = inference_results_section(empty, pd.DataFrame(), None, CONFIG)
    assert text.startswith("No framework is compared with PyTorch in this study.") and "highest" not in text
    assert modes_sentence(empty) == ""


def test_ratios_left_out_of_the_counts_are_said_only_where_there_are_some():
    deviating = RATIOS.assign(deviation_differs=[True] + [False] * (len(RATIOS) - 1))
    results = inference_results(FRAME, deviating, None, CONFIG)
    assert results.deviating == 1 and not results.deviating_counted
    assert results.groups[0].findings[0].tally.comparisons == 1, "the deviating ratio is not counted"
    text = inference_results_section(FRAME, deviating, None, CONFIG)
    assert "One ratio compares cells that ran with different workarounds (marked $^{d}$) and is left out" in text
    counted = {**CONFIG, "fallbacks": {"include_deviating_in_summary": True}}
    assert "the study's configuration counts them here" in inference_results_section(FRAME, deviating, None, counted)
    # a stand-in outside the family against eager PyTorch (JAX eager for JAX jit) is left out and said so
    other = RATIOS.copy()
    other.loc[0, ["numerator_mode", "stand_in"]] = ["eager", "jax: eager for jit"]
    assert inference_results(FRAME, other, None, CONFIG).stand_ins_left_out == 1
    assert "One further ratio, where another mode stood in for a missing cell (marked $^{m}$), is left out" in (
        inference_results_section(FRAME, other, None, CONFIG)
    )


def test_a_gpu_study_names_its_cuda_graph_mode_and_keeps_the_first_compiled_gain():
    gpu = pd.concat(
        [FRAME, pd.DataFrame([_cell("torch", "cudagraphs", "small_cnn", 32, 9000.0)])], ignore_index=True
    ).assign(platform="cuda", device_name="NVIDIA H200")
    graphs = GAINS.assign(mode="cudagraphs", ratio=3.0)
    results = inference_results(gpu, RATIOS, pd.concat([GAINS, graphs], ignore_index=True), CONFIG)
    assert results.gain.tally.comparisons == 2 and results.gain.tally.high == 1.3, "CUDA graphs are not pooled"
    assert results.peak == findings.Peak("CUDA-graph PyTorch", "small CNN", 32, 9000.0)
    assert modes_sentence(gpu) == (
        "In this study, PyTorch ran eagerly for every model and compiled and compiled with CUDA graphs for the small "
        "CNN only; JAX and TensorFlow ran compiled for every model."
    )
    text = inference_results_section(gpu, RATIOS, GAINS, CONFIG)
    assert max(_sentences(text)) <= structure_check.MAX_SENTENCE_WORDS


def test_the_modes_sentence_names_the_models_by_their_display_names(monkeypatch):
    assert mode_macros.mode_uses(FRAME) == (
        mode_macros.ModeUse(
            ("PyTorch",),
            (mode_macros.ModeScope(("eager",), None), mode_macros.ModeScope(("compiled",), ("small CNN",))),
        ),
        mode_macros.ModeUse(("JAX", "TensorFlow"), (mode_macros.ModeScope(("compiled",), None),)),
    )
    assert "compiled for the small CNN only" in modes_sentence(FRAME)
    monkeypatch.setattr(mode_macros, "model_name", str)  # negative control: the identifier comes back
    assert _no_identifier(modes_sentence(FRAME)) == ["small_cnn"]


def test_the_failure_summary_counts_failed_cells_by_kind():
    failed = pd.DataFrame(
        [
            _cell("jax", "jit", "small_cnn", 1, 1.0, status="failed", failure_kind="device_oom"),
            _cell("jax", "jit", "small_cnn", 8, 1.0, status="failed", failure_kind="crash"),
            _cell("torch", "eager", "small_cnn", 1, 1.0, deviations="xla_autotune_off"),
        ]
    )
    counts = failure_tally(study_cells(failed))
    assert counts.failed == 2 and counts.kinds == (("device out of memory", 1), ("crash", 1)) and counts.deviating == 1
    assert failure_summary(failed) == (
        "Over all suites, 2 cells failed (1 device out of memory, 1 crash) and 1 cell ran with a workaround from "
        "the fallback ladder."
    )
    assert failure_summary(failed.iloc[:1]) == (
        "Over all suites, 1 cell failed (1 device out of memory) and no cell needed a workaround."
    )
    assert failure_summary(FRAME) == "No cell failed and none needed a workaround."
