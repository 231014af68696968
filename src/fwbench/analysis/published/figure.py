"""The published-vs-reproduced figure: per model and batch size, the published speed ratio to PyTorch (open
marker, with the equivalence margin around it as a grey bar) beside this study's: with its paired 95% CI (filled
marker, bars) where a verdict was tested, a cross without bars where only the direction is compared; on a log axis
around 1."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from fwbench.analysis.common.latex import label  # noqa: E402
from fwbench.analysis.common.names import model_name  # noqa: E402
from fwbench.analysis.inference.figures import PALETTE, save_figure  # noqa: E402
from fwbench.analysis.published.judgement import TESTED  # noqa: E402


def published_figure(rows: pd.DataFrame, pdf: str | Path, png: str | Path) -> None:
    """One x position per matched (model, batch size, framework); an empty comparison draws a note saying so."""
    rows = rows.sort_values(["model", "batch_size", "framework"]).reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(3.5, 2.6))
    if rows.empty:
        ax.text(0.5, 0.5, "no published figure matches a cell of this study", ha="center", va="center", fontsize=8)
        ax.set_axis_off()
        save_figure(fig, pdf, png)
        return
    x = range(len(rows))
    if {"margin_low", "margin_high"} <= set(rows):
        band = rows.dropna(subset=["margin_low", "margin_high"])
        ax.vlines(
            band.index - 0.12,
            band["margin_low"],
            band["margin_high"],
            color="0.75",
            linewidth=3,
            zorder=0,
            label="equivalence margin",
        )
    tested = rows["verdict"].isin(TESTED) if "verdict" in rows else rows["ci_low"].notna()
    for framework, part in rows.groupby("framework"):
        colour = PALETTE.get(label(framework), "tab:purple")
        ax.scatter(
            part.index - 0.12,
            part["published_ratio"],
            marker="o",
            facecolors="none",
            edgecolors=colour,
            s=22,
            label=f"{label(framework)} published",
        )
        measured = part[tested[part.index]].dropna(subset=["ratio"])
        lower = (measured["ratio"] - measured["ci_low"]).where(measured["ci_low"].notna(), 0)
        upper = (measured["ci_high"] - measured["ratio"]).where(measured["ci_high"].notna(), 0)
        ax.errorbar(
            measured.index + 0.12,
            measured["ratio"],
            yerr=[lower, upper],
            fmt="o",
            color=colour,
            markersize=4,
            capsize=2,
            linewidth=0.8,
            label=f"{label(framework)} here",
        )
        direction = part[~tested[part.index]].dropna(subset=["ratio"])
        if len(direction):
            ax.scatter(
                direction.index + 0.12,
                direction["ratio"],
                marker="x",
                color=colour,
                s=18,
                linewidths=0.9,
                label=f"{label(framework)} here, no paired CI",
            )
    ax.axhline(1.0, color="grey", linewidth=0.6, linestyle="--")
    # Room around every marker and bar (a log axis's automatic margins let the extreme markers sit on the frame).
    shown = [c for c in ("published_ratio", "ratio", "ci_low", "ci_high", "margin_low", "margin_high") if c in rows]
    drawn = rows[tested]  # a direction-only ratio's interval is not drawn
    values = pd.concat([(drawn if c in ("ci_low", "ci_high") else rows)[c] for c in shown]).dropna()
    values = values[values > 0]
    if not values.empty:
        ax.set_ylim(min(values.min(), 1.0) / 1.4, max(values.max(), 1.0) * 1.4)
    ax.set_yscale("log")
    # Ratios read as plain numbers (0.2, 0.5, 1, 2), not as powers of ten.
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(list(x))
    ax.set_xticklabels(
        [f"{model_name(m)}\nbs {b}" for m, b in zip(rows["model"], rows["batch_size"], strict=True)],
        rotation=60,
        ha="right",
        fontsize=6,
    )
    ax.set_ylabel("speed ratio to PyTorch", fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=6, frameon=False, loc="best")
    fig.tight_layout()
    save_figure(fig, pdf, png)
