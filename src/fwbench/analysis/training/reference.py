"""This study's small-CNN training beside a published one on another machine (reference/published-l4-training.csv:
a blog's small-CNN training on an NVIDIA L4), in the published table's shape: per framework, training time,
accuracy, initial and maximum host RAM and device memory.

The published figures come from another machine, other data and the blog's own epochs and batch size, so the table
sets them beside ours, labelled as such, rather than dividing one by the other. Everything said about them (which
frameworks they cover, that every accuracy is the same chance-level value, a maximum below its initial value) is
read from the reference file, never typed here.

Execution modes (fwbench.study.modes): the reference does not state whether it compiled any framework (torch.compile,
jax.jit, XLA in TensorFlow; reference/README.md and sources.yaml record none), so none of this study's modes is
picked as its match: every small-CNN cell stands beside it, each named with its mode where its framework trained in
more than one, and the text says the reference's modes are unknown. Where they become known, REFERENCE_MODES holds
them and only the cells in those modes are shown.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fwbench.analysis.common.latex import (
    escape,
    label,
    mode_label,
    number,
    ordered_frameworks,
    stacked_header,
    table_float,
)
from fwbench.analysis.common.names import model_name
from fwbench.analysis.common.partners import cell_mode, multi_mode, with_modes
from fwbench.study.modes import MODES
from fwbench.trackers.memory import MB

PUBLISHED_COLUMNS = [
    "framework",
    "training_time_s",
    "accuracy",
    "initial_ram_gb",
    "max_ram_gb",
    "initial_vram_gb",
    "max_vram_gb",
]
# The reference's framework names -> ours.
PUBLISHED_FRAMEWORKS = {"pytorch": "torch", "jax": "jax", "tensorflow": "tensorflow"}
REFERENCE_MODEL = "small_cnn"
REFERENCE_GPU = "NVIDIA L4"
REFERENCE_FILE = "reference/published-l4-training.csv"
GB = 1e9  # bytes; the reference gives its memory in GB
MEASURES = ["training_time_s", "accuracy", "initial_ram_gb", "max_ram_gb", "initial_vram_gb", "max_vram_gb"]
MISSING = "missing"
# The mode each framework ran in for the reference, where it states one (framework -> mode); it states none.
REFERENCE_MODES: dict[str, str] = {}


def read_published(path: str | Path) -> pd.DataFrame:
    """The reference rows with the framework names mapped to ours; a file with other columns or an unknown
    framework is refused with its name, since a silently misread reference would be printed as published."""
    table = pd.read_csv(path)
    if list(table.columns) != PUBLISHED_COLUMNS:
        raise ValueError(f"{path}: expected the columns {', '.join(PUBLISHED_COLUMNS)}, found {', '.join(table)}")
    unknown = sorted(set(table["framework"]) - set(PUBLISHED_FRAMEWORKS))
    if unknown:
        raise ValueError(
            f"{path}: unknown framework(s) {', '.join(unknown)} (known: {', '.join(PUBLISHED_FRAMEWORKS)})"
        )
    return table.assign(framework=table["framework"].map(PUBLISHED_FRAMEWORKS))


def _column(rows: pd.DataFrame, name: str) -> pd.Series:
    """A column of the training tidy table, all missing when the table predates it."""
    return rows[name] if name in rows else pd.Series(float("nan"), index=rows.index)


def _first(rows: pd.DataFrame, name: str):
    values = _column(rows, name).dropna()
    return values.iloc[0] if len(values) else None


def _gb_from_mb(value) -> float | None:
    return None if value is None else float(value) * MB / GB


def _gb_from_bytes(value) -> float | None:
    return None if value is None else float(value) / GB


def _measured_cell(rows: pd.DataFrame) -> dict:
    """One training cell (its epoch rows) in the reference's shape. Training time: the sum over its epochs of each
    epoch's step loop; accuracy: the last epoch's top-1; RAM: RSS before the data and model load and its peak over
    training; device memory: the allocator's peak once the model is loaded and over the whole process, or the
    reason it is missing."""
    first = rows.iloc[0]
    base = {key: first[key] for key in ("framework", "precision", "batch_size", "status")}
    base["mode"] = cell_mode(first)
    base |= {"reason": first.get("reason"), "failure_kind": first.get("failure_kind"), "source": "measured"}
    if first["status"] != "ok":
        return base
    rows = rows.sort_values("epoch")
    return base | {
        "epochs": len(rows),
        "training_time_s": float(rows["time_s"].sum()),
        "accuracy": float(rows["top1"].iloc[-1]),
        "initial_ram_gb": _gb_from_mb(_first(rows, "rss_initial_mb")),
        "max_ram_gb": _gb_from_mb(_first(rows, "rss_max_mb")),
        "initial_vram_gb": _gb_from_bytes(_first(rows, "device_initial_bytes")),
        "max_vram_gb": _gb_from_bytes(_first(rows, "device_max_with_load_bytes")),
        "vram_missing": _first(rows, "device_memory_missing"),
    }


def _mode_rank(row) -> int:
    """Where a cell's mode sorts among its framework's (the registry's order: eager before compiled)."""
    order = MODES.get(row["framework"], ())
    return order.index(row["mode"]) if row["mode"] in order else len(order)


def measured(frame: pd.DataFrame, modes: dict[str, str] | None = None) -> pd.DataFrame:
    """The study's small-CNN training cells in the reference's shape, one row per cell, each framework's modes in
    the registry's order; only the cells in `modes` (framework -> mode, REFERENCE_MODES) for a framework it names."""
    modes = REFERENCE_MODES if modes is None else modes
    cells = with_modes(frame[frame["model"] == REFERENCE_MODEL])
    cells = cells[[modes.get(f, m) == m for f, m in zip(cells["framework"], cells["mode"], strict=True)]]
    if cells.empty:
        return pd.DataFrame(columns=["framework", "mode", "source", *MEASURES])
    key = "path" if "path" in cells else ["framework", "mode", "precision", "batch_size"]
    rows = pd.DataFrame([_measured_cell(group) for _, group in cells.groupby(key, sort=False)])
    rows = rows.assign(mode_rank=rows.apply(_mode_rank, axis=1))
    rows = rows.sort_values(["precision", "batch_size", "mode_rank"], kind="stable").drop(columns="mode_rank")
    return rows.reset_index(drop=True)


def comparison(frame: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """The table's rows: per framework of the study's small-CNN cells (the paper's order), its measured cells and
    then the published row for the same framework, if the reference has one. `mode_shown`: a measured cell's mode
    where its framework trained in more than one (the table names it), else empty."""
    ours = measured(frame)
    several = multi_mode(zip(ours["framework"], ours["mode"], strict=True))
    variants = zip(ours["framework"], ours["mode"], strict=True)
    ours = ours.assign(mode_shown=[m if f in several else None for f, m in variants])
    rows = []
    for framework in ordered_frameworks(ours["framework"]):
        rows.append(ours[ours["framework"] == framework])
        rows.append(published[published["framework"] == framework].assign(source="published"))
    return pd.concat(rows, ignore_index=True) if rows else ours


def _gb(value, missing: str) -> str:
    """A memory figure; one the cell could not record is "missing" with its reason's note mark."""
    if value is not None and value == value:
        return number(float(value))
    return missing


def _notes(rows: pd.DataFrame) -> dict[str, str]:
    """Reason -> note letter for every device-memory figure a measured cell could not record."""
    reasons = _column(rows[rows["source"] == "measured"], "vram_missing").dropna()
    return {reason: "abcdefgh"[index] for index, reason in enumerate(dict.fromkeys(reasons))}


def _source(row) -> str:
    if row["source"] == "published":
        return f"published ({REFERENCE_GPU})"
    epochs = row.get("epochs")
    detail = f", {int(epochs)} epoch{'' if epochs == 1 else 's'}" if pd.notna(epochs) and epochs else ""
    mode = row.get("mode_shown")
    named = f"{escape(mode_label(mode))}, " if isinstance(mode, str) and mode else ""
    return f"this study ({named}{escape(row['precision'])}, batch {int(row['batch_size'])}{detail})"


def _line(row, notes: dict[str, str]) -> str:
    if row["source"] == "measured" and row["status"] != "ok":
        kind = row.get("failure_kind")
        failed = f"failed ({escape(kind)})" if isinstance(kind, str) and kind else "failed"
        return rf"{_source(row)} & \multicolumn{{6}}{{l}}{{{failed}: {escape(str(row['reason'])[:60])}}}"
    reason = row.get("vram_missing")
    missing = rf"{MISSING}$^{{{notes[reason]}}}$" if isinstance(reason, str) and reason in notes else "---"
    values = [number(row["training_time_s"]), number(row["accuracy"])]
    values += [_gb(row[name], "---") for name in ("initial_ram_gb", "max_ram_gb")]
    values += [_gb(row[name], missing) for name in ("initial_vram_gb", "max_vram_gb")]
    return " & ".join([_source(row), *values])


def comparison_table(rows: pd.DataFrame) -> str:
    """The tabular: framework, source, then the reference's six columns; one block per framework."""
    notes = _notes(rows)
    lines = [
        # the source wraps in its column; with two-line headers the table fits the page at 8 pt (nothing scaled)
        r"\begin{tabular}{l >{\raggedright\arraybackslash}p{3.0cm} r r r r r r}",
        r"\toprule",
        # Two-line headers keep the table within the page at 8 pt (nothing is scaled).
        r"\textbf{Framework} & \textbf{Source} & \textbf{Time (s)} & \textbf{Accuracy} & "
        + " & ".join(stacked_header(what, f"{when} (GB)") for what in ("RAM", "Device") for when in ("initial", "max"))
        + r" \\",
        r"\midrule",
    ]
    frameworks = list(dict.fromkeys(rows["framework"]))
    for index, framework in enumerate(frameworks):
        for row_index, (_, row) in enumerate(rows[rows["framework"] == framework].iterrows()):
            name = escape(label(framework)) if row_index == 0 else ""
            lines.append(f"{name} & {_line(row, notes)} \\\\")
        if index < len(frameworks) - 1:
            lines.append(r"\midrule")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def missing_legend(rows: pd.DataFrame) -> str:
    """The note's sentence giving each missing device-memory figure's recorded reason, or nothing."""
    notes = _notes(rows)
    if not notes:
        return ""
    legend = "; ".join(f"$^{{{letter}}}$: {escape(reason)}" for reason, letter in notes.items())
    return f"Device memory missing: {legend}."


def comparison_float(frame: pd.DataFrame, published: pd.DataFrame) -> list[str]:
    """The table of the study's small-CNN training cells beside the published L4 figures, line by line (none where
    the study has no small-CNN training cell). What the appendix says about it is the template's
    (fwbench.analysis.training.reference_findings)."""
    rows = comparison(frame, published)
    if rows.empty:
        return []
    shown = rows[rows["source"] == "published"]
    uncovered = [label(f) for f in ordered_frameworks(rows["framework"]) if f not in set(shown["framework"])]
    missing_rows = f" The reference has no row for {', '.join(uncovered)}." if uncovered else ""
    caption = (
        f"Training of the {escape(model_name(REFERENCE_MODEL))} in this study beside published figures from another "
        f"machine ({REFERENCE_GPU}): time, accuracy, and host and device memory at the start and at their peak."
    )
    note = (
        f"\\emph{{This study}}: the {escape(model_name(REFERENCE_MODEL))}'s training cells; time is the sum over the "
        "cell's epochs of each epoch's "
        "step loop (waiting for the loader, host-to-device transfers and the training steps), without compilation "
        "and first calls, the step-0 probe, BatchNorm recalibration, evaluation and checkpoint writes; accuracy is "
        "the final validation top-1; RAM is the process's resident set size before the data and model load "
        "(initial) and its peak over training (max, checkpoint writes left out); device memory is the allocator's "
        "peak once the model and its optimizer are loaded, before the first batch and any compilation (initial), "
        "and over the whole process (max). "
        f"\\emph{{Published}}: a blog's small-CNN training on an {REFERENCE_GPU} (in-memory NumPy data, one "
        f"warm-up epoch), copied verbatim into \\texttt{{{escape(REFERENCE_FILE)}}}: another machine, other data, "
        "and the blog's own model definition, epoch count and batch size, none of which the reference records, so "
        f"its figures are not comparable one to one with this study's. GB = $10^9$ bytes.{missing_rows}"
    )
    return table_float(caption, "tab:l4", comparison_table(rows), [note, missing_legend(rows)])
