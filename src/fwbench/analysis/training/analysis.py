"""Training results → tidy per-epoch table, the step-0 agreement of each framework with PyTorch, the paper's
training section (tables, and the loss/accuracy curves figure), for every framework the study trains.

Every cell is a (framework, execution mode) variant (fwbench.study.modes): PyTorch eager and PyTorch compiled
(torch.compile) are two rows everywhere, labelled with their mode wherever a framework trains in more than one. The
compiled PyTorch step's step-0 probe is compared with eager PyTorch's, so the paper shows that compiling the step
changed nothing it computes before it says anything about its speed."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from fwbench.analysis.common.cells import cells_by_path, load_cells
from fwbench.analysis.common.latex import (
    BASELINE,
    FRAMEWORK_LABELS,
    escape,
    join_words,
    label,
    macro_name,
    mode_label,
    number,
    ordered_frameworks,
    ordered_variants,
    others,
    variant_short,
)
from fwbench.analysis.common.partners import (
    cell_mode,
    deviations_differ,
    device_columns,
    failure_columns,
    flag_deviations,
    multi_mode,
    placement_columns,
    variant_names,
    with_modes,
)
from fwbench.analysis.inference.aggregate import graph_breaks, mode_columns
from fwbench.analysis.inference.figures import save_figure, variant_color
from fwbench.analysis.inference.tables import stacked_header
from fwbench.analysis.training.reference import comparison_section
from fwbench.io import atomic_write_text
from fwbench.study.modes import DESCRIPTIONS, MODES, is_compiled, primary

DEVIATION_MARK = r"$^{d}$"  # a cell that ran with a workaround; a pair whose cells ran with different ones

# Relative difference of the loss after one step in fp32: 1e-3, or three times PyTorch's own fp32 error against its
# float64 probe where that is larger (the same yardstick as the parity tests).
STEP0_TOLERANCE = 1e-3
KEYS = ["model", "precision", "batch_size", "framework", "mode"]
# The step-0 agreement's columns that do not name a variant (the others are `loss_<tag>` and so on, `variant_tag`).
STEP0_COLUMNS = ["model", "precision", "batch_size", "torch_fp32_error_after_step", "rel_diff_loss"]
STEP0_COLUMNS += ["rel_diff_loss_after_step", "rel_diff_grad_norm", "flagged", "deviation_differs"]
STEP0_COLUMNS += ["numerator", "denominator", "numerator_mode", "denominator_mode"]
# Every variant the step-0 summaries are defined for (the baseline's primary mode is what they compare with), so
# the paper compiles for any subset of them.
COMPARED_VARIANTS = [
    (framework, mode)
    for framework in FRAMEWORK_LABELS
    for mode in MODES.get(framework, ())
    if (framework, mode) != (BASELINE, primary(BASELINE))
]


def variant_tag(framework: str, mode: str | None) -> str:
    """The name a variant's own columns end in: the framework for its primary mode (`loss_jax`, `final_top1_torch`,
    as tables written before modes have them), framework_mode otherwise (`loss_torch_compile`)."""
    if not mode or framework not in MODES or mode == primary(framework):
        return framework
    return f"{framework}_{mode}"


def _macro_parts(framework: str, mode: str) -> tuple[str, ...]:
    """A variant's part of a macro name: the framework for its primary mode (fwbStepZeroMaxDiffJax), the framework
    and mode otherwise (fwbStepZeroMaxDiffTorchCompile)."""
    return (framework,) if mode == primary(framework) else (framework, mode)


def epoch_rows(paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per (cell, epoch); a failed cell is one row with its reason and no epoch. Every row carries its
    cell's execution mode (`mode`, `compiled`, how it compiled and autotuned, its graph breaks and whether it
    recompiled in the timed loop), its failure kind and deviations (`failure_columns`) and whether its partner cells
    (the other variants) ran with different workarounds (`deviation_differs`), and where it ran (`device_columns`,
    `placement_columns`: the conclusions refuse a time ratio across device models). The cell-level columns after
    `resumed_from_epoch` (initial RSS, initial device memory or why it is missing, the input layout) feed the
    comparison with the published L4 figures (`training_reference`) and the section's text."""
    rows = []
    for path, result in cells_by_path(paths):
        cell, metrics = result["cell"], result["metrics"] or {}
        base = {k: cell[k] for k in ("framework", "model", "precision", "batch_size", "image_size")}
        base |= mode_columns(result)
        base |= {"graph_breaks": graph_breaks(metrics), "recompiled": (metrics.get("flags") or {}).get("recompiled")}
        base |= {"status": result["status"], "reason": result["reason"], "path": str(path)}
        base |= failure_columns(result) | device_columns(result) | placement_columns(result)
        if result["status"] != "ok":
            rows.append(base)
            continue
        rss = (metrics.get("rss_mb") or {}).get("max")
        memory = (metrics.get("device_memory") or {}).get("max") or {}
        initial_memory = (metrics.get("device_memory") or {}).get("initial") or {}
        for epoch in metrics["epochs"]:
            energy = epoch.get("energy") or {}
            rows.append(
                base
                | {k: epoch[k] for k in ("epoch", "time_s", "img_s", "compile_s", "train_loss", "val_loss", "top1")}
                | {
                    "top5": epoch["top5"],
                    "top1_running_statistics": epoch.get("top1_running_statistics", epoch["top1"]),
                    "top1_batch_statistics": epoch.get("top1_batch_statistics"),
                    "bn_recalibration_s": epoch.get("bn_recalibration_s"),
                    "bn_recalibration_batches": (metrics.get("bn_recalibration") or {}).get("batches", 0),
                    "data_wait_frac": epoch["data_wait_frac"],
                    "energy_j": energy.get("joules"),
                    "energy_missing": (metrics.get("missing") or {}).get("energy"),
                    "rss_max_mb": rss,
                    # the epochs' own peak where the framework reports one (load and compilation apart)
                    "device_max_bytes": memory.get("steady_state_peak_bytes", memory.get("peak_allocated_bytes")),
                    "device_max_with_load_bytes": memory.get("peak_allocated_bytes"),
                    "step0_loss": metrics["step0"]["loss"],
                    "step0_loss_after_step": metrics["step0"]["loss_after_step"],
                    "step0_grad_norm": metrics["step0"]["grad_norm"],
                    "step0_fp64_loss_after_step": metrics["step0"].get("fp64_loss_after_step"),
                    "time_to_target_s": metrics.get("time_to_target_s"),
                    "target_top1": metrics.get("target_top1"),
                    "resumed_from_epoch": metrics.get("resumed_from_epoch"),
                    "rss_initial_mb": (metrics.get("rss_mb") or {}).get("initial"),
                    # the allocator's peak once the model and optimizer are loaded (before the first batch, compiling)
                    "device_initial_bytes": initial_memory.get("peak_allocated_bytes"),
                    "device_memory_missing": (metrics.get("missing") or {}).get("device_memory"),
                    "input_layout": metrics.get("input_layout"),
                }
            )
    frame = pd.DataFrame(rows)
    if frame.empty:
        raise ValueError("no training results to aggregate")
    frame = frame.sort_values([*KEYS, "epoch"] if "epoch" in frame else KEYS, kind="stable").reset_index(drop=True)
    return flag_deviations(frame, ["model", "precision", "batch_size"])


def _step0_row(key: tuple, a: pd.Series, b: pd.Series, frame: pd.DataFrame) -> dict:
    """One variant's step-0 figures (`a`) against the baseline's (`b`), for one (model, precision, batch); each
    side's own figures in columns named after its `variant_tag`."""
    model, precision, batch = key
    diff = {
        name: abs(a[f"step0_{name}"] - b[f"step0_{name}"]) / max(abs(b[f"step0_{name}"]), 1e-12)
        for name in ("loss", "loss_after_step", "grad_norm")
    }
    exact = b["step0_fp64_loss_after_step"]  # PyTorch's float64 probe: the yardstick for fp32 rounding
    own = abs(b["step0_loss_after_step"] - exact) / abs(exact) if exact is not None and exact == exact else None
    bar = max(STEP0_TOLERANCE, 3 * own) if own is not None else STEP0_TOLERANCE
    sides = [(variant_tag(row["framework"], row["mode"]), row) for row in (a, b)]
    return {
        "model": model,
        "precision": precision,
        "batch_size": batch,
        "torch_fp32_error_after_step": own,
        **{
            f"{name}_{tag}": row[f"step0_{name}"]
            for tag, row in sides
            for name in ("loss", "loss_after_step", "grad_norm")
        },
        **{f"rel_diff_{name}": value for name, value in diff.items()},
        "flagged": bool(diff["loss_after_step"] > bar and precision == "fp32"),
        **{f"final_top1_{tag}": float(_final(frame, row)["top1"]) for tag, row in sides},
        "deviation_differs": deviations_differ(a.get("deviations"), b.get("deviations")),
        "numerator": a["framework"],
        "denominator": b["framework"],
        "numerator_mode": a["mode"],
        "denominator_mode": b["mode"],
    }


def _baseline_variant(variants: Iterable[tuple[str, str]], denominator: str) -> tuple[str, str] | None:
    """The variant every other is compared with: the baseline framework in its primary mode (eager PyTorch, whose
    float64 probe is the yardstick), or its first other mode present in a study without it."""
    found = [variant for variant in variants if variant[0] == denominator]
    order = list(MODES.get(denominator, ()))
    found.sort(key=lambda v: order.index(v[1]) if v[1] in order else len(order))
    return found[0] if found else None


def step0_agreement(frame: pd.DataFrame, numerator: str | None = None, denominator: str = BASELINE) -> pd.DataFrame:
    """Per (model, precision, batch) and other variant (every (framework, mode) of the frame but the baseline's, in
    the paper's order; only `numerator`'s modes when it names a framework): its and the baseline's step-0 figures
    and their relative differences; `deviation_differs` where the two cells ran with different workarounds from the
    fallback ladder. The baseline is eager PyTorch, so compiled PyTorch is one of the compared variants: its row is
    the check that torch.compile's step computes what the eager step does. The variant is in `numerator` and
    `numerator_mode`; its own figures are in the columns named after its tag (`loss_jax`, `final_top1_tensorflow`,
    `loss_torch_compile`)."""
    first = frame[(frame["status"] == "ok") & (frame["epoch"] == 0)] if "epoch" in frame else frame.iloc[0:0]
    first = with_modes(first)
    rows = []
    for key, group in first.groupby(["model", "precision", "batch_size"]):
        by = {(row["framework"], row["mode"]): row for _, row in group.iterrows()}
        base = _baseline_variant(by, denominator)
        for variant in ordered_variants(by):
            if base is not None and variant != base and numerator in (None, variant[0]):
                rows.append(_step0_row(key, by[variant], by[base], frame))
    # With no pair (a study of PyTorch alone, or every pair failed) the CSV still gets a header to read back.
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=STEP0_COLUMNS)


def agreement_framework(row) -> str:
    """The framework a step-0 row compares with PyTorch; a table written before there were more than two
    frameworks (no `numerator` column) compares JAX."""
    value = row.get("numerator")
    return value if isinstance(value, str) and value else "jax"


def _mode_of(row, role: str, framework: str) -> str:
    """A step-0 row's mode of its `role` (numerator, denominator); a table from before modes ran the primary one."""
    value = row.get(f"{role}_mode")
    return value if isinstance(value, str) and value else primary(framework)


def agreement_variant(row) -> tuple[str, str]:
    """(framework, mode) a step-0 row compares with the baseline."""
    framework = agreement_framework(row)
    return framework, _mode_of(row, "numerator", framework)


def _denominator_tag(row) -> str:
    value = row.get("denominator")
    framework = value if isinstance(value, str) and value else BASELINE
    return variant_tag(framework, _mode_of(row, "denominator", framework))


def agreement_for(agreement: pd.DataFrame, framework: str, mode: str | None = None) -> pd.DataFrame:
    """The rows comparing `framework` (in `mode`, when given) with the baseline."""
    if agreement.empty:
        return agreement
    variants = agreement.apply(agreement_variant, axis=1)
    keep = variants.map(lambda v: v[0] == framework and (mode is None or v[1] == mode))
    return agreement[keep]


def _top1_gap(agreement: pd.DataFrame) -> pd.Series:
    """Points between each row's variant's final top-1 and the baseline's."""

    def gap(row) -> float:
        own = row[f"final_top1_{variant_tag(*agreement_variant(row))}"]
        return abs(own - row[f"final_top1_{_denominator_tag(row)}"]) * 100

    return agreement.apply(gap, axis=1)


def _final(frame: pd.DataFrame, row) -> pd.Series:
    same = frame[(frame["path"] == row["path"])]
    return same.sort_values("epoch").iloc[-1]


def write_training_tables(paths: Iterable[str | Path], epochs_csv: str | Path, step0_csv: str | Path) -> None:
    frame = epoch_rows(paths)
    atomic_write_text(epochs_csv, frame.to_csv(index=False))
    atomic_write_text(step0_csv, step0_agreement(frame).to_csv(index=False))


# The two training tables' columns after Model, Framework and Batch: time and cost (tab:training), then loss and
# accuracy (tab:training-accuracy). Split in two, each fits the page at 8 pt with nothing scaled.
TRAINING_PARTS = {
    "time": [
        r"\textbf{s/epoch}",
        r"\textbf{img/s}",
        stacked_header("Compile", "(s)"),
        r"\textbf{J/epoch}",
        stacked_header("RSS max", "(MB)"),
        stacked_header("To target", "(s)"),
    ],
    "accuracy": [
        r"\textbf{Loss}",
        r"\textbf{Top-1}",
        r"\textbf{Top-5}",
        r"\textbf{Top-1$^r$}",
        r"\textbf{Top-1$^b$}",
    ],
}


def _training_values(ok: pd.DataFrame, part: str) -> list[str]:
    last = ok.sort_values("epoch").iloc[-1]
    if part == "accuracy":
        return [
            number(last["train_loss"]),
            f"{number(100 * last['top1'])}\\%",
            f"{number(100 * last['top5'])}\\%",
            _percent(last.get("top1_running_statistics")),
            _percent(last.get("top1_batch_statistics")),
        ]
    wait = r"$^w$" if (ok["data_wait_frac"] > 0.05).any() else ""
    energy = number(ok["energy_j"].mean()) if ok["energy_j"].notna().any() else "---"
    return [
        number(ok["time_s"].mean()),
        f"{number(ok['img_s'].iloc[-1])}{wait}",
        number(ok["compile_s"].iloc[0]),
        energy,
        number(last["rss_max_mb"]),
        number(last["time_to_target_s"]),
    ]


def frame_names(frame: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(framework, mode) -> how the training tables and text name each variant of a training table
    (`partners.variant_names`: the mode where a framework trains in several)."""
    frame = with_modes(frame)
    return variant_names(zip(frame["framework"], frame["mode"], strict=True))


def _training_groups(frame: pd.DataFrame):
    """(model, framework, mode, batch) and its rows, by model, then variant in the paper's order, then batch."""
    frame = with_modes(frame)
    order = {v: i for i, v in enumerate(ordered_variants(zip(frame["framework"], frame["mode"], strict=True)))}
    keys = sorted(
        frame.groupby(["model", "framework", "mode", "batch_size"]).groups,
        key=lambda k: (k[0], order[(k[1], k[2])], k[3]),
    )
    groups = frame.groupby(["model", "framework", "mode", "batch_size"])
    return [(key, groups.get_group(key)) for key in keys]


def training_table(frame: pd.DataFrame, part: str = "time") -> str:
    """Model x variant (framework and execution mode) x batch size, `part` "time": time/epoch, steady img/s
    (data-wait marked), compile time, energy, memory and time to the target top-1; "accuracy": final train loss and
    top-1/5 (with the running and the batch statistics)."""
    columns = TRAINING_PARTS[part]
    names = frame_names(frame)
    lines = [
        r"\begin{tabular}{l l r " + "r " * len(columns) + "}",
        r"\toprule",
        r"\textbf{Model} & \textbf{Framework} & \textbf{Batch} & " + " & ".join(columns) + r" \\",
        r"\midrule",
    ]
    for (model, framework, mode, batch), group in _training_groups(frame):
        ok = group[group["status"] == "ok"]
        deviated = not ok.empty and _present(ok["deviations"].iloc[0] if "deviations" in ok else None)
        head = f"{escape(model)} & {names[(framework, mode)]}{DEVIATION_MARK if deviated else ''} & {batch}"
        if ok.empty:
            kind = group["failure_kind"].iloc[0] if "failure_kind" in group else None
            failed = f"failed ({escape(kind)})" if _present(kind) else "failed"
            reason = escape(str(group["reason"].iloc[0])[:60])
            lines.append(rf"{head} & \multicolumn{{{len(columns)}}}{{l}}{{{failed}: {reason}}} \\")
            continue
        lines.append(f"{head} & " + " & ".join(_training_values(ok, part)) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def step0_table(agreement: pd.DataFrame) -> str:
    """Step-0 agreement of each variant with eager PyTorch; a Framework column only when more than one variant is
    compared (with one, the table is the two-framework table it always was). Compiled PyTorch's row is named
    "PyTorch (compiled)": the check that torch.compile's step computes what the eager one does."""
    variants = list(dict.fromkeys(agreement.apply(agreement_variant, axis=1)))
    several = len(variants) > 1
    final = (
        stacked_header("Final top-1", "framework/", "PyTorch")
        if several
        else stacked_header("Final top-1", f"{variant_short(*variants[0])}/PyTorch")
    )
    names = _compared_names(variants)
    baseline = "PyTorch eager" if BASELINE in {framework for framework, _ in variants} else "PyTorch"
    lines = [
        r"\begin{tabular}{l l r " + ("l " if several else "") + "r r r r r r}",
        r"\toprule",
        r"\textbf{Model} & \textbf{Prec.} & \textbf{Batch} & "
        + (r"\textbf{Framework} & " if several else "")
        + " & ".join(
            [
                stacked_header("Loss", f"({baseline})"),
                r"\textbf{$\Delta$ loss}",
                stacked_header(r"$\Delta$ loss", "after step"),
                stacked_header("PyTorch fp32", "vs fp64"),
                stacked_header(r"$\Delta$ grad", "norm"),
                final,
            ]
        )
        + r" \\",
        r"\midrule",
    ]
    for _, row in agreement.iterrows():
        variant, base = agreement_variant(row), _denominator_tag(row)
        flag = r"$^\ast$" if str(row["flagged"]) == "True" else ""
        own = row.get("torch_fp32_error_after_step")
        deviating = DEVIATION_MARK if str(row.get("deviation_differs")) == "True" else ""
        lines.append(
            f"{escape(row['model'])}{deviating} & {row['precision']} & {row['batch_size']} & "
            + (f"{escape(names[variant])} & " if several else "")
            + f"{number(row[f'loss_{base}'], 5)} & "
            f"{row['rel_diff_loss']:.1e} & {row['rel_diff_loss_after_step']:.1e}{flag} & {_sci(own)} & "
            f"{row['rel_diff_grad_norm']:.1e} & {number(100 * row[f'final_top1_{variant_tag(*variant)}'])} / "
            f"{number(100 * row[f'final_top1_{base}'])}\\% \\\\"
        )
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def _compared_names(variants) -> dict[tuple[str, str], str]:
    """How the step-0 text and table name each compared variant: with its mode where its framework has another one
    among them or is the baseline's (compiled PyTorch against eager PyTorch), else the framework alone."""
    return variant_names(variants, [(BASELINE, primary(BASELINE))])


def _percent(value) -> str:
    return "---" if value is None or value != value else f"{number(100 * value)}\\%"


def _sci(value) -> str:
    return "---" if value is None or value != value else f"{value:.1e}"


def training_figure(paths: Iterable[str | Path], pdf: str | Path, png: str | Path) -> None:
    """Per model: training loss per step (top) and validation top-1 per epoch (bottom), every variant (framework and
    execution mode) overlaid: one colour per framework, a lighter shade for its other mode, labelled with the mode
    where a framework trained in more than one."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(context="paper", style="whitegrid", font_scale=0.8)
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
        loss_ax.set_title(model)
        loss_ax.set_xlabel("step")
        top1_ax.set_xlabel("training time (s)")
        if column == 0:
            loss_ax.set_ylabel("training loss")
            top1_ax.set_ylabel("validation top-1 (%)")
            loss_ax.legend(fontsize=6)
    fig.tight_layout()
    save_figure(fig, pdf, png)
    plt.close(fig)


def _present(value) -> bool:
    return value is not None and not (not isinstance(value, str) and pd.isna(value)) and str(value) != ""


def _agreement_macros(agreement: pd.DataFrame, *variant: str) -> dict[str, str]:
    """Step-0 and top-1 summary of some pairs: the largest relative difference of the loss after the step (and of
    the step-0 loss and gradient norm), how many fp32 pairs are flagged, the largest top-1 gap (points) and the
    number of pairs. Names end in the variant for its own pairs (fwbStepZeroMaxDiffTensorflow,
    fwbStepZeroLossDiffTorchCompile: compiled PyTorch against eager); without one they cover every pair
    (fwbStepZeroMaxDiff)."""
    if agreement.empty:
        values = {
            "step zero max diff": "---",
            "step zero loss diff": "---",
            "step zero grad norm diff": "---",
            "step zero flagged": "0",
            "top one max gap": "---",
            "num train pairs": "0",
        }
    else:
        values = {
            "step zero max diff": f"{agreement['rel_diff_loss_after_step'].max():.1e}",
            "step zero loss diff": f"{agreement['rel_diff_loss'].max():.1e}",
            "step zero grad norm diff": f"{agreement['rel_diff_grad_norm'].max():.1e}",
            "step zero flagged": str(int((agreement["flagged"].astype(str) == "True").sum())),
            "top one max gap": number(float(_top1_gap(agreement).max())),
            "num train pairs": str(len(agreement)),
        }
    return {macro_name(role, *variant): value for role, value in values.items()}


def training_macros(frame: pd.DataFrame, agreement: pd.DataFrame, include_deviating: bool = False) -> dict[str, str]:
    """The training section's numbers. Pairs whose two cells ran with different workarounds are left out of the
    step-0 and top-1 summaries unless `include_deviating` (`fallbacks.include_deviating_in_summary`). The step-0 and
    top-1 summaries cover every framework's pairs with PyTorch, and each framework's own under names ending in it
    (defined for every framework, so the paper compiles for any subset). Compiled PyTorch is one of them: its
    summaries end in TorchCompile, and fwbStepZeroCompiledSentence says how its step-0 probe agrees with eager
    PyTorch's."""
    ok = frame[frame["status"] == "ok"]
    cells = frame.drop_duplicates("path")
    deviating = (
        agreement["deviation_differs"].astype(str) == "True"
        if "deviation_differs" in agreement
        else pd.Series(False, index=agreement.index)
    )
    excluded = 0 if include_deviating else int(deviating.sum())
    agreement = agreement if include_deviating else agreement[~deviating]
    with_workaround = cells["deviations"].map(_present) & (cells["status"] == "ok") if "deviations" in cells else []
    defs = {
        "fwbNumTrainCells": str(len(cells)),
        "fwbNumTrainOk": str(int((cells["status"] == "ok").sum())),
        "fwbNumTrainDeviating": str(int(sum(with_workaround))),
        "fwbNumTrainPairsDeviating": str(int(deviating.sum())),
        "fwbNumTrainPairsExcludedDeviating": str(excluded),
        "fwbTrainEpochs": str(int(ok["epoch"].max() + 1)) if not ok.empty else "0",
        "fwbTrainTime": number(float(ok["time_s"].sum())) if not ok.empty else "---",
        "fwbBnRecalBatches": str(int(ok["bn_recalibration_batches"].max())) if not ok.empty else "0",
    }
    defs |= _agreement_macros(agreement)
    for framework, mode in COMPARED_VARIANTS:
        defs |= _agreement_macros(agreement_for(agreement, framework, mode), *_macro_parts(framework, mode))
    defs["fwbStepZeroCompiledSentence"] = compiled_step0_text(agreement)
    return defs


def _recalibration_text(
    batches: str, twins: str = "the same average in the Flax twins", without_batch_norm: list[str] = ()
) -> str:
    """The recalibration sentence; names the trained models that have no BatchNorm (and skip it), if any."""
    if batches == "0":
        return "Evaluation uses the running BatchNorm statistics that training left behind."
    return (
        "Before each evaluation (and before the initial one), the recipe recomputes BatchNorm's statistics as the "
        f"plain average over the first {batches} training batches of the epoch's order, in train mode with dropout "
        f"and stochastic depth off and no gradients (torch's cumulative mode; {twins}), "
        "so top-1 reflects the weights rather than a running average that lags behind them; its time is reported "
        "apart from the epoch's and counts towards the time to accuracy, and top-1$^r$ gives the running "
        "statistics' figure beside it."
        + (
            f" {_model_list(without_batch_norm)} {_verb(without_batch_norm, 'has', 'have')} no BatchNorm and "
            f"{_verb(without_batch_norm, 'skips', 'skip')} it."
            if without_batch_norm
            else ""
        )
    )


def _curves_figure(wide: bool) -> list[str]:
    """The training-curves float: one panel column per model, so across both columns only when more than two
    models would not fit one (a single model's panels stretched to the page width would fill a page)."""
    environment, width = ("figure*", r"\textwidth") if wide else ("figure", r"\columnwidth")
    return [
        rf"\begin{{{environment}}}[t]",
        r"\centering",
        rf"\includegraphics[width={width}]{{training_curves}}",
        r"\caption{Training loss per step (top) and time to accuracy (bottom): validation top-1 at each epoch end "
        r"against cumulative training time, starting from the measured top-1 of the initial weights, with the "
        r"target top-1 dashed; frameworks overlaid, each execution mode its own line (a lighter shade for a "
        r"framework's second mode).}",
        r"\label{fig:training}",
        rf"\end{{{environment}}}",
    ]


def _model_list(models: list[str]) -> str:
    return join_words([f"\\texttt{{{escape(model)}}}" for model in models])


def _verb(subjects: list, singular: str, plural: str) -> str:
    return singular if len(subjects) == 1 else plural


def _without_batch_norm(frame: pd.DataFrame) -> list[str]:
    """Trained models whose cells recalibrated nothing: no epoch recorded a recalibration time."""
    if "bn_recalibration_s" not in frame:
        return []
    recalibrated = frame.groupby("model")["bn_recalibration_s"].apply(lambda times: times.notna().any())
    return sorted(model for model, any_time in recalibrated.items() if not any_time)


def _deviation_text(defs: dict[str, str]) -> str:
    deviating, excluded = int(defs["fwbNumTrainDeviating"]), int(defs["fwbNumTrainPairsExcludedDeviating"])
    pairs = int(defs["fwbNumTrainPairsDeviating"])
    if deviating == 0:
        return ""
    text = (
        f" {deviating} training cell{'' if deviating == 1 else 's'} ran with a workaround from the fallback ladder "
        "(marked $^{d}$, see Section~\\ref{sec:failures})"
    )
    if pairs == 0:
        return text + "; every pair compares cells that ran with the same workarounds."
    if excluded:
        return text + (
            f"; {excluded} pair{'' if excluded == 1 else 's'} whose cells ran with different workarounds "
            f"{'is' if excluded == 1 else 'are'} left out of the step-0 and top-1 figures above."
        )
    one = pairs == 1
    return text + (
        f"; {pairs} pair{'' if one else 's'} whose cells ran with different workarounds {'is' if one else 'are'} "
        "counted in the figures above, as the study's configuration asks."
    )


def _frameworks_subject(frameworks: list[str]) -> str:
    """ "Both frameworks train", "All three frameworks train", or the one framework's name."""
    if len(frameworks) == 1:
        return f"{label(frameworks[0])} trains"
    return "Both frameworks train" if len(frameworks) == 2 else f"All {_count_word(len(frameworks))} frameworks train"


def _count_word(count: int) -> str:
    return {2: "two", 3: "three", 4: "four", 5: "five"}.get(count, str(count))


def _by_framework(defs: dict[str, str], compared: list[tuple[str, str]], role: str, unit: str = "") -> str:
    """ " (PyTorch (compiled): a; JAX/Flax: b; TensorFlow/Keras: c)" after a figure over every pair, when more than
    one variant is compared with eager PyTorch."""
    if len(compared) < 2:
        return ""
    names = _compared_names(compared)
    return " (" + "; ".join(f"{names[v]}: {defs[macro_name(role, *_macro_parts(*v))]}{unit}" for v in compared) + ")"


def _top1_text(defs: dict[str, str], compared: list[tuple[str, str]], frameworks: list[str]) -> str:
    if len(frameworks) < 2:
        return "With one framework there is no pair to compare."
    if len(compared) < 2:
        return (
            f"The final top-1 accuracies of the two frameworks differ by at most {defs['fwbTopOneMaxGap']} points "
            f"over {defs['fwbNumTrainPairs']} pairs."
        )
    return (
        f"The final top-1 accuracy of each framework differs from PyTorch's by at most {defs['fwbTopOneMaxGap']} "
        f"points over {defs['fwbNumTrainPairs']} pairs{_by_framework(defs, compared, 'top one max gap', ' points')}."
    )


# How each compiled variant compiles, for the compile-time sentence (eager PyTorch compiles nothing).
COMPILE_TEXT = {
    ("torch", "compile"): r"Dynamo's tracing and Inductor's code generation for \texttt{torch.compile}",
    ("jax", "jit"): "JAX",
    ("tensorflow", "xla"): r"TensorFlow/Keras's XLA compilation of \texttt{tf.function(jit\_compile=True)}",
}


def _compile_text(variants: list[tuple[str, str]]) -> str:
    compiled = [COMPILE_TEXT[v] for v in variants if v in COMPILE_TEXT]
    eager = ["none in eager PyTorch"] if (BASELINE, "eager") in variants else []
    return "; ".join(compiled + eager)


def compiled_step0_text(agreement: pd.DataFrame | None) -> str:
    """How compiled PyTorch's step-0 probe agrees with eager PyTorch's (largest relative differences over their
    pairs; fwbStepZeroCompiledSentence), or nothing without such a pair: the check that torch.compile changed
    nothing the step computes, before its speed is compared."""
    rows = agreement_for(agreement, BASELINE, "compile") if agreement is not None else pd.DataFrame()
    if rows.empty:
        return ""
    flagged = int((rows["flagged"].astype(str) == "True").sum())
    count = len(rows)
    return (
        f"\\texttt{{torch.compile}}'s step-0 loss agrees with eager PyTorch's to {rows['rel_diff_loss'].max():.1e} "
        f"(the loss after one step to {rows['rel_diff_loss_after_step'].max():.1e}, the gradient norm to "
        f"{rows['rel_diff_grad_norm'].max():.1e}; largest relative differences over {count} "
        f"pair{'' if count == 1 else 's'}, {flagged} flagged)."
    )


def mode_gains(frame: pd.DataFrame) -> pd.DataFrame:
    """Per model, precision, batch and framework trained both eagerly and compiled: each run's training time (its
    epochs' step loops summed, compilation apart), the compiled run's compile time, and the gain (eager time over
    compiled time: the compiled run's speed in multiples of the eager run's). One run each, so no interval."""
    ok = with_modes(frame[frame["status"] == "ok"]) if "epoch" in frame else frame.iloc[0:0]
    rows = []
    for (model, precision, batch, framework), group in ok.groupby(["model", "precision", "batch_size", "framework"]):
        runs = {mode: cell for mode, cell in group.groupby("mode")}
        eager = [m for m in runs if not is_compiled(m)]
        for mode in (m for m in runs if is_compiled(m) and eager):
            compiled, base = runs[mode], runs[eager[0]]
            rows.append(
                {
                    "model": model,
                    "precision": precision,
                    "batch_size": batch,
                    "framework": framework,
                    "mode": mode,
                    "eager_mode": eager[0],
                    "eager_time_s": float(base["time_s"].sum()),
                    "time_s": float(compiled["time_s"].sum()),
                    "compile_s": float(compiled.sort_values("epoch")["compile_s"].iloc[0]),
                    "gain": float(base["time_s"].sum() / compiled["time_s"].sum()),
                }
            )
    return pd.DataFrame(rows)


def mode_gain_text(frame: pd.DataFrame) -> str:
    """One sentence on the frameworks trained in an eager and a compiled mode: the compiled run's speed in multiples
    of the eager one's, per model and batch, with its compile time apart ("" without such a framework)."""
    gains = mode_gains(frame)
    parts = [
        f"\\texttt{{{escape(row.model)}}} at batch {int(row.batch_size)}: {number(row.time_s)}~s against "
        f"{number(row.eager_time_s)}~s eagerly, {number(row.gain)}$\\times$ the eager speed, with "
        f"{number(row.compile_s)}~s of compilation apart"
        for row in gains.itertuples()
    ]
    if not parts:
        return ""
    names = join_words([label(f) for f in ordered_frameworks(gains["framework"])])
    return f"Compiled, {names} trained {'; '.join(parts)} (one run each, so no interval)."


def _modes_text(frame: pd.DataFrame, agreement: pd.DataFrame | None) -> str:
    """What the execution modes are, where a framework trains in more than one: how each mode runs the step, that
    every mode is a cell of its own, the compiled step's step-0 agreement with the eager one, and its gain."""
    frame = with_modes(frame)
    variants = ordered_variants(zip(frame["framework"], frame["mode"], strict=True))
    several = multi_mode(variants)
    if not several:
        return ""
    names = frame_names(frame)
    described = [
        f"{label(f)} trains in {_count_word(len([v for v in variants if v[0] == f]))} modes, "
        + join_words([escape(DESCRIPTIONS.get((f, m), mode_label(m))) for g, m in variants if g == f])
        for f in ordered_frameworks(several)
    ]
    named = join_words([f"``{names[v]}''" for v in variants if v[0] in several])
    step0 = compiled_step0_text(agreement)
    return (
        f" {'; '.join(described)}: each mode is a cell of its own, named in every table and figure ({named})."
        + (f" {step0}" if step0 else "")
        + (f" {gain}" if (gain := mode_gain_text(frame)) else "")
    )


def _layout_text(frame: pd.DataFrame) -> str:
    """Which layout each framework's batches come in, read from the cells (" (NCHW for PyTorch, NHWC for ...)"),
    or nothing for a table from before the cells recorded it."""
    if "input_layout" not in frame or frame["input_layout"].isna().all():
        return ""
    cells = frame.dropna(subset=["input_layout"]).drop_duplicates("framework")
    by_layout: dict[str, list[str]] = {}
    for framework in ordered_frameworks(cells["framework"]):
        layout = cells.loc[cells["framework"] == framework, "input_layout"].iloc[0]
        by_layout.setdefault(str(layout), []).append(label(framework))
    return " (" + ", ".join(f"{escape(layout)} for {join_words(names)}" for layout, names in by_layout.items()) + ")"


def _twins_text(frameworks: list[str]) -> str:
    """The model libraries of the frameworks other than PyTorch (the label's part after the slash: Flax, Keras)."""
    libraries = [label(f).split("/")[-1] for f in frameworks if f != BASELINE and "/" in label(f)]
    return f"the same average in the {join_words(libraries)} twins" if libraries else "the same average elsewhere"


def _step0_caption(compared: list[tuple[str, str]]) -> str:
    what = (
        f"relative {variant_short(*compared[0])}--PyTorch differences"
        if len(compared) == 1
        else "relative differences of each framework from PyTorch"
        + (" (compiled PyTorch: from eager PyTorch)" if (BASELINE, "compile") in compared else "")
    )
    return (
        rf"\caption{{Step-0 agreement: {what} on the first batch. $^{{d}}$: the two cells ran with different "
        r"workarounds from the fallback ladder (Section~\ref{sec:failures}).}"
    )


def training_section(
    frame: pd.DataFrame | None,
    agreement: pd.DataFrame | None,
    include_deviating: bool = False,
    published: pd.DataFrame | None = None,
) -> str:
    """The paper's training section, or one sentence when the study has no training suite (so the paper compiles
    for any config without stale figures). Every framework of the training table is named; with `published` (the
    reference's L4 rows, `training_reference.read_published`) the small-CNN cells are set beside them."""
    if frame is None:
        return "\\section{Training}\nThis study has no training suite (\\texttt{suites} in its config).\n"
    defs = training_macros(frame, agreement, include_deviating)
    frameworks = ordered_frameworks(frame["framework"])
    variants = ordered_variants(zip(with_modes(frame)["framework"], with_modes(frame)["mode"], strict=True))
    compared = agreement_variants(agreement)
    two = len(frameworks) == 2
    body = [
        r"\section{Training}",
        f"{_frameworks_subject(frameworks)} {_model_list(sorted(frame['model'].unique()))} from the same "
        "converted weights on the same batches in the same order (the shared loader), with the same recipe: "
        "cross-entropy, Adam with identical hyperparameters "
        f"and the same learning rate at every step (computed once and passed to {'both' if two else 'each'}). "
        f"{defs['fwbNumTrainOk']} of {defs['fwbNumTrainCells']} training cells completed "
        f"{defs['fwbTrainEpochs']} epochs ({defs['fwbTrainTime']}~s of training in all); Tables~\\ref{{tab:training}} "
        "and~\\ref{tab:training-accuracy} give each cell's time, cost, loss and accuracy, and Fig.~\\ref{fig:training} "
        "its loss and accuracy curves. "
        "On the first batch, with dropout and stochastic depth off, each framework records its loss, gradient norm "
        "and the loss after one optimiser step (Table~\\ref{tab:step0}); the largest relative difference of the "
        f"loss after the step is {defs['fwbStepZeroMaxDiff']}{_by_framework(defs, compared, 'step zero max diff')}. "
        "PyTorch also runs the probe in float64: the "
        "difference between its own fp32 and float64 results is the yardstick for fp32 rounding (Adam's first step "
        "moves every parameter by about the learning rate whatever the size of its gradient, so ill-conditioned "
        "gradients, as in randomly initialised BatchNorm networks, amplify rounding), and a pair is flagged $^\\ast$ "
        f"when {'the frameworks differ' if len(compared) < 2 else 'a framework differs from PyTorch'} by more than "
        "$10^{-3}$ and by more than three times that yardstick "
        f"({defs['fwbStepZeroFlagged']} fp32 pairs). {_top1_text(defs, compared, frameworks)}{_deviation_text(defs)}"
        f"{_modes_text(frame, agreement)} "
        "Beyond the first step, "
        "training amplifies fp32 rounding differences, so short runs from scratch can end several points apart even "
        "within one framework when only the rounding changes (another thread count, or starting weights moved by "
        "one ulp); \\texttt{benchmarks/rounding\\_control.py} measures that spread, the yardstick for this gap. "
        "Throughput excludes the first "
        f"steps of each epoch. Compile time is one measure for {'both frameworks' if two else 'every framework'}: "
        "for every function a cell runs (train step, evaluation, recalibration, step-0 probe), its ahead-of-time "
        f"compilation ({_compile_text(variants)}) plus its first call's time beyond a steady-state call, taken "
        f"before the first timed step. Each framework receives batches in its own layout{_layout_text(frame)}, "
        "transposed by the shared loader's threads, so no layout change falls inside a timed step. RSS max is the "
        "peak over the training window without the checkpoint writes (sampled every 250~ms inside the step loops); "
        "$^w$ marks cells that spent more than 5\\% of their step time waiting for data. "
        + _recalibration_text(defs["fwbBnRecalBatches"], _twins_text(frameworks), _without_batch_norm(frame)),
        "",
        *_curves_figure(wide=frame["model"].nunique() > 2),
        "",
        r"\begin{table*}[tp]",
        r"\centering",
        r"\caption{Training time and cost: mean time per epoch, steady-state img/s of the last epoch ($^w$: the "
        r"cell spent more than 5\% of its step time waiting for data), compile time, energy per epoch, peak host "
        r"memory and time to the target top-1 (training plus recalibration). $^{d}$: the cell ran with a workaround "
        r"from the fallback ladder (Section~\ref{sec:failures}). Loss and accuracy: "
        r"Table~\ref{tab:training-accuracy}.}",
        r"\label{tab:training}",
        r"\footnotesize",
        training_table(frame, "time").rstrip(),
        r"\end{table*}",
        "",
        r"\begin{table*}[tp]",
        r"\centering",
        r"\caption{Training loss and accuracy: final training loss, validation top-1/top-5 (eval mode, as "
        r"inference runs, with the BatchNorm statistics the recipe delivers: recalibrated where it recalibrates), "
        r"top-1$^r$ with the running statistics training left behind, top-1$^b$ with each batch's own statistics (a "
        r"diagnostic: where it is far above top-1$^r$, the running statistics have not caught up with the weights). "
        r"$^{d}$: the cell ran with a workaround from the fallback ladder (Section~\ref{sec:failures}).}",
        r"\label{tab:training-accuracy}",
        r"\footnotesize",
        training_table(frame, "accuracy").rstrip(),
        r"\end{table*}",
        "",
        *([comparison_section(frame, published).rstrip(), ""] if published is not None else []),
        r"\begin{table*}[tp]",
        r"\centering",
        _step0_caption(compared or [(f, primary(f)) for f in others(frameworks)]),
        r"\label{tab:step0}",
        r"\footnotesize",
        r"\setlength{\tabcolsep}{4pt}",  # with 8 pt text: ten columns fit the page unscaled
        step0_table(agreement).rstrip() if not agreement.empty else _no_pairs_text(frameworks),
        r"\end{table*}",
    ]
    return "\n".join(body) + "\n"


def agreement_variants(agreement: pd.DataFrame | None) -> list[tuple[str, str]]:
    """The variants (framework, mode) a step-0 agreement table compares with eager PyTorch, in the paper's order."""
    if agreement is None or agreement.empty:
        return []
    return ordered_variants(agreement.apply(agreement_variant, axis=1))


def _no_pairs_text(frameworks: list[str]) -> str:
    if len(frameworks) == 2:
        return "No cell pair completed in both frameworks."
    return "No cell completed both in PyTorch and in another framework."
