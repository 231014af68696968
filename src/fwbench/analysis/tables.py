"""LaTeX tables for the paper, generated from the tidy table (never typed by hand)."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from fwbench.analysis.aggregate import node_differs, ratios_for, refused
from fwbench.analysis.latex import BASELINE, FRAMEWORK_LABELS, escape, label, literal, macro_name, number, short_label
from fwbench.failures import KINDS

FAILED = r"failed$^\dagger$"
# A cell that ran with a workaround from the fallback ladder, and a ratio whose two cells ran with different ones.
DEVIATION_MARK = r"$^{d}$"
# A ratio refused because its two cells ran on different device models (printed as a dash), and a ratio whose cells
# ran on different nodes of one device model (kept).
REFUSED_MARK = r"$^{r}$"
NODE_MARK = r"$^{x}$"


def stacked(*lines: str, align: str = "c", position: str = "b") -> str:
    """A table cell of several lines (a header "RSS max (MB)" as "RSS max" over "(MB)"), aligned `align` (l, c, r):
    tables stay narrow enough for 8 pt without scaling. `position` "b" (a header) puts the last line on the row's
    baseline, "t" (a body cell) the first."""
    return rf"\begin{{tabular}}[{position}]{{@{{}}{align}@{{}}}}" + r" \\ ".join(lines) + r"\end{tabular}"


def stacked_header(*lines: str, align: str = "r") -> str:
    """A bold header of several lines (`stacked`)."""
    return r"\textbf{" + stacked(*lines, align=align) + "}"


def _cell(frame: pd.DataFrame, framework: str, column: str, digits: int = 3) -> str:
    if frame.empty or framework not in set(frame["framework"]):
        return "---"
    row = frame[frame["framework"] == framework].iloc[0]
    if row["status"] != "ok":
        return FAILED
    marks = ""
    if column == "throughput_img_s":
        marks = (
            (r"$^{n}$" if row.get("noisy") is True else "")
            + (r"$^{c}$" if row.get("ci_not_reached") is True else "")
            + (r"$^{s}$" if str(row.get("settings_differ")) == "True" else "")
            + (DEVIATION_MARK if _present(row.get("deviations")) else "")
        )
    return number(row[column], digits) + marks


# How a ratio's CI was obtained, when it cannot resolve a comparison (see fwbench.analysis.aggregate.ratio_interval).
SCOPE_MARKS = {"within_process": r"$^{w}$", "unpaired_trials": r"$^{u}$"}


def _ratio(row) -> str:
    """Ratio with its 95% CI; bold where it is resolved (a paired CI over interleaved rounds that excludes 1).
    A CI from within one process (one trial) or from trials not interleaved is marked and never bold. A refused
    ratio (different device models) is a marked dash; one across nodes of one device model carries its mark."""
    if _present(row.get("refused")):
        return "---" + REFUSED_MARK
    text = rf"{number(row['ratio'])}$\times$ {{\scriptsize[{number(row['ci_low'])}, {number(row['ci_high'])}]}}"
    marks = (DEVIATION_MARK if str(row.get("deviation_differs")) == "True" else "") + (
        NODE_MARK if str(row.get("node_differs")) == "True" else ""
    )
    if str(row.get("resolved")) == "True":
        return rf"\textbf{{{text}}}" + marks
    return text + SCOPE_MARKS.get(str(row.get("ci_scope")), "") + marks


def compiled_frameworks(frame: pd.DataFrame, frameworks: list[str]) -> list[str]:
    """The frameworks (in the given order) whose cells record a compile time: the ones that compile before timing
    (JAX, TensorFlow with XLA), each of which gets a compile-time column; eager PyTorch records none."""
    if "compile_s" not in frame:
        return []
    timed = set(frame.loc[frame["compile_s"].notna(), "framework"])
    return [f for f in frameworks if f in timed]


def _ratio_cell(ratios: pd.DataFrame, framework: str, model: str, precision: str, batch: int) -> str:
    mine = ratios_for(ratios, framework)
    match = mine[(mine["model"] == model) & (mine["precision"] == precision) & (mine["batch_size"] == batch)]
    return _ratio(match.iloc[0]) if not match.empty else "---"


def _framework_names(frameworks: list[str]) -> tuple[Any, str]:
    """How the inference tables name the frameworks in their headers, and the caption's words for it: the full
    names with up to two frameworks; beyond, the short names (PT, JAX, TF), spelt out in the caption, so that
    every column stays readable at the table's 8 pt."""
    if len(frameworks) <= 2:
        return label, ""
    spelt = ", ".join(f"{short_label(f)} for {label(f)}" for f in frameworks)
    return short_label, f" The columns name the frameworks {spelt}."


def _inference_rows(frame: pd.DataFrame, row: Any) -> list[str]:
    """The body of an inference tabular: one line per model, precision and batch size, `row(cells, model,
    precision, batch)` giving its values after the first three; a rule between model/precision groups."""
    lines = []
    groups = list(frame.groupby(["model", "precision"], sort=True))
    for index, ((model, precision), group) in enumerate(groups):
        for row_index, (batch, cells) in enumerate(group.groupby("batch_size", sort=True)):
            values = [escape(model) if row_index == 0 else "", escape(precision) if row_index == 0 else "", str(batch)]
            values += row(cells, model, precision, batch)
            lines.append(" & ".join(values) + r" \\")
        if index < len(groups) - 1:
            lines.append(r"\midrule")
    return lines


def _tabular(groups: list[tuple[str, list[str]]], body: list[str]) -> str:
    """An inference tabular: Model, Prec., BS, then each group's columns under its title (a frameworks' name per
    column, e.g. "Throughput (img/s)" over PT, JAX, TF), so that each column is only as wide as its numbers."""
    groups = [(title, columns) for title, columns in groups if columns]
    titles, rules, names, position = ["", "", ""], [], [], 4
    for title, columns in groups:
        titles.append(rf"\multicolumn{{{len(columns)}}}{{c}}{{\textbf{{{escape(title)}}}}}")
        rules.append(rf"\cmidrule(lr){{{position}-{position + len(columns) - 1}}}")
        names += columns
        position += len(columns)
    lines = [
        r"\begin{tabular}{ll r " + "r" * len(names) + "}",
        r"\toprule",
        " & ".join(titles) + r" \\",
        "".join(rules),
        " & ".join(rf"\textbf{{{escape(c)}}}" for c in ["Model", "Prec.", "BS", *names]) + r" \\",
        r"\midrule",
        *body,
        r"\bottomrule",
        r"\end{tabular}",
    ]
    return "\n".join(lines) + "\n"


def throughput_table(frame: pd.DataFrame, frameworks: list[str], ratios: pd.DataFrame) -> str:
    """The tabular of Table tab:inference: throughput per model, precision and batch size, frameworks side by side
    (in the config's order), then one ratio column per framework against PyTorch when the study has PyTorch."""
    compared = [f for f in frameworks if f != BASELINE] if BASELINE in frameworks else []
    name, _ = _framework_names(frameworks)
    groups = [
        ("Throughput (img/s)", [name(f) for f in frameworks]),
        (f"Ratio to {short_label(BASELINE)} [95% CI]", [f"{short_label(f)}/{short_label(BASELINE)}" for f in compared]),
    ]

    def row(cells: pd.DataFrame, model: str, precision: str, batch: int) -> list[str]:
        values = [_cell(cells, f, "throughput_img_s") for f in frameworks]
        return values + [_ratio_cell(ratios, f, model, precision, batch) for f in compared]

    return _tabular(groups, _inference_rows(frame, row))


def latency_table(frame: pd.DataFrame, frameworks: list[str]) -> str:
    """The tabular of Table tab:inference-latency: median latency, model FLOP utilisation (when the tidy table has
    it) and the compile time of each framework that compiles, per model, precision and batch size."""
    compiled = compiled_frameworks(frame, frameworks)
    name, _ = _framework_names(frameworks)
    show_mfu = "mfu" in frame
    groups = [
        ("p50 latency (ms)", [name(f) for f in frameworks]),
        ("MFU (%)", [name(f) for f in frameworks] if show_mfu else []),
        ("Compile (s)", [name(f) for f in compiled]),
    ]

    def row(cells: pd.DataFrame, model: str, precision: str, batch: int) -> list[str]:
        values = [_cell(cells, f, "latency_p50_ms") for f in frameworks]
        if show_mfu:
            values += [_cell(cells.assign(mfu=cells["mfu"] * 100), f, "mfu", 2) for f in frameworks]
        return values + [_cell(cells, f, "compile_s") for f in compiled]

    return _tabular(groups, _inference_rows(frame, row))


RATIO_NOTES = (
    r" Ratios in bold are resolved (the paired CI over interleaved rounds excludes 1); $^w$: the CI comes from within "
    r"one process only (one trial), $^u$: from trials not interleaved; neither can resolve a ratio."
)
CELL_NOTES = (
    r" $^n$: noisy (IQR $>$ 10\% of the median); $^c$: the CI target was not reached; $^s$: a GPU cell whose "
    r"comparable settings (GPU model, TF32 in effect, dtype, CUDA major version) differ from its partner in another "
    r"framework (\fwbNumSettingsDiffer{} cells; details in \texttt{inference.csv}); $^{d}$: on a throughput, the "
    r"cell ran with a workaround from the fallback ladder"
)
DEVIATING_RATIO_NOTE = (
    r"; on a ratio, its two cells ran with different workarounds, and the ratio is left out of the summary figures "
    r"in the text (\fwbNumPairsDeviating{} ratios; \fwbNumPairsExcludedDeviating{} left out)"
)


REFUSED_NOTE = (
    r"; $^{r}$: no ratio, because its two cells ran on different device models (\fwbNumRatiosRefused{} refused; "
    r"the models in \texttt{speedups.csv})"
)
NODE_NOTE = (
    r"; $^{x}$: the ratio's two cells ran on different nodes with the same device model (\fwbNumRatiosNodeDiffer{} "
    r"ratios; the nodes in \texttt{speedups.csv})"
)


def _placement_notes(ratios: pd.DataFrame) -> str:
    """The legend of the placement marks, each only when some ratio carries it."""
    return (REFUSED_NOTE if refused(ratios).any() else "") + (NODE_NOTE if node_differs(ratios).any() else "")


def _latency_contents(frame: pd.DataFrame, frameworks: list[str]) -> str:
    """What the latency table holds, in words (its caption's and the throughput caption's pointer to it)."""
    parts = ["median latency (p50 of the timed steps, ms)"]
    if "mfu" in frame:
        parts.append("model FLOP utilisation (MFU, % of the measured peak at the cell's precision)")
    compiled = compiled_frameworks(frame, frameworks)
    if compiled:
        who = label(compiled[0]) if len(compiled) == 1 else "each framework that compiles"
        parts.append(f"the compile time (s) of {who}")
    return escape(", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])


def _throughput_caption(frame: pd.DataFrame, frameworks: list[str], names: str, ratios: pd.DataFrame) -> str:
    with_ratios = BASELINE in frameworks and len(frameworks) > 1
    head = r"Inference throughput (img/s, batch size over the median step)"
    head += r" and each framework's throughput ratio to PyTorch (PT) with its 95\% CI." if with_ratios else "."
    return (
        head
        + names
        + (RATIO_NOTES if with_ratios else "")
        + CELL_NOTES
        + (DEVIATING_RATIO_NOTE + _placement_notes(ratios) if with_ratios else "")
        + r"; $^\dagger$: the cell failed; both see Section~\ref{sec:failures}. Table~\ref{tab:inference-latency} "
        + f"gives the same cells' {_latency_contents(frame, frameworks)}."
    )


def _latency_caption(frame: pd.DataFrame, frameworks: list[str], names: str) -> str:
    return (
        f"Inference: {_latency_contents(frame, frameworks)}, for the cells of Table~\\ref{{tab:inference}}.{names} "
        r"$^\dagger$: the cell failed (Section~\ref{sec:failures})."
    )


def _table_float(caption: str, label_: str, tabular: str) -> list[str]:
    # [tp]: a page top, or a page of floats; with the paper's many full-width tables, top-only placement holds the
    # single-column figures back for pages.
    return [
        r"\begin{table*}[tp]",
        r"\centering",
        rf"\caption{{{caption}}}",
        rf"\label{{{label_}}}",
        r"\footnotesize",
        tabular.rstrip(),
        r"\end{table*}",
    ]


def inference_table(frame: pd.DataFrame, frameworks: list[str], ratios: pd.DataFrame) -> str:
    """The paper's inference tables, two full-width floats at 8 pt with nothing scaled: throughput with the ratios
    to PyTorch (Table tab:inference, `throughput_table`), then median latency, MFU and compile time (Table
    tab:inference-latency, `latency_table`), each caption explaining exactly its own marks."""
    _, names = _framework_names(frameworks)
    lines = [
        *_table_float(
            _throughput_caption(frame, frameworks, names, ratios),
            "tab:inference",
            throughput_table(frame, frameworks, ratios),
        ),
        "",
        *_table_float(
            _latency_caption(frame, frameworks, names), "tab:inference-latency", latency_table(frame, frameworks)
        ),
    ]
    return "\n".join(lines) + "\n"


def _present(value: Any) -> bool:
    """A tidy value that is there: not None, NaN or empty (CSV round trips turn None into NaN)."""
    return value is not None and not (not isinstance(value, str) and pd.isna(value)) and str(value) != ""


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
    return (cells["status"] == "ok") & cells["deviations"].map(_present)


def failure_counts(cells: pd.DataFrame) -> tuple[dict[str, int], int]:
    """Failed cells per kind (every kind of the closed set, in its order; "unclassified" for a failed cell without
    a kind) and the number of successful cells that ran with a workaround."""
    failed = cells[cells["status"] != "ok"]
    kinds = failed["failure_kind"].map(lambda kind: kind if _present(kind) else "unclassified")
    counts = {kind: int((kinds == kind).sum()) for kind in (*KINDS, "unclassified")}
    return counts, int(_deviating(cells).sum())


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def failure_summary(cells: pd.DataFrame) -> str:
    """One sentence: how many cells failed, by kind, and how many ran with a workaround."""
    counts, deviating = failure_counts(cells)
    failed = sum(counts.values())
    if failed == 0 and deviating == 0:
        return "No cell failed and none needed a workaround."
    parts = []
    if failed:
        kinds = ", ".join(f"{n} {KIND_LABELS.get(kind, kind)}" for kind, n in counts.items() if n)
        parts.append(f"{_plural(failed, 'cell')} failed ({kinds})")
    if deviating:
        parts.append(f"{_plural(deviating, 'cell')} ran with a workaround from the fallback ladder")
    elif failed:
        parts.append("no cell needed a workaround")
    return "Over all suites, " + " and ".join(parts) + "."


def failure_macros(frame: pd.DataFrame, training: pd.DataFrame | None = None) -> dict[str, str]:
    """Macros counting failures and deviations over every suite: fwbFailureSummary (a sentence),
    fwbNumFailedCells, fwbNumDeviatingCells and fwbNumFailed<Kind> for each kind (e.g. fwbNumFailedDeviceOom)."""
    cells = study_cells(frame, training)
    counts, deviating = failure_counts(cells)
    defs = {
        "fwbFailureSummary": escape(failure_summary(cells)),
        "fwbNumFailedCells": str(sum(counts.values())),
        "fwbNumDeviatingCells": str(deviating),
    }
    defs |= {macro_name("NumFailed", kind): str(n) for kind, n in counts.items() if kind in KINDS}
    return defs


def _names(value: Any) -> str:
    return ", ".join(rf"\texttt{{{escape(name)}}}" for name in str(value).split("+")) if _present(value) else "---"


def _shorten(text: Any, limit: int = 200) -> str:
    text = str(text) if _present(text) else "---"
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
        head = (
            f"{escape(row['suite'])} & {escape(framework)} & {escape(row['model'])} & {escape(row['precision'])} & "
            f"{row['batch_size']}"
        )
        if row["status"] != "ok":
            tried = _present(row["workarounds_tried"])
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
    """The caption's key to short framework names, e.g. "Frameworks: PT PyTorch, JAX JAX/Flax." after a space."""
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
        r"\begin{table}[t]",
        r"\centering",
        r"\caption{Largest batch size that fit: the largest batch size whose inference cell succeeded and the "
        r"smallest that ran out of device or host memory (never worked around: the batch size is an axis)."
        + _short_names(sorted(set(cells["framework"]), key=_framework_order))
        + "}",
        r"\label{tab:largest_batch}",
        r"\footnotesize",
        r"\setlength{\tabcolsep}{4pt}",  # with the longest model name, the table fits its column at 8 pt
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
        # short framework names (the caption spells them out): the table fits its column at 8 pt
        lines.append(
            f"{escape(model)} & {escape(precision)} & {escape(short_label(framework))} & {largest} & {smallest} \\\\"
        )
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def failures_table(frame: pd.DataFrame, training: pd.DataFrame | None = None) -> str:
    """The generated body of the paper's "Deviations and failures" section: a sentence counting failed cells by
    kind and cells that ran with a workaround; the table of every such cell of every suite (suite, framework,
    model, precision, batch; status; the failure's kind, or for a deviation the kind of the failure that made the
    workaround apply; the workarounds applied or tried; the recorded reason, or why each workaround applied); and
    the largest batch size that fit (`largest_batch_table`). When no cell failed or deviated the first part is
    the single sentence "No cell failed and none needed a workaround."
    """
    cells = study_cells(frame, training)
    summary = failure_summary(cells)
    listed = (cells["status"] != "ok") | _deviating(cells)
    if not listed.any():
        return summary + "\n\n" + largest_batch_table(frame)
    lines = [
        escape(summary) + r" Table~\ref{tab:failures} lists every such cell.",
        "",
        r"\begin{table*}[t]",
        r"\centering",
        r"\caption{Deviations and failures: every cell, of every suite, that failed (its failure kind and recorded "
        r"reason) or succeeded only with a workaround from the fallback ladder (ok$^{d}$: the workaround, the kind "
        r"of the failure that made it apply and why it applied).}",
        r"\label{tab:failures}",
        r"\footnotesize",
        deviations_table(cells).rstrip(),
        r"\end{table*}",
        "",
    ]
    return "\n".join(lines) + "\n" + largest_batch_table(frame)


# The environment table sits in one column of the paper, and its values are whatever the machine reports (a CPU
# model string, a GPU name, XLA_FLAGS): both columns have fixed widths that add up to the column and wrap, and a long
# value may break after a separator, so no machine's names can make the table wider than the column.
ENVIRONMENT_COLUMNS = (
    r"@{}>{\raggedright\arraybackslash}p{0.40\columnwidth}"
    r">{\raggedright\arraybackslash}p{0.56\columnwidth}@{}"
)


def breakable(text: str) -> str:
    """LaTeX-escaped `text`, hyphens as typed, that may break after "/", "=", ",", ";", ":" or "_" (unbroken tokens
    such as XLA_FLAGS or a UUID would otherwise overrun a narrow column)."""
    return re.sub(r"(\\_|[/=,;:])", r"\1\\allowbreak{}", literal(text))


def environment_table(env: dict[str, Any]) -> str:
    """Machine and software the study ran on, from the cells' provenance."""
    lines = [rf"\begin{{tabular}}{{{ENVIRONMENT_COLUMNS}}}", r"\toprule"]
    for key, value in env.items():
        lines.append(rf"{escape(key)} & {breakable(value) if value is not None else '---'} \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def _count(value: int) -> str:
    return f"{int(value):,}".replace(",", "{,}")


def _flops(value: float) -> str:
    return number(value / 1e9, 3)


def models_table(facts: list[dict[str, Any]], starts: dict[str, str]) -> str:
    """Parameter counts and FLOPs per image from both counters, at the study's and torchvision's configuration.

    The counters' disagreements are explained by lettered notes under the table rather than hidden.
    """
    notes: dict[str, str] = {}
    lines = [
        r"\begin{tabular}{l l r r r r l}",
        r"\toprule",
        r"\textbf{Model} & \textbf{Config.} & \textbf{Params} & \textbf{GFLOP/img (torch)} & "
        r"\textbf{GFLOP/img (XLA)} & \textbf{XLA/torch} & \textbf{Note} \\",
        r"\midrule",
    ]
    for row in sorted(facts, key=lambda r: (r["model"], r["configuration"] != "study")):
        params = (
            _count(row["params_torch"])
            if row["params_torch"] == row["params_flax"]
            else rf"{_count(row['params_torch'])} vs {_count(row['params_flax'])}\,(!)"
        )
        letter = notes.setdefault(row["note"], "abcdefgh"[len(notes)])
        config = f"{row['image_size']} px, {row['num_classes']} cl."
        lines.append(
            f"{escape(row['model'])} & {config} & {params} & {_flops(row['flops_torch'])} & "
            f"{_flops(row['flops_xla'])} & {number(1 + row['flops_difference'], 3)} & {letter} \\\\"
        )
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    legend = "; ".join(f"({letter}) {escape(note)}" for note, letter in notes.items())
    counters = (
        r"torch: \texttt{torch.utils.flop\_counter.FlopCounterMode}; XLA: \texttt{compiled.cost\_analysis()}; "
        r"FLOPs = 2 $\times$ MACs."
    )
    by_start: dict[str, list[str]] = {}
    for model, text in sorted(starts.items()):
        by_start.setdefault(text, []).append(model)
    start = "; ".join(
        f"{'all models' if len(by_start) == 1 else escape(', '.join(models))}: {escape(text)}"
        for text, models in by_start.items()
    )
    lines.append(rf"\par\smallskip{{\footnotesize Notes: {legend}. Counters: {counters} Start: {start}.}}")
    return "\n".join(lines) + "\n"
