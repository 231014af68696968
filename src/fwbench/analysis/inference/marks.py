"""The cells of the inference tables and their marks: a throughput or latency with its cell's marks (noisy, CI
target missed, settings differ, deviation; `value_cell`), a ratio with its interval, bold where resolved and marked
where it cannot be or was not (`ratio_cell`), and the legend that explains each mark in the note (`ratio_notes`,
CELL_NOTES and the notes that appear only when some ratio carries their mark).

A mark and its note change together, so they live here side by side; the tables' layout, captions and notes are
fwbench.analysis.inference.tables'."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import BASELINE, escape, number, variant_short
from fwbench.analysis.inference.columns import Variant
from fwbench.analysis.inference.ratio_macros import adjusted_phrase
from fwbench.analysis.inference.summary import (
    against_eager_baseline,
    mixed_modes,
    multiplicity_of,
    node_differs,
    off_pairing,
    pairings,
    ratios_for,
    refused,
)
from fwbench.analysis.inference.tidy import present

FAILED = r"failed$^\dagger$"
# A cell that ran with a workaround from the fallback ladder, and a ratio whose two cells ran with different ones.
DEVIATION_MARK = r"$^{d}$"
# A ratio refused because its two cells ran on different device models (printed as a dash), and a ratio whose cells
# ran on different nodes of one device model (kept).
REFUSED_MARK = r"$^{r}$"
NODE_MARK = r"$^{x}$"


def value_cell(frame: pd.DataFrame, variant: Variant, column: str, digits: int = 3) -> str:
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
            + (DEVIATION_MARK if present(row.get("deviations")) else "")
        )
    return number(row[column], digits) + marks


# How a ratio's CI was obtained, when it cannot resolve a comparison (see
# fwbench.analysis.inference.ratios.ratio_interval).
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
    adjusted = _true(row.get("resolved_adjusted")) if present(row.get("resolved_adjusted")) else own
    return adjusted, own


def _ratio(row) -> str:
    """Ratio with its own 95% CI; bold where it is resolved after the adjustment within its family (the paired test
    over interleaved rounds, `verdicts.adjust_verdicts`), marked $^a$ where its own CI excludes 1 but the adjusted
    test does not resolve it. A CI from within one process (one trial) or from trials not interleaved is marked and
    never bold. A refused ratio (different device models) is a marked dash; one across nodes of one device model
    carries its mark, and so does one that pairs other modes than its column (`off_pairing`)."""
    if present(row.get("refused")):
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


def ratio_cell(ratios: pd.DataFrame, framework: str, model: str, precision: str, batch: int) -> str:
    mine = ratios_for(ratios, framework)
    match = mine[(mine["model"] == model) & (mine["precision"] == precision) & (mine["batch_size"] == batch)]
    return _ratio(match.iloc[0]) if not match.empty else "---"


def ratio_notes(ratios: pd.DataFrame) -> str:
    """The legend of the ratio columns: what bold means (resolved after the ratio table's adjustment within each
    framework pair, `summary.multiplicity_of`), that the bracket is each ratio's own 95% CI, $^a$ where some
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


def placement_notes(ratios: pd.DataFrame) -> str:
    """The legend of the placement marks, each only when some ratio carries it."""
    return (REFUSED_NOTE if refused(ratios).any() else "") + (NODE_NOTE if node_differs(ratios).any() else "")


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


def mode_notes(ratios: pd.DataFrame) -> str:
    """The legend of the mode mark ($^m$: another mode stands in for the column's, named, and whether that sets an
    eager against a compiled program), only when some ratio carries it."""
    pairing = pairings(ratios)
    off = off_pairing(ratios)
    if not off.any():
        return ""
    mixed = bool((off & mixed_modes(ratios)).any())
    eager = off & against_eager_baseline(ratios)
    if eager[off].all():
        summarised = "summarised in the text as the family against eager PyTorch"
    elif eager.any():
        summarised = (
            "in the text those against eager PyTorch are summarised as a family of their own, the others left out of "
            "its summary figures"
        )
    else:
        summarised = "left out of the summary figures in the text"
    return (
        rf"; {MODE_MARK}: another mode stands in for the column's ({escape(', '.join(_stand_ins(ratios, pairing)))}), "
        r"where the column's cell failed or was not measured"
        + (", so the ratio sets an eager against a compiled program" if mixed else "")
        + rf" (\fwbNumRatiosStandIn{{}} ratios; {summarised})"
    )
