"""The section's figure: where each variant's step goes, one panel per profiled model, precision and batch size, one
horizontal bar per framework and execution mode, stacked by operation category in ms per step.

The categories keep the contract's order and one colour each in every panel (fwbench.analysis.profile.categories),
so a category is found at the same place in every bar. The timed median of the cell's trials is marked beside its
bar: the bar is what the profiler saw, the marker what the timed trials saw, and the gap between them is the
profiler's own overhead, which a reader must see before trusting a split. Each panel has its own scale (models
differ by orders of magnitude); the shares are in op_profile.csv."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from fwbench.analysis.common.latex import variant_label  # noqa: E402
from fwbench.analysis.common.names import model_name  # noqa: E402
from fwbench.analysis.common.style import paper_theme  # noqa: E402
from fwbench.analysis.inference.figures import save_figure  # noqa: E402
from fwbench.analysis.profile.categories import category_colour, category_label, ordered_categories  # noqa: E402
from fwbench.analysis.profile.tables import PANEL_KEYS, category_times, cell_rows, row_key  # noqa: E402

TIMED_MARKER = {"marker": "D", "color": "black", "markersize": 4, "markeredgecolor": "white", "markeredgewidth": 0.5}


def panel_title(model: str, precision: str, batch: int) -> str:
    return f"{model_name(model)}, bs {int(batch)}, {precision}"


def _no_profile(ax: plt.Axes) -> None:
    ax.axis("off")
    ax.text(0.5, 0.5, "No inference cell was profiled in this study.", ha="center", va="center", transform=ax.transAxes)


def _panel(ax: plt.Axes, cells: pd.DataFrame, times: dict, categories: list[str]) -> None:
    """One panel: a stacked bar per variant (first variant on top), the timed median as a black diamond."""
    labels = []
    for y, (_, cell) in enumerate(cells.iterrows()):
        key = row_key(cell)
        left = 0.0
        for category in categories:
            width = times[key].get(category, 0.0)
            if width > 0:
                ax.barh(y, width, left=left, color=category_colour(category), height=0.6, linewidth=0)
            left += width
        if pd.notna(cell["timed_step_ms"]):
            ax.plot([cell["timed_step_ms"]], [y], linestyle="none", **TIMED_MARKER)
        labels.append(variant_label(cell["framework"], cell["mode"]))
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlim(left=0)
    ax.set_xlabel("ms per step")
    ax.grid(axis="y", visible=False)


def profile_figure(table: pd.DataFrame, pdf: str | Path, png: str | Path) -> None:
    """The stacked-bar figure of an op-profile table (`tables.op_profile_table`), written atomically as PDF and PNG;
    a figure that says no cell was profiled when the table is empty (the paper builds either way)."""
    paper_theme(font_scale=0.9)
    if table.empty:
        fig, ax = plt.subplots(figsize=(3.4, 1.2))
        _no_profile(ax)
        save_figure(fig, pdf, png)
        plt.close(fig)
        return
    cells = cell_rows(table)
    times = category_times(table)
    categories = ordered_categories(table["category"])
    panels = list(cells.groupby(PANEL_KEYS, sort=False))
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    tallest = max(len(group) for _, group in panels)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, (0.9 + 0.32 * tallest) * nrows), squeeze=False)
    for ax, ((model, precision, batch), group) in zip(axes.flat, panels, strict=False):
        _panel(ax, group, times, categories)
        ax.set_title(panel_title(model, precision, batch))
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    handles = [Patch(color=category_colour(c), label=category_label(c)) for c in categories]
    handles.append(Line2D([], [], linestyle="none", label="timed median step", **TIMED_MARKER))
    fig.tight_layout()
    columns = min(3 if ncols > 1 else 2, len(handles))
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=columns, frameon=False)
    save_figure(fig, pdf, png)
    plt.close(fig)
