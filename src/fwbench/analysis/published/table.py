"""The published-vs-reproduced section's tables: one LaTeX table per source with matches, each row a published
ratio beside this study's with its interval and verdict, marked where this study's cells ran in another mode or
another arithmetic than the source's, and a note under it that explains every mark, the verdicts' rule and whether
absolute numbers are comparable (they never are across machines). Read from the rows of `matching.compare`.

The section's prose is report/templates/published.tex.j2's; these tables are LaTeX the template is handed as is."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.common.latex import escape, join_words, mode_label, number, short_label, table_float
from fwbench.analysis.common.names import model_name
from fwbench.analysis.published.judgement import (
    DIFFERENT,
    DIRECTION_ONLY,
    FAILED,
    INCONCLUSIVE,
    REPRODUCED,
    TESTED,
    factor,
    margin_of,
)
from fwbench.analysis.published.sources import BASELINE, Source

# How the paper names a precision a source ran in (reference/sources.yaml; fwbench.backends.base.PRECISIONS).
PRECISION_PHRASES = {
    "default": "each framework's default float32 arithmetic (TF32 not pinned)",
    "fp32": "true FP32",
    "tf32": "TF32",
    "bf16": "bfloat16",
}
OTHER_ARITHMETIC_MARK = r"$^{\S}$"  # a row whose cells here computed in another arithmetic than the source's


def precision_phrase(precision: str) -> str:
    return PRECISION_PHRASES.get(str(precision), escape(str(precision)))


def _ours(value: float | None, digits: int = 3) -> str:
    return number(value, digits) if value is not None and pd.notna(value) else "---"


def _ratio_with_ci(row) -> str:
    """This study's ratio, with its 95% CI where a verdict was drawn from it (a direction-only ratio's within-process
    or unpaired interval is not printed: it is not the interval the verdicts test)."""
    if pd.isna(row.ratio):
        return "---"
    if row.verdict not in TESTED or pd.isna(row.ci_low):
        return number(row.ratio)
    return f"{number(row.ratio)} [{number(row.ci_low)}, {number(row.ci_high)}]"


COMPILED_MARK = r"$^{c}$"  # this study's ratio against compiled PyTorch, under the one against eager PyTorch


def _vs_compiled(row) -> str:
    """This study's ratio of the pair against compiled PyTorch with its paired 95% CI, on a line of its own and
    marked, where the row's own sets it against eager PyTorch as the source did ("" otherwise)."""
    ratio = getattr(row, "ratio_vs_compiled", None)
    if ratio is None or pd.isna(ratio):
        return ""
    interval = f"{number(ratio)} [{number(row.ci_low_vs_compiled)}, {number(row.ci_high_vs_compiled)}]"
    return f"\\newline {interval}{COMPILED_MARK}"


OTHER_MODE_MARK = r"$^{\ddagger}$"  # a row whose cells here ran in another mode than the source's


def flag(rows: pd.DataFrame, column: str, default: bool) -> pd.Series:
    """A boolean column of a published.csv read back ("True"/"False" or bools), `default` where it is absent."""
    if column not in rows:
        return pd.Series(default, index=rows.index)
    return rows[column].astype(str) == "True"


def modes_note(rows: pd.DataFrame, source: Source) -> str:
    """The table note's sentence on modes: the mode of each framework's published figures (stated, or taken as its
    primary mode), that this study's cells are in the same modes, and the mark on rows whose cells here are not."""
    frameworks = [BASELINE, *sorted(set(rows["framework"]))]
    stated = [source.mode_of(f)[1] for f in frameworks]
    if all(stated):
        how = "as the source states them"
    elif any(stated):
        how = "each framework's primary one where the source states none"
    else:
        how = "not stated by the source, so each framework's primary one"
    modes = "; ".join(f"{short_label(f)} {mode_label(source.mode_of(f)[0])}" for f in frameworks)
    text = f" Modes of the published figures ({how}): {escape(modes)}; this study's cells are in the same modes"
    other = rows[~flag(rows, "modes_match", True)]
    if len(other):
        ran = {
            f"{short_label(BASELINE)} {mode_label(r.ours_torch_mode)}, {short_label(r.framework)} "
            f"{mode_label(r.ours_other_mode)}"
            for r in other.itertuples()
        }
        text += (
            f" except where marked {OTHER_MODE_MARK}: no cell here in the published mode, so the cells here ran "
            f"{escape('; '.join(sorted(ran)))}"
        )
    return text + "."


def arithmetic_note(rows: pd.DataFrame, source: Source) -> str:
    """The table note's sentence on arithmetic: this study's cells in the source's precision, or the stand-in and why
    (matching.matched_precision), and the mark on rows computed in another arithmetic than the source's."""
    if "our_precision" not in rows or rows["our_precision"].isna().all():
        return ""
    ours = sorted(set(rows["our_precision"].astype(str)))
    if ours == [source.precision]:
        return f" This study's cells: {precision_phrase(source.precision)} too."
    notes = sorted({str(n) for n in rows["arithmetic_note"].dropna() if str(n)})
    other = ~flag(rows, "arithmetic_match", True)
    text = f" This study's cells: {join_words([precision_phrase(p) for p in ours])} ({escape('; '.join(notes))})"
    if other.any():
        text += f"; rows marked {OTHER_ARITHMETIC_MARK} compare another arithmetic than the source's"
    return text + "."


def table_verdict(row) -> str:
    """A row's verdict as the paper's table prints it (short; the CSV's verdict_text has it in full)."""
    if row.verdict in (REPRODUCED, INCONCLUSIVE):
        return f"{row.verdict} (TOST p = {row.tost_p:.2g})"
    if row.verdict == DIFFERENT:
        return f"different: ours {row.ours_vs_published}"
    if row.verdict == DIRECTION_ONLY:
        return f"direction only, no interval: {row.direction}"
    return "failed here" if row.verdict == FAILED else str(row.verdict)


def device_classes(rows: pd.DataFrame) -> tuple[tuple[str, str], ...]:
    """The pairs of device classes the rows compare across, (published, ours) in capitals: (("GPU", "CPU"),) for GPU
    figures set beside CPU cells; none within one class, or for a table from before the columns."""
    if rows.empty or not {"published_device_kind", "ours_device_kind"} <= set(rows):
        return ()
    pairs = zip(rows["published_device_kind"], rows["ours_device_kind"], strict=True)
    return tuple(sorted({(str(a).upper(), str(b).upper()) for a, b in pairs if str(a).lower() != str(b).lower()}))


def across_classes(rows: pd.DataFrame) -> int:
    """How many rows compare a published figure with a cell of another device class."""
    if rows.empty or not {"published_device_kind", "ours_device_kind"} <= set(rows):
        return 0
    published = rows["published_device_kind"].astype(str).str.lower()
    return int((published != rows["ours_device_kind"].astype(str).str.lower()).sum())


def _classes_note(rows: pd.DataFrame) -> str:
    """'GPU there, CPU here' for the table's note ('' within one class)."""
    return "; ".join(f"{a} there, {b} here" for a, b in device_classes(rows))


def comparison_table(rows: pd.DataFrame, source: Source) -> str:
    """One source's matched rows as a LaTeX table (a full-width float, footnotesize); its note names the modes
    matched and the verdicts' rule, and a row whose cells here ran in another mode than the source's is marked."""
    others = sorted(set(rows["framework"]))
    comparable = bool(rows["absolute_comparable"].iloc[0])
    mark = "" if comparable else "$^\\ast$"
    other_mode = ~flag(rows, "modes_match", True)
    classes = _classes_note(rows)
    rule = (
        f" Verdicts: reproduced when two one-sided tests at 5\\% show this study's ratio within a factor of "
        f"{factor(margin_of(rows))} of the published one; different when its 95\\% CI excludes it; inconclusive when "
        "the CI contains it but is too wide; direction only (never agreement) without a paired CI"
        + (f"; ratios across device classes ({escape(classes)})" if classes else "")
        + "."
    )
    caption = (
        f"Published vs reproduced: {escape(source.source)} on the {escape(source.device)}, beside this study's "
        "matching cells, with each framework's speed ratio to PyTorch and the verdict."
    )
    note = (
        f"Published figures: {source.image_size}~px, {precision_phrase(source.precision)}."
        f"{arithmetic_note(rows, source)} Ratios: "
        f"{join_words([short_label(f) for f in others])} speed relative to PyTorch (above 1: faster than PyTorch); "
        f"this study's with its paired 95\\% CI where it has one, and marked {COMPILED_MARK} under it the same pair's "
        f"against compiled PyTorch where the source's PyTorch ran eagerly.{rule}{modes_note(rows, source)}"
        + (
            f" $^\\ast$: absolute {escape(source.unit)} from different machines, "
            f"{escape(rows['absolute_note'].iloc[0])}; only ratios and directions are compared."
            if not comparable
            else ""
        )
    )
    lines = [
        # this study's ratio may wrap, with its ratio against compiled PyTorch on a line of its own; a verdict may wrap
        r"\begin{tabular}{llr rr rr r >{\raggedright\arraybackslash}p{2.8cm} >{\raggedright\arraybackslash}p{2.6cm}}",
        r"\toprule",
        f"Model & vs & Batch & \\multicolumn{{2}}{{c}}{{PT {escape(source.unit)}{mark}}} & "
        f"\\multicolumn{{2}}{{c}}{{Other {escape(source.unit)}{mark}}} & \\multicolumn{{2}}{{c}}{{Ratio to PT}} & "
        r"Verdict \\",
        r"\cmidrule(lr){4-5}\cmidrule(lr){6-7}\cmidrule(lr){8-9}",
        r" & & & publ. & here & publ. & here & publ. & here [95\% CI] & \\",
        r"\midrule",
    ]
    other_arithmetic = ~flag(rows, "arithmetic_match", True)
    for index, row in zip(rows.index, rows.itertuples(), strict=True):
        marked = (OTHER_MODE_MARK if other_mode[index] else "") + (
            OTHER_ARITHMETIC_MARK if other_arithmetic[index] else ""
        )
        lines.append(
            f"{escape(model_name(row.model))}{marked} & {short_label(row.framework)} & {row.batch_size} & "
            f"{_ours(row.published_torch)} & {_ours(row.ours_torch)} & "
            f"{_ours(row.published_other)} & {_ours(row.ours_other)} & "
            f"{number(row.published_ratio)} & {_ratio_with_ci(row)}{_vs_compiled(row)} & "
            f"{escape(table_verdict(row))} \\\\"
        )
    lines += [r"\bottomrule", r"\end{tabular}"]
    return (
        "\n".join(table_float(caption, f"tab:published-{source.key}", "\n".join(lines), [note], placement="t")) + "\n"
    )
