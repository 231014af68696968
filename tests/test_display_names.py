"""Words as people write them (issue 56): the LaTeX the analysis writes for the paper names every model by its display
name (ResNet-50, ViT-B/16, "the small CNN"), never by the identifier a study file uses (`resnet50`, `small_cnn`).

Each test builds one part of the paper from the small fake frames the tests of that part use (the Results macros,
the conclusions, the published-vs-reproduced section and figure, the training section, the mode-gain figure, the
models table) and looks for any identifier of `names.identifiers()` in its text, as the paper check
(fwbench.analysis.paper.structure_check.identifiers_in_prose) looks in the PDF. Keys are not text: \\label{},
\\ref{}, \\input{} and \\includegraphics{} arguments are left out, and the models table's config-name column is the
one place an identifier belongs."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from fwbench.analysis.common.names import identifiers, model_in_text, model_name, models_in_text, with_display_names
from fwbench.analysis.fairness.ledger import ledger_table
from fwbench.analysis.inference import figures as inference_figures
from fwbench.analysis.inference import findings as inference_findings
from fwbench.analysis.inference import mode_macros
from fwbench.analysis.inference.macros import macros
from fwbench.analysis.inference.ratios import write_ratio_tables
from fwbench.analysis.inference.tidy import read_tidy, write_tidy
from fwbench.analysis.paper.conclusions import conclusions_section
from fwbench.analysis.paper.inference import inference_results_section, modes_sentence
from fwbench.analysis.paper.published_section import published_section
from fwbench.analysis.paper.training_section import training_section
from fwbench.analysis.published import figure as published_figures
from fwbench.analysis.published.matching import COLUMNS as PUBLISHED_COLUMNS
from fwbench.analysis.setup.provenance import study_environment
from fwbench.analysis.setup.tables import models_table
from fwbench.analysis.training.epochs import write_training_tables
from fwbench.analysis.training.reference import read_published
from fwbench.study.config import validate_config
from tests.test_conclusions import CONFIG, LEDGER, RATIOS
from tests.test_conclusions import _inference as _conclusions_inference
from tests.test_mode_analysis import THREE, _study_results
from tests.test_mode_analysis import _write as _write_cells
from tests.test_mode_training_analysis import _trained_results as _modes_trained_results
from tests.test_multi_framework_analysis import PUBLISHED, _training_results
from tests.test_published import _default_arithmetic_beside_true_fp32

# What LaTeX holds that a reader never reads: a key or a file name.
KEYS = re.compile(r"\\(?:label|ref|eqref|input|includegraphics)(?:\[[^\]]*\])?\{[^}]*\}")


def leaked(latex: str) -> list[str]:
    """Every registered identifier in the text `latex` prints (its \\_ read as the underscore it prints), each with
    the text around it; keys and file names left out."""
    text = KEYS.sub(" ", latex).replace(r"\_", "_")
    found = []
    for name in sorted(identifiers()):
        for match in re.finditer(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text):
            found.append(f"{name}: {' '.join(text[max(0, match.start() - 40) : match.end() + 40].split())}")
    return found


# --------------------------------------------------------------------------------------------------------------------
# The check itself, and a negative control: it fails where an identifier reaches the text


def test_the_check_finds_an_identifier_in_the_text_and_not_in_keys():
    assert identifiers() == {"resnet50", "vit_b_16", "small_cnn", "mobilenet_v3_small", "efficientnet_b0"}
    assert [hit.split(":")[0] for hit in leaked("JAX on resnet50 at batch 1")] == ["resnet50"]
    assert [hit.split(":")[0] for hit in leaked(r"Training \texttt{small\_cnn} at batch 32")] == ["small_cnn"]
    assert [hit.split(":")[0] for hit in leaked(r"(on vit\_b\_16)")] == ["vit_b_16"]
    assert leaked(r"\label{fig:small_cnn} Fig.~\ref{tab:resnet50} \includegraphics[width=2in]{vit_b_16_curves}") == []
    assert leaked("ResNet-50, ViT-B/16, MobileNetV3-Small, EfficientNet-B0 and the small CNN") == []


def test_names_in_sentences():
    assert model_in_text("small_cnn") == "the small CNN" and model_in_text("resnet50") == "ResNet-50"
    assert model_in_text("my_net") == "my net", "a user's own model: its identifier, readable, without article"
    assert models_in_text(["vit_b_16", "small_cnn", "resnet50", "small_cnn"]) == [
        "ResNet-50",
        "the small CNN",
        "ViT-B/16",
    ], "sorted by identifier, each once"
    assert with_display_names("inference jax efficientnet_b0 fp32 bs1, torch/eager small_cnn bs32 (1)") == (
        "inference jax EfficientNet-B0 fp32 bs1, torch/eager small CNN bs32 (1)"
    )
    assert with_display_names("weights/resnet50.npz, my_resnet50") == "weights/resnet50.npz, my_resnet50"


# --------------------------------------------------------------------------------------------------------------------
# The Results macros and the mode-gain figure


@pytest.fixture
def mode_study(tmp_path):
    """(paths, tidy frame, ratios, gains) of tests/test_mode_analysis.py's study: the small CNN in PyTorch eager and
    compiled, JAX and TensorFlow, ResNet-50 without compiled PyTorch."""
    paths = _write_cells(tmp_path, _study_results())
    ratios, gains = write_ratio_tables(paths, tmp_path / "speedups.csv", tmp_path / "mode_gains.csv")
    return paths, write_tidy(paths, tmp_path / "inference.csv"), ratios, gains


def _results_text(mode_study, tiny_config) -> str:
    """The Results' macros, their inference findings (inference_results.tex) and the method's modes sentence."""
    paths, frame, ratios, gains = mode_study
    config = validate_config({**tiny_config, "frameworks": THREE})
    return "\n".join(
        [
            macros(frame, ratios, study_environment(paths), config),
            inference_results_section(frame, ratios, gains, config),
            modes_sentence(frame),
        ]
    )


def test_the_results_name_models_by_their_display_names(mode_study, tiny_config):
    text = _results_text(mode_study, tiny_config)
    assert leaked(text) == []
    assert "compiled for the small CNN only" in text and "on ResNet-50 and the small CNN" in text


def test_the_check_fails_the_results_where_the_identifiers_come_back(mode_study, tiny_config, monkeypatch):
    """Negative control: the same text with the names undone (each model by its identifier) fails the check."""
    monkeypatch.setattr(mode_macros, "model_name", str)
    monkeypatch.setattr(inference_findings, "model_name", str)
    hits = leaked(_results_text(mode_study, tiny_config))
    assert {hit.split(":")[0] for hit in hits} == {"resnet50", "small_cnn"}, hits


def _drawn(module, monkeypatch) -> list[plt.Figure]:
    """The figures a figure function draws, kept open (it closes each once saved) until `monkeypatch.undo()`."""
    kept = []
    monkeypatch.setattr(module.plt, "close", kept.append)
    return kept


def _texts(figure: plt.Figure) -> list[str]:
    texts = []
    for ax in figure.axes:
        texts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        texts += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels() + ax.texts]
        legend = ax.get_legend()
        texts += [t.get_text() for t in legend.get_texts()] if legend else []
    return texts


def test_the_mode_gain_and_throughput_figures_label_models_by_their_display_names(mode_study, tmp_path, monkeypatch):
    _, frame, _, gains = mode_study
    kept = _drawn(inference_figures, monkeypatch)
    inference_figures.mode_gain_figure(gains, tmp_path / "g.pdf", tmp_path / "g.png")
    inference_figures.throughput_figure(frame, tmp_path / "t.pdf", tmp_path / "t.png")
    gain, throughput = (_texts(figure) for figure in kept)
    assert "small CNN, bs 1" in gain and leaked("\n".join(gain)) == []
    assert {"ResNet-50", "small CNN"} <= set(throughput) and leaked("\n".join(throughput)) == []
    monkeypatch.undo()
    for figure in kept:
        plt.close(figure)


# --------------------------------------------------------------------------------------------------------------------
# The conclusions


def test_the_conclusions_name_models_by_their_display_names(tmp_path):
    paths = _write_cells(tmp_path, _training_results(), "train")
    write_training_tables(paths, tmp_path / "training.csv", tmp_path / "step0.csv")
    epochs, agreement = read_tidy(tmp_path / "training.csv"), read_tidy(tmp_path / "step0.csv")
    config = {
        **CONFIG,
        "suites": ["inference", "training"],
        "models": ["resnet50", "vit_b_16", "small_cnn", "mobilenet_v3_small", "efficientnet_b0"],
    }
    text = conclusions_section(
        ratios=RATIOS,
        inference=_conclusions_inference(),
        epochs=epochs,
        agreement=agreement,
        published=pd.DataFrame(columns=PUBLISHED_COLUMNS),
        ledger=LEDGER,
        config=config,
    )
    assert leaked(text) == []
    assert "ResNet-50 at batch 32" in text and "Training the small CNN at batch 32" in text
    assert "so it has no interval, and only for ResNet-50 and the small CNN." in text


# --------------------------------------------------------------------------------------------------------------------
# The published-vs-reproduced section and figure


def test_the_published_section_and_figure_name_models_by_their_display_names(tmp_path, monkeypatch):
    sources, rows = _default_arithmetic_beside_true_fp32(tmp_path)
    text = published_section(rows, sources, "published_vs_reproduced")
    assert leaked(text) == []
    assert "JAX on ResNet-50 at batch 128" in text and "\nResNet-50 & " in text, "the sentence and the table"
    kept = _drawn(published_figures, monkeypatch)
    before = set(plt.get_fignums())
    published_figures.published_figure(rows, tmp_path / "p.pdf", tmp_path / "p.png")
    (figure,) = kept + [plt.figure(number) for number in set(plt.get_fignums()) - before if not kept]
    labels = _texts(figure)
    assert "ResNet-50\nbs 128" in labels and leaked("\n".join(labels)) == []
    monkeypatch.undo()
    plt.close(figure)


# --------------------------------------------------------------------------------------------------------------------
# The training section


@pytest.mark.parametrize("study", ["three frameworks, two models", "PyTorch eager and compiled"])
def test_the_training_section_names_models_by_their_display_names(study, tmp_path):
    results = _training_results() if study.startswith("three") else _modes_trained_results()
    paths = _write_cells(tmp_path, results, "train")
    write_training_tables(paths, tmp_path / "training.csv", tmp_path / "step0.csv")
    frame, agreement = read_tidy(tmp_path / "training.csv"), read_tidy(tmp_path / "step0.csv")
    text = training_section(frame, agreement, published=read_published(PUBLISHED))
    assert leaked(text) == []
    assert "small CNN & " in text, "the tables' model column"
    if study.startswith("three"):
        assert "All three frameworks train ResNet-50 and the small CNN from" in text
    else:
        assert "compiled PyTorch trained the small CNN" in text
    # a study without the small CNN says so in words
    assert leaked(training_section(frame[frame["model"] != "small_cnn"], agreement)) == []


# --------------------------------------------------------------------------------------------------------------------
# The models table (the one place identifiers belong) and the ledger's cell coordinates


def _fact(model: str, configuration: str) -> dict:
    return {
        "model": model,
        "configuration": configuration,
        "image_size": 32 if configuration == "study" else 224,
        "num_classes": 10 if configuration == "study" else 1000,
        "params_torch": 5,
        "params_flax": 5,
        "flops_torch": 1e9,
        "flops_xla": 1e9,
        "flops_difference": 0.0,
        "note": "counters agree",
    }


def test_the_models_table_names_each_model_then_gives_its_config_name_on_its_second_row():
    models = sorted(identifiers())
    facts = [_fact(model, configuration) for model in models for configuration in ("study", "torchvision")]
    table = models_table(facts, {"resnet50": "torchvision weights", "small_cnn": "seeded"})
    assert r"\textbf{Model} & \textbf{Setting}" in table
    rows = [line.split(" & ") for line in table.splitlines() if line.endswith(r"\\") and "textbf" not in line]
    assert [row[0] for row in rows[1::2]] == [rf"\texttt{{{model.replace('_', chr(92) + '_')}}}" for model in models]
    assert [row[0] for row in rows[::2]] == [model_name(model) for model in models]
    assert leaked("\n".join(" & ".join(row) for row in rows[::2])) == []
    assert "ResNet-50: torchvision weights; small CNN: seeded" in table
    assert leaked(table.split(r"\end{tabular}")[1]) == [], "the notes under the table name models too"


def test_the_ledger_table_names_cells_by_their_display_names_and_its_csv_keeps_identifiers():
    rows = pd.DataFrame(
        [
            {
                "control": "Compiled cells did not recompile",
                "status": "did not hold",
                "measured": "worst relative error 1e-5 (resnet50)",
                "where": "inference jax jit efficientnet_b0 fp32 bs1 (3 of 3 trials), torch/eager small_cnn bs32 (1)",
            }
        ]
    )
    table = ledger_table(rows)
    assert leaked(table) == []
    assert "inference jax jit EfficientNet-B0 fp32 bs1" in table and "(ResNet-50)" in table
    assert "efficientnet_b0" in rows["where"].iloc[0], "the rows (ledger.csv) keep the identifiers"
