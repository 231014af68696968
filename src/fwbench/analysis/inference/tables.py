"""LaTeX tables for the paper, generated from the tidy table (never typed by hand)."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from fwbench.analysis.common import partners
from fwbench.analysis.common.latex import (
    BASELINE,
    FRAMEWORK_LABELS,
    escape,
    join_words,
    label,
    literal,
    macro_name,
    mode_label,
    number,
    short_label,
    variant_label,
    variant_short,
)
from fwbench.analysis.common.partners import multi_mode, with_modes
from fwbench.analysis.inference.aggregate import (
    mixed_modes,
    multiplicity_of,
    node_differs,
    off_pairing,
    pairings,
    ratios_for,
    refused,
)
from fwbench.analysis.inference.macros import adjusted_phrase
from fwbench.running.failures import KINDS
from fwbench.study import modes as execution_modes

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


Variant = tuple[str, str]  # (framework, execution mode): one column of the inference tables


def table_variants(frame: pd.DataFrame, frameworks: list[str]) -> list[Variant]:
    """The inference tables' columns: each framework in the given (config) order, in each mode it has cells in
    (registry order: eager before compiled), or in its primary mode when it has no cell (a column of dashes)."""
    frame = with_modes(frame)
    variants = []
    for framework in frameworks:
        present = set(frame.loc[frame["framework"] == framework, "mode"])
        registry = execution_modes.MODES.get(framework, ())
        modes = [m for m in registry if m in present] + sorted(present - set(registry))
        variants += [(framework, mode) for mode in modes or [execution_modes.primary(framework)]]
    return variants


def _cell(frame: pd.DataFrame, variant: Variant, column: str, digits: int = 3) -> str:
    framework, mode = variant
    mine = frame[(frame["framework"] == framework) & (frame["mode"] == mode)] if not frame.empty else frame
    if mine.empty:
        return "---"
    row = mine.iloc[0]
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


# How a ratio's CI was obtained, when it cannot resolve a comparison (see
# fwbench.analysis.inference.aggregate.ratio_interval).
SCOPE_MARKS = {"within_process": r"$^{w}$", "unpaired_trials": r"$^{u}$"}
# A ratio that pairs other execution modes than its column names (a stand-in: the ratio mode's cell is missing).
MODE_MARK = r"$^{m}$"
# A ratio whose own 95% CI excludes 1 but which the adjusted test of its family does not resolve (not bold).
ADJUSTED_MARK = r"$^{a}$"


def _true(value: Any) -> bool:
    return str(value) == "True"


def _verdicts(row: Any) -> tuple[bool, bool]:
    """(resolved after the family's adjustment, resolved by its own 95% CI) of a ratio row; a row from before the
    adjusted column has only its own verdict, which stands in for both."""
    own = _true(row.get("resolved")) and row.get("ci_scope") in (None, "paired_rounds")
    adjusted = _true(row.get("resolved_adjusted")) if _present(row.get("resolved_adjusted")) else own
    return adjusted, own


def _ratio(row) -> str:
    """Ratio with its own 95% CI; bold where it is resolved after the adjustment within its family (the paired test
    over interleaved rounds, `verdicts.adjust_verdicts`), marked $^a$ where its own CI excludes 1 but the adjusted
    test does not resolve it. A CI from within one process (one trial) or from trials not interleaved is marked and
    never bold. A refused ratio (different device models) is a marked dash; one across nodes of one device model
    carries its mark, and so does one that pairs other modes than its column (`off_pairing`)."""
    if _present(row.get("refused")):
        return "---" + REFUSED_MARK
    text = rf"{number(row['ratio'])}$\times$ {{\scriptsize[{number(row['ci_low'])}, {number(row['ci_high'])}]}}"
    marks = (
        (DEVIATION_MARK if str(row.get("deviation_differs")) == "True" else "")
        + (NODE_MARK if str(row.get("node_differs")) == "True" else "")
        + (MODE_MARK if str(row.get("off_pairing")) == "True" else "")
    )
    adjusted, own = _verdicts(row)
    if adjusted:
        return rf"\textbf{{{text}}}" + marks
    return text + (ADJUSTED_MARK if own else "") + SCOPE_MARKS.get(str(row.get("ci_scope")), "") + marks


def compiled_variants(frame: pd.DataFrame, variants: list[Variant]) -> list[Variant]:
    """The variants (in the given order) whose cells record a compile time: the compiled modes (torch.compile,
    JAX's jit, TensorFlow's XLA), each of which gets a compile-time column; eager PyTorch records none."""
    if "compile_s" not in frame:
        return []
    timed = with_modes(frame[frame["compile_s"].notna()])
    recorded = set(zip(timed["framework"], timed["mode"], strict=True))
    return [variant for variant in variants if variant in recorded]


def _ratio_cell(ratios: pd.DataFrame, framework: str, model: str, precision: str, batch: int) -> str:
    mine = ratios_for(ratios, framework)
    match = mine[(mine["model"] == model) & (mine["precision"] == precision) & (mine["batch_size"] == batch)]
    return _ratio(match.iloc[0]) if not match.empty else "---"


Header = str | tuple[str, ...]  # a column header: one line, or several stacked (`stacked_header`)


def _variant_names(variants: list[Variant]) -> tuple[Any, str]:
    """How the inference tables name their columns, and the caption's words for it: a framework measured in one
    mode by its name alone (the caption's mode sentence says which), one measured in several by name and mode;
    full names with up to two columns, beyond that the short names (PT-eager, PT-compiled, JAX, TF), spelt out in
    the caption, a mode under its framework's name ("PT" over "compiled"), so that every column stays readable at
    the table's 8 pt and the table fits the page."""
    several = multi_mode(variants)

    def full(variant: Variant) -> str:
        return variant_label(*variant, alone=variant[0] not in several)

    if len(variants) <= 2:
        return full, ""

    def short(variant: Variant) -> Header:
        framework, mode = variant
        return (short_label(framework), mode_label(mode)) if framework in several else short_label(framework)

    def spelt_short(variant: Variant) -> str:
        return variant_short(*variant) if variant[0] in several else short_label(variant[0])

    spelt = ", ".join(f"{spelt_short(v)} for {full(v)}" for v in variants)
    return short, f" The columns name the frameworks {spelt}."


def _header_cell(name: Header) -> str:
    if isinstance(name, tuple):
        return stacked_header(*(escape(line) for line in name))
    return rf"\textbf{{{escape(name)}}}"


# More columns than four frameworks' fit the page at 8 pt only with narrower gaps between them.
TIGHT_COLUMNS = r"\setlength{\tabcolsep}{3pt}"


def _mode_description(frame: pd.DataFrame, variant: Variant) -> str:
    """One mode in words (fwbench.study.modes.DESCRIPTIONS), torch.compile with the compile mode its cells recorded."""
    text = execution_modes.DESCRIPTIONS.get(variant, variant[1])
    if "compile_mode" in frame:
        mine = frame[(frame["framework"] == variant[0]) & (frame["mode"] == variant[1])]
        recorded = sorted({str(m) for m in mine["compile_mode"] if _present(m)})
        if recorded:
            mode = f"mode {' / '.join(recorded)}"
            text = f"{text[:-1]}; {mode})" if text.endswith(")") else f"{text} ({mode})"
    return text


def modes_sentence(frame: pd.DataFrame, variants: list[Variant]) -> str:
    """The inference captions' sentence on execution modes: every framework's modes in the table, what each is,
    and that every mode but eager is compiled, so no column's mode is left to the reader."""
    frame = with_modes(frame)
    parts = []
    for framework in dict.fromkeys(f for f, _ in variants):
        modes = [_mode_description(frame, v) for v in variants if v[0] == framework]
        parts.append(f"{label(framework)} {' and '.join(modes)}")
    return escape(" Execution modes: " + "; ".join(parts) + ". Every mode but eager runs a compiled program.")


def _ratio_name(framework: str, pairing: dict[str, tuple[str, str]]) -> str:
    """A ratio column's name with the modes it pairs ("JAX/PT-compiled"), or without modes for a speedups table
    from before them ("JAX/PT")."""
    if framework not in pairing:
        return f"{short_label(framework)}/{short_label(BASELINE)}"
    numerator, denominator = pairing[framework]
    return f"{variant_short(framework, numerator)}/{variant_short(BASELINE, denominator)}"


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


def _tabular(groups: list[tuple[str, list[Header]]], body: list[str], tight: bool = False) -> str:
    """An inference tabular: Model, Prec., BS, then each group's columns under its title (a frameworks' name per
    column, e.g. "Throughput (img/s)" over PT, JAX, TF), so that each column is only as wide as its numbers;
    `tight`: with narrower gaps between columns (TIGHT_COLUMNS, inside the float), for more than three variants."""
    groups = [(title, columns) for title, columns in groups if columns]
    titles, rules, names, position = ["", "", ""], [], [], 4
    for title, columns in groups:
        titles.append(rf"\multicolumn{{{len(columns)}}}{{c}}{{\textbf{{{escape(title)}}}}}")
        rules.append(rf"\cmidrule(lr){{{position}-{position + len(columns) - 1}}}")
        names += columns
        position += len(columns)
    lines = [
        *([TIGHT_COLUMNS] if tight else []),
        r"\begin{tabular}{ll r " + "r" * len(names) + "}",
        r"\toprule",
        " & ".join(titles) + r" \\",
        "".join(rules),
        " & ".join(_header_cell(c) for c in ["Model", "Prec.", "BS", *names]) + r" \\",
        r"\midrule",
        *body,
        r"\bottomrule",
        r"\end{tabular}",
    ]
    return "\n".join(lines) + "\n"


def _compared(frameworks: list[str]) -> list[str]:
    """The frameworks with a ratio column: every other one when the study has PyTorch, none otherwise."""
    return [f for f in frameworks if f != BASELINE] if BASELINE in frameworks else []


def throughput_table(frame: pd.DataFrame, frameworks: list[str], ratios: pd.DataFrame) -> str:
    """The tabular of Table tab:inference: throughput per model, precision and batch size, one column per framework
    and mode (in the config's order), then one ratio column per framework against PyTorch when the study has
    PyTorch, named with the modes it pairs; a ratio that pairs other modes than its column is marked."""
    frame = with_modes(frame)
    variants = table_variants(frame, frameworks)
    compared = _compared(frameworks)
    pairing = pairings(ratios)
    ratios = ratios.assign(off_pairing=off_pairing(ratios))
    name, _ = _variant_names(variants)
    groups = [
        ("Throughput (img/s)", [name(v) for v in variants]),
        (f"Ratio to {short_label(BASELINE)} [95% CI]", [_ratio_name(f, pairing) for f in compared]),
    ]

    def row(cells: pd.DataFrame, model: str, precision: str, batch: int) -> list[str]:
        values = [_cell(cells, v, "throughput_img_s") for v in variants]
        return values + [_ratio_cell(ratios, f, model, precision, batch) for f in compared]

    return _tabular(groups, _inference_rows(frame, row), tight=len(variants) > 3)


def latency_table(frame: pd.DataFrame, frameworks: list[str]) -> str:
    """The tabular of Table tab:inference-latency: median latency, model FLOP utilisation (when the tidy table has
    it) and the compile time of each compiled mode, per model, precision and batch size, one column per framework
    and mode."""
    frame = with_modes(frame)
    variants = table_variants(frame, frameworks)
    compiled = compiled_variants(frame, variants)
    name, _ = _variant_names(variants)
    show_mfu = "mfu" in frame
    groups = [
        ("p50 latency (ms)", [name(v) for v in variants]),
        ("MFU (%)", [name(v) for v in variants] if show_mfu else []),
        ("Compile (s)", [name(v) for v in compiled]),
    ]

    def row(cells: pd.DataFrame, model: str, precision: str, batch: int) -> list[str]:
        values = [_cell(cells, v, "latency_p50_ms") for v in variants]
        if show_mfu:
            values += [_cell(cells.assign(mfu=cells["mfu"] * 100), v, "mfu", 2) for v in variants]
        return values + [_cell(cells, v, "compile_s") for v in compiled]

    return _tabular(groups, _inference_rows(frame, row), tight=len(variants) > 3)


def ratio_notes(ratios: pd.DataFrame) -> str:
    """The legend of the ratio columns: what bold means (resolved after the ratio table's adjustment within each
    framework pair, `aggregate.multiplicity_of`), that the bracket is each ratio's own 95% CI, $^a$ where some
    ratio's own CI excludes 1 but the adjusted test does not resolve it, and $^w$ and $^u$."""
    method = multiplicity_of(ratios)
    bold = (
        r" Ratios in bold are resolved by the paired $t$ test over interleaved rounds, "
        + adjusted_phrase(method)
        + r"; the brackets give each ratio's own 95\% CI"
    )
    shown = ratios[~refused(ratios)] if len(ratios) else ratios
    adjusted_only = any(_verdicts(row) == (False, True) for _, row in shown.iterrows())
    marked = (
        rf"; {ADJUSTED_MARK}: its own CI excludes 1, but the adjusted test does not resolve it" if adjusted_only else ""
    )
    return (
        bold
        + marked
        + r"; $^w$: the CI comes from within one process only (one trial), $^u$: from trials not interleaved; neither "
        r"can resolve a ratio."
    )


CELL_NOTES = (
    r" $^n$: at least one trial noisy (its IQR $>$ 10\% of its median); $^c$: the CI target was not reached; "
    r"$^s$: a GPU cell whose "
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


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def _kind(mode: str) -> str:
    return "a compiled" if execution_modes.is_compiled(mode) else "an eager"


def _stand_ins(ratios: pd.DataFrame, pairing: dict[str, tuple[str, str]]) -> list[str]:
    """What stood in for what in the ratios off their column's pairing, e.g. "PT-eager for PT-compiled"."""
    found = []
    for row in ratios[off_pairing(ratios)].itertuples():
        numerator, denominator = pairing[row.numerator]
        if row.numerator_mode != numerator:
            found.append(
                f"{variant_short(row.numerator, row.numerator_mode)} for {variant_short(row.numerator, numerator)}"
            )
        if row.denominator_mode != denominator:
            found.append(f"{variant_short(BASELINE, row.denominator_mode)} for {variant_short(BASELINE, denominator)}")
    return list(dict.fromkeys(found))


def _mode_notes(ratios: pd.DataFrame) -> str:
    """The legend of the mode mark ($^m$: another mode stands in for the column's, named, and whether that sets an
    eager against a compiled program), only when some ratio carries it."""
    pairing = pairings(ratios)
    off = off_pairing(ratios)
    if not off.any():
        return ""
    mixed = bool((off & mixed_modes(ratios)).any())
    return (
        rf"; {MODE_MARK}: another mode stands in for the column's ({escape(', '.join(_stand_ins(ratios, pairing)))}), "
        r"where the column's cell failed or was not measured"
        + (", so the ratio sets an eager against a compiled program" if mixed else "")
        + r" (\fwbNumRatiosStandIn{} ratios; left out of the summary figures in the text)"
    )


def _mixed_columns(ratios: pd.DataFrame, compared: list[str]) -> str:
    """A sentence for the ratio columns whose own pairing sets an eager against a compiled program (a study with no
    compiled PyTorch cell, or ratio_modes naming eager): their header names both modes, and the caption says it."""
    pairing = pairings(ratios)
    by_kind: dict[tuple[str, str], list[str]] = {}
    for framework in compared:
        if framework in pairing and partners.mixed_modes(*pairing[framework]):
            numerator, denominator = pairing[framework]
            by_kind.setdefault((_kind(numerator), _kind(denominator)), []).append(_ratio_name(framework, pairing))
    clauses = [
        f"every ratio in {join_words(names)} sets {numerator} program against {denominator} one"
        for (numerator, denominator), names in by_kind.items()
    ]
    return escape(" " + _capitalised("; ".join(clauses)) + ".") if clauses else ""


def _latency_contents(frame: pd.DataFrame, frameworks: list[str]) -> str:
    """What the latency table holds, in words (its caption's and the throughput caption's pointer to it)."""
    frame = with_modes(frame)
    variants = table_variants(frame, frameworks)
    parts = ["median latency (p50 of the timed steps, ms)"]
    if "mfu" in frame:
        parts.append("model FLOP utilisation (MFU, % of the measured peak at the cell's precision)")
    compiled = compiled_variants(frame, variants)
    if compiled:
        name, _ = _variant_names(variants)
        who = name(compiled[0]) if len(compiled) == 1 else "each compiled mode"
        parts.append(f"the compile time (s) of {who}")
    return escape(", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])


# What a compiled mode's compile time covers: measured apart from the timed steady state, never inside it.
COMPILE_COVERS = {
    ("torch", "compile"): "torch.compile's first call (Dynamo tracing and Inductor code generation)",
    ("jax", "jit"): "JAX's trace, lowering and compilation ahead of time",
    ("tensorflow", "xla"): "TensorFlow's tracing and XLA compilation",
}


def _compile_note(frame: pd.DataFrame, frameworks: list[str]) -> str:
    """What the compile times cover, for the compiled modes the latency table shows."""
    frame = with_modes(frame)
    covered = [
        COMPILE_COVERS[v] for v in compiled_variants(frame, table_variants(frame, frameworks)) if v in COMPILE_COVERS
    ]
    if not covered:
        return ""
    return escape(f" Compile times, apart from the timed steps: {'; '.join(covered)}.")


def _throughput_caption(frame: pd.DataFrame, frameworks: list[str], names: str, ratios: pd.DataFrame) -> str:
    compared = _compared(frameworks)
    with_ratios = bool(compared)
    head = r"Inference throughput (img/s, batch size over the median step)"
    head += (
        r" and each framework's throughput ratio to PyTorch (PT) with its 95\% CI, in the modes its column names."
        if with_ratios
        else "."
    )
    variants = table_variants(frame, frameworks)
    return (
        head
        + names
        + modes_sentence(frame, variants)
        + (_mixed_columns(ratios, compared) + ratio_notes(ratios) if with_ratios else "")
        + CELL_NOTES
        + (DEVIATING_RATIO_NOTE + _placement_notes(ratios) + _mode_notes(ratios) if with_ratios else "")
        + r"; $^\dagger$: the cell failed; both see Section~\ref{sec:failures}. Table~\ref{tab:inference-latency} "
        + f"gives the same cells' {_latency_contents(frame, frameworks)}."
    )


def _latency_caption(frame: pd.DataFrame, frameworks: list[str], names: str) -> str:
    return (
        f"Inference: {_latency_contents(frame, frameworks)}, for the cells of Table~\\ref{{tab:inference}}.{names}"
        f"{_compile_note(frame, frameworks)} "
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
    tab:inference-latency, `latency_table`), each caption explaining exactly its own marks and naming every
    column's execution mode."""
    frame = with_modes(frame)
    _, names = _variant_names(table_variants(frame, frameworks))
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
