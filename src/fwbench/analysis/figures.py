"""Figures for the paper and the Snakemake report, drawn from the tidy table."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from fwbench.analysis.latex import FRAMEWORK_LABELS  # noqa: E402

# One colour per framework label, the same in every figure (inference, training, micro).
PALETTE = {"PyTorch": "#ee4c2c", "JAX/Flax": "#5e97f6", "TensorFlow/Keras": "#2e9e44"}


def save_figure(fig: plt.Figure, pdf: str | Path, png: str | Path) -> None:
    # Atomic per file: write next to the target, then rename; metadata pinned so reruns give the same PDF bytes.
    for path, kwargs in ((Path(pdf), {"metadata": {"CreationDate": None}}), (Path(png), {"dpi": 200})):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
        fig.savefig(tmp, bbox_inches="tight", **kwargs)
        os.replace(tmp, path)


def throughput_figure(frame: pd.DataFrame, pdf: str | Path, png: str | Path) -> None:
    """Throughput against batch size, one panel per model, one line per framework, each cell's 95% CI as a vertical
    bar (over its trials; the within-process bootstrap for a cell of one trial); failed cells marked ×."""
    sns.set_theme(context="paper", style="whitegrid", font_scale=0.9)
    data = frame.assign(Framework=frame["framework"].map(lambda f: FRAMEWORK_LABELS.get(f, f)))
    models = sorted(data["model"].unique())
    ncols = min(3, len(models))
    nrows = -(-len(models) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.6 * nrows), squeeze=False)
    palette = {**PALETTE, **{f: "#555555" for f in data["Framework"] if f not in PALETTE}}
    # Precision gets its own line style only when the study has more than one.
    style = {"style": "precision", "markers": True} if data["precision"].nunique() > 1 else {"marker": "o"}
    for ax, model in zip(axes.flat, models, strict=False):
        panel = data[data["model"] == model]
        ok = panel[panel["status"] == "ok"]
        if not ok.empty:
            sns.lineplot(
                data=ok,
                x="batch_size",
                y="throughput_img_s",
                hue="Framework",
                **style,
                dashes=False,
                palette=palette,
                ax=ax,
                legend=ax is axes.flat[0],
            )
        for framework, rows in ok.groupby("Framework"):
            if {"throughput_ci_low", "throughput_ci_high"} <= set(rows) and rows["throughput_ci_low"].notna().all():
                ax.vlines(
                    rows["batch_size"],
                    rows["throughput_ci_low"],
                    rows["throughput_ci_high"],
                    color=palette[framework],
                    linewidth=2.5,
                    alpha=0.6,
                )
        failed = panel[panel["status"] != "ok"]
        if not failed.empty:
            floor = ok["throughput_img_s"].min() if not ok.empty else 1.0
            ax.scatter(failed["batch_size"], [floor] * len(failed), marker="x", color="black", zorder=5, label="failed")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sorted(panel["batch_size"].unique()))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_title(model)
        ax.set_xlabel("batch size")
        ax.set_ylabel("throughput (img/s)")
    for ax in list(axes.flat)[len(models) :]:
        ax.set_visible(False)
    fig.tight_layout()
    save_figure(fig, pdf, png)
    plt.close(fig)
