"""The values of the paper's published-vs-reproduced section, which report/templates/published.tex.j2 words: the
sources (what each ran, where, in what arithmetic, what it notes, how many of its ratios match), the verdicts counted,
how many of this study's ratios lie on the published side of 1, the largest departures, the modes the figures were
taken in, how far true FP32 moves the ratios, and the machine. The tables and the figure are LaTeX this package
writes (`floats`: `table.comparison_table`, `figure_float`), set after the prose.

A reader should take from the section whether the published finding holds here, and why it may not: so the template
is handed counts, verdicts, a few named ratios and display names, never a sentence, and the tables keep every number
(fwbench.analysis.paper.published_section renders it; the conclusions say the counts and modes the same way)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from fwbench.analysis.common.latex import figure_float
from fwbench.analysis.common.names import framework_name, model_in_text, precision_name
from fwbench.analysis.published.counts import published_counts, published_modes
from fwbench.analysis.published.judgement import DIFFERENT, OPPOSITE, SAME, UNRESOLVED, factor, margin_of
from fwbench.analysis.published.sources import Source
from fwbench.analysis.published.table import comparison_table

DEPARTURES_SHOWN = 2  # the largest departures the prose names (the table holds every ratio)
FIGURE_LABEL = "fig:published"


@dataclass(frozen=True)
class PublishedSource:
    """One published figure set as the section introduces it: who published it (`name`, from reference/sources.yaml),
    the suite its rows match, the device and resolution, the arithmetic (`precision`, fwbench's identifier, for the
    template to word; `precision_name` its display name), what the source notes about how it measured, one item
    each, how many of its ratios match cells here, and the label of its table (LaTeX, where it has one)."""

    name: str
    suite: str
    device: str
    image_size: int
    precision: str
    precision_name: str
    notes: tuple[str, ...]
    matched: int
    label: str


@dataclass(frozen=True)
class Sides:
    """On which side of 1 this study's ratios lie against the published ones: the same (`same`), the other
    (`other`), or not resolved (an interval that contains 1)."""

    same: int
    other: int
    unresolved: int


@dataclass(frozen=True)
class Departure:
    """A published ratio this study resolvedly differs from, by display names: the framework over PyTorch on a model
    at a batch size, the published ratio and ours."""

    framework: str
    model: str
    batch: int
    published: float
    ours: float


@dataclass(frozen=True)
class FP32Shift:
    """How one matched ratio moves in true FP32 (this study's fp32 cells of the same pair, TF32 off everywhere)
    against each framework's default arithmetic: from `default` to `fp32` [`low`, `high`]."""

    framework: str
    model: str
    batch: int
    default: float
    fp32: float
    low: float
    high: float


@dataclass(frozen=True)
class TrueFP32:
    """The matched ratios set beside their true-FP32 twins: how many, the range of the factor they move by
    (true-FP32 ratio over default-arithmetic ratio), and the one that moves most."""

    shifts: int
    low: float
    high: float
    largest: FP32Shift


@dataclass(frozen=True)
class Bandwidth:
    """Memory bandwidth (TB/s) of this study's GPU and of the published ones, named (`theirs`: (name, TB/s)), where
    the two differ in memory and not in compute (an H200 against an H100)."""

    ours: str
    ours_tb_s: float
    theirs: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Machine:
    """Where this study's matched cells ran: the device, whether it is a GPU, and the bandwidth comparison."""

    device: str
    gpu: bool
    bandwidth: Bandwidth | None


# Memory bandwidth of the Hopper GPUs the published and this study's figures come from (NVIDIA's data sheets): the
# H200 has the H100's compute and a faster memory. The longest names first.
BANDWIDTH_TB_S = {"H200": 4.8, "H100 NVL": 3.9, "H100": 3.35}


def _bandwidth_of(device: str) -> tuple[str, float] | None:
    for name, tb_s in BANDWIDTH_TB_S.items():
        if name.lower() in device.lower():
            return name, tb_s
    return None


def machine(rows: pd.DataFrame, sources: list[Source]) -> Machine | None:
    """Where this study's matched cells ran, and the bandwidth comparison where ours is an H200 and a matched source
    ran on an H100 (None without a row, or for a table from before the device columns)."""
    if rows.empty or "ours_device" not in rows or rows["ours_device"].isna().all():
        return None
    device = str(rows["ours_device"].dropna().iloc[0])
    ours = _bandwidth_of(device)
    matched = set(rows["source"])
    theirs = {_bandwidth_of(s.device) for s in sources if s.key in matched} - {None}
    bandwidth = None
    if ours and ours[0] == "H200" and any(name.startswith("H100") for name, _ in theirs):
        bandwidth = Bandwidth(ours=ours[0], ours_tb_s=ours[1], theirs=tuple(sorted(theirs)))
    return Machine(device=device, gpu=str(rows["ours_device_kind"].iloc[0]).lower() == "gpu", bandwidth=bandwidth)


def sides(rows: pd.DataFrame) -> Sides:
    """The rows' `direction` counted (a failed row has none)."""
    directions = rows["direction"].astype(str) if "direction" in rows else pd.Series(dtype=str)
    return Sides(
        same=int((directions == SAME).sum()),
        other=int((directions == OPPOSITE).sum()),
        unresolved=int((directions == UNRESOLVED).sum()),
    )


def departures(rows: pd.DataFrame, shown: int = DEPARTURES_SHOWN) -> tuple[Departure, ...]:
    """The `shown` different rows farthest from their published ratio (on the log scale, either way)."""
    if rows.empty:
        return ()
    different = rows[rows["verdict"].astype(str) == DIFFERENT].dropna(subset=["ratio", "published_ratio"])
    distance = (different["ratio"].astype(float) / different["published_ratio"].astype(float)).map(
        lambda x: abs(math.log(x))
    )
    farthest = different.loc[distance.sort_values(ascending=False, kind="stable").index[:shown]]
    return tuple(
        Departure(
            framework=framework_name(r.framework),
            model=model_in_text(r.model),
            batch=int(r.batch_size),
            published=float(r.published_ratio),
            ours=float(r.ratio),
        )
        for r in farthest.itertuples()
    )


def true_fp32(rows: pd.DataFrame) -> TrueFP32 | None:
    """The matched ratios this study also has in true FP32 (None where it has none)."""
    if "ratio_true_fp32" not in rows:
        return None
    shown = rows.dropna(subset=["ratio", "ratio_true_fp32"])
    if shown.empty:
        return None
    factors = shown["ratio_true_fp32"].astype(float) / shown["ratio"].astype(float)
    r = shown.loc[factors.map(lambda x: abs(math.log(x))).idxmax()]
    largest = FP32Shift(
        framework=framework_name(r["framework"]),
        model=model_in_text(r["model"]),
        batch=int(r["batch_size"]),
        default=float(r["ratio"]),
        fp32=float(r["ratio_true_fp32"]),
        low=float(r["ci_low_true_fp32"]),
        high=float(r["ci_high_true_fp32"]),
    )
    return TrueFP32(shifts=len(shown), low=float(factors.min()), high=float(factors.max()), largest=largest)


# A source's notes split into items: at "; " or ". " outside parentheses (a flag's "=" or a version's "0.4.x" stays).
_NOTE_BREAK = re.compile(r"(?:;|\.)\s+(?![^(]*\))")


def note_items(notes: str) -> tuple[str, ...]:
    """A source's notes (sources.yaml's free text) as items, each without its closing punctuation, so that the
    template lists them."""
    items = (item.strip().rstrip(".;").strip() for item in _NOTE_BREAK.split(str(notes)))
    return tuple(item for item in items if item)


def published_source(source: Source, matched: int) -> PublishedSource:
    return PublishedSource(
        name=source.source,
        suite=source.suite,
        device=source.device,
        image_size=int(source.image_size),
        precision=str(source.precision),
        precision_name=precision_name(source.precision),
        notes=note_items(source.notes),
        matched=matched,
        label=f"tab:published-{source.key}" if matched else "",
    )


def floats(rows: pd.DataFrame, sources: list[Source], figure: str | None) -> str:
    """One table per source with matches, then the figure (none without a row): LaTeX for the template."""
    parts = [comparison_table(rows[rows["source"] == s.key], s) for s in sources if (rows["source"] == s.key).any()]
    if figure and not rows.empty:
        notes = [
            "Open markers: published, with the equivalence margin as a grey bar; filled, with bars: this study's, "
            r"with its paired 95\% CI; a cross where it has no paired CI and only the direction is compared."
        ]
        caption = (
            "Published vs reproduced speed ratios to PyTorch per model and batch size (log scale); above 1: faster "
            "than PyTorch."
        )
        parts.append("\n".join(figure_float(figure, caption, FIGURE_LABEL, notes)) + "\n")
    return "\n\n".join(part.rstrip() for part in parts)


def section_values(
    rows: pd.DataFrame, sources: list[Source], figure: str | None, margin: float | None = None
) -> dict[str, object]:
    """What report/templates/published.tex.j2 is handed (its header names each value). `margin`: the study's
    equivalence margin (the rows' where not given), handed as the factor either way ("1.1"); `figure`: the figure's
    file stem (None: no figure). Each source's `label` and the figure's are LaTeX; the floats follow the prose
    (`floats`)."""
    matched = rows["source"].value_counts() if "source" in rows else pd.Series(dtype=int)
    return {
        "sources": [published_source(s, int(matched.get(s.key, 0))) for s in sources],
        "factor": factor(margin_of(rows) if margin is None else margin),
        "counts": published_counts(rows),
        "sides": sides(rows),
        "departures": departures(rows),
        "modes": published_modes(rows),
        "true_fp32": true_fp32(rows),
        "machine": machine(rows, sources),
        "figure": FIGURE_LABEL if figure and not rows.empty else "",
    }
