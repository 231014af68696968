"""The training section's words are its templates' (report/templates/training.tex.j2, training_detail.tex.j2): the
values it is handed (fwbench.analysis.training.findings and method) and the rendered text, for the studies a paper
meets: three frameworks with compiled PyTorch, a target reached or missed, one framework, a failed cell, no completed
cell, no training suite, flagged step-0 pairs, and a GPU study with CUDA graphs. Every study's section keeps each
sentence within the paper check's 35 words and names no configuration identifier. Hand-built cells, no framework
runs."""

from __future__ import annotations

import copy
import re

import pytest

from fwbench.analysis.common.detail import split_detail
from fwbench.analysis.common.names import identifiers
from fwbench.analysis.inference.tidy import read_tidy
from fwbench.analysis.paper.abstract import words
from fwbench.analysis.paper.structure_check import MAX_SENTENCE_WORDS, identifiers_in_prose, long_sentences, sentences
from fwbench.analysis.paper.templates import TemplateValueError, render
from fwbench.analysis.paper.training_section import training_section
from fwbench.analysis.training.epochs import write_training_tables
from fwbench.analysis.training.findings import section_values
from fwbench.analysis.training.method import method_values
from fwbench.analysis.training.reference import read_published
from tests.test_conclusions import training_paragraph
from tests.test_deviations import _failed
from tests.test_mode_training_analysis import _compiled_torch, _in_mode, _trained_results
from tests.test_multi_framework_analysis import PUBLISHED, _provenance, _training, _write


def _tables(tmp_path, results):
    paths = _write(tmp_path, results, "train")
    write_training_tables(paths, tmp_path / "training.csv", tmp_path / "step0.csv")
    return read_tidy(tmp_path / "training.csv"), read_tidy(tmp_path / "step0.csv")


def _parts(frame, agreement, **kwargs) -> tuple[str, str]:
    """(body prose, appendix paragraph): the section's text before its figure and before its first table."""
    body, detail = split_detail(training_section(frame, agreement, **kwargs), "Training in full", "app:training")
    return body.split(r"\begin{figure")[0], detail.split(r"\begin{table")[0]


# Configuration identifiers that are not a model's: precisions and (framework, mode) keys.
OTHER_IDENTIFIERS = {"fp32", "bf16", "tf32", "fp16", "jax_jit", "torch_compile", "tensorflow_xla"}


def _readable(text: str) -> None:
    """Every sentence within the paper check's limit, and no configuration identifier in the words."""
    assert long_sentences(text, "training") == [], text
    plain = text.replace("\\_", "_")
    assert identifiers_in_prose([plain], identifiers() | OTHER_IDENTIFIERS) == [], plain


def _referenced(section: str) -> None:
    """Every float the section sets is referenced in it (the paper check fails an unreferenced float)."""
    labels = re.findall(r"\\label\{((?:tab|fig):[^}]+)\}", section)
    unreferenced = [label for label in labels if f"{{{label}}}" not in section.replace(f"\\label{{{label}}}", "")]
    assert labels and unreferenced == [], unreferenced


def _targeted(result, seconds, target=0.5):
    """`result` with the config's target top-1 recorded and reached in `seconds` (None: not reached)."""
    result = copy.deepcopy(result)
    result["metrics"] |= {"target_top1": target, "time_to_target_s": seconds}
    return result


# --- the default study's shape: three frameworks, PyTorch eager and compiled ---------------------------------------


@pytest.fixture
def modes(tmp_path):
    reached = dict(zip(("torch eager", "torch compile", "jax", "tensorflow"), (3.0, 1.5, None, 2.4), strict=True))
    results = [_targeted(r, s) for r, s in zip(_trained_results(), reached.values(), strict=True)]
    return _tables(tmp_path, results)


def test_the_values_say_who_reached_the_target_when(modes):
    frame, agreement = modes
    values = section_values(frame, agreement)
    assert values["recipe"].frameworks == ("PyTorch", "JAX", "TensorFlow")
    assert values["recipe"].models == ("the small CNN",)
    cells = values["cells"]
    assert (cells.cells, cells.completed, cells.epochs, cells.failed) == (4, 4, 2, ())
    assert cells.seconds == pytest.approx(5.0 + 2.5 + 5.0 + 5.0)
    [run] = values["runs"]
    assert (run.model, run.batch, run.named, run.target, run.epochs) == ("the small CNN", 32, False, 50.0, 2)
    assert [(t.name, t.seconds) for t in run.timings] == [
        ("compiled PyTorch", 1.5),
        ("TensorFlow", 2.4),
        ("eager PyTorch", 3.0),
        ("JAX", None),
    ], "fastest first, the one that never reached it last"


def test_the_section_reads_as_findings(modes):
    frame, agreement = modes
    body, detail = _parts(frame, agreement, published=read_published(PUBLISHED))
    _readable(body)
    _readable(detail)
    _referenced(training_section(frame, agreement, published=read_published(PUBLISHED)))
    assert "Table~\\ref{tab:l4} sets this study's training cells of the small CNN beside published ones" in detail
    assert "All three frameworks train the small CNN from the same converted weights." in body
    assert "All four training cells completed two epochs, 18~s of training in all." in body
    assert "Compiled PyTorch reached the 50\\% top-1 target first, in 1.5~s." in body
    assert "TensorFlow took 2.4~s and eager PyTorch 3.0~s. JAX did not reach it within two epochs." in body
    assert "every other framework's loss equals eager PyTorch's (Table~\\ref{tab:step0})." in body
    assert "No pair is flagged." in body and "\\begin{itemize}" not in body
    assert "Final top-1 differs from PyTorch's by at most 10 points." in body
    assert "rounding\\_control.py" in body, "the yardstick for the top-1 gap"
    assert "PyTorch trains in two modes, eager (operator by operator) and torch.compile (Dynamo + Inductor)" in body
    # the definitions are the appendix's, not the body's
    assert "250~ms" in detail and "250~ms" not in body and "layout" not in body
    assert "The compilers are Dynamo and Inductor (compiled PyTorch) and XLA (JAX and TensorFlow);" in detail
    assert "(NCHW for PyTorch, NHWC for JAX and TensorFlow)" in detail
    assert words(body) < 250, "a short section"


def test_compiled_pytorch_says_its_step0_check_and_its_gain(modes):
    frame, agreement = modes
    [compiled] = section_values(frame, agreement)["compiled"]
    assert (compiled.name, compiled.baseline, compiled.pairs, compiled.flagged) == (
        "compiled PyTorch",
        "eager PyTorch",
        1,
        0,
    )
    assert compiled.loss_after_step == pytest.approx(0.0002 / 2.2)
    [gain] = section_values(frame, agreement)["gains"]
    assert (gain.name, gain.eager, gain.seconds, gain.eager_seconds, gain.gain) == (
        "compiled PyTorch",
        "eager PyTorch",
        2.5,
        5.0,
        2.0,
    )
    step0 = (
        "Compiled PyTorch's first optimiser step agrees with eager PyTorch's to a relative "
        "9.1\\ensuremath{\\times 10^{-5}} in the loss after it (one pair, none flagged)."
    )
    said = (
        "At batch 32, compiled PyTorch trained the small CNN 2.0$\\times$ as fast as eager PyTorch "
        "(2.5~s against 5.0~s), after 12~s of compilation."
    )
    body, _ = _parts(frame, agreement)
    closing = training_paragraph(frame, agreement)
    assert step0 in body and said in body and step0 in closing and said in closing, "the same words (training.j2)"
    # neither is said without a compiled pair or compiled cells
    eager = frame[frame["mode"] != "compile"]
    alone = training_paragraph(eager, agreement.iloc[1:])
    assert "first optimiser step" not in alone and "as fast as eager PyTorch" not in alone


# --- edge cases ----------------------------------------------------------------------------------------------------


def test_a_study_of_one_framework(tmp_path):
    frame, agreement = _tables(tmp_path, [_training("torch"), _training("torch", model="resnet50")])
    values = section_values(frame, agreement)
    assert values["step0"].comparisons == 0 and values["step0"].top1_gap is None and values["compiled"] == ()
    body, detail = _parts(frame, agreement)
    _readable(body + detail)
    assert "PyTorch trains ResNet-50 and the small CNN from the same converted weights." in body
    assert "With one framework, there is no pair of frameworks to compare (Table~\\ref{tab:step0})." in body
    _referenced(training_section(frame, agreement))
    assert "On ResNet-50 at batch 32, PyTorch took 2.5~s per epoch." in body
    assert "flagged" not in body and "JAX" not in body + detail and "compilers" not in detail


def test_a_study_in_which_no_cell_reached_the_target(tmp_path):
    results = [_targeted(_training(f), None) for f in ("torch", "jax")]
    frame, agreement = _tables(tmp_path, results)
    [run] = section_values(frame, agreement)["runs"]
    assert [t.seconds for t in run.timings] == [None, None]
    body, _ = _parts(frame, agreement)
    _readable(body)
    assert "No cell reached the 50\\% top-1 target within two epochs." in body
    assert "Both frameworks train the small CNN" in body and "target first" not in body


def test_a_study_with_a_failed_cell(tmp_path):
    failed = _failed("jax", 32, "host_oom", "host out of memory: killed", model="resnet50", suite="training")
    frame, agreement = _tables(
        tmp_path, [_training("torch"), _training("jax"), _training("torch", model="resnet50"), failed]
    )
    cells = section_values(frame, agreement)["cells"]
    assert (cells.cells, cells.completed) == (4, 3)
    assert [(f.name, f.model) for f in cells.failed] == [("JAX", "ResNet-50")]
    body, _ = _parts(frame, agreement)
    _readable(body)
    assert "Three of four training cells completed two epochs" in body
    assert "JAX on ResNet-50 failed (Appendix~\\ref{sec:failures})." in body


def test_a_study_whose_every_cell_failed(tmp_path):
    results = [_failed(f, 32, "crash", "crashed", suite="training") for f in ("torch", "jax")]
    frame, agreement = _tables(tmp_path, results)
    values = section_values(frame, agreement)
    assert values["runs"] == () and values["cells"].seconds is None
    _referenced(training_section(frame, agreement).replace(r"\label{fig:training}", ""))  # no figure to draw
    body, detail = _parts(frame, agreement)
    _readable(body + detail)
    assert "None of the two training cells completed; Table~\\ref{tab:training} and Appendix" in body
    assert "Fig.~\\ref" not in body


def test_a_study_without_the_training_suite():
    text = training_section(None, None)
    assert text.startswith("\\section{Training} \\label{sec:training}\n\n")
    assert text.endswith("\nThis study has no training suite (\\texttt{suites} in its config).\n")
    assert split_detail(text, "Training in full", "app:training")[1] == "", "no appendix part"


def test_flagged_pairs_are_said_only_when_there_are_any_and_as_a_list_beyond_one(tmp_path):
    one = [_training("torch"), _training("tensorflow", loss_after_step=2.21)]
    frame, agreement = _tables(tmp_path, one)
    [pair] = section_values(frame, agreement)["step0"].flagged
    assert (pair.name, pair.model, pair.batch, pair.bar) == ("TensorFlow", "the small CNN", 32, 1e-3)
    body, _ = _parts(frame, agreement)
    assert "One pair is flagged: TensorFlow on the small CNN at batch 32 (0.0045 against a bar of 0.001)." in body
    models = ("small_cnn", "resnet50", "vit_b_16", "mobilenet_v3_small", "efficientnet_b0")
    many = [
        cell
        for model in models
        for cell in (_training("torch", model=model), _training("tensorflow", model=model, loss_after_step=2.21))
    ]
    (tmp_path / "many").mkdir()
    frame, agreement = _tables(tmp_path / "many", many)
    assert len(section_values(frame, agreement)["step0"].flagged) == 5
    body, _ = _parts(frame, agreement)
    _readable(body)
    assert "Five pairs are flagged: \\begin{itemize} \\item TensorFlow on EfficientNet-B0 at batch 32" in body
    assert sum(len(s.split()) > 0 for s in sentences(body)) > 5, "each item is read as a sentence of its own"


def test_a_gpu_study_with_cuda_graphs(tmp_path):
    results = []
    for result in [*_trained_results(), _in_mode(_compiled_torch(), "cudagraphs")]:
        _provenance(result, result["cell"]["framework"], platform="cuda")
        result["metrics"]["missing"] = {}
        result["metrics"]["device_memory"] = {
            "initial": {"peak_allocated_bytes": 1e9},
            "max": {"peak_allocated_bytes": 2e9},
        }
        results.append(result)
    frame, agreement = _tables(tmp_path, results)
    values = section_values(frame, agreement)
    assert [c.name for c in values["compiled"]] == ["compiled PyTorch", "CUDA-graph PyTorch"]
    assert [g.name for g in values["gains"]] == ["compiled PyTorch", "CUDA-graph PyTorch"]
    assert len(values["modes"][0].descriptions) == 3
    assert [(c.kind, c.names) for c in method_values(frame)["method"].compilers] == [
        ("inductor", ("compiled PyTorch",)),
        ("cudagraphs", ("CUDA-graph PyTorch",)),
        ("xla", ("JAX", "TensorFlow")),
    ]
    body, detail = _parts(frame, agreement)
    _readable(body)
    _readable(detail)
    assert "PyTorch trains in three modes" in body and "CUDA-graph PyTorch's first optimiser step" in body
    assert "Dynamo and Inductor with CUDA graphs (CUDA-graph PyTorch)" in detail


# --- the checks' negative controls ---------------------------------------------------------------------------------


def test_a_missing_value_stops_the_build_naming_the_template():
    with pytest.raises(TemplateValueError, match=r"training\.tex\.j2.*recipe"):
        render("training.tex.j2", {"trained": True})


def test_the_sentence_check_fails_a_long_sentence():
    """The negative control of `_readable`: the old section's opening sentence, 45 words, fails the check."""
    old = (
        "All three frameworks train the small CNN from the same converted weights on the same batches in the same "
        "order (the shared loader), with the same recipe: cross-entropy, Adam with identical hyperparameters and the "
        "same learning rate at every step (computed once and passed to each)."
    )
    assert words(old) > MAX_SENTENCE_WORDS
    with pytest.raises(AssertionError):
        _readable(old)
    with pytest.raises(AssertionError):
        _readable("We trained resnet50 briefly.")


def test_many_runs_are_counted_not_listed(tmp_path):
    """Beyond two runs (a model at one batch size each) the section says who reached the target first how often and
    who missed it; each time is the table's."""
    reached = {"small_cnn": (2.0, 1.0), "resnet50": (2.0, 1.5), "vit_b_16": (2.0, None)}
    results = [
        _targeted(_training(framework, model=model), seconds)
        for model, times in reached.items()
        for framework, seconds in zip(("torch", "jax"), times, strict=True)
    ]
    frame, agreement = _tables(tmp_path, results)
    summary = section_values(frame, agreement)["summary"]
    assert (summary.runs, summary.by_target, summary.target) == (3, True, 50.0)
    assert [(lead.name, lead.first, lead.missed) for lead in summary.leaders] == [("JAX", 2, 1), ("PyTorch", 1, 0)]
    body, _ = _parts(frame, agreement)
    _readable(body)
    assert (
        "Over three runs, each a model at one batch size, JAX reached the 50\\% top-1 target first in two and "
        "PyTorch in one. JAX missed it in one run."
    ) in body
    assert "On ResNet-50" not in body, "no run said one by one"
    # without a target: who trained fastest per epoch, and nothing missed
    slower = [_training("jax", model=m) for m in reached]
    for result in slower:
        for epoch in result["metrics"]["epochs"]:
            epoch["time_s"] *= 2
    (tmp_path / "epochs").mkdir()
    frame, agreement = _tables(tmp_path / "epochs", [*(_training("torch", model=m) for m in reached), *slower])
    body, _ = _parts(frame, agreement)
    assert "Over three runs, each a model at one batch size, PyTorch trained fastest per epoch in three." in body
    assert "missed" not in body
