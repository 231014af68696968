"""Three frameworks in the analysis and the paper: every framework's ratio against PyTorch with its paired interval,
the inference table's columns, the macros, the setup table, the step-0 agreement, the training section and its
table beside the published L4 figures; and two-framework inputs still giving the two-framework outputs.

Hand-built cell results only (the skeleton of tests/test_analysis.py), no subprocess."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pandas as pd
import pytest

from fwbench.analysis.common.latex import stacked_header
from fwbench.analysis.inference.figures import throughput_figure
from fwbench.analysis.inference.findings import inference_results
from fwbench.analysis.inference.macros import macros
from fwbench.analysis.inference.ratios import speedups, write_speedups
from fwbench.analysis.inference.tables import inference_table, latency_table, throughput_table
from fwbench.analysis.inference.tidy import read_tidy, write_tidy
from fwbench.analysis.paper.inference import inference_results_section
from fwbench.analysis.paper.training_section import training_section
from fwbench.analysis.setup.provenance import study_environment
from fwbench.analysis.training.epochs import write_training_tables
from fwbench.analysis.training.figure import training_figure
from fwbench.analysis.training.macros import training_macros
from fwbench.analysis.training.reference import comparison, comparison_float, read_published
from fwbench.analysis.training.reference_findings import reference_values
from fwbench.analysis.training.step0 import step0_agreement
from fwbench.analysis.training.tables import step0_table
from fwbench.io import atomic_write_json
from fwbench.results import load_result
from fwbench.study.config import validate_config
from tests.test_analysis import BASE, failed_in_rounds, measured_in_rounds

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "reference" / "published-l4-training.csv"
THREE = ["torch", "jax", "tensorflow"]
VERSIONS = {
    "torch": {"torch": "2.9.0", "torchvision": "0.24.0", "cuda": None, "cudnn": None},
    "jax": {"jax": "0.7.0", "jaxlib": "0.7.0", "flax": "0.12.0", "cuda": None, "cudnn": None},
    "tensorflow": {"tensorflow": "2.20.0", "keras": "3.11.3", "cuda": None, "cudnn": None},
}
SETTINGS = {
    "torch": {"intra_op_threads": 2, "interop_threads": 2, "tf32_in_effect": False, "dtype": "float32"},
    "jax": {"intra_op_threads": 2, "tf32_in_effect": False, "dtype": "float32", "xla_flags": ""},
    "tensorflow": {
        "intra_op_threads": 2,
        "inter_op_threads": 1,
        "tf32_in_effect": False,
        "memory_growth": True,
        "mode": "tf.function(jit_compile=True) (XLA)",
        "dtype": "float32",
        "bf16_policy": None,
        "xla_flags": "",
    },
}
COMPILE_S = {"torch": None, "jax": 0.2, "tensorflow": 0.3}
# Per-round throughputs: drift moves every framework alike; at batch 1 JAX is 1.5x PyTorch and TensorFlow 0.5x
# (both resolved), at batch 8 JAX's rounds scatter around PyTorch's (not resolved) and TensorFlow's cell failed.
TORCH_RATES = {1: [100.0, 120.0, 90.0], 8: [400.0, 440.0, 380.0]}
FACTORS = {("jax", 1): [1.5, 1.5, 1.5], ("tensorflow", 1): [0.5, 0.5, 0.5], ("jax", 8): [1.3, 0.8, 1.05]}


def _provenance(result, framework, platform="cpu", tf32=False):
    settings = {**SETTINGS[framework], "tf32_in_effect": tf32}
    result["provenance"]["framework"] = {
        "name": framework,
        "versions": VERSIONS[framework],
        "device": {"name": "cpu" if platform == "cpu" else "NVIDIA H100", "platform": platform},
        "settings": settings,
    }


def _inference(framework, batch, model="small_cnn"):
    """An inference cell of group g{batch}, its trials in rounds 1-3, or a crashed cell where FACTORS has none."""
    result = copy.deepcopy(BASE)
    result["cell"] = {
        "suite": "inference",
        "framework": framework,
        "model": model,
        "precision": "fp32",
        "batch_size": batch,
        "image_size": 32,
    }
    result["provenance"]["group"] = {"id": f"g{batch}"}
    if framework != "torch" and (framework, batch) not in FACTORS:
        return failed_in_rounds(result, "crashed: killed by SIGSEGV", "crash", signal="SIGSEGV")
    factors = FACTORS.get((framework, batch), [1.0, 1.0, 1.0])
    rates = [rate * factor for rate, factor in zip(TORCH_RATES[batch], factors, strict=True)]
    missing = {"device_memory": f"{framework} on the CPU has no allocator statistics"}
    measured_in_rounds(result, rates, COMPILE_S[framework], missing=missing)
    _provenance(result, framework)
    return result


def _write(tmp_path, results, prefix="cell"):
    paths = []
    for index, result in enumerate(results):
        path = tmp_path / f"{prefix}{index}.json"
        atomic_write_json(path, result)
        paths.append(path)
    return paths


def _macro(text, name):
    match = re.search(r"\\newcommand\{\\" + name + r"\}\{(.*)\}$", text, flags=re.M)
    assert match, f"{name} not defined"
    return match.group(1)


@pytest.fixture
def three(tmp_path):
    """(paths, tidy frame, ratios) of a three-framework study at batch sizes 1 and 8."""
    results = [_inference(framework, batch) for batch in (1, 8) for framework in THREE]
    paths = _write(tmp_path, results)
    return paths, write_tidy(paths, tmp_path / "inference.csv"), write_speedups(paths, tmp_path / "speedups.csv")


@pytest.fixture
def two(tmp_path):
    results = [_inference(framework, batch) for batch in (1, 8) for framework in ("torch", "jax")]
    paths = _write(tmp_path, results, "two")
    return paths, write_tidy(paths, tmp_path / "two.csv"), write_speedups(paths, tmp_path / "two_speedups.csv")


def test_every_framework_gets_a_paired_ratio_against_pytorch(three):
    paths, _, ratios = three
    rows = [(r.numerator, r.batch_size) for r in ratios.itertuples()]
    assert rows == [("jax", 1), ("tensorflow", 1), ("jax", 8)], "TensorFlow failed at batch 8: no ratio there"
    assert set(ratios["denominator"]) == {"torch"} and set(ratios["ci_scope"]) == {"paired_rounds"}
    by = ratios.set_index(["numerator", "batch_size"])
    assert by.loc[("jax", 1), "ratio"] == pytest.approx(1.5) and by.loc[("tensorflow", 1), "ratio"] == pytest.approx(
        0.5
    )
    assert by.loc[("jax", 1), "ci_low"] > 1 and bool(by.loc[("jax", 1), "resolved"])
    assert by.loc[("tensorflow", 1), "ci_high"] < 1 and bool(by.loc[("tensorflow", 1), "resolved"])
    assert by.loc[("jax", 8), "ci_low"] < 1 < by.loc[("jax", 8), "ci_high"] and not bool(by.loc[("jax", 8), "resolved"])
    assert by.loc[("jax", 8), "pairs"] == 3
    # one framework on request, as benchmarks/interval_methods.py asks
    only = speedups([load_result(p) for p in paths], "tensorflow")
    assert only["numerator"].tolist() == ["tensorflow"] and only["ratio"].iloc[0] == pytest.approx(0.5)


def _header(table: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(r"\textbf{Model}"))
    return re.findall(r"\\textbf\{(.*?)\} ?(?:&|\\\\)", line)


def _row(table: str, batch: int) -> list[str]:
    rows = [line.split(" & ") for line in table.splitlines() if line.count(" & ") > 5 and "textbf{Model}" not in line]
    return next(cells for cells in rows if cells[2].strip() == str(batch))


def _groups(table: str) -> list[tuple[str, int]]:
    """The column groups of an inference tabular's first header row: (title, number of columns)."""
    line = next(line for line in table.splitlines() if r"\multicolumn" in line and r"\textbf" in line)
    return [(title, int(n)) for n, title in re.findall(r"\\multicolumn\{(\d+)\}\{c\}\{\\textbf\{(.*?)\}\}", line)]


def test_inference_tables_have_a_ratio_and_a_compile_column_per_other_framework(three):
    _, frame, ratios = three
    throughput, latency = throughput_table(frame, THREE, ratios), latency_table(frame, THREE)
    assert _groups(throughput) == [("Throughput (img/s)", 3), (r"Ratio to PT [95\% CI]", 2)]
    # cells from before modes ran in each framework's primary one: the ratio columns name eager PyTorch
    assert _header(throughput) == ["Model", "Prec.", "BS", "PT", "JAX", "TF", "JAX/PT-eager", "TF/PT-eager"]
    assert _groups(latency) == [("p50 latency (ms)", 3), ("Compile (s)", 2)]
    assert _header(latency) == ["Model", "Prec.", "BS", "PT", "JAX", "TF", "JAX", "TF"]
    assert throughput.startswith(r"\begin{tabular}{ll r " + "r" * 5 + "}")
    bs1, bs8 = _row(throughput, 1), _row(throughput, 8)
    assert len(bs1) == len(bs8) == 8
    assert bs1[6].startswith(r"\textbf{1.50$\times$") and bs1[7].startswith(r"\textbf{0.500$\times$")
    assert bs8[5] == r"failed$^\dagger$" and bs8[7] == r"--- \\", "a failed TensorFlow cell: no ratio"
    assert not bs8[6].startswith(r"\textbf"), "an unresolved ratio is not bold"
    assert _row(latency, 1)[6:] == ["0.200", r"0.300 \\"]
    # The paper's input holds both, each a full-width float with its own caption and label, at 8 pt, unscaled, and
    # its note under it at 8 pt; with three frameworks the notes spell out the short names.
    table = inference_table(frame, THREE, ratios)
    assert throughput in table and latency in table and table.count(r"\begin{table*}") == 2
    assert r"\label{tab:inference}" in table and r"\label{tab:inference-latency}" in table
    assert "adjustbox" not in table and table.count("\n\\footnotesize\n") == 2
    notes = [part.split(r"\end{table*}")[0] for part in table.split(r"\parbox{\linewidth}{\footnotesize")[1:]]
    assert len(notes) == 2 and r"\footnotesize" not in "".join(notes)
    assert all(
        "The columns name the frameworks PT for PyTorch, JAX for JAX/Flax, TF for TensorFlow/Keras" in note
        for note in notes
    )
    # the columns follow the config's order
    reordered = throughput_table(frame, ["torch", "tensorflow", "jax"], ratios)
    assert _header(reordered)[6:8] == ["TF/PT-eager", "JAX/PT-eager"]


def test_two_framework_inputs_give_the_two_framework_table(two):
    _, frame, ratios = two
    assert set(ratios["numerator"]) == {"jax"}
    throughput, latency = throughput_table(frame, ["torch", "jax"], ratios), latency_table(frame, ["torch", "jax"])
    assert _groups(throughput) == [("Throughput (img/s)", 2), (r"Ratio to PT [95\% CI]", 1)]
    assert _header(throughput) == ["Model", "Prec.", "BS", "PyTorch", "JAX/Flax", "JAX/PT-eager"]
    assert _header(latency) == ["Model", "Prec.", "BS", "PyTorch", "JAX/Flax", "JAX/Flax"]
    assert "TF" not in throughput + latency and "TensorFlow" not in throughput + latency
    table = inference_table(frame, ["torch", "jax"], ratios)
    assert "TensorFlow" not in table and "The columns name" not in table
    assert "Every ratio in JAX/PT-eager sets a compiled program against an eager one." in table
    # a speedups table from before there were three frameworks (no numerator column, no modes) reads as JAX's
    legacy = ratios.drop(columns=["numerator", "denominator", "numerator_mode", "denominator_mode", "mixed_modes"])
    legacy_throughput = throughput_table(frame, ["torch", "jax"], legacy)
    assert legacy_throughput.split(r"\midrule")[1] == throughput.split(r"\midrule")[1], "the same ratios"
    assert _header(legacy_throughput)[-1] == "JAX/PT", "no modes to name"


def test_a_study_without_pytorch_has_no_ratio_column(three):
    _, frame, ratios = three
    table = inference_table(frame[frame["framework"] != "torch"], ["jax", "tensorflow"], ratios.iloc[0:0])
    assert not any("/PT" in column for column in _header(table))
    assert "ratio to PyTorch" not in table and "Ratios in bold" not in table, "the caption has no ratio to explain"


def test_macros_for_every_framework(three, tiny_config):
    paths, frame, ratios = three
    config = validate_config({**tiny_config, "frameworks": THREE})
    text = macros(frame, ratios, study_environment(paths), config)
    names = re.findall(r"\\newcommand\{\\([^}]*)\}", text)
    assert all(re.fullmatch(r"fwb[A-Za-z]+", name) for name in names), "macro names must be letters only"
    assert len(names) == len(set(names)), "each macro defined once"
    assert _macro(text, "fwbNumRatios") == "3" and _macro(text, "fwbNumPairsAll") == "3"
    # versions other than the tested set's say which they are (fwbench.installation)
    assert _macro(text, "fwbTensorflowVersion") == "2.20.0 (tested: 2.21.0)"
    assert _macro(text, "fwbKerasVersion") == "3.11.3 (tested: 3.15.1)"
    assert _macro(text, "fwbMultiplicity") == "holm"
    # the Results' findings, one sentence per framework against the PyTorch both pair (eager, the study's only mode)
    (group,) = inference_results(frame, ratios, None, config).groups
    assert group.baseline == "eager PyTorch" and group.mixed and group.every_model
    jax, tf = group.findings
    assert (jax.framework, jax.tally.comparisons, jax.tally.faster, jax.tally.slower) == ("JAX", 2, 1, 0)
    assert (tf.framework, tf.tally.comparisons, tf.tally.faster, tf.tally.slower) == ("TensorFlow", 1, 0, 1)
    jax_ratios = ratios[ratios["numerator"] == "jax"]["ratio"]
    assert jax.tally.typical == pytest.approx(float(jax_ratios.prod()) ** 0.5), "the geometric mean"
    assert (jax.tally.low, jax.tally.high, tf.tally.typical) == (jax_ratios.min(), 1.5, 0.5)
    section = inference_results_section(frame, ratios, None, config)
    assert "JAX was faster on one of two comparisons, with one unresolved" in section
    assert "TensorFlow was slower on the one comparison (0.50$\\times$)." in section


def test_two_framework_macros_keep_their_meaning(two, tiny_config):
    paths, frame, ratios = two
    text = macros(frame, ratios, study_environment(paths), validate_config(tiny_config))
    assert _macro(text, "fwbNumRatios") == "2" and _macro(text, "fwbTensorflowVersion") == "---"
    config = validate_config(tiny_config)
    (group,) = inference_results(frame, ratios, None, config).groups
    assert [(f.framework, f.tally.comparisons, f.tally.faster, f.tally.high) for f in group.findings] == [
        ("JAX", 2, 1, 1.5)
    ]
    assert "TensorFlow" not in inference_results_section(frame, ratios, None, config)


def test_a_study_of_pytorch_alone_has_no_ratio_to_report(two, tiny_config):
    paths, frame, ratios = two
    alone = frame[frame["framework"] == "torch"]
    config = validate_config({**tiny_config, "frameworks": ["torch"]})
    text = macros(alone, ratios.iloc[0:0], study_environment(paths), config)
    assert _macro(text, "fwbMultiplicity") == "holm", "the configuration's setting where no ratio carries one"
    assert inference_results(alone, ratios.iloc[0:0], None, config).groups == ()
    section = inference_results_section(alone, ratios.iloc[0:0], None, config)
    assert section.startswith("No framework is compared with PyTorch in this study.")
    # negative control: the same study with JAX has a ratio to report
    with_jax = validate_config(tiny_config)
    assert not inference_results_section(frame, ratios, None, with_jax).startswith("No framework is compared")


def test_setup_table_lists_tensorflow_only_when_the_study_has_it(three, two):
    env = study_environment(three[0])
    assert env["TensorFlow"] == "2.20.0 (tested: 2.21.0)" and env["Keras"] == "3.11.3 (tested: 3.15.1)"
    assert env["JAX"] == "0.7.0 (tested: 0.10.2)"
    assert env["TensorFlow threads (intra-op / inter-op)"] == "2 / 1" and env["Threads per cell"] == 2
    keys = list(env)
    assert keys.index("Flax") < keys.index("TensorFlow") < keys.index("Keras") < keys.index("NumPy")
    assert not {"TensorFlow", "Keras", "TensorFlow threads (intra-op / inter-op)"} & set(study_environment(two[0]))


def test_gpu_setup_rows_of_tensorflow_and_a_tf32_disagreement(tmp_path):
    results = []
    for framework in THREE:
        result = _inference(framework, 1)
        _provenance(result, framework, platform="cuda", tf32=framework == "tensorflow")
        results.append(result)
    env = study_environment(_write(tmp_path, results))
    assert env["TensorFlow memory growth"] is True and "cuDNN (TensorFlow)" in env
    assert env["TF32 in effect"] == "fp32: PyTorch off, JAX/Flax off, TensorFlow/Keras in matmuls and convolutions"
    same = study_environment(_write(tmp_path, results[:2], "same"))
    assert same["TF32 in effect"] == "fp32: off" and "TensorFlow memory growth" not in same


def test_throughput_figure_draws_three_series(three, tmp_path):
    import matplotlib.pyplot as plt

    _, frame, _ = three
    seen = []
    original = plt.Figure.savefig

    def spy(fig, *args, **kwargs):
        seen.append(sorted({t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()}))
        return original(fig, *args, **kwargs)

    plt.Figure.savefig = spy
    try:
        throughput_figure(frame, tmp_path / "fig.pdf", tmp_path / "fig.png")
    finally:
        plt.Figure.savefig = original
    assert seen[0] == ["JAX/Flax", "PyTorch", "TensorFlow/Keras"]


# --- training ---------------------------------------------------------------------------------------------------

GIB = 2**30


def _training(framework, model="small_cnn", loss_after_step=2.2, top1=0.6, device=None):
    """A training cell of two epochs; `device`: (initial, max) allocator bytes, else device memory is missing."""
    result = copy.deepcopy(BASE)
    result["cell"] = {
        "suite": "training",
        "framework": framework,
        "model": model,
        "precision": "fp32",
        "batch_size": 32,
        "image_size": 32,
    }
    epoch = {
        "epoch": 0,
        "time_s": 2.0,
        "elapsed_s": 2.0,
        "img_s": 500.0,
        "compile_s": 0.1,
        "train_loss": 2.0,
        "val_loss": 2.1,
        "top1": 0.4,
        "top5": 0.9,
        "data_wait_frac": 0.01,
        "loss_curve": [2.3, 2.1],
    }
    missing = {} if device else {"device_memory": f"{framework} on the CPU has no allocator statistics"}
    result.update(
        status="ok",
        reason=None,
        samples_ms=[1.0],
        metrics={
            "epochs": [epoch, {**epoch, "epoch": 1, "time_s": 3.0, "elapsed_s": 5.0, "top1": top1}],
            "step0": {
                "loss": 2.3,
                "loss_after_step": loss_after_step,
                "grad_norm": 1.0,
                "fp64_loss_after_step": 2.2,
                "initial_eval": {"top1": 0.1},
            },
            "recipe": {},
            "train_time_s": 5.0,
            "final_top1": top1,
            "rss_mb": {"initial": 500.0, "max": 1500.0},
            "device_memory": (
                {"initial": {"peak_allocated_bytes": device[0]}, "max": {"peak_allocated_bytes": device[1]}}
                if device
                else None
            ),
            "input_layout": "NCHW" if framework == "torch" else "NHWC",
            "missing": missing,
        },
    )
    _provenance(result, framework)
    return result


def _training_results():
    return [
        _training("torch", device=(1.5e9, 3e9)),
        _training("jax", top1=0.5),
        _training("tensorflow", loss_after_step=2.21, top1=0.62),  # 4.5e-3 off PyTorch after the step: flagged
        _training("torch", model="resnet50"),
        _training("jax", model="resnet50"),
        _training("tensorflow", model="resnet50"),
    ]


@pytest.fixture
def trained(tmp_path):
    paths = _write(tmp_path, _training_results(), "train")
    write_training_tables(paths, tmp_path / "training.csv", tmp_path / "step0.csv")
    return paths, read_tidy(tmp_path / "training.csv"), read_tidy(tmp_path / "step0.csv")


def test_step0_agreement_compares_every_framework_with_pytorch(trained):
    _, frame, agreement = trained
    rows = [(r.model, r.numerator) for r in agreement.itertuples()]
    assert rows == [("resnet50", "jax"), ("resnet50", "tensorflow"), ("small_cnn", "jax"), ("small_cnn", "tensorflow")]
    assert set(agreement["denominator"]) == {"torch"}
    small = agreement[agreement["model"] == "small_cnn"].set_index("numerator")
    assert small.loc["tensorflow", "rel_diff_loss_after_step"] == pytest.approx(0.01 / 2.2)
    assert bool(small.loc["tensorflow", "flagged"]) and not bool(small.loc["jax", "flagged"])
    assert small.loc["tensorflow", "final_top1_tensorflow"] == pytest.approx(0.62)
    assert small.loc["jax", "final_top1_jax"] == pytest.approx(0.5)
    assert step0_agreement(frame, "tensorflow")["numerator"].tolist() == ["tensorflow", "tensorflow"]

    table = step0_table(agreement)
    assert r"\textbf{Framework}" in table and stacked_header("Final top-1", "framework/", "PyTorch") in table
    line = next(line for line in table.splitlines() if line.startswith("small CNN & fp32 & 32 & TensorFlow/Keras"))
    assert r"4.5e-03$^\ast$" in line and line.endswith(r"62.0 / 60.0\% \\")
    assert sum("JAX/Flax" in line for line in table.splitlines()) == 2


def test_two_framework_step0_table_is_unchanged(trained):
    _, frame, _ = trained
    two = frame[frame["framework"] != "tensorflow"]
    agreement = step0_agreement(two)
    table = step0_table(agreement)
    assert "Framework" not in table and stacked_header("Final top-1", "JAX/PyTorch") in table
    assert table.startswith(r"\begin{tabular}{l l r r r r r r r}")
    # a step-0 table written before there were three frameworks (no numerator column) reads as JAX's
    assert step0_table(agreement.drop(columns=["numerator", "denominator"])) == table
    section = training_section(two, agreement)
    assert (
        "Both frameworks train ResNet-50 and the small CNN from" in section
        and "relative JAX--PyTorch differences" in section
    )
    assert "TensorFlow" not in section


def test_training_macros_per_framework(trained):
    _, frame, agreement = trained
    defs = training_macros(frame, agreement)
    assert defs["fwbStepZeroFlagged"] == "1" and defs["fwbNumTrainPairs"] == "4"
    assert defs["fwbStepZeroFlaggedTensorflow"] == "1" and defs["fwbStepZeroFlaggedJax"] == "0"
    assert defs["fwbStepZeroMaxDiffTensorflow"] == "4.5e-03" and defs["fwbStepZeroMaxDiffJax"] == "0.0e+00"
    assert float(defs["fwbTopOneMaxGapJax"]) == pytest.approx(10.0) and defs["fwbTopOneMaxGapTensorflow"] == "2.00"
    assert defs["fwbTopOneMaxGap"] == defs["fwbTopOneMaxGapJax"] and defs["fwbNumTrainPairsTensorflow"] == "2"
    assert all(re.fullmatch(r"fwb[A-Za-z]+", name) for name in defs)


def test_training_section_names_every_framework(trained):
    _, frame, agreement = trained
    section = training_section(frame, agreement)
    assert "All three frameworks train ResNet-50 and the small CNN from" in section
    assert "loss agrees with PyTorch's to a relative 0.0045" in section, "the largest of JAX's and TensorFlow's"
    assert "One pair is flagged: TensorFlow on the small CNN at batch 32" in section
    assert "(NCHW for PyTorch, NHWC for JAX and TensorFlow)" in section
    assert "small CNN & TensorFlow/Keras & 32" in section
    assert "relative differences of each framework from PyTorch" in section
    assert "tab:l4" not in section, "no published reference given, no table beside it"


def test_training_section_sizes_its_figure_and_names_models_without_batch_norm(trained):
    _, frame, agreement = trained
    frame = frame.assign(bn_recalibration_batches=16, bn_recalibration_s=0.1)
    section = training_section(frame, agreement)
    assert r"\begin{figure}[t]" in section and r"\includegraphics[width=\columnwidth]{training_curves}" in section
    assert "no BatchNorm" not in section, "both trained models recalibrated"
    vit = frame[frame["model"] == "small_cnn"].assign(model="vit_b_16", bn_recalibration_s=None)
    mobilenet = frame[frame["model"] == "small_cnn"].assign(model="mobilenet_v3_small")
    section = training_section(pd.concat([frame, vit, mobilenet], ignore_index=True), agreement)
    assert r"\begin{figure*}[t]" in section and r"\includegraphics[width=\textwidth]{training_curves}" in section
    assert " ViT-B/16 has no BatchNorm and skips it." in section


def test_training_figure_overlays_three_frameworks(trained, tmp_path):
    paths, _, _ = trained
    training_figure(paths, tmp_path / "train.pdf", tmp_path / "train.png")
    assert (tmp_path / "train.png").read_bytes()[:4] == b"\x89PNG"


def test_published_reference_is_read_and_mapped():
    published = read_published(PUBLISHED)
    assert sorted(published["framework"]) == sorted(THREE), "pytorch -> torch"
    assert list(published.columns) == [
        "framework",
        "training_time_s",
        "accuracy",
        "initial_ram_gb",
        "max_ram_gb",
        "initial_vram_gb",
        "max_vram_gb",
    ]


def test_published_reference_with_other_columns_is_refused(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("framework,time\npytorch,1\n")
    with pytest.raises(ValueError, match="bad.csv: expected the columns"):
        read_published(path)
    path.write_text(PUBLISHED.read_text().replace("pytorch", "mxnet"))
    with pytest.raises(ValueError, match="unknown framework"):
        read_published(path)


def _l4_line(section: str, start: str) -> list[str]:
    line = next(line for line in section.splitlines() if line.startswith(start))
    return [cell.strip() for cell in line.removesuffix(r"\\").split(" & ")]


def test_l4_table_sets_measured_beside_published_rows(trained):
    _, frame, agreement = trained
    published = read_published(PUBLISHED)
    rows = comparison(frame, published)
    assert [(r.framework, r.source) for r in rows.itertuples()] == [
        (framework, source) for framework in THREE for source in ("measured", "published")
    ]
    section = training_section(frame, agreement, published=published)
    assert r"\label{tab:l4}" in section and section.index("tab:training}") < section.index("tab:l4}")
    assert section.index(r"\label{tab:l4}") < section.index(r"\label{tab:step0}")
    torch = _l4_line(section, "PyTorch & this study (fp32, batch 32, 2 epochs)")
    # 2 + 3 s of step loops; last top-1; 500 and 1500 MiB of RSS in GB; 1.5e9 and 3e9 allocator bytes in GB
    assert torch[2:] == ["5.00", "0.600", "0.524", "1.57", "1.50", "3.00"]
    tensorflow = _l4_line(section, "TensorFlow/Keras & this study")
    assert tensorflow[-2:] == ["missing$^{b}$", "missing$^{b}$"], "missing with its reason's note, never 0"
    note = section[section.index(r"\label{tab:l4}") :].split(r"\parbox{\linewidth}")[1].split(r"\end{table*}")[0]
    assert (
        r"Device memory missing: $^{a}$: " in note
        and r"$^{b}$: tensorflow on the CPU has no allocator statistics" in note
    )
    published_rows = [line for line in section.splitlines() if "published (NVIDIA L4)" in line]
    assert len(published_rows) == 3
    # the published PyTorch row, verbatim from the reference file
    row = published.set_index("framework").loc["torch"]
    expected = [f"{row[c]:.3g}" for c in ("initial_ram_gb", "max_ram_gb", "initial_vram_gb", "max_vram_gb")]
    assert _l4_line(section, " & published (NVIDIA L4) & " + f"{row['training_time_s']:.3g}")[4:] == expected
    assert "another machine, other data" in section and "GB = $10^9$ bytes" in section


def test_l4_notes_are_read_from_the_published_figures(trained):
    _, frame, agreement = trained
    published = read_published(PUBLISHED)
    values = published["accuracy"].unique()
    assert len(values) == 1, "the reference's accuracies, as shipped"
    beside = reference_values(frame, published)
    assert (beside.accuracy, beside.classes, beside.frameworks) == (values[0], 10, ("PyTorch", "JAX", "TensorFlow"))
    assert [(i.framework, i.kind, i.peak, i.initial) for i in beside.inconsistent] == [("JAX", "RAM", 3.29, 4.42)]
    text = training_section(frame, agreement, published=published)
    assert (
        f"The published accuracy is {values[0]:g} for every framework shown (PyTorch, JAX and TensorFlow), "
        "chance level on 10 classes (1/10)." in text
    )
    assert "JAX's maximum RAM (3.29~GB) is below its initial RAM (4.42~GB)" in text
    # other figures, other notes: nothing about chance or the RAM is typed in
    other = published.assign(accuracy=[0.25, 0.25, 0.25], max_ram_gb=published["initial_ram_gb"] + 1)
    assert (reference_values(frame, other).classes, reference_values(frame, other).inconsistent) == (4, ())
    text = training_section(frame, agreement, published=other)
    assert "0.25 for every framework shown" in text and "chance level on 4 classes (1/4)" in text
    assert "below its initial" not in text
    mixed = published.assign(accuracy=[0.3, 0.5, 0.7])
    assert (reference_values(frame, mixed).accuracy, reference_values(frame, mixed).classes) == (None, None)
    text = training_section(frame, agreement, published=mixed)
    assert "The published accuracy" not in text and "chance" not in text


def test_l4_table_shows_only_the_study_frameworks_and_is_omitted_without_small_cnn(trained):
    _, frame, agreement = trained
    published = read_published(PUBLISHED)
    two = frame[frame["framework"] != "tensorflow"]
    section = training_section(two, step0_agreement(two), published=published)
    assert "TensorFlow" not in section and section.count("published (NVIDIA L4)") == 2
    assert "for every framework shown (PyTorch and JAX)" in section
    no_small = frame[frame["model"] != "small_cnn"]
    text = training_section(no_small, step0_agreement(no_small), published=published)
    assert "no training cell of the small CNN, so there is no table" in text and "tab:l4" not in text


def test_l4_table_marks_a_failed_small_cnn_cell(trained):
    _, frame, _ = trained
    failed = frame[~((frame["framework"] == "jax") & (frame["model"] == "small_cnn"))]
    row = {"framework": "jax", "model": "small_cnn", "precision": "fp32", "batch_size": 32, "status": "failed"}
    row |= {"reason": "host out of memory: killed", "failure_kind": "host_oom", "path": "x.json"}
    frame = pd.concat([failed, pd.DataFrame([row])], ignore_index=True)
    section = "\n".join(comparison_float(frame, read_published(PUBLISHED)))
    assert r"JAX/Flax & this study (fp32, batch 32) & \multicolumn{6}{l}{failed (host\_oom)" in section


def test_epoch_rows_carry_what_the_l4_table_needs(trained):
    _, frame, _ = trained
    torch = frame[(frame["framework"] == "torch") & (frame["model"] == "small_cnn")]
    assert torch["rss_initial_mb"].tolist() == [500.0, 500.0] and torch["device_initial_bytes"].tolist() == [1.5e9] * 2
    jax = frame[(frame["framework"] == "jax") & (frame["model"] == "small_cnn")]
    assert jax["device_memory_missing"].iloc[0] == "jax on the CPU has no allocator statistics"
    assert set(frame["input_layout"]) == {"NCHW", "NHWC"}


def test_training_tables_from_before_the_new_columns_still_render(trained):
    _, frame, agreement = trained
    old = frame.drop(columns=["rss_initial_mb", "device_initial_bytes", "device_memory_missing", "input_layout"])
    old = old[old["framework"] != "tensorflow"]
    legacy = step0_agreement(old).drop(columns=["numerator", "denominator"])
    section = training_section(old, legacy, published=read_published(PUBLISHED))
    assert "Each framework receives batches in its own layout, transposed" in section
    line = _l4_line(section, "PyTorch & this study")
    assert line[4] == "---" and line[5] == "1.57", "an initial RSS the table does not have is ---, never 0"


def test_a_study_of_pytorch_alone_still_writes_its_training_section(tmp_path):
    paths = _write(tmp_path, [_training("torch"), _training("torch", model="resnet50")], "alone")
    write_training_tables(paths, tmp_path / "training.csv", tmp_path / "step0.csv")
    frame, agreement = read_tidy(tmp_path / "training.csv"), read_tidy(tmp_path / "step0.csv")
    assert agreement.empty and "numerator" in agreement, "an empty agreement still has its header"
    section = training_section(frame, agreement, published=read_published(PUBLISHED))
    assert (
        "PyTorch trains ResNet-50 and the small CNN from" in section
        and "With one framework, there is no pair of frameworks to compare" in section
    )
    assert "No cell completed both in PyTorch and in another framework." in section
    assert section.count("published (NVIDIA L4)") == 1 and "JAX" not in section
    assert training_macros(frame, agreement)["fwbNumTrainPairs"] == "0"
