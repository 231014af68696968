"""The paper's abstract and the study's summary (fwbench.analysis.paper.abstract, report/templates/): per framework
pair which is faster on which kind of model and by how much, the largest difference with its interval and its reason
from the op profile, what ran and how, the machine and the arithmetic; within 150 words for the studies fwbench runs,
in display names and short sentences; and the README's summary says the same findings in the same words."""

from __future__ import annotations

import dataclasses
import json
import re

import pandas as pd
import pytest

from fwbench.analysis.common.latex import escape
from fwbench.analysis.common.names import identifiers
from fwbench.analysis.paper.abstract import MAX_WORDS, abstract, fitted, shorter, summary, words
from fwbench.analysis.paper.headline import headline
from fwbench.analysis.paper.templates import render
from tests.conftest import benchmark_script

FRAMEWORKS = ["torch", "jax", "tensorflow"]
MODELS = ("resnet50", "vit_b_16", "small_cnn", "mobilenet_v3_small", "efficientnet_b0")
# The CPU study archived at f607aa1 (docs/runs/2026-11-28-default-zen3-f607aa1), its speedups.csv to four figures:
# model, batch, framework, PyTorch's mode, ratio, its own 95% interval, its simultaneous interval.
ARCHIVED = [
    ("efficientnet_b0", 1, "jax", "eager", 1.1099, 1.0486, 1.1747, 1.0122, 1.2170),
    ("efficientnet_b0", 1, "tensorflow", "eager", 0.8814, 0.8132, 0.9554, 0.7734, 1.0045),
    ("efficientnet_b0", 32, "jax", "eager", 0.5042, 0.4700, 0.5410, 0.4498, 0.5651),
    ("efficientnet_b0", 32, "tensorflow", "eager", 0.5138, 0.4652, 0.5674, 0.4373, 0.6036),
    ("mobilenet_v3_small", 1, "jax", "compile", 1.1107, 1.0501, 1.1747, 1.0142, 1.2163),
    ("mobilenet_v3_small", 1, "tensorflow", "compile", 0.7475, 0.7046, 0.7929, 0.6792, 0.8226),
    ("mobilenet_v3_small", 32, "jax", "compile", 0.6253, 0.5928, 0.6596, 0.5734, 0.6819),
    ("mobilenet_v3_small", 32, "tensorflow", "compile", 0.5919, 0.5426, 0.6456, 0.5141, 0.6814),
    ("resnet50", 1, "jax", "eager", 0.4383, 0.4091, 0.4695, 0.3920, 0.4900),
    ("resnet50", 1, "tensorflow", "eager", 0.7718, 0.7311, 0.8148, 0.7069, 0.8427),
    ("resnet50", 32, "jax", "eager", 0.2511, 0.2319, 0.2718, 0.2207, 0.2856),
    ("resnet50", 32, "tensorflow", "eager", 0.2918, 0.2751, 0.3095, 0.2652, 0.3211),
    ("small_cnn", 1, "jax", "compile", 1.4177, 1.3444, 1.4949, 1.3008, 1.5451),
    ("small_cnn", 1, "tensorflow", "compile", 0.6439, 0.5878, 0.7054, 0.5554, 0.7465),
    ("small_cnn", 32, "jax", "compile", 0.5524, 0.5227, 0.5838, 0.5051, 0.6042),
    ("small_cnn", 32, "tensorflow", "compile", 0.8467, 0.8015, 0.8944, 0.7747, 0.9254),
    ("vit_b_16", 1, "jax", "eager", 1.6441, 1.5438, 1.7510, 1.4845, 1.8209),
    ("vit_b_16", 1, "tensorflow", "eager", 1.5558, 1.3779, 1.7567, 1.2776, 1.8945),
    ("vit_b_16", 32, "jax", "eager", 1.0843, 1.0215, 1.1511, 0.9842, 1.1946),
    ("vit_b_16", 32, "tensorflow", "eager", 1.1865, 1.1240, 1.2524, 1.0868, 1.2953),
]
# Its op profile of ResNet-50 at batch 32, ms per profiled step by category.
PROFILED = {
    ("torch", "eager"): {"convolution": 98.97, "normalization": 5.77, "elementwise": 2.41, "other": 9.61},
    ("jax", "jit"): {"convolution": 405.47, "elementwise": 8.59, "data_movement": 31.54},
    ("tensorflow", "xla"): {"convolution": 284.98, "matmul": 33.21, "elementwise": 17.35, "data_movement": 37.62},
}
PRIMARY = {"jax": "jit", "tensorflow": "xla"}


def _ratio(model, batch, ratio, numerator="jax", resolved=True, precision="fp32", compiled=False, interval=None):
    low, high, simultaneous_low, simultaneous_high = interval or (ratio * 0.9, ratio * 1.1, None, None)
    return {
        "model": model,
        "precision": precision,
        "batch_size": batch,
        "ratio": ratio,
        "ci_low": low,
        "ci_high": high,
        "ci_low_simultaneous": simultaneous_low,
        "ci_high_simultaneous": simultaneous_high,
        "ci_scope": "paired_rounds",
        "pairs": 3,
        "resolved": resolved,
        "resolved_adjusted": resolved,
        "multiplicity": "holm",
        "numerator": numerator,
        "denominator": "torch",
        "numerator_mode": PRIMARY[numerator],
        "denominator_mode": "compile" if compiled else "eager",
        "mixed_modes": not compiled,
        "refused": None,
    }


def _archived_ratios() -> pd.DataFrame:
    return pd.DataFrame(
        [
            _ratio(model, batch, ratio, framework, compiled=mode == "compile", interval=interval)
            for model, batch, framework, mode, ratio, *interval in ARCHIVED
        ]
    )


def _archived_inference() -> pd.DataFrame:
    """The 34 cells: every model in each framework at batch 1 and 32, compiled PyTorch beside eager for the two small
    CNNs; the columns benchmarks/readme_results.py reads."""
    rows = []
    for model in sorted(MODELS):
        variants = [("jax", "jit"), ("tensorflow", "xla"), ("torch", "eager")]
        variants += [("torch", "compile")] if model in ("mobilenet_v3_small", "small_cnn") else []
        for batch in (1, 32):
            rows += [
                {
                    "suite": "inference",
                    "framework": framework,
                    "mode": mode,
                    "model": model,
                    "precision": "fp32",
                    "batch_size": batch,
                    "image_size": 32,
                    "status": "ok",
                    "throughput_img_s": 100.0,
                    "threads": 2,
                    "device": "cpu",
                    "platform": "cpu",
                    "cpu_model": "AMD EPYC",
                    "git_commit": "f607aa1" + "0" * 33,
                }
                for framework, mode in variants
            ]
    return pd.DataFrame(rows)


def _profile(model, batch, framework, mode, times, precision="fp32"):
    return [
        {"model": model, "framework": framework, "mode": mode, "precision": precision, "batch_size": batch}
        | {"category": category, "ms_per_step": ms}
        for category, ms in times.items()
    ]


def _archived_profile() -> pd.DataFrame:
    return pd.DataFrame([row for (f, m), times in PROFILED.items() for row in _profile("resnet50", 32, f, m, times)])


def _inference(cells=34, failed=0, platform="cpu", device="cpu", precisions=("fp32",)):
    rows = [
        {
            "status": "failed" if index < failed else "ok",
            "platform": platform,
            "device": device,
            "cpu_model": "AMD EPYC",
            "threads": 2,
            "model": "resnet50",
            "precision": precisions[index % len(precisions)],
            "batch_size": 1 if index % 2 else 32,
        }
        for index in range(cells)
    ]
    return pd.DataFrame(rows)


def sentences(text: str) -> list[str]:
    return re.split(r"(?<=[.;])\s+(?=[A-Z])", text)


def significant_figures(token: str) -> int:
    digits = token.replace(",", "").replace("{", "").replace("}", "")
    if "." in digits:
        return len(digits.replace(".", "").lstrip("0"))
    return len(digits.lstrip("0").rstrip("0")) or 1


def assert_reads_as_prose(text: str):
    """Within the word limit, sentences of at most 35 words, display names only, numbers to at most three figures."""
    assert words(text) <= MAX_WORDS, (words(text), text)
    for sentence in sentences(text):
        assert words(sentence) <= 35, sentence
    for name in identifiers():
        assert name not in text and escape(name) not in text, name
    for token in re.findall(r"(?<![\w/-])\d[\d,{}]*(?:\.\d+)?", text):
        assert significant_figures(token) <= 3, (token, text)


def test_the_abstract_of_the_archived_study_says_per_pair_and_family_which_is_faster_and_why():
    text = abstract(_archived_ratios(), _archived_inference(), _archived_profile(), FRAMEWORKS)
    jax, jax_largest, tensorflow, tensorflow_largest, method, machine, modes = sentences(text)
    assert jax == (
        "Against PyTorch, JAX was slower on five of eight CNN comparisons and faster on three (0.25--1.4$\\times$, "
        "typically 0.65$\\times$), and faster on both ViT-B/16 comparisons (1.1--1.6$\\times$)."
    )
    # the largest difference with its simultaneous interval, against the PyTorch it stood against, and its reason
    assert jax_largest == (
        "JAX's largest difference, ResNet-50 at batch 32, was 0.25$\\times$ [0.22, 0.29] of eager PyTorch, mostly in "
        "convolution (410 against 99 ms per profiled step)."
    )
    assert tensorflow.startswith("TensorFlow was slower on all eight CNN comparisons (0.29--0.88$\\times$, typically")
    assert "0.29$\\times$ [0.27, 0.32] of eager PyTorch, mostly in convolution (280 against 99" in tensorflow_largest
    assert method == (
        "Each framework ran inference on four CNNs and ViT-B/16 at batch 1 and 32 with identical weights and inputs; "
        "differences count where paired, Holm-adjusted 95\\% intervals over fresh processes exclude 1."
    )
    assert machine == "All 34 cells ran in FP32 on an AMD EPYC CPU (2 threads per process)."
    assert modes == "PyTorch was compiled for MobileNetV3-Small and the small CNN, eager otherwise."
    assert_reads_as_prose(text)


def test_four_models_two_pairs_and_two_precisions_stay_within_150_words():
    """The abstract grows with framework pairs and model families, not with comparisons: 32 ratios read as two
    sentences per pair."""
    models = ("resnet50", "vit_b_16", "mobilenet_v3_small", "efficientnet_b0")
    ratios = pd.DataFrame(
        [
            _ratio(model, batch, base * (1.3 if batch == 1 else 0.8), framework, resolved=model != "efficientnet_b0")
            | {"precision": precision}
            for framework in ("jax", "tensorflow")
            for precision in ("fp32", "bf16")
            for model, base in zip(models, (0.3, 1.7, 1.2, 0.95), strict=True)
            for batch in (1, 32)
        ]
    )
    inference = _inference(cells=48, failed=3, precisions=("fp32", "bf16"))
    text = abstract(ratios, inference, None, FRAMEWORKS)
    assert_reads_as_prose(text)
    assert "JAX was slower on six of 12 CNN comparisons, faster on two and unresolved on four" in text
    assert "JAX's largest difference, ResNet-50 at batch 32 in FP32, was 0.24$\\times$" in text
    assert "Of 48 cells, 3 failed; the others ran in BF16 and FP32 on an AMD EPYC CPU" in text


def _three_ways(family):
    """A family's verdicts at their longest: faster, slower and unresolved comparisons all at once."""
    n = family.comparisons
    unresolved = 1 if n < 6 else 2
    faster = max(1, (n - unresolved) // 2)
    return dataclasses.replace(family, faster=faster, slower=n - unresolved - faster, unresolved=unresolved)


def test_the_default_studys_longest_findings_are_fitted_within_150_words():
    """The default study measured on 2026-11-29 came to 157 words and its paper check stopped the README's first
    command. Its shape at its longest: every family with faster, slower and unresolved comparisons, failed cells, the
    op profile's reasons and a PyTorch compiled for some models. In full that is over the limit; fitted, the reasons
    go first, then the families' spreads, and the verdicts and the largest differences stay."""
    study = headline(_archived_ratios(), _archived_inference(), _archived_profile(), FRAMEWORKS)
    assert fitted(study) is study, "a study within the limit is said in full"
    longest = dataclasses.replace(
        study,
        failed=3,
        pairs=tuple(dataclasses.replace(p, families=tuple(map(_three_ways, p.families))) for p in study.pairs),
    )
    assert words(render("abstract.tex.j2", {"study": longest})) > MAX_WORDS
    text = render("abstract.tex.j2", {"study": fitted(longest)})
    assert_reads_as_prose(text)
    assert "per profiled step" not in text and "typically" not in text
    assert "JAX was slower on three of eight CNN comparisons, faster on three and unresolved on two, and faster" in text
    assert "JAX's largest difference, ResNet-50 at batch 32, was 0.25$\\times$ [0.22, 0.29] of eager PyTorch." in text
    assert "Of 34 cells, 3 failed" in text
    without_reasons = next(s for s in shorter(longest) if s.pairs[0].largest.reason is None)
    assert without_reasons.spreads, "the reasons are left out before the spreads"
    markdown = render("summary.md.j2", {"study": fitted(longest), "measured": None})
    assert "per profiled step" not in markdown and "typically" not in markdown, "the README says what the paper says"


def test_a_gpu_study_names_its_gpu_and_a_failed_cell_is_counted():
    ratios = pd.DataFrame([_ratio("resnet50", 128, 1.9)])
    inference = _inference(cells=4, failed=1, platform="cuda", device="NVIDIA H100 80GB HBM3")
    text = abstract(ratios, inference, None, ["torch", "jax"])
    assert "Of 4 cells, 1 failed; the others ran in FP32 on one NVIDIA H100 80GB HBM3 GPU." in text
    assert "JAX was faster on the ResNet-50 comparison (1.9$\\times$)" in text


def test_a_study_of_one_framework_says_what_it_measured():
    text = abstract(pd.DataFrame(), _inference(cells=2), None, ["jax"])
    assert text == (
        "We measured the inference throughput of JAX on ResNet-50 at batch 1 and 32; the study has no ratio to PyTorch "
        "to report. Both cells ran in FP32 on an AMD EPYC CPU (2 threads per process)."
    )


def test_nothing_resolved_is_said_as_such():
    ratios = pd.DataFrame([_ratio("resnet50", 1, 1.02, resolved=False), _ratio("resnet50", 32, 0.97, resolved=False)])
    text = abstract(ratios, _inference(cells=4), None, ["torch", "jax"])
    assert "JAX showed no resolved difference on either ResNet-50 comparison (0.97--1.02$\\times$)." in text
    assert "largest" not in text


def test_ratios_between_cells_of_different_arithmetic_say_so():
    """Precision default on a GPU: PyTorch's convolutions in TF32 and its matmuls in true FP32, JAX both in TF32 (the
    first GPU study, on an H200): the abstract says the ratios measure the arithmetic too; alike, it says nothing."""
    ratios = pd.DataFrame([_ratio("vit_b_16", 128, 3.27, precision="default", compiled=True)])
    inference = _inference(cells=3, platform="cuda", device="NVIDIA H200").assign(
        precision="default",
        framework=["torch", "torch", "jax"],
        tf32_scope=["convolutions", "convolutions", "matmuls and convolutions"],
    )
    text = abstract(ratios, inference, None, ["torch", "jax"])
    assert (
        "In each framework's default float32, TF32 computed the convolutions in PyTorch and the matmuls and "
        "convolutions in JAX, so those ratios measure the arithmetic as well as the frameworks." in text
    )
    assert_reads_as_prose(text)
    alike = inference.assign(tf32_scope="none", precision="fp32")
    assert "TF32" not in abstract(ratios.assign(precision="fp32"), alike, None, ["torch", "jax"])


def test_names_from_the_study_are_escaped_for_latex():
    inference = _archived_inference().assign(cpu_model="ACME_9 & Co")
    text = abstract(_archived_ratios(), inference, None, FRAMEWORKS)
    assert "an ACME\\_9 \\& Co CPU" in text


def _markdown(tex: str) -> str:
    return tex.replace("$\\times$", "×").replace("--", "–").replace("\\%", "%")


def _readme_script():
    return benchmark_script("readme_results")


def test_the_readme_summary_says_the_abstracts_findings_in_the_same_words(tmp_path):
    tables = tmp_path / "results" / "tables"
    tables.mkdir(parents=True)
    _archived_ratios().to_csv(tables / "speedups.csv", index=False)
    _archived_inference().to_csv(tables / "inference.csv", index=False)
    _archived_profile().to_csv(tables / "op_profile.csv", index=False)
    (tables / "study_time.json").write_text(json.dumps({"started_at": 1795000000.0, "wall_s": 1169.0}))
    made = _readme_script().blocks(tmp_path / "results")["summary"]
    findings, measured = made.split("\n\n")
    tex = abstract(
        *(pd.read_csv(tables / name) for name in ("speedups.csv", "inference.csv", "op_profile.csv")), FRAMEWORKS
    )
    assert findings == _markdown(tex)
    number = r"\d+(?:\.\d+)?"
    assert re.findall(number, findings) == re.findall(number, tex), "the same numbers in the same order"
    assert measured == (
        "Measured 2026-11-18 at commit `f607aa1`; study wall time 19 min 29 s from the first job to the last table "
        "(no PDF built)."
    )
    # and the front page's form, without the provenance, is the same paragraph
    assert summary(_archived_ratios(), _archived_inference(), _archived_profile(), FRAMEWORKS) == findings


@pytest.mark.parametrize("frameworks", [["torch", "jax"], ["torch", "tensorflow"]])
def test_a_study_of_two_frameworks_names_only_them(frameworks):
    ratios = _archived_ratios()
    ratios = ratios[ratios["numerator"].isin(frameworks)]
    inference = _archived_inference()
    text = abstract(ratios, inference[inference["framework"].isin(frameworks)], _archived_profile(), frameworks)
    other = {"jax": "JAX", "tensorflow": "TensorFlow"}[({"jax", "tensorflow"} - set(frameworks)).pop()]
    assert other not in text
    assert_reads_as_prose(text)
