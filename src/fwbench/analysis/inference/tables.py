"""The paper's inference tables, generated from the tidy table (never typed by hand): throughput with each
framework's ratio to PyTorch (`throughput_table`), then median latency, MFU and compile time (`latency_table`),
each a full-width float whose caption says what it holds and whose note, under the table, explains exactly its own
marks and names every column's execution mode (`inference_table`, the appendix); and the ratios alone, a column
wide, for the body's results (`ratios_table`).

Their columns and names are fwbench.analysis.inference.columns', their cells and the marks' legend
fwbench.analysis.inference.marks'; the tables of the other sections live with their sections."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fwbench.analysis.common import partners
from fwbench.analysis.common.latex import BASELINE, escape, join_words, short_label, stacked_header, table_float
from fwbench.analysis.common.names import model_name
from fwbench.analysis.common.partners import with_modes
from fwbench.analysis.inference.columns import (
    Header,
    compiled_variants,
    modes_sentence,
    ratio_name,
    table_variants,
    variant_names,
)
from fwbench.analysis.inference.marks import (
    CELL_NOTES,
    DEVIATING_RATIO_NOTE,
    mode_notes,
    placement_notes,
    ratio_cell,
    ratio_notes,
    value_cell,
)
from fwbench.analysis.inference.summary import off_pairing, pairings
from fwbench.study import modes as execution_modes


def _header_cell(name: Header) -> str:
    if isinstance(name, tuple):
        return stacked_header(*(escape(line) for line in name))
    return rf"\textbf{{{escape(name)}}}"


# More columns than four frameworks' fit the page at 8 pt only with narrower gaps between them.
TIGHT_COLUMNS = r"\setlength{\tabcolsep}{3pt}"


def _inference_rows(frame: pd.DataFrame, row: Any, with_precision: bool = True) -> list[str]:
    """The body of an inference tabular: one line per model, precision and batch size, `row(cells, model,
    precision, batch)` giving its values after the model, the precision (left out where not `with_precision`) and
    the batch size; a rule between model/precision groups."""
    lines = []
    groups = list(frame.groupby(["model", "precision"], sort=True))
    for index, ((model, precision), group) in enumerate(groups):
        for row_index, (batch, cells) in enumerate(group.groupby("batch_size", sort=True)):
            values = [escape(model_name(model)) if row_index == 0 else ""]
            values += [escape(precision) if row_index == 0 else ""] if with_precision else []
            values += [str(batch), *row(cells, model, precision, batch)]
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
    name, _ = variant_names(variants)
    groups = [
        ("Throughput (img/s)", [name(v) for v in variants]),
        (f"Ratio to {short_label(BASELINE)} [95% CI]", [ratio_name(f, pairing) for f in compared]),
    ]

    def row(cells: pd.DataFrame, model: str, precision: str, batch: int) -> list[str]:
        values = [value_cell(cells, v, "throughput_img_s") for v in variants]
        return values + [ratio_cell(ratios, f, model, precision, batch) for f in compared]

    return _tabular(groups, _inference_rows(frame, row), tight=len(variants) > 3)


def latency_table(frame: pd.DataFrame, frameworks: list[str]) -> str:
    """The tabular of Table tab:inference-latency: median latency, model FLOP utilisation (when the tidy table has
    it) and the compile time of each compiled mode, per model, precision and batch size, one column per framework
    and mode."""
    frame = with_modes(frame)
    variants = table_variants(frame, frameworks)
    compiled = compiled_variants(frame, variants)
    name, _ = variant_names(variants)
    show_mfu = "mfu" in frame
    groups = [
        ("p50 latency (ms)", [name(v) for v in variants]),
        ("MFU (%)", [name(v) for v in variants] if show_mfu else []),
        ("Compile (s)", [name(v) for v in compiled]),
    ]

    def row(cells: pd.DataFrame, model: str, precision: str, batch: int) -> list[str]:
        values = [value_cell(cells, v, "latency_p50_ms") for v in variants]
        if show_mfu:
            values += [value_cell(cells.assign(mfu=cells["mfu"] * 100), v, "mfu", 2) for v in variants]
        return values + [value_cell(cells, v, "compile_s") for v in compiled]

    return _tabular(groups, _inference_rows(frame, row), tight=len(variants) > 3)


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def _kind(mode: str) -> str:
    return "a compiled" if execution_modes.is_compiled(mode) else "an eager"


def _mixed_columns(ratios: pd.DataFrame, compared: list[str]) -> str:
    """A sentence for the ratio columns whose own pairing sets an eager against a compiled program (a study with no
    compiled PyTorch cell, or ratio_modes naming eager): their header names both modes, and the note says it."""
    pairing = pairings(ratios)
    by_kind: dict[tuple[str, str], list[str]] = {}
    for framework in compared:
        if framework in pairing and partners.mixed_modes(*pairing[framework]):
            numerator, denominator = pairing[framework]
            by_kind.setdefault((_kind(numerator), _kind(denominator)), []).append(ratio_name(framework, pairing))
    clauses = [
        f"every ratio in {join_words(names)} sets {numerator} program against {denominator} one"
        for (numerator, denominator), names in by_kind.items()
    ]
    return escape(" " + _capitalised("; ".join(clauses)) + ".") if clauses else ""


def _latency_parts(frame: pd.DataFrame, frameworks: list[str]) -> list[tuple[str, str]]:
    """What the latency table holds: (short name with its unit for the caption, the same in full for the
    throughput table's pointer to it) per kind of column."""
    frame = with_modes(frame)
    variants = table_variants(frame, frameworks)
    parts = [("median latency (ms)", "median latency (p50 of the timed steps, ms)")]
    if "mfu" in frame:
        parts.append(
            (
                "model FLOP utilisation (MFU, %)",
                "model FLOP utilisation (MFU, % of the measured peak at the cell's precision)",
            )
        )
    compiled = compiled_variants(frame, variants)
    if compiled:
        name, _ = variant_names(variants)
        who = name(compiled[0]) if len(compiled) == 1 else "each compiled mode"
        if isinstance(who, tuple):
            who = " ".join(who)
        parts.append((f"compile time (s) of {who}", f"the compile time (s) of {who}"))
    return parts


def _listed(parts: list[str]) -> str:
    return escape(", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])


def _latency_contents(frame: pd.DataFrame, frameworks: list[str]) -> str:
    """What the latency table holds, in full (the throughput table's note points to it)."""
    return _listed([full for _, full in _latency_parts(frame, frameworks)])


# What a compiled mode's compile time covers: measured apart from the timed steady state, never inside it.
COMPILE_COVERS = {
    ("torch", "compile"): "torch.compile's first call (Dynamo tracing and Inductor code generation)",
    ("torch", "cudagraphs"): (
        "torch.compile's first call in mode reduce-overhead (Dynamo tracing and Inductor code generation; its CUDA "
        "graphs are recorded in the warm-up)"
    ),
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


def _throughput_float(frame: pd.DataFrame, frameworks: list[str], names: str, ratios: pd.DataFrame) -> list[str]:
    """Table tab:inference: throughput and the ratios in its caption, every mode, pairing and mark in its note."""
    compared = _compared(frameworks)
    with_ratios = bool(compared)
    caption = "Inference throughput (img/s) per model, precision and batch size" + (
        r", and each framework's throughput ratio to PyTorch (PT) with its 95\% CI." if with_ratios else "."
    )
    variants = table_variants(frame, frameworks)
    note = (
        "Throughput: batch size over the median step."
        + (" Each ratio pairs the modes its column names." if with_ratios else "")
        + names
        + modes_sentence(frame, variants)
        + (_mixed_columns(ratios, compared) + ratio_notes(ratios) if with_ratios else "")
        + CELL_NOTES
        + (DEVIATING_RATIO_NOTE + placement_notes(ratios) + mode_notes(ratios) if with_ratios else "")
        + r"; $^\dagger$: the cell failed; both see Section~\ref{sec:failures}. Table~\ref{tab:inference-latency} "
        + f"gives the same cells' {_latency_contents(frame, frameworks)}."
    )
    return table_float(caption, "tab:inference", throughput_table(frame, frameworks, ratios), [note])


def _latency_float(frame: pd.DataFrame, frameworks: list[str], names: str) -> list[str]:
    """Table tab:inference-latency: what it holds in its caption; what latency, MFU and compile time cover in its
    note."""
    parts = _latency_parts(frame, frameworks)
    caption = f"Inference {_listed([short for short, _ in parts])}, for the cells of Table~\\ref{{tab:inference}}."
    note = (
        "Latency: the p50 of the timed steps."
        + (escape(" MFU: % of the measured peak at the cell's precision.") if "mfu" in frame else "")
        + names
        + _compile_note(frame, frameworks)
        + r" $^\dagger$: the cell failed (Section~\ref{sec:failures})."
    )
    return table_float(caption, "tab:inference-latency", latency_table(frame, frameworks), [note])


def inference_table(frame: pd.DataFrame, frameworks: list[str], ratios: pd.DataFrame) -> str:
    """The paper's inference tables, two full-width floats at 8 pt with nothing scaled: throughput with the ratios
    to PyTorch (Table tab:inference, `throughput_table`), then median latency, MFU and compile time (Table
    tab:inference-latency, `latency_table`), each with a short caption and a note under it that explains exactly its
    own marks and names every column's execution mode."""
    frame = with_modes(frame)
    _, names = variant_names(table_variants(frame, frameworks))
    lines = [*_throughput_float(frame, frameworks, names, ratios), "", *_latency_float(frame, frameworks, names)]
    return "\n".join(lines) + "\n"


def _stacked(cell: str) -> str:
    """A ratio cell with its interval on a second line, so that a column holds two frameworks' ratios: the cell's
    markup kept (bold where resolved, its marks after it)."""
    head, bracket, rest = cell.partition(r" {\scriptsize[")
    if not bracket:
        return cell
    interval, _, after = rest.partition("]}")
    bold = head.startswith(r"\textbf{")
    ratio = head.removeprefix(r"\textbf{")
    marks = after.removeprefix("}") if bold else after
    lines = rf"{ratio}{marks}\\{{\scriptsize[{interval}]}}"  # the marks beside the ratio they qualify
    content = r"\bfseries " + lines if bold else lines
    return rf"\begin{{tabular}}[t]{{@{{}}r@{{}}}}{content}\end{{tabular}}"


def ratios_table(frameworks: list[str], ratios: pd.DataFrame) -> str:
    """Table tab:ratios, the body's results a column wide: each framework's throughput ratio to PyTorch with its 95%
    CI (on a second line) per model, batch size and, where the study has several, precision, marked as the
    appendix's Table tab:inference marks them; empty (nothing for the body to show) without a ratio."""
    compared = _compared(frameworks)
    if not compared or ratios.empty or "ratio" not in ratios:
        return ""
    pairing = pairings(ratios)
    ratios = ratios.assign(off_pairing=off_pairing(ratios))
    several = ratios["precision"].nunique() > 1
    names = [ratio_name(f, pairing).split("/", 1) for f in compared]
    headers = [_header_cell((f"{n[0]}/", n[1]) if len(n) == 2 else n[0]) for n in names]
    lines = [
        r"\begin{tabular}{l" + ("l" if several else "") + "r" + "r" * len(compared) + "}",
        r"\toprule",
        " & ".join([_header_cell("Model"), *([_header_cell("Prec.")] if several else []), _header_cell("BS"), *headers])
        + r" \\",
        r"\midrule",
    ]

    def row(cells: pd.DataFrame, model: str, precision: str, batch: int) -> list[str]:
        return [_stacked(ratio_cell(ratios, f, model, precision, batch)) for f in compared]

    lines += [*_inference_rows(ratios, row, several), r"\bottomrule", r"\end{tabular}"]
    caption = r"Each framework's throughput over PyTorch's (PT) with its 95\% CI; above 1: faster than PyTorch."
    note = (
        "Each ratio pairs the modes its column names."
        + _mixed_columns(ratios, compared)
        + ratio_notes(ratios)
        # the throughput table's $^{d}$ note covers throughputs and ratios: here, ratios only
        + DEVIATING_RATIO_NOTE.replace("; on a ratio,", r" $^{d}$: on a ratio,", 1)
        + placement_notes(ratios)
        + mode_notes(ratios)
        + r". Throughputs: Table~\ref{tab:inference}."
    )
    body = "\n".join(lines) + "\n"
    return "\n".join(table_float(caption, "tab:ratios", body, [note], wide=False, placement="t")) + "\n"
