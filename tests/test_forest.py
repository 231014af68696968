"""The paper's headline figure (fwbench.analysis.inference.forest): every ratio with its interval, by model and
framework pair. Drawn from a copy of a real study's ratio table (five models, two batch sizes, JAX and TensorFlow
over compiled PyTorch for two models and over eager PyTorch for three) and from the edge cases a study can produce:
no ratio, one pair, one model, failed or refused cells, several precisions, a table from before modes. The Figure is
inspected, not a rendering: no LaTeX, no framework."""

from __future__ import annotations

import math
import struct

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.text import Text

from fwbench.analysis.common.names import identifiers, model_name
from fwbench.analysis.inference.forest import (
    DAGGER,
    FONT_PT,
    MARKERS,
    NOT_MEASURED,
    WIDTH_IN,
    build_headline,
    headline_figure,
    row_keys,
    row_labels,
)

# The ratio table of a study on one GPU (results/tables/speedups.csv, rounded to 4 digits): model, batch size,
# numerator and its mode, PyTorch's mode, ratio and 95% CI. Three models had no compiled PyTorch cell, so their
# ratios stand against eager PyTorch (stand-ins, eager against compiled).
ARCHIVED_ROWS = [
    ("efficientnet_b0", 1, "jax", "jit", "eager", 1.1099, 1.0486, 1.1747),
    ("efficientnet_b0", 1, "tensorflow", "xla", "eager", 0.8814, 0.8132, 0.9554),
    ("efficientnet_b0", 32, "jax", "jit", "eager", 0.5042, 0.4700, 0.5410),
    ("efficientnet_b0", 32, "tensorflow", "xla", "eager", 0.5138, 0.4652, 0.5674),
    ("mobilenet_v3_small", 1, "jax", "jit", "compile", 1.1107, 1.0501, 1.1747),
    ("mobilenet_v3_small", 1, "tensorflow", "xla", "compile", 0.7475, 0.7046, 0.7929),
    ("mobilenet_v3_small", 32, "jax", "jit", "compile", 0.6253, 0.5928, 0.6596),
    ("mobilenet_v3_small", 32, "tensorflow", "xla", "compile", 0.5919, 0.5426, 0.6456),
    ("resnet50", 1, "jax", "jit", "eager", 0.4383, 0.4091, 0.4695),
    ("resnet50", 1, "tensorflow", "xla", "eager", 0.7718, 0.7311, 0.8148),
    ("resnet50", 32, "jax", "jit", "eager", 0.2511, 0.2319, 0.2718),
    ("resnet50", 32, "tensorflow", "xla", "eager", 0.2918, 0.2751, 0.3095),
    ("small_cnn", 1, "jax", "jit", "compile", 1.4177, 1.3444, 1.4949),
    ("small_cnn", 1, "tensorflow", "xla", "compile", 0.6439, 0.5878, 0.7054),
    ("small_cnn", 32, "jax", "jit", "compile", 0.5524, 0.5227, 0.5838),
    ("small_cnn", 32, "tensorflow", "xla", "compile", 0.8467, 0.8015, 0.8944),
    ("vit_b_16", 1, "jax", "jit", "eager", 1.6441, 1.5438, 1.7510),
    ("vit_b_16", 1, "tensorflow", "xla", "eager", 1.5558, 1.3779, 1.7567),
    ("vit_b_16", 32, "jax", "jit", "eager", 1.0843, 1.0215, 1.1511),
    ("vit_b_16", 32, "tensorflow", "xla", "eager", 1.1865, 1.1240, 1.2524),
]
PAIRS = ["JAX / eager PyTorch", "JAX / compiled PyTorch", "TensorFlow / eager PyTorch", "TensorFlow / compiled PyTorch"]


def archived() -> pd.DataFrame:
    """The archived table with the columns the figure reads, as `read_tidy` returns them (NaN for None)."""
    rows = []
    for model, batch, numerator, mode, baseline, ratio, low, high in ARCHIVED_ROWS:
        eager = baseline == "eager"
        rows.append(
            {
                "model": model,
                "precision": "fp32",
                "batch_size": batch,
                "ratio": ratio,
                "ci_low": low,
                "ci_high": high,
                "ci_scope": "paired_rounds",
                "resolved": True,
                "resolved_adjusted": True,
                "multiplicity": "holm",
                "numerator": numerator,
                "denominator": "torch",
                "numerator_mode": mode,
                "denominator_mode": baseline,
                "mixed_modes": eager,
                "stand_in": "torch: eager for compile" if eager else math.nan,
                "deviation_differs": False,
                "refused": math.nan,
            }
        )
    return pd.DataFrame(rows)


@pytest.fixture
def figure():
    """A built figure, closed after the test."""
    made = []

    def build(ratios: pd.DataFrame):
        made.append(build_headline(ratios))
        return made[-1]

    yield build
    for fig in made:
        plt.close(fig)


def texts(fig) -> list[str]:
    """Every non-empty text the figure shows: tick labels, axis label, legend, notes, daggers, "not measured"."""
    found = {id(t): t for t in fig.findobj(Text)}
    for ax in fig.axes:
        found.update({id(t): t for t in ax.get_yticklabels() + ax.get_xticklabels()})
    return [t.get_text() for t in found.values() if t.get_text() and t.get_visible()]


def leaked(labels: list[str]) -> list[str]:
    """The configuration identifiers (resnet50, vit_b_16, ...) that appear in any of `labels`."""
    return sorted({name for name in identifiers() for label in labels if name in label})


def y_labels(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_yticklabels()]


def legend_labels(fig) -> list[str]:
    """The legends' entries: the pairs', then what filled and open mean."""
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def lines_of(fig) -> list[str]:
    """Every line of every text (the footnote holds one note a line)."""
    return [line for text in texts(fig) for line in text.splitlines()]


def markers(fig) -> list:
    """The drawn ratios' markers: the errorbars' data points, not their caps nor the line at 1."""
    return [line for line in fig.axes[0].lines if line.get_marker() in MARKERS]


def x_labels_overlap(fig) -> bool:
    """Whether any two x tick labels, once drawn, come closer than a word space (3 pt): a narrow axis must label
    fewer factors rather than run them together."""
    fig.canvas.draw()
    boxes = sorted(
        (t.get_window_extent() for t in fig.axes[0].get_xticklabels() if t.get_text()), key=lambda box: box.x0
    )
    space = 3 * fig.dpi / 72
    return any(right.x0 - left.x1 < space for left, right in zip(boxes, boxes[1:], strict=False))


def png_width_in(path) -> float:
    """The saved PNG's width in inches (save_figure writes 200 dpi), read from its IHDR chunk."""
    width = struct.unpack(">I", path.read_bytes()[16:20])[0]
    return width / 200


def test_the_archived_table_gives_a_figure_for_one_column(tmp_path):
    pdf, png = tmp_path / "headline_ratios.pdf", tmp_path / "headline_ratios.png"
    headline_figure(archived(), pdf, png)
    assert pdf.read_bytes().startswith(b"%PDF")
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert not list(tmp_path.glob(".*tmp*")), "temporary files must be renamed away"
    # printed at \columnwidth (3.5 in), the saved figure scaled to it: nothing sticks out of the figure's width (the
    # saved bounding box adds 0.1 in each side), so no text is below the paper check's 7 pt
    width = png_width_in(png)
    assert width <= WIDTH_IN + 0.2 + 0.01
    assert FONT_PT * 3.5 / width >= 7.0


def test_every_text_is_at_least_7_pt(figure):
    fig = figure(archived())
    assert fig.get_size_inches()[0] <= 3.5
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text()]
    sizes += [t.get_fontsize() for t in fig.axes[0].get_yticklabels() + fig.axes[0].get_xticklabels()]
    assert min(sizes) >= 7.0


def test_rows_are_grouped_by_model_in_display_names(figure):
    fig = figure(archived())
    labels = y_labels(fig)
    assert len(labels) == 10  # five models at two batch sizes, one precision
    # CNNs first, by display name, then the transformer; the model named on its group's first row only
    assert labels == [
        "EfficientNet-B0  batch 1",
        "batch 32",
        "MobileNetV3-Small  batch 1",
        "batch 32",
        "ResNet-50  batch 1",
        "batch 32",
        "small CNN  batch 1",
        "batch 32",
        "ViT-B/16  batch 1",
        "batch 32",
    ]
    assert leaked(texts(fig)) == []


def test_the_identifier_check_catches_labels_without_display_names():
    """Negative control: the same rows labelled with the identifiers fail the check the figure passes."""
    keys = row_keys(archived())
    raw = row_labels(keys, several_precisions=False, name=str)
    assert leaked(raw) == ["efficientnet_b0", "mobilenet_v3_small", "resnet50", "small_cnn", "vit_b_16"]
    assert leaked(row_labels(keys, several_precisions=False, name=model_name)) == []


def test_each_pair_says_which_pytorch_it_stands_against(figure):
    fig = figure(archived())
    assert legend_labels(fig) == [*PAIRS, "resolved", "not resolved"]
    handles = dict(zip(legend_labels(fig), [h for legend in fig.legends for h in legend.legend_handles], strict=True))
    # one colour per numerator, one shape per PyTorch mode
    assert handles["JAX / eager PyTorch"].get_color() == handles["JAX / compiled PyTorch"].get_color()
    assert handles["JAX / eager PyTorch"].get_marker() != handles["JAX / compiled PyTorch"].get_marker()
    assert handles["JAX / eager PyTorch"].get_color() != handles["TensorFlow / eager PyTorch"].get_color()
    assert len(markers(fig)) == len(ARCHIVED_ROWS)


def test_the_axis_is_log_and_symmetric_around_1(figure):
    ax = figure(archived()).axes[0]
    assert ax.get_xscale() == "log"
    low, high = ax.get_xlim()
    assert low < 0.2318 and high > 1.7567
    assert low * high == pytest.approx(1.0)
    assert 1.0 in ax.get_xticks()
    assert len(ax.get_xticks()) == 5 and not x_labels_overlap(ax.figure)
    assert any(list(line.get_xdata()) == [1.0, 1.0] for line in ax.lines), "a vertical line at 1"


def test_resolved_ratios_are_filled_and_the_others_open(figure):
    ratios = archived()
    ratios.loc[ratios["model"] == "vit_b_16", "resolved_adjusted"] = False
    ratios.loc[ratios["model"] == "resnet50", "ci_scope"] = "within_process"  # never resolves a comparison
    fig = figure(ratios)
    faces = [line.get_markerfacecolor() for line in markers(fig)]
    open_ = [face for face in faces if face == "white"]
    assert len(open_) == 8 and len(faces) == 20
    filled = [line for line in markers(fig) if line.get_markerfacecolor() != "white"]
    assert all(line.get_markerfacecolor() == line.get_color() for line in filled)


def test_stand_ins_and_mixed_modes_carry_a_dagger(figure):
    fig = figure(archived())
    shown = texts(fig)
    assert shown.count(DAGGER) == 12  # three models against eager PyTorch, two batch sizes, two numerators
    assert any(line.startswith(f"{DAGGER} ") for line in lines_of(fig)), "the note says what the dagger means"
    clean = archived()
    clean = clean[clean["denominator_mode"] == "compile"]
    assert DAGGER not in "".join(texts(figure(clean)))


@pytest.mark.parametrize("table", ["no rows", "no columns"])
def test_a_study_without_ratios_says_so(table, figure, tmp_path):
    ratios = archived().iloc[0:0] if table == "no rows" else pd.DataFrame()
    headline_figure(ratios, tmp_path / "none.pdf", tmp_path / "none.png")
    assert (tmp_path / "none.png").stat().st_size > 0
    assert any("No ratio was measured" in t for t in texts(figure(ratios)))


def test_one_pair_only(figure):
    ratios = archived()
    fig = figure(ratios[(ratios["numerator"] == "jax") & (ratios["denominator_mode"] == "compile")])
    assert legend_labels(fig) == ["JAX / compiled PyTorch", "resolved", "not resolved"]
    assert y_labels(fig) == ["MobileNetV3-Small  batch 1", "batch 32", "small CNN  batch 1", "batch 32"]
    assert {line.get_marker() for line in markers(fig)} == {"o"}


def test_one_model_only(figure):
    ratios = archived()
    fig = figure(ratios[ratios["model"] == "resnet50"])
    assert y_labels(fig) == ["ResNet-50  batch 1", "batch 32"]
    assert len(markers(fig)) == 4


def test_failed_and_refused_ratios_are_shown_as_not_measured(figure):
    ratios = archived()
    failed = (ratios["model"] == "small_cnn") & (ratios["batch_size"] == 32) & (ratios["numerator"] == "jax")
    ratios.loc[failed, ["ratio", "ci_low", "ci_high"]] = math.nan
    refused = (ratios["model"] == "resnet50") & (ratios["batch_size"] == 1) & (ratios["numerator"] == "tensorflow")
    ratios.loc[refused, ["ratio", "ci_low", "ci_high"]] = math.nan
    ratios["refused"] = ratios["refused"].astype(object)
    ratios.loc[refused, "refused"] = "jax on NVIDIA L4, torch on NVIDIA H100"
    fig = figure(ratios)
    shown = texts(fig)
    assert shown.count(NOT_MEASURED) == 2
    assert any(line.startswith(f"{NOT_MEASURED}: ") for line in lines_of(fig)), "the note says why"
    assert len(markers(fig)) == 18
    assert len(y_labels(fig)) == 10, "a row keeps its place when one of its ratios is missing"


def test_several_precisions_get_a_row_each(figure):
    fp32 = archived()
    ratios = pd.concat([fp32, fp32.assign(precision="bf16", ratio=fp32["ratio"] * 1.1)], ignore_index=True)
    fig = figure(ratios)
    labels = y_labels(fig)
    assert len(labels) == 20
    assert labels[:4] == ["EfficientNet-B0  batch 1, FP32", "batch 32, FP32", "batch 1, BF16", "batch 32, BF16"]
    assert leaked(texts(fig)) == []
    # the longest labels, "each framework's default float32" shortened: the narrower axis labels fewer factors
    wide = figure(pd.concat([fp32, fp32.assign(precision="default")], ignore_index=True))
    assert "batch 32, default float32" in y_labels(wide)
    assert len(wide.axes[0].get_xticks()) >= 3 and not x_labels_overlap(wide)


def test_several_batch_sizes_and_the_height_follows_the_rows(figure):
    ratios = archived()
    more = pd.concat([ratios, ratios.assign(batch_size=ratios["batch_size"] * 8)], ignore_index=True)
    tall = figure(more)
    assert y_labels(tall)[:4] == ["EfficientNet-B0  batch 1", "batch 8", "batch 32", "batch 256"]
    short = figure(ratios[ratios["model"] == "resnet50"])
    assert tall.get_size_inches()[1] > figure(ratios).get_size_inches()[1] > short.get_size_inches()[1]


def test_a_table_from_before_frameworks_and_modes_is_jax_over_pytorch(figure):
    old = archived()
    old = old[old["numerator"] == "jax"].drop(
        columns=["numerator", "denominator", "numerator_mode", "denominator_mode", "mixed_modes", "stand_in"]
    )
    fig = figure(old)
    assert legend_labels(fig) == ["JAX / PyTorch", "resolved", "not resolved"]
    assert len(markers(fig)) == 10


def test_the_overlap_check_catches_crowded_tick_labels(figure, monkeypatch):
    """Negative control: the narrow axis of several precisions, given every factor, runs its labels together."""
    from fwbench.analysis.inference import forest

    monkeypatch.setattr(forest, "TICK_IN", 0.01)
    fp32 = archived()
    crowded = figure(pd.concat([fp32, fp32.assign(precision="default")], ignore_index=True))
    assert x_labels_overlap(crowded)
