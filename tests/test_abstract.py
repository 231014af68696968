"""The paper's abstract (fwbench.analysis.paper.abstract): per framework pair, which is faster on which model and
batch size and by how much, the interval of the largest difference each way with its reason from the op profile,
the machine, and never more than 200 words."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.paper.abstract import MAX_WORDS, abstract, words

MODELS = ("resnet50", "vit_b_16", "small_cnn", "mobilenet_v3_small", "efficientnet_b0")


def _ratio(model, batch, ratio, numerator="jax", resolved=True, precision="fp32", compiled=False):
    return {
        "model": model,
        "precision": precision,
        "batch_size": batch,
        "ratio": ratio,
        "ci_low": ratio * 0.9,
        "ci_high": ratio * 1.1,
        "ci_scope": "paired_rounds",
        "resolved": resolved,
        "resolved_adjusted": resolved,
        "multiplicity": "holm",
        "numerator": numerator,
        "denominator": "torch",
        "numerator_mode": {"jax": "jit", "tensorflow": "xla"}[numerator],
        "denominator_mode": "compile" if compiled else "eager",
        "refused": None,
    }


def _inference(cells=34, failed=0, platform="cpu", device="cpu"):
    rows = [
        {
            "status": "failed" if index < failed else "ok",
            "platform": platform,
            "device": device,
            "cpu_model": "AMD EPYC",
            "threads": 2,
            "precision": "fp32",
            "batch_size": 1 if index % 2 else 32,
        }
        for index in range(cells)
    ]
    return pd.DataFrame(rows)


def _profile(model, batch, framework, mode, times):
    return [
        {"model": model, "framework": framework, "mode": mode, "precision": "fp32", "batch_size": batch}
        | {"category": category, "ms_per_step": ms}
        for category, ms in times.items()
    ]


def test_each_pair_says_where_each_framework_is_faster_and_by_how_much_with_the_reason():
    ratios = pd.DataFrame(
        [
            _ratio("small_cnn", 1, 1.70, compiled=True),
            _ratio("vit_b_16", 1, 1.50),
            _ratio("resnet50", 32, 0.26),
            _ratio("resnet50", 1, 0.48),
            _ratio("vit_b_16", 32, 1.02, resolved=False),
            _ratio("resnet50", 32, 0.30, numerator="tensorflow"),
        ]
    )
    profile = pd.DataFrame(
        _profile("resnet50", 32, "jax", "jit", {"convolution": 191.0, "elementwise": 10.0})
        + _profile("resnet50", 32, "torch", "eager", {"convolution": 29.0, "elementwise": 8.0})
    )
    text = abstract(ratios, _inference(), profile, ["torch", "jax", "tensorflow"])
    assert text.startswith("We compare PyTorch, JAX/Flax and TensorFlow/Keras on identical models")
    assert "on AMD EPYC (CPU only, 2 threads per cell): 34 inference cells (none failed) in fp32" in text
    assert "PyTorch compiled for small\\_cnn and eager for the other models" in text
    jax = text.split("JAX/Flax against PyTorch: ")[1].split(". ")[0]
    assert jax.startswith("faster on small\\_cnn at batch 1 (1.70$\\times$ [1.53, 1.87]) and vit\\_b\\_16 at batch 1")
    assert "slower on resnet50 at batch 32 (0.260$\\times$ [0.234, 0.286]; convolution 191 against 29.0~ms per" in jax
    assert jax.endswith("no resolved difference in 1 comparison")
    assert "TensorFlow/Keras against PyTorch: slower on resnet50 at batch 32 (0.300$\\times$" in text
    assert text.endswith("after Holm's adjustment within each framework pair.")
    assert words(text) <= MAX_WORDS


def test_the_smallest_differences_are_counted_not_named_to_stay_within_200_words():
    ratios = pd.DataFrame(
        [
            _ratio(model, batch, ratio, numerator=numerator, precision=precision)
            for numerator in ("jax", "tensorflow")
            for precision in ("fp32", "default", "bf16")
            for model, ratio in zip(MODELS, (0.3, 0.5, 1.6, 1.3, 0.8), strict=True)
            for batch in (1, 32, 128)
        ]
    )
    text = abstract(ratios, _inference(cells=270), None, ["torch", "jax", "tensorflow"])
    assert words(text) <= MAX_WORDS
    assert " more" in text, "what is not named is counted"
    assert "at batch 1 in fp32 (1.60$\\times$" in text or "in fp32 (1.60$\\times$" in text, "the largest is named"


def test_a_gpu_study_names_its_gpu_and_a_failed_cell_is_counted():
    ratios = pd.DataFrame([_ratio("resnet50", 128, 1.9)])
    text = abstract(
        ratios, _inference(cells=4, failed=1, platform="cuda", device="NVIDIA H100 80GB HBM3"), None, ["torch", "jax"]
    )
    assert "on an NVIDIA H100 80GB HBM3: 4 inference cells (1 failed)" in text


def test_a_study_without_pytorch_says_it_has_no_ratio():
    text = abstract(pd.DataFrame(), _inference(cells=2), None, ["jax"])
    assert text.endswith("The study has no ratio to PyTorch to report.")


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
        "TF32 computed the convolutions in PyTorch and the matmuls and convolutions in JAX/Flax (default; the rest "
        "in true FP32), so these ratios measure the arithmetic as well as the frameworks." in text
    )
    assert words(text) <= MAX_WORDS
    alike = inference.assign(tf32_scope="none", precision="fp32")
    assert "TF32" not in abstract(ratios.assign(precision="fp32"), alike, None, ["torch", "jax"])
