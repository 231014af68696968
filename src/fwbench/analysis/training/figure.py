"""The training curves figure: per model, the training loss per step and the validation top-1 against cumulative
training time, every variant (framework and execution mode) overlaid."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from fwbench.analysis.common.cells import load_cells
from fwbench.analysis.common.names import model_name
from fwbench.analysis.common.partners import cell_mode, variant_names
from fwbench.analysis.inference.figures import save_figure, variant_color


def training_figure(paths: Iterable[str | Path], pdf: str | Path, png: str | Path) -> None:
    """Per model: training loss per step (top) and validation top-1 per epoch (bottom), every variant (framework and
    execution mode) overlaid: one colour per framework, a lighter shade for its other mode, labelled with the mode
    where a framework trained in more than one."""
    import matplotlib.pyplot as plt

    from fwbench.analysis.common.style import paper_theme

    paper_theme(font_scale=0.8)
    results = [r for r in load_cells(paths) if r["status"] == "ok"]
    models = sorted({r["cell"]["model"] for r in results})
    if not models:
        raise ValueError("no successful training cell to plot")
    fig, axes = plt.subplots(2, len(models), figsize=(2.3 * len(models), 3.6), squeeze=False)
    batches = sorted({r["cell"]["batch_size"] for r in results})
    styles = dict(zip(batches, ["-", "--", ":", "-."] * 4, strict=False))
    names = variant_names((r["cell"]["framework"], cell_mode(r["cell"])) for r in results)
    for column, model in enumerate(models):
        loss_ax, top1_ax = axes[0, column], axes[1, column]
        for result in (r for r in results if r["cell"]["model"] == model):
            framework, batch = result["cell"]["framework"], result["cell"]["batch_size"]
            mode = cell_mode(result["cell"])
            color = variant_color(framework, mode)
            epochs = result["metrics"]["epochs"]
            curve = [v for e in epochs for v in e["loss_curve"]]
            name = names[(framework, mode)]
            series = f"{name} bs{batch}" if len(batches) > 1 else name
            loss_ax.plot(np.arange(1, len(curve) + 1), curve, styles[batch], color=color, linewidth=0.8, label=series)
            # Time to accuracy: top-1 at each epoch end against the cell's cumulative training time (BatchNorm
            # recalibration included, evaluation excluded).
            elapsed = [0.0] + [e["elapsed_s"] for e in epochs]
            initial = result["metrics"]["step0"]["initial_eval"]["top1"]
            top1 = [100 * initial] + [100 * e["top1"] for e in epochs]
            top1_ax.plot(elapsed, top1, styles[batch], marker="o", color=color, markersize=3, label=series)
            target = result["metrics"].get("target_top1")
        if target:
            top1_ax.axhline(100 * target, color="#999999", linestyle="--", linewidth=0.8, label="target")
        top1_ax.set_ylim(0, 102)
        loss_ax.set_title(model_name(model))
        loss_ax.set_xlabel("step")
        top1_ax.set_xlabel("training time (s)")
        if column == 0:
            loss_ax.set_ylabel("training loss")
            top1_ax.set_ylabel("validation top-1 (%)")
            loss_ax.legend(fontsize=6)
    fig.tight_layout()
    save_figure(fig, pdf, png)
    plt.close(fig)
