"""Figures for the paper and the Snakemake report, drawn from the tidy table."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from fwbench.analysis.common.latex import label, ordered_variants, variant_label, variant_short  # noqa: E402
from fwbench.analysis.common.names import model_name  # noqa: E402
from fwbench.analysis.common.partners import multi_mode, with_modes  # noqa: E402
from fwbench.analysis.common.style import paper_theme  # noqa: E402
from fwbench.analysis.inference.summary import refused, resolved_adjusted  # noqa: E402
from fwbench.study.modes import MODES  # noqa: E402

# One colour per framework label, the same in every figure (inference, training, micro).
PALETTE = {"PyTorch": "#ee4c2c", "JAX/Flax": "#5e97f6", "TensorFlow/Keras": "#2e9e44"}


def save_figure(fig: plt.Figure, pdf: str | Path, png: str | Path) -> None:
    # Atomic per file: write next to the target, then rename; metadata pinned so reruns give the same PDF bytes.
    for path, kwargs in ((Path(pdf), {"metadata": {"CreationDate": None}}), (Path(png), {"dpi": 200})):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
        fig.savefig(tmp, bbox_inches="tight", **kwargs)
        os.replace(tmp, path)


# The micro suite's NumPy baseline, which has no label of the paper's (fwbench.analysis.micro.vocabulary names it).
OTHER_COLOURS = {"numpy": "#333333"}
SHADE = 0.45  # how far towards white a framework's later modes are drawn, per mode after its first


def variant_color(framework: str, mode: str | None = None) -> str:
    """A (framework, mode)'s colour in every figure: the framework's own (PALETTE) for its primary mode, a lighter
    shade of it for each later mode in the registry (compiled PyTorch beside eager PyTorch), so a figure tells the
    modes of one framework apart while keeping them visibly one framework's."""
    base = PALETTE.get(label(framework)) or OTHER_COLOURS.get(framework, "#888888")
    order = MODES.get(framework, ())
    rank = order.index(mode) if mode in order else 0
    if rank == 0:
        return base
    mix = min(0.8, SHADE * rank)
    rgb = [channel + (1.0 - channel) * mix for channel in matplotlib.colors.to_rgb(base)]
    return matplotlib.colors.to_hex(rgb)


def series_labels(frame: pd.DataFrame) -> tuple[pd.Series, dict[str, str]]:
    """Each row's series name, a framework in one execution mode ("PyTorch (eager)", "PyTorch (compiled)"; the
    framework alone where the study ran it in one mode only), and each name's colour, in the paper's order (the
    palette's order is the legend's)."""
    frame = with_modes(frame)
    variants = list(zip(frame["framework"], frame["mode"], strict=True))
    several = multi_mode(variants)

    def name(variant: tuple[str, str]) -> str:
        return variant_label(*variant, alone=variant[0] not in several)

    palette = {name(v): variant_color(*v) for v in ordered_variants(variants)}
    return pd.Series([name(v) for v in variants], index=frame.index), palette


def throughput_figure(frame: pd.DataFrame, pdf: str | Path, png: str | Path) -> None:
    """Throughput against batch size, one panel per model, one line per framework and execution mode (a
    framework's second mode a lighter shade of its colour, named with its mode), each cell's 95% CI as a vertical
    bar (over its trials; the within-process bootstrap for a cell of one trial); failed cells marked ×."""
    import seaborn as sns  # here, not at the top: the other figures' jobs need not import it (common/style.py)

    paper_theme(font_scale=0.9)
    names, palette = series_labels(frame)
    data = frame.assign(Framework=names)
    models = sorted(data["model"].unique())
    ncols = min(3, len(models))
    nrows = -(-len(models) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.6 * nrows), squeeze=False)
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
                hue_order=list(palette),  # every series in the first panel's legend, measured there or not
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
        ax.set_title(model_name(model))
        ax.set_xlabel("batch size")
        ax.set_ylabel("throughput (img/s)")
    for ax in list(axes.flat)[len(models) :]:
        ax.set_visible(False)
    fig.tight_layout()
    save_figure(fig, pdf, png)
    plt.close(fig)


def _gain_label(row: pd.Series, several_precisions: bool, several_variants: bool) -> str:
    """A gain's row on the figure: model and batch size, the precision and the mode pair only where they vary."""
    text = f"{model_name(row['model'])}, bs {int(row['batch_size'])}"
    if several_precisions:
        text += f", {row['precision']}"
    if several_variants:
        text = f"{variant_short(row['framework'], row['mode'])}/{row['baseline_mode']}: " + text
    return text


def _symmetric_limits(gains: pd.DataFrame) -> tuple[float, float]:
    """x limits symmetric around 1 on the log axis, wide enough for every interval (at least 0.8 to 1.25)."""
    low = gains[["ratio", "ci_low"]].min(axis=1).astype(float)
    high = gains[["ratio", "ci_high"]].max(axis=1).astype(float)
    reach = max(1.25, float((1 / low).max()), float(high.max())) * 1.1
    return 1 / reach, reach


def _not_measured(ax: plt.Axes) -> None:
    ax.axis("off")
    ax.text(
        0.5,
        0.5,
        "Not measured in this study:\nno framework ran both eagerly and compiled\nin one comparison.",
        ha="center",
        va="center",
        transform=ax.transAxes,
    )


def mode_gain_figure(gains: pd.DataFrame, pdf: str | Path, png: str | Path) -> None:
    """The eager-vs-compiled gain within a framework (`ratios.mode_gains`): the compiled cell's throughput over
    the eager one's with its 95% CI, one row per model and batch size (and precision, and mode pair, where they
    vary), on a log axis symmetric around 1 with a line at 1, so a gain and a loss of the same factor look alike.
    Filled: resolved (the paired test over interleaved rounds, adjusted within the framework's gains:
    `summary.resolved_adjusted`); hollow: not. Refused gains (cells on different device models) are left out. A
    study with no framework in two modes gets a figure that says so."""
    paper_theme(font_scale=0.9)
    gains = gains[~refused(gains) & gains["ratio"].notna()] if not gains.empty else gains
    # one row per gain, the figure no taller than a column leaves room for its caption
    fig, ax = plt.subplots(figsize=(3.4, min(8.0, 0.9 + 0.22 * max(len(gains), 3))))
    if gains.empty:
        _not_measured(ax)
    else:
        gains = gains.reset_index(drop=True)
        filled = resolved_adjusted(gains)
        several_variants = gains[["framework", "mode", "baseline_mode"]].drop_duplicates().shape[0] > 1
        labels = [_gain_label(row, gains["precision"].nunique() > 1, several_variants) for _, row in gains.iterrows()]
        for y, row in gains.iterrows():
            colour = variant_color(row["framework"], row["mode"])
            resolved = bool(filled[y])
            ax.errorbar(
                [row["ratio"]],
                [y],
                xerr=[[row["ratio"] - row["ci_low"]], [row["ci_high"] - row["ratio"]]],
                fmt="o",
                color=colour,
                markerfacecolor=colour if resolved else "white",
                capsize=2,
            )
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        low, high = _symmetric_limits(gains)
        ax.set_xlim(low, high)
        # Ticks at the round factors inside the range (a log axis within one decade would show only 1×).
        ax.set_xticks([t for t in (0.1, 0.25, 0.5, 1, 2, 4, 10) if low <= t <= high])
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}×"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_yticks(range(len(gains)), labels)
        ax.invert_yaxis()
        ax.set_xlabel("throughput, compiled / eager (log scale; filled: resolved)")
    fig.tight_layout()
    save_figure(fig, pdf, png)
    plt.close(fig)
