"""The paper's headline figure: every ratio of the study with its 95% interval, as a forest plot.

A reader who looks at one figure only should see the whole result: each framework's throughput over PyTorch's, for
every model, batch size and precision, with its uncertainty and whether the study resolves it. So the figure draws
every row of the ratio table (`ratios.speedups`), not a summary; it says which PyTorch each ratio stands against
(eager or compiled, a different question); and it shows, rather than drops, the ratios that were not measured, so
an empty spot is not read as "no difference".

Layout, for one IEEE column (3.5 in): one row per model, batch size (and precision where the study has several),
grouped by model (CNNs, then transformers, by name within a family), one marker per framework pair in the row,
coloured by the numerator's framework (`figures.variant_color`) and shaped by the PyTorch mode it is divided by.
Horizontal bars are the ratios' own 95% intervals; the x axis is logarithmic and symmetric around 1 (a line), so a
gain and a loss of the same factor look alike. A filled marker is resolved after the adjustment within its
framework pair (`summary.resolved_adjusted`), an open one is not; a dagger marks a ratio that sets an eager program
against a compiled one or pairs a stand-in mode (`summary.mixed_modes`, `summary.off_pairing`). Every text is set
at `FONT_PT`, so at the column's width none is below the paper check's 7 pt. Every label goes through
`fwbench.analysis.common.names`: no configuration identifier reaches the figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.font_manager  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.textpath  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from fwbench.analysis.common.latex import BASELINE, ordered_frameworks  # noqa: E402
from fwbench.analysis.common.names import model_family, model_name, precision_name, variant_name  # noqa: E402
from fwbench.analysis.common.style import paper_theme  # noqa: E402
from fwbench.analysis.inference.figures import save_figure, variant_color  # noqa: E402
from fwbench.analysis.inference.summary import mixed_modes, off_pairing, refused, resolved_adjusted  # noqa: E402
from fwbench.study.modes import MODES  # noqa: E402

# The figure is drawn at the column's width (\columnwidth is 3.5 in in IEEEtran), so it is printed at about its own
# size and FONT_PT is what the reader gets; the paper check fails any text below 7 pt.
WIDTH_IN = 3.4
FONT_PT = 8.0
# Vertical room: a row holds its pairs' markers PAIR_IN apart plus a gap; the figure stops growing at a column's
# height (a study that large reads its numbers from the tables).
PAIR_IN = 0.075
ROW_GAP_IN = 0.08
GROUP_GAP = 0.35  # extra space between two models' rows, in rows
MAX_HEIGHT_IN = 9.0
# One marker shape per PyTorch mode a ratio is divided by, in the registry's order (a study with one baseline mode
# draws circles only).
MARKERS = ("o", "s", "D", "^", "v", "P")
MARKER_PT = 4.5
FAMILY_ORDER = ("CNN", "transformer")
PRECISION_ORDER = ("fp32", "tf32", "bf16", "fp16", "default")
# The room one x tick label ("0.25×") needs, so that a narrow axis labels fewer factors rather than overlap them.
TICK_IN = 0.3
TEXT_WIDTH = matplotlib.textpath.TextToPath()
DAGGER = "\u2020"
NOT_MEASURED = "not measured"


def _text(value) -> str | None:
    """A string cell of a CSV-read table, None where it is empty or NaN."""
    if value is None or (not isinstance(value, str) and pd.isna(value)) or str(value) == "":
        return None
    return str(value)


def pair_label(numerator: str, numerator_mode: str | None, denominator: str, denominator_mode: str | None) -> str:
    """ "JAX / compiled PyTorch", "TensorFlow / eager PyTorch": the label says which PyTorch the ratio stands
    against, since a ratio over eager PyTorch measures the compiler as much as the framework."""
    over = variant_name(denominator, denominator_mode, alone=False)
    return f"{variant_name(numerator, numerator_mode, alone=False)} / {over}"


def _prepared(ratios: pd.DataFrame) -> pd.DataFrame:
    """The ratio table with what the figure draws per row: its pair (label, colour, baseline mode), whether it was
    measured (a finite positive ratio, not refused), resolved after adjustment, and marked. Tolerates a table from
    before the framework and mode columns (JAX over PyTorch, modes unknown)."""
    frame = ratios.reset_index(drop=True).copy()
    for column, default in (("numerator", "jax"), ("denominator", BASELINE), ("precision", "")):
        if column not in frame:
            frame[column] = default
    # one type per key column, so rows group and sort alike whatever the CSV reader made of them
    frame["model"] = frame["model"].astype(str)
    frame["precision"] = [_text(v) or "" for v in frame["precision"]]
    frame["batch_size"] = frame["batch_size"].astype(int)
    for column in ("numerator_mode", "denominator_mode"):
        frame[column] = [_text(v) for v in frame[column]] if column in frame else None
    ratio = pd.to_numeric(frame["ratio"], errors="coerce")
    frame["measured"] = ~refused(frame) & ratio.gt(0) & np.isfinite(ratio)
    frame["filled"] = resolved_adjusted(frame) & frame["measured"]
    frame["marked"] = (mixed_modes(frame) | off_pairing(frame)) & frame["measured"]
    frame["pair"] = [
        pair_label(str(n), nm, str(d), dm)
        for n, nm, d, dm in zip(
            frame["numerator"], frame["numerator_mode"], frame["denominator"], frame["denominator_mode"], strict=True
        )
    ]
    frame["colour"] = [
        variant_color(str(n), m) for n, m in zip(frame["numerator"], frame["numerator_mode"], strict=True)
    ]
    return frame


def _mode_rank(framework: str, mode: str | None) -> int:
    order = MODES.get(framework, ())
    return order.index(mode) if mode in order else len(order)


def pair_order(frame: pd.DataFrame) -> list[str]:
    """The pairs in the paper's order: by the numerator's framework (PyTorch, JAX, TensorFlow), its mode, then the
    PyTorch mode it is divided by, in the registry's order (eager before compiled)."""
    frameworks = ordered_frameworks(frame["numerator"])
    keys = {}
    for row in frame.itertuples():
        keys[row.pair] = (
            frameworks.index(str(row.numerator)),
            _mode_rank(str(row.numerator), row.numerator_mode),
            _mode_rank(str(row.denominator), row.denominator_mode),
            row.pair,
        )
    return sorted(keys, key=keys.get)


def pair_markers(frame: pd.DataFrame) -> dict[str, str]:
    """Each pair's marker: one shape per baseline (denominator framework and mode), so "JAX / compiled PyTorch" and
    "JAX / eager PyTorch", which share JAX's colour, still differ."""
    baselines = sorted(
        {(str(d), m) for d, m in zip(frame["denominator"], frame["denominator_mode"], strict=True)},
        key=lambda b: (b[0], _mode_rank(*b), str(b[1])),
    )
    shape = {b: MARKERS[i % len(MARKERS)] for i, b in enumerate(baselines)}
    return {row.pair: shape[(str(row.denominator), row.denominator_mode)] for row in frame.itertuples(index=False)}


def _precision_rank(precision: str) -> tuple[int, str]:
    return (PRECISION_ORDER.index(precision) if precision in PRECISION_ORDER else len(PRECISION_ORDER), precision)


def _precision_label(precision: str) -> str:
    """A precision in a row label: its display name, the long "each framework's default float32" shortened to fit a
    tick label."""
    return "default float32" if precision == "default" else precision_name(precision)


def row_keys(frame: pd.DataFrame) -> list[tuple[str, str, int]]:
    """The figure's rows, (model, precision, batch size), top to bottom: models by family (CNNs, then transformers,
    then any other) and display name, so the kinds of model a finding generalises over sit together; within a model
    by precision, then batch size."""
    keys = set(zip(frame["model"], frame["precision"], frame["batch_size"], strict=True))

    def order(key: tuple[str, str, int]) -> tuple:
        model, precision, batch = key
        family = model_family(model)
        rank = FAMILY_ORDER.index(family) if family in FAMILY_ORDER else len(FAMILY_ORDER)
        return (rank, family, model_name(model).casefold(), model, _precision_rank(precision), batch)

    return sorted(keys, key=order)


def row_labels(
    keys: Sequence[tuple[str, str, int]], several_precisions: bool, name: Callable[[str], str] = model_name
) -> list[str]:
    """Each row's tick label: the model's display name on its first row only (the group reads as one block), then
    the batch size and, where the study has several, the precision: "ResNet-50  batch 1", "batch 32, BF16". `name`
    is the model's display name; a test passes `str` to show what a label with identifiers would look like."""
    labels, previous = [], None
    for model, precision, batch in keys:
        text = f"batch {batch}" + (f", {_precision_label(precision)}" if several_precisions else "")
        labels.append(f"{name(model)}  {text}" if model != previous else text)
        previous = model
    return labels


def _layout(keys: Sequence[tuple[str, str, int]]) -> tuple[list[float], list[tuple[float, float]]]:
    """Each row's y position (one unit per row, GROUP_GAP more between models) and each model group's extent (for
    its shading)."""
    ys, groups, y, previous = [], [], 0.0, None
    for model, _, _ in keys:
        if previous is not None and model != previous:
            y += GROUP_GAP
        if model != previous:
            groups.append((y, y))
        ys.append(y)
        groups[-1] = (groups[-1][0], y)
        previous, y = model, y + 1.0
    return ys, groups


def _limits(measured: pd.DataFrame) -> tuple[float, float]:
    """x limits symmetric around 1 on the log axis, wide enough for every ratio and interval (at least 0.8 to 1.25,
    so a figure of tiny differences does not magnify them)."""
    values = pd.concat([measured[c] for c in ("ratio", "ci_low", "ci_high") if c in measured])
    values = pd.to_numeric(values, errors="coerce")
    values = values[values.gt(0) & np.isfinite(values)]
    reach = 1.25 if values.empty else max(1.25, float((1 / values).max()), float(values.max()))
    reach *= 1.12  # room for a dagger beyond the widest interval
    return 1 / reach, reach


def _ticks(low: float, high: float, most: int) -> list[float]:
    """Round factors inside the range, symmetric around 1: tenths near 1, powers of two (then of four, of ten) further
    out, at most `most` of them (a log axis within one decade would otherwise label 1 alone, and a narrow one would
    run its labels together)."""
    if high <= 2.5:
        candidates = [0.8, 0.9, 1.0, 1.1, 1.25] if high <= 1.5 else [0.5, 2 / 3, 1.0, 1.5, 2.0]
        return [t for t in (candidates if most >= 5 else candidates[::2]) if low <= t <= high]
    step = 1
    while 2 * math.floor(math.log2(high) / step) + 1 > max(most, 3):
        step += 1
    ticks = [2.0**k for k in range(-step * 20, step * 20 + 1, step) if low <= 2.0**k <= high]
    return ticks if len(ticks) >= 3 else [t for t in (10.0**k for k in range(-6, 7)) if low <= t <= high]


def _axis_in(labels: Sequence[str]) -> float:
    """The x axis's width in inches once the longest row label has taken its share of the figure (measured from the
    font, before any drawing)."""
    font = matplotlib.font_manager.FontProperties(size=FONT_PT)
    widest = max(TEXT_WIDTH.get_text_width_height_descent(label, font, ismath=False)[0] for label in labels)
    return WIDTH_IN - widest / 72 - 0.2


def _not_measured_at_all(fig: plt.Figure) -> None:
    ax = fig.add_subplot()
    ax.axis("off")
    ax.text(
        0.5,
        0.5,
        "No ratio was measured in this study:\nno framework pair has two\nsuccessful cells to compare.",
        ha="center",
        va="center",
        fontsize=FONT_PT,
        transform=ax.transAxes,
    )


def _legend(fig: plt.Figure, pairs: list[str], colours: dict[str, str], markers: dict[str, str]) -> None:
    """Above the axes, two legends side by side: the pairs (colour and shape, filled) in one column on the left, what
    filled and open mean on the right. Two pair labels side by side would be wider than the column."""
    handles = [
        Line2D([], [], color=colours[p], marker=markers[p], markerfacecolor=colours[p], markersize=MARKER_PT, lw=1)
        for p in pairs
    ]
    fill = [
        Line2D([], [], color="#444444", marker="o", markerfacecolor=face, markersize=MARKER_PT, lw=0)
        for face in ("#444444", "white")
    ]
    style = {"frameon": False, "fontsize": FONT_PT, "handlelength": 1.6, "handletextpad": 0.4, "borderaxespad": 0.1}
    fig.legend(handles, pairs, loc="outside upper left", **style)
    fig.legend(fill, ["resolved", "not resolved"], loc="outside upper right", **style)


def _notes(frame: pd.DataFrame) -> str:
    """The footnote: what the dagger and "not measured" mean, only where the figure shows them."""
    notes = []
    if frame["marked"].any():
        notes.append(f"{DAGGER} eager against compiled, or a stand-in mode")
    if (~frame["measured"]).any():
        notes.append(f"{NOT_MEASURED}: a cell failed, or the devices differed")
    return "\n".join(notes)


def _draw_row_entries(
    ax: plt.Axes, rows: pd.DataFrame, y: float, order: list[str], markers: dict[str, str], dodge: float
) -> None:
    """One row's pairs, `dodge` row units apart in the paper's order: a marker with its interval, or the words "not
    measured" where the pair has no ratio."""
    present = [p for p in order if p in set(rows["pair"])]
    for i, pair in enumerate(present):
        row = rows[rows["pair"] == pair].iloc[0]
        at = y + (i - (len(present) - 1) / 2) * dodge
        colour = row["colour"]
        if not row["measured"]:
            ax.text(
                1.0,
                at,
                NOT_MEASURED,
                ha="center",
                va="center",
                fontsize=FONT_PT,
                style="italic",
                color=colour,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.3},
                zorder=4,
            )
            continue
        ratio = float(row["ratio"])
        low, high = float(row.get("ci_low", math.nan)), float(row.get("ci_high", math.nan))
        has_interval = math.isfinite(low) and math.isfinite(high) and 0 < low <= ratio <= high
        ax.errorbar(
            [ratio],
            [at],
            xerr=[[ratio - low], [high - ratio]] if has_interval else None,
            fmt=markers[pair],
            color=colour,
            markerfacecolor=colour if row["filled"] else "white",
            markeredgewidth=1.0,
            markersize=MARKER_PT,
            elinewidth=1.0,
            capsize=1.5,
            zorder=3,
        )
        if row["marked"]:
            ax.annotate(
                DAGGER,
                (high if has_interval else ratio, at),
                xytext=(2, 0),
                textcoords="offset points",
                ha="left",
                va="center",
                fontsize=FONT_PT,
                color=colour,
            )


def _row_in(pairs: int) -> float:
    """The height in inches one row needs for `pairs` dodged markers."""
    return ROW_GAP_IN + PAIR_IN * max(pairs, 1)


def build_headline(ratios: pd.DataFrame) -> plt.Figure:
    """The headline figure (see the module's docstring) as a Figure, unsaved: `headline_figure` saves it, tests read
    its Axes. An empty table gives a figure that says no ratio was measured."""
    paper_theme(font_scale=0.9)
    frame = _prepared(ratios) if not ratios.empty else ratios
    if frame.empty:
        fig = plt.figure(figsize=(WIDTH_IN, 1.2), layout="constrained")
        _not_measured_at_all(fig)
        return fig
    keys = row_keys(frame)
    order = pair_order(frame)
    markers = pair_markers(frame)
    colours = dict(zip(frame["pair"], frame["colour"], strict=True))
    by_row = dict(iter(frame.groupby(["model", "precision", "batch_size"], sort=False)))
    fullest = max(rows["pair"].nunique() for rows in by_row.values())
    ys, groups = _layout(keys)
    notes = _notes(frame)
    # around the rows: the legend's lines, the x axis and its label, the notes' lines
    overhead = 0.17 * max(len(order), 2) + 0.75 + 0.15 * (notes.count("\n") + 1 if notes else 0)
    span = ys[-1] + 1.0 + GROUP_GAP
    height = min(MAX_HEIGHT_IN, max(1.8, span * _row_in(fullest) + overhead))
    unit_in = (height - overhead) / span  # a row's height as drawn (less than it needs where the cap cut it)
    dodge = min(PAIR_IN / unit_in, 0.7 / max(fullest - 1, 1))
    fig = plt.figure(figsize=(WIDTH_IN, height), layout="constrained")
    ax = fig.add_subplot()
    for index, (top, bottom) in enumerate(groups):
        if index % 2 == 1:  # every other model shaded, so a group reads as one block across the axis
            ax.axhspan(top - 0.5 - GROUP_GAP / 2, bottom + 0.5 + GROUP_GAP / 2, color="#f0f0f0", zorder=0, lw=0)
    ax.axvline(1.0, color="black", linewidth=0.8, zorder=2)
    for key, y in zip(keys, ys, strict=True):
        _draw_row_entries(ax, by_row[key], y, order, markers, dodge)
    ax.set_xscale("log")
    low, high = _limits(frame[frame["measured"]])
    ax.set_xlim(low, high)
    labels = row_labels(keys, frame["precision"].nunique() > 1)
    ax.set_xticks(_ticks(low, high, most=int(_axis_in(labels) / TICK_IN)))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:.3g}\u00d7"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_yticks(ys, labels)
    ax.set_ylim(ys[-1] + 0.5 + GROUP_GAP / 2, -0.5 - GROUP_GAP / 2)  # top to bottom
    ax.grid(axis="y", visible=False)
    ax.tick_params(axis="both", labelsize=FONT_PT, length=0, pad=2)
    # two lines: one would be wider than the axis and stick out of the column
    ax.set_xlabel("throughput over PyTorch's\n(log scale; > 1: faster)", fontsize=FONT_PT, linespacing=1.1)
    _legend(fig, order, colours, markers)
    if notes:
        fig.supxlabel(notes, fontsize=FONT_PT, x=0.01, ha="left", linespacing=1.1)
    return fig


def headline_figure(ratios: pd.DataFrame, pdf: str | Path, png: str | Path) -> None:
    """Write the headline figure of a ratio table (`ratios.speedups`, or its CSV read back) as a PDF for the paper
    and a PNG for the HTML report."""
    fig = build_headline(ratios)
    save_figure(fig, pdf, png)
    plt.close(fig)
