"""The generated body of the paper's "Deviations and failures" section (`failures_table`): a sentence counting
failed cells by kind and cells that ran with a workaround (its values `FailureCounts`, its counts also as macros:
`failure_macros`), the table of every such cell of every suite (`deviations_table`), and the largest batch size
that fit (`largest_batch_table`).

It reads the inference tidy table and the training one alike (`study_cells`: one row per cell, with the failure and
deviation columns), so it is a section of its own rather than part of either suite's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import (
    FRAMEWORK_LABELS,
    escape,
    label,
    macro_name,
    short_label,
    stacked_header,
    table_float,
)
from fwbench.analysis.common.names import display_or_same, model_name
from fwbench.analysis.inference.tidy import present
from fwbench.running.failures import KINDS

KIND_LABELS = {
    "device_oom": "device out of memory",
    "host_oom": "host out of memory",
    "compiler": "compiler error",
    "crash": "crash",
    "timeout": "timeout",
    "exception": "exception",
    "no_result": "no result",
}
OUT_OF_MEMORY = ("device_oom", "host_oom")
FAILURE_COLUMNS = ["failure_kind", "workarounds_tried", "deviations", "deviation_detail", "deviation_first_failure"]
CELL_COLUMNS = ["suite", "framework", "model", "precision", "batch_size", "status", "reason", *FAILURE_COLUMNS]


def study_cells(frame: pd.DataFrame, training: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per cell of every suite: the inference tidy table (one row per cell) and the training one (one row
    per epoch, a failed cell one row), with the failure and deviation columns (absent columns read as none)."""
    parts = [frame.assign(suite=frame.get("suite", "inference"))]
    if training is not None and not training.empty:
        cells = training.drop_duplicates("path") if "path" in training else training
        parts.append(cells.assign(suite="training"))
    rows = pd.concat([part.reindex(columns=CELL_COLUMNS) for part in parts], ignore_index=True)
    rows = rows.astype({column: object for column in FAILURE_COLUMNS + ["reason"]})
    return rows.where(rows.notna(), None)


def _deviating(cells: pd.DataFrame) -> pd.Series:
    return (cells["status"] == "ok") & cells["deviations"].map(present)


def failure_counts(cells: pd.DataFrame) -> tuple[dict[str, int], int]:
    """Failed cells per kind (every kind of the closed set, in its order; "unclassified" for a failed cell without
    a kind) and the number of successful cells that ran with a workaround."""
    failed = cells[cells["status"] != "ok"]
    kinds = failed["failure_kind"].map(lambda kind: kind if present(kind) else "unclassified")
    counts = {kind: int((kinds == kind).sum()) for kind in (*KINDS, "unclassified")}
    return counts, int(_deviating(cells).sum())


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


@dataclass(frozen=True)
class FailureCounts:
    """What the failure summary says (its words are report/templates/failure_summary.tex.j2's, rendered by
    fwbench.analysis.paper.failures): failed cells, per kind that occurred (the kind in words, in the closed set's
    order), and successful cells that ran with a workaround."""

    failed: int
    kinds: tuple[tuple[str, int], ...]
    deviating: int


def failure_tally(cells: pd.DataFrame) -> FailureCounts:
    counts, deviating = failure_counts(cells)
    kinds = tuple((KIND_LABELS.get(kind, kind), n) for kind, n in counts.items() if n)
    return FailureCounts(sum(counts.values()), kinds, deviating)


def failure_macros(frame: pd.DataFrame, training: pd.DataFrame | None = None) -> dict[str, str]:
    """Macros counting failures and deviations over every suite: fwbNumFailedCells, fwbNumDeviatingCells and
    fwbNumFailed<Kind> for each kind (e.g. fwbNumFailedDeviceOom). The sentence that says them, fwbFailureSummary,
    is a template's (`FailureCounts`)."""
    cells = study_cells(frame, training)
    counts, deviating = failure_counts(cells)
    defs = {
        "fwbNumFailedCells": str(sum(counts.values())),
        "fwbNumDeviatingCells": str(deviating),
    }
    defs |= {macro_name("NumFailed", kind): str(n) for kind, n in counts.items() if kind in KINDS}
    return defs


def _names(value: Any) -> str:
    return ", ".join(rf"\texttt{{{escape(name)}}}" for name in str(value).split("+")) if present(value) else "---"


def _shorten(text: Any, limit: int = 200) -> str:
    text = str(text) if present(text) else "---"
    return escape(text if len(text) <= limit else text[: limit - 3].rstrip() + "...")


# A reason spans the table's eight columns, indented, as wide as the page allows.
REASON_ROW = r"\multicolumn{8}{@{\hspace{\tabcolsep}\quad}p{\dimexpr\textwidth-2\tabcolsep-1em\relax}}"


def deviations_table(cells: pd.DataFrame) -> str:
    """The tabular of every failed or deviating cell (see `failures_table`)."""
    listed = cells[(cells["status"] != "ok") | _deviating(cells)]
    listed = listed.sort_values(["suite", "model", "precision", "batch_size", "framework"], kind="stable")
    # Eight columns, each cell's reason on a row of its own across the table: the table fits the page at 8 pt.
    lines = [
        r"\begin{tabular}{l l l l r l l >{\raggedright\arraybackslash}p{3.5cm}}",
        r"\toprule",
        r"\textbf{Suite} & \textbf{Framework} & \textbf{Model} & \textbf{Prec.} & \textbf{BS} & \textbf{Status} & "
        r"\textbf{Failure kind} & \textbf{Workaround} \\",
        r"\multicolumn{8}{l}{\textbf{Reason}} \\",
        r"\midrule",
    ]
    for _, row in listed.iterrows():
        framework = FRAMEWORK_LABELS.get(row["framework"], row["framework"])
        model = escape(display_or_same(row["model"]))
        head = f"{escape(row['suite'])} & {escape(framework)} & {model} & {escape(row['precision'])} & "
        head += str(row["batch_size"])
        if row["status"] != "ok":
            tried = present(row["workarounds_tried"])
            workaround = f"tried {_names(row['workarounds_tried'])}" if tried else "---"
            status, kind, reason = "failed", _names(row["failure_kind"]), _shorten(row["reason"])
        else:
            status, workaround = r"ok$^{d}$", _names(row["deviations"])
            kind = _names(row["deviation_first_failure"])  # one kind per workaround, in the order they applied
            reason = _shorten(row["deviation_detail"], 300)
        lines.append(f"{head} & {status} & {kind} & {workaround} \\\\ {REASON_ROW}{{{reason}}} \\\\[2pt]")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def _framework_order(framework: str) -> tuple[int, str]:
    order = list(FRAMEWORK_LABELS)
    return (order.index(framework) if framework in order else len(order), framework)


def _short_names(frameworks: list[str]) -> str:
    """The note's key to short framework names, e.g. "Frameworks: PT PyTorch, JAX JAX/Flax." after a space."""
    names = [f"{escape(short_label(f))} {escape(label(f))}" for f in frameworks if short_label(f) != label(f)]
    return f" Frameworks: {', '.join(names)}." if names else ""


def largest_batch_table(frame: pd.DataFrame) -> str:
    """Largest batch size that fit, per model x precision x framework of the inference suite: the largest batch
    size whose cell succeeded and the smallest that ran out of device or host memory. Out-of-memory is never worked
    around (the batch size is an axis of the study), so this is how the paper reports it. Only when some cell ran
    out of memory; otherwise one sentence with the largest batch size measured."""
    cells = study_cells(frame)
    cells = cells[cells["suite"] == "inference"]
    oom = cells[(cells["status"] != "ok") & cells["failure_kind"].isin(OUT_OF_MEMORY)]
    ok = cells[cells["status"] == "ok"]
    if oom.empty:
        if ok.empty:
            return "No inference cell ran out of memory, and none succeeded.\n"
        return (
            f"No inference cell ran out of memory; the largest batch size measured was {int(ok['batch_size'].max())}.\n"
        )
    lines = [
        f"{_plural(len(oom), 'inference cell')} ran out of memory. Table~\\ref{{tab:largest_batch}} gives, for each "
        "model, precision and framework, the largest batch size whose cell succeeded and the smallest that ran out "
        "of memory.",
        "",
    ]
    tabular = [
        r"\begin{tabular}{l l l r l}",
        r"\toprule",
        r"\textbf{Model} & \textbf{Prec.} & "
        + stacked_header("Frame-", "work", align="l")
        + " & "
        + stacked_header("Largest", "OK")
        + " & "
        + stacked_header("Smallest", "OOM", align="l")
        + r" \\",
        r"\midrule",
    ]
    for (model, precision, framework), group in cells.groupby(["model", "precision", "framework"], sort=True):
        fits = group.loc[group["status"] == "ok", "batch_size"]
        out = group[(group["status"] != "ok") & group["failure_kind"].isin(OUT_OF_MEMORY)].sort_values("batch_size")
        largest = str(int(fits.max())) if not fits.empty else "---"
        smallest = "---"
        if not out.empty:
            first = out.iloc[0]
            smallest = f"{int(first['batch_size'])} ({'device' if first['failure_kind'] == 'device_oom' else 'host'})"
        # short framework names (the note spells them out): the table fits its column at 8 pt
        tabular.append(
            f"{escape(model_name(model))} & {escape(precision)} & {escape(short_label(framework))} & {largest} & "
            f"{smallest} \\\\"
        )
    tabular += [r"\bottomrule", r"\end{tabular}"]
    lines += table_float(
        "Largest batch size that fit per model, precision and framework, and the smallest that ran out of memory.",
        "tab:largest_batch",
        "\n".join(tabular),
        [
            "Largest OK: the largest batch size whose inference cell succeeded; smallest OOM: the smallest that ran "
            "out of device or host memory (never worked around: the batch size is an axis)."
            + _short_names(sorted(set(cells["framework"]), key=_framework_order))
        ],
        wide=False,
        placement="t",
        setup=[r"\setlength{\tabcolsep}{4pt}"],  # with the longest model name, the table fits its column at 8 pt
    )
    return "\n".join(lines) + "\n"


def failures_table(frame: pd.DataFrame, training: pd.DataFrame | None = None, *, summary: str) -> str:
    """The generated body of the paper's "Deviations and failures" section: `summary`, the sentence counting failed
    cells by kind and cells that ran with a workaround (LaTeX, from `FailureCounts`); the table of every such cell
    of every suite (suite, framework, model, precision, batch; status; the failure's kind, or for a deviation the
    kind of the failure that made the workaround apply; the workarounds applied or tried; the recorded reason, or
    why each workaround applied); and the largest batch size that fit (`largest_batch_table`). When no cell failed
    or deviated the first part is the sentence alone.
    """
    cells = study_cells(frame, training)
    listed = (cells["status"] != "ok") | _deviating(cells)
    if not listed.any():
        return summary + "\n\n" + largest_batch_table(frame)
    lines = [
        summary + r" Table~\ref{tab:failures} lists every such cell.",
        "",
        *table_float(
            "Deviations and failures: every cell, of every suite, that failed or succeeded only with a workaround "
            "from the fallback ladder.",
            "tab:failures",
            deviations_table(cells),
            [
                "Failed: the cell's failure kind and recorded reason; ok$^{d}$: the workaround, the kind of the "
                "failure that made it apply and why it applied."
            ],
            placement="t",
        ),
        "",
    ]
    return "\n".join(lines) + "\n" + largest_batch_table(frame)
