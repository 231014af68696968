"""The micro suite's figure: time per call and speedup over NumPy by batch size, crossovers and the reference
marked. One series per framework and execution mode: a framework's second mode (compiled PyTorch beside eager) is a
lighter shade of its colour, and named with its mode.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import FRAMEWORK_LABELS
from fwbench.analysis.inference.figures import variant_color
from fwbench.analysis.micro.reference import (
    REFERENCE_STUDY,
    SERIES,
    reference_for,
)
from fwbench.analysis.micro.vocabulary import (
    NUMPY,
    frame_modes,
    is_measured,
    mode_names,
    one_value,
    row_modes,
)


def framework_order(frameworks: Iterable[str]) -> list[str]:
    """NumPy first, then the study's frameworks in the paper's usual order (PyTorch, JAX), then any other."""
    known = [NUMPY, *FRAMEWORK_LABELS]
    found = set(frameworks)
    return [f for f in known if f in found] + sorted(found - set(known))


def _panels(frame: pd.DataFrame) -> list[tuple[str, str]]:
    return sorted({(o, p) for o, p in zip(frame["operation"], frame["precision"], strict=True)})


def _batch_axis(ax, batches: Sequence[int]) -> None:
    """Log2 x axis with the measured batch sizes as ticks (every other label when there are many)."""
    import matplotlib.ticker

    ax.set_xscale("log", base=2)
    batches = sorted({int(b) for b in batches})
    if batches:
        step = max(1, math.ceil(len(batches) / 7))
        ax.set_xticks(batches)
        ax.set_xticklabels([str(b) if i % step == 0 else "" for i, b in enumerate(batches)])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        if len(batches) == 1:
            ax.set_xlim(batches[0] / 2, batches[0] * 2)


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=7, color="#555555")


def _line(ax, x, y, low, high, *, color: str, dashed: bool, text: str) -> None:
    ax.plot(x, y, "--" if dashed else "-", marker="o", markersize=3, color=color, linewidth=1, label=text)
    bars = pd.DataFrame({"x": x, "low": low, "high": high}).dropna()
    if not bars.empty:
        ax.vlines(bars["x"], bars["low"], bars["high"], color=color, linewidth=2, alpha=0.5)


def _series_label(name: str, variant: str) -> str:
    return name + (" + copy" if variant == "transfer" else "")


def _log_y(ax, values: Iterable[float]) -> None:
    positive = [v for v in values if is_measured(v) and v > 0]
    if not positive:
        ax.set_ylim(0.1, 10)
    ax.set_yscale("log")


def _series(ax, ok: pd.DataFrame, names: dict[tuple[str, str], str], columns: tuple[str, str, str]) -> None:
    """One line per framework, mode and variant (the copy variant dashed) of `columns` (value, CI low, CI high);
    `names`: each (framework, mode)'s name (`mode_names` of the whole study, so every panel names it alike)."""
    value, low, high = columns
    modes = row_modes(ok)
    for framework, mode in names:
        mine = ok[(ok["framework"] == framework) & (modes == mode)]
        for variant, rows in mine.groupby("variant", sort=False):
            rows = rows.sort_values("batch_size")
            _line(
                ax,
                rows["batch_size"],
                rows[value],
                rows[low],
                rows[high],
                color=variant_color(framework, mode),
                dashed=variant != "resident",
                text=_series_label(names[(framework, mode)], variant),
            )


def _time_panel(ax, panel: pd.DataFrame, names: dict[tuple[str, str], str]) -> None:
    """Median time per call against batch size, one line per framework, mode and variant (copy dashed)."""
    ok = panel[panel["status"] == "ok"]
    _series(ax, ok, names, ("median_ms", "median_ci_low", "median_ci_high"))
    failed = panel[panel["status"] != "ok"]
    if not failed.empty:
        floor = float(ok["median_ms"].min()) if not ok.empty else 1.0
        ax.scatter(failed["batch_size"], [floor] * len(failed), marker="x", color="black", zorder=5, label="failed")
    if ok.empty:
        _note(ax, "no successful cell")
    _log_y(ax, ok["median_ms"])
    ax.set_ylabel("time per call (ms)")


def _mark_crossovers(ax, crossovers: pd.DataFrame) -> None:
    """A dotted vertical line per crossover, labelled with its batch size ("<=b" when already at the smallest)."""
    import matplotlib.transforms

    blend = matplotlib.transforms.blended_transform_factory(ax.transData, ax.transAxes)
    for index, (_, row) in enumerate(crossovers[crossovers["kind"] == "crossover"].iterrows()):
        batch, color = int(row["crossover_batch"]), variant_color(row["framework"], row.get("mode"))
        ax.axvline(batch, color=color, linestyle=":" if row["variant"] == "resident" else "-.", linewidth=1)
        text = (f"≤{batch}" if bool(row["at_smallest"]) else str(batch)) + (" copy" * (row["variant"] != "resident"))
        ax.text(batch, 0.96 - 0.07 * index, text, transform=blend, color=color, fontsize=6, ha="left", va="top")


def _published_points(ax, published: pd.DataFrame, speedups: pd.DataFrame, operation: str) -> None:
    """The reference's speedups, as hollow markers, for the series each of our frameworks (in the mode the
    reference is taken to have run, `reference_for`) is compared with."""
    names = {
        reference_for(framework, one_value(rows["platform"]), mode): (framework, mode)
        for (framework, mode), rows in speedups.groupby(["framework", row_modes(speedups)])
    }
    for name, (framework, mode) in names.items():
        rows = published[(published["reference"] == name) & (published["operation"] == operation)]
        if name is None or rows.empty:
            continue
        ax.scatter(
            rows["batch_size"],
            rows["speedup"],
            marker="s",
            s=14,
            facecolors="none",
            edgecolors=variant_color(framework, mode),
            linewidths=0.8,
            label=f"{SERIES[name].label}, reference ({REFERENCE_STUDY})",
        )


def _speedup_panel(
    ax,
    speedups: pd.DataFrame,
    crossovers: pd.DataFrame,
    published: pd.DataFrame,
    operation: str,
    names: dict[tuple[str, str], str],
):
    """Speedup over NumPy with CI bars, the line at 1, crossovers and the reference's points."""
    ok = speedups[speedups["status"] == "ok"]
    _series(ax, ok, names, ("speedup", "ci_low", "ci_high"))
    missing = speedups[speedups["status"] != "ok"]
    if not missing.empty:
        ax.scatter(missing["batch_size"], [1.0] * len(missing), marker="x", color="black", zorder=5, label="failed")
    ax.axhline(1.0, color="#777777", linewidth=0.8)
    _mark_crossovers(ax, crossovers)
    if published is not None and not published.empty:
        _published_points(ax, published, speedups, operation)
    if ok.empty:
        _note(ax, "no speedup: no framework besides NumPy" if speedups.empty else "no successful pair of cells")
    _log_y(ax, [*ok["speedup"], *ok["ci_low"], *(published["speedup"] if published is not None else [])])
    ax.set_ylabel("speedup over NumPy")
    ax.set_xlabel("batch size")


def _select(frame: pd.DataFrame, operation: str, precision: str | None = None) -> pd.DataFrame:
    if frame is None or frame.empty:
        return frame
    keep = frame["operation"] == operation
    if precision is not None and "precision" in frame:
        keep &= frame["precision"] == precision
    return frame[keep]


def micro_figure(
    frame: pd.DataFrame,
    speedups: pd.DataFrame,
    crossovers: pd.DataFrame,
    published: pd.DataFrame | None,
    pdf: str | Path,
    png: str | Path,
) -> None:
    """Time per call (top) and speedup over NumPy (bottom) against batch size, log-log, one column per operation
    (and precision, when the study has several): one line per framework and mode, the copy variant dashed, 95% CI
    bars,
    crossovers as dotted lines labelled with their batch size, the reference's speedups as hollow squares, failed
    cells as x. A column without a successful cell is drawn empty, with a note."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fwbench.analysis.common.style import paper_theme
    from fwbench.analysis.inference.figures import save_figure

    paper_theme(font_scale=0.8)
    panels = _panels(frame)
    several = len({p for _, p in panels}) > 1
    names = mode_names(frame_modes(frame))
    fig, axes = plt.subplots(2, max(1, len(panels)), figsize=(3.3 * max(1, len(panels)), 4.8), squeeze=False)
    for column, (operation, precision) in enumerate(panels):
        top, bottom = axes[0, column], axes[1, column]
        cells = _select(frame, operation, precision)
        _time_panel(top, cells, names)
        _speedup_panel(
            bottom,
            _select(speedups, operation, precision),
            _select(crossovers, operation, precision),
            _select(published, operation),
            operation,
            names,
        )
        for ax in (top, bottom):
            _batch_axis(ax, cells["batch_size"])
        top.set_title(f"{operation} ({precision})" if several else operation)
    _legend(fig, axes)
    fig.tight_layout()
    save_figure(fig, pdf, png)
    plt.close(fig)


def _legend(fig, axes) -> None:
    """One legend for the figure, below it: every series any panel drew, once."""
    entries: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(text, handle)
    if entries:
        fig.legend(
            list(entries.values()),
            list(entries),
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=min(4, len(entries)),
            fontsize=6,
            frameon=False,
        )
