"""Training results → the tidy per-epoch table (epochs.csv) and, beside it, the step-0 agreement table (step0.csv),
for every framework the study trains: the two CSVs the training section, the conclusions and the published comparison
read back.

Every cell is a (framework, execution mode) variant (fwbench.study.modes): PyTorch eager and PyTorch compiled
(torch.compile) are two cells, and every row carries its cell's mode."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from fwbench.analysis.common.cells import cells_by_path
from fwbench.analysis.common.partners import device_columns, failure_columns, flag_deviations, placement_columns
from fwbench.analysis.inference.tidy import graph_breaks, mode_columns
from fwbench.analysis.training.step0 import step0_agreement
from fwbench.io import atomic_write_text

KEYS = ["model", "precision", "batch_size", "framework", "mode"]


def epoch_rows(paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per (cell, epoch); a failed cell is one row with its reason and no epoch. Every row carries its
    cell's execution mode (`mode`, `compiled`, how it compiled and autotuned, its graph breaks and whether it
    recompiled in the timed loop), its failure kind and deviations (`failure_columns`) and whether its partner cells
    (the other variants) ran with different workarounds (`deviation_differs`), and where it ran (`device_columns`,
    `placement_columns`: the conclusions refuse a time ratio across device models). The cell-level columns after
    `resumed_from_epoch` (initial RSS, initial device memory or why it is missing, the input layout) feed the
    comparison with the published L4 figures (`fwbench.analysis.training.reference`) and the section's text."""
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


def write_training_tables(paths: Iterable[str | Path], epochs_csv: str | Path, step0_csv: str | Path) -> None:
    frame = epoch_rows(paths)
    atomic_write_text(epochs_csv, frame.to_csv(index=False))
    atomic_write_text(step0_csv, step0_agreement(frame).to_csv(index=False))
