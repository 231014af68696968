"""The paper's published-vs-reproduced section: what each source measured, the verdicts' rule and margin, the summary
of the verdicts and of the modes compared, and one LaTeX table per source with matches (its note naming the modes,
the rule, and whether absolute numbers are comparable), read from the rows of `matching.compare`."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from fwbench.analysis.common.latex import (
    escape,
    figure_float,
    join_words,
    label,
    literal,
    mode_label,
    number,
    short_label,
    table_float,
)
from fwbench.analysis.common.names import model_in_text, model_name
from fwbench.analysis.published.judgement import (
    DIFFERENT,
    DIRECTION_ONLY,
    FAILED,
    HIGHER,
    INCONCLUSIVE,
    LOWER,
    OPPOSITE,
    REPRODUCED,
    SAME,
    TESTED,
    VERDICTS,
    factor,
    margin_of,
    verdict_counts,
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


def _flag(rows: pd.DataFrame, column: str, default: bool) -> pd.Series:
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
    other = rows[~_flag(rows, "modes_match", True)]
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
    other = ~_flag(rows, "arithmetic_match", True)
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


def _classes_note(rows: pd.DataFrame) -> str:
    """'GPU there, CPU here' for rows compared across device classes ('' within one class, or before the columns)."""
    if not {"published_device_kind", "ours_device_kind"} <= set(rows):
        return ""
    pairs = sorted(
        {
            (str(a).upper(), str(b).upper())
            for a, b in zip(rows["published_device_kind"], rows["ours_device_kind"], strict=True)
            if str(a).lower() != str(b).lower()
        }
    )
    return "; ".join(f"{a} there, {b} here" for a, b in pairs)


def comparison_table(rows: pd.DataFrame, source: Source) -> str:
    """One source's matched rows as a LaTeX table (a full-width float, footnotesize); its note names the modes
    matched and the verdicts' rule, and a row whose cells here ran in another mode than the source's is marked."""
    others = sorted(set(rows["framework"]))
    comparable = bool(rows["absolute_comparable"].iloc[0])
    mark = "" if comparable else "$^\\ast$"
    other_mode = ~_flag(rows, "modes_match", True)
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
    other_arithmetic = ~_flag(rows, "arithmetic_match", True)
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


def _count(count: int, singular: str, plural: str) -> str:
    return f"{count} {singular if count == 1 else plural}"


def _of(rows: pd.DataFrame, column: str, value: str) -> int:
    return int((rows[column].astype(str) == value).sum()) if column in rows else 0


@dataclass(frozen=True)
class PublishedCounts:
    """What the published comparison found, as the conclusions' template says it (`summary_sentence` says it in the
    section): matched rows by verdict, the different ones by side, the direction-only ones by direction, the
    equivalence margin as a factor, and how many rows compare across device classes (`classes`: "GPU there, CPU
    here")."""

    total: int
    reproduced: int
    different: int
    higher: int
    lower: int
    inconclusive: int
    direction_only: int
    same: int
    opposite: int
    failed: int
    margin: str
    across: int
    classes: str


def _across(rows: pd.DataFrame) -> int:
    """How many rows compare a published figure with a cell of another device class."""
    published = rows["published_device_kind"].astype(str).str.lower()
    return int((published != rows["ours_device_kind"].astype(str).str.lower()).sum())


def published_counts(rows: pd.DataFrame) -> PublishedCounts:
    counts = verdict_counts(rows) if len(rows) else dict.fromkeys(VERDICTS, 0)
    different = rows[rows["verdict"].astype(str) == DIFFERENT] if len(rows) else rows
    direction = rows[rows["verdict"].astype(str) == DIRECTION_ONLY] if len(rows) else rows
    classes = _classes_note(rows) if len(rows) else ""
    across = _across(rows) if classes else 0
    return PublishedCounts(
        total=len(rows),
        reproduced=counts[REPRODUCED],
        different=counts[DIFFERENT],
        higher=_of(different, "ours_vs_published", HIGHER),
        lower=_of(different, "ours_vs_published", LOWER),
        inconclusive=counts[INCONCLUSIVE],
        direction_only=counts[DIRECTION_ONLY],
        same=_of(direction, "direction", SAME),
        opposite=_of(direction, "direction", OPPOSITE),
        failed=counts[FAILED],
        margin=factor(margin_of(rows)) if len(rows) else "",
        across=across,
        classes=classes,
    )


def summary_sentence(rows: pd.DataFrame) -> str:
    """What the comparison found, counted from the rows: how many published ratios are reproduced (equivalent
    within the margin), different (ours higher or lower), inconclusive, or compared by direction only (same or
    opposite, never counted as agreement), and whether they were compared across device classes."""
    if rows.empty:
        return "No published figure matches a cell of this study (same suite, model, batch size and precision)."
    counts = verdict_counts(rows)
    margin = factor(margin_of(rows))
    reproduced = _count(counts[REPRODUCED], "is", "are") if counts[REPRODUCED] else "none is"
    parts = [f"{reproduced} reproduced (shown equivalent within a factor of {margin} by two one-sided tests at 5\\%)"]
    if counts[DIFFERENT]:
        different = rows[rows["verdict"].astype(str) == DIFFERENT]
        sides = [f"{side} in {n}" for side in (HIGHER, LOWER) if (n := _of(different, "ours_vs_published", side))]
        parts.append(
            _count(counts[DIFFERENT], "is", "are")
            + f" different (outside this study's 95\\% CI: ours {', '.join(sides) or 'not on one side'})"
        )
    if counts[INCONCLUSIVE]:
        parts.append(
            _count(counts[INCONCLUSIVE], "is", "are")
            + " inconclusive (inside this study's 95\\% CI, which is too wide to show equivalence)"
        )
    if counts[DIRECTION_ONLY]:
        direction = rows[rows["verdict"].astype(str) == DIRECTION_ONLY]
        ways = [f"{n} in the {way} direction" for way in (SAME, OPPOSITE) if (n := _of(direction, "direction", way))]
        parts.append(
            _count(counts[DIRECTION_ONLY], "has", "have")
            + f" no paired interval here and {'is' if counts[DIRECTION_ONLY] == 1 else 'are'} compared by direction "
            f"only ({', '.join(ways)}), which never counts as agreement"
        )
    if counts[FAILED]:
        parts.append(_count(counts[FAILED], "has", "have") + " a failed cell here")
    others = {v: n for v, n in counts.items() if v not in VERDICTS and n}
    parts += [f"{n} {escape(v)}" for v, n in others.items()]
    total = len(rows)
    text = (
        f"Of the {_count(total, 'published ratio', 'published ratios')} that match a pair of cells of this study, "
        + join_words(parts)
        + "."
    )
    classes = _classes_note(rows)
    if classes:
        across = _across(rows)
        who = "All of them compare" if across == total else f"{across} of them compare"
        text += f" {who} ratios across device classes ({escape(classes)})."
    return text


def modes_sentence(rows: pd.DataFrame) -> str:
    """Which modes the matched published ratios were compared in, read from the rows: each framework's published
    mode (and whether the sources state it or it is taken as the framework's primary one: torch.compile is opt-in),
    that this study's cells are in the same modes, and how many rows set them beside cells in another mode for want
    of one in the published mode. Empty without a row, or for a table from before modes."""
    if rows.empty or "published_torch_mode" not in rows:
        return ""
    modes = {BASELINE: set(rows["published_torch_mode"].astype(str))}
    for framework, mine in rows.groupby("framework"):
        modes[framework] = set(mine["published_other_mode"].astype(str))
    named = join_words([f"{label(f)} {' / '.join(mode_label(m) for m in sorted(modes[f]))}" for f in modes])
    stated = _flag(rows, "modes_stated", False)
    if stated.all():
        how = "as the sources state"
    elif stated.any():
        how = "as stated where a source states a mode, otherwise each framework's primary one"
    else:
        how = "no source states a mode, so each framework's primary one: torch.compile is opt-in"
    other = int((~_flag(rows, "modes_match", True)).sum())
    text = f"The published figures are taken as {named} ({how}), and compared with this study's cells in those modes"
    if other:
        text += (
            f" except in {_count(other, 'row', 'rows')} (marked {OTHER_MODE_MARK} in the tables), where this study has "
            "no cell in the published mode"
        )
    return text + "."


def arithmetic_sentence(rows: pd.DataFrame) -> str:
    """How far the matched ratios move in true FP32 (this study's fp32 cells of the same pairs, where it has them
    beside its default-arithmetic ones): what of a difference is the arithmetic's, not the framework's."""
    if "ratio_true_fp32" not in rows:
        return ""
    shown = rows.dropna(subset=["ratio", "ratio_true_fp32"])
    if shown.empty:
        return ""
    moves = [
        f"{short_label(r.framework)} on {escape(model_in_text(r.model))} at batch {r.batch_size} from "
        f"{number(r.ratio)} to {number(r.ratio_true_fp32)} "
        f"[{number(r.ci_low_true_fp32)}, {number(r.ci_high_true_fp32)}]"
        for r in shown.itertuples()
    ]
    return (
        "In true FP32 (this study's fp32 cells of the same pairs, TF32 off in every framework) instead of each "
        f"framework's default arithmetic, the ratios to PyTorch move: {join_words(moves)}."
    )


# Memory bandwidth of the Hopper GPUs the published and this study's figures come from (NVIDIA's data sheets): the
# H200 has the H100's compute and a faster memory.
BANDWIDTH_TB_S = {"H200": "4.8", "H100 NVL": "3.9", "H100": "3.35"}


def _bandwidth(device: str) -> tuple[str, str] | None:
    for name, tb_s in BANDWIDTH_TB_S.items():  # the longest names first
        if name.lower() in device.lower():
            return name, tb_s
    return None


def machine_sentence(rows: pd.DataFrame, sources: list[Source]) -> str:
    """Where this study's matched cells ran (its driver, CUDA and framework versions are the setup table's), and,
    where the published figures come from an H100 and ours from an H200, which ratios the H200's faster memory can
    move."""
    if rows.empty or "ours_device" not in rows or rows["ours_device"].isna().all():
        return ""
    device = str(rows["ours_device"].dropna().iloc[0])
    on_gpu = str(rows["ours_device_kind"].iloc[0]).lower() == "gpu"
    versions = "its driver, CUDA and framework versions" if on_gpu else "its framework versions"
    text = f"This study's cells ran on the {escape(device)}; Table~\\ref{{tab:environment}} gives {versions}."
    ours = _bandwidth(device)
    theirs = {_bandwidth(s.device) for s in sources if s.key in set(rows["source"])} - {None}
    if ours and ours[0] == "H200" and any(name.startswith("H100") for name, _ in theirs):
        there = " or ".join(f"{tb_s} TB/s ({escape(name)})" for name, tb_s in sorted(theirs))
        text += (
            f" The H200 has the H100's compute but {ours[1]} TB/s of memory bandwidth against {there}: a ratio "
            "between cells bound by memory (small batches, MobileNetV3-Small and EfficientNet-B0's depthwise "
            "convolutions) can move between the two GPUs, one between cells bound by compute (ResNet-50 and "
            "ViT-B/16 at large batches) less."
        )
    return text


def _describe(source: Source, matched: pd.DataFrame) -> str:
    """One sentence on a source: what it ran where, how it was measured, and what of it matches here."""
    found = (
        f"{_count(len(matched), 'published ratio matches', 'published ratios match')} a pair of cells here "
        f"(Table~\\ref{{tab:published-{source.key}}})"
        if len(matched)
        else "no cell of this study has its suite, model, batch size and precision, so none of it is shown"
    )
    what = escape(source.source)
    return (
        f"{what[:1].upper()}{what[1:]} ran the {source.suite} suite on the {escape(source.device)} at "
        f"{source.image_size}~px in {precision_phrase(source.precision)} ({literal(source.notes.rstrip('.'))}); "
        f"{found}."
    )


def rule_sentence(margin: float) -> str:
    """The verdicts' rule and the margin, in one sentence."""
    f = factor(margin)
    return (
        f"A published ratio counts as reproduced only when two one-sided tests at the 5\\% level show this study's "
        f"ratio within a factor of {f} of it either way (its paired 90\\% CI inside the published ratio times "
        f"[1/{f}, {f}]; equivalence margin {margin:g}, \\texttt{{analysis.equivalence\\_margin}}), as different "
        "when its paired 95\\% CI excludes the published ratio, as inconclusive when that CI contains it but is too "
        "wide to show equivalence, and by direction only, never as agreement, when this study has no paired CI "
        "(one training run each, one trial each, or trials not interleaved)."
    )


def section(rows: pd.DataFrame, sources: list[Source], figure: str | None, margin: float | None = None) -> str:
    """The paper's published-vs-reproduced section: what each source measured, the rule of the verdicts with its
    `margin` (the rows' where not given), the summary, one table per source with matches, and the figure."""
    margin = margin_of(rows) if margin is None else margin
    lines = [r"\section{Published vs reproduced}", r"\label{sec:published}"]
    described = [_describe(source, rows[rows["source"] == source.key]) for source in sources]
    lines.append(
        "Published figures are compared with this study's matching cells: the same suite, model, batch size and "
        "precision, and no row where none matches. The sources, as copied into the repository with how they were "
        "measured (\\texttt{reference/}). " + " ".join(described) + " "
        "A ratio is compared, never an absolute number across machines. " + rule_sentence(margin)
    )
    modes = modes_sentence(rows)
    extra = " ".join(filter(None, [modes, arithmetic_sentence(rows), machine_sentence(rows, sources)]))
    lines.append(
        summary_sentence(rows)
        + (f" {extra}" if extra else "")
        + (" Figure~\\ref{fig:published} sets them side by side." if figure and not rows.empty else "")
    )
    for source in sources:
        matched = rows[rows["source"] == source.key]
        if not matched.empty:
            lines.append(comparison_table(matched, source))
    if figure and not rows.empty:
        lines.append(
            "\n".join(
                figure_float(
                    figure,
                    "Published vs reproduced speed ratios to PyTorch per model and batch size (log scale); above "
                    "1: faster than PyTorch.",
                    "fig:published",
                    [
                        "Open markers: published, with the equivalence margin as a grey bar; filled, with bars: this "
                        r"study's, with its paired 95\% CI; a cross where it has no paired CI and only the direction "
                        "is compared."
                    ],
                )
            )
        )
    return "\n\n".join(lines) + "\n"
