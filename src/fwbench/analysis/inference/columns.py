"""The columns of the inference tables: one per framework and execution mode (`table_variants`), a compile-time
column per compiled mode (`compiled_variants`), and how each column and each ratio column is named in a header and
spelt out in the tables' notes, with every column's mode in words (`modes_sentence`).

Apart from the tables' cells and marks (fwbench.analysis.inference.marks) and their layout, captions and notes
(fwbench.analysis.inference.tables): what a column is called must read the same in the header, the note and the
legend, whatever frameworks and modes a study has."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import (
    BASELINE,
    escape,
    label,
    mode_label,
    short_label,
    variant_label,
    variant_short,
)
from fwbench.analysis.common.partners import multi_mode, with_modes
from fwbench.analysis.inference.tidy import present
from fwbench.study import modes as execution_modes

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


def compiled_variants(frame: pd.DataFrame, variants: list[Variant]) -> list[Variant]:
    """The variants (in the given order) whose cells record a compile time: the compiled modes (torch.compile,
    JAX's jit, TensorFlow's XLA), each of which gets a compile-time column; eager PyTorch records none."""
    if "compile_s" not in frame:
        return []
    timed = with_modes(frame[frame["compile_s"].notna()])
    recorded = set(zip(timed["framework"], timed["mode"], strict=True))
    return [variant for variant in variants if variant in recorded]


Header = str | tuple[str, ...]  # a column header: one line, or several stacked (`stacked_header`)


def variant_names(variants: list[Variant]) -> tuple[Any, str]:
    """How the inference tables name their columns, and the note's words for it: a framework measured in one
    mode by its name alone (the note's mode sentence says which), one measured in several by name and mode;
    full names with up to two columns, beyond that the short names (PT-eager, PT-compiled, JAX, TF), spelt out in
    the note, a mode under its framework's name ("PT" over "compiled"), so that every column stays readable at
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


def _mode_description(frame: pd.DataFrame, variant: Variant) -> str:
    """One mode in words (fwbench.study.modes.DESCRIPTIONS), torch.compile with the compile mode its cells recorded."""
    text = execution_modes.DESCRIPTIONS.get(variant, variant[1])
    if "compile_mode" in frame:
        mine = frame[(frame["framework"] == variant[0]) & (frame["mode"] == variant[1])]
        recorded = sorted({str(m) for m in mine["compile_mode"] if present(m)})
        if recorded:
            mode = f"mode {' / '.join(recorded)}"
            text = f"{text[:-1]}; {mode})" if text.endswith(")") else f"{text} ({mode})"
    return text


def modes_sentence(frame: pd.DataFrame, variants: list[Variant]) -> str:
    """The inference notes' sentence on execution modes: every framework's modes in the table, what each is,
    and that every mode but eager is compiled, so no column's mode is left to the reader."""
    frame = with_modes(frame)
    parts = []
    for framework in dict.fromkeys(f for f, _ in variants):
        modes = [_mode_description(frame, v) for v in variants if v[0] == framework]
        parts.append(f"{label(framework)} {' and '.join(modes)}")
    return escape(" Execution modes: " + "; ".join(parts) + ". Every mode but eager runs a compiled program.")


def ratio_name(framework: str, pairing: dict[str, tuple[str, str]]) -> str:
    """A ratio column's name with the modes it pairs ("JAX/PT-compiled"), or without modes for a speedups table
    from before them ("JAX/PT")."""
    if framework not in pairing:
        return f"{short_label(framework)}/{short_label(BASELINE)}"
    numerator, denominator = pairing[framework]
    return f"{variant_short(framework, numerator)}/{variant_short(BASELINE, denominator)}"
