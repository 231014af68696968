"""The macros that summarise the ratio tables: which ratios a summary is taken over (refused, deviating and
stand-in ratios left out, and counted), each framework's summary against PyTorch under its macro names (geometric
mean with its interval over models, extremes, resolved counts), and how the counts of resolved ratios were adjusted
for multiple comparisons, in words.

Part of the numbers quoted in the paper's prose (fwbench.analysis.inference.macros), apart because the Results'
findings (fwbench.analysis.inference.findings), the mode axis (fwbench.analysis.inference.mode_macros), the inference
tables' legend and the paper's abstract and conclusions all summarise ratios this same way."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import escape, macro_name, number
from fwbench.analysis.common.names import model_in_text
from fwbench.analysis.common.verdicts import DEFAULT_MULTIPLICITY
from fwbench.analysis.inference.summary import (
    Summary,
    against_eager_baseline,
    geometric_summary,
    multiplicity_of,
    node_differs,
    off_pairing,
    paired,
    refused,
    resolved_adjusted,
    resolved_unadjusted,
)


def include_deviating(config: dict[str, Any]) -> bool:
    """Whether the summary statistics count ratios between cells that ran with different workarounds."""
    return bool((config.get("fallbacks") or {}).get("include_deviating_in_summary", False))


def deviating(ratios: pd.DataFrame) -> pd.Series:
    """The ratios whose two cells ran with different workarounds (they measure the workaround too)."""
    if "deviation_differs" not in ratios:
        return pd.Series(False, index=ratios.index)
    return ratios["deviation_differs"].astype(str) == "True"


def computed_ratios(ratios: pd.DataFrame) -> pd.DataFrame:
    """The rows of a speedups table that hold a ratio: refused ones (cells on different device models, NaN) never
    enter a summary, whatever the configuration."""
    return ratios[~refused(ratios)]


def stand_ins(ratios: pd.DataFrame) -> pd.Series:
    """The computed ratios that pair other modes than their column (`summary.off_pairing`: a framework's first
    mode standing in where its ratio mode's cell failed or was not measured): marked in the table, and left out of
    the summaries, which speak for the column's pairing."""
    return off_pairing(ratios) & ~refused(ratios)


def placement_macros(ratios: pd.DataFrame) -> dict[str, str]:
    """fwbNumRatiosRefused (ratios refused: their cells ran on different device models, a marked dash in the table)
    and fwbNumRatiosNodeDiffer (kept ratios whose cells ran on different nodes of one device model, marked)."""
    return {
        "fwbNumRatiosRefused": str(int(refused(ratios).sum())),
        "fwbNumRatiosNodeDiffer": str(int(node_differs(ratios).sum())),
    }


def summary_ratios(ratios: pd.DataFrame, config: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, str]]:
    """The ratios the summary statistics are taken over, and the macros saying what was left out: refused ratios
    always (`computed_ratios`; counted by `placement_macros`), then fwbNumPairsAll (every computed ratio),
    fwbNumPairsDeviating (ratios whose cells ran with different workarounds, marked in the table),
    fwbNumPairsExcludedDeviating (those left out of the summary: all of them, or none when
    `fallbacks.include_deviating_in_summary` is set; the Results say so, fwbench.analysis.inference.findings).
    Ratios that pair other modes than their column (a stand-in, `stand_ins`) are left out as well: a summary of
    compiled-over-compiled ratios must not mix in an eager program (`mode_ratio_macros` counts them)."""
    placement = placement_macros(ratios)
    ratios = computed_ratios(ratios)
    differing = deviating(ratios)
    include = include_deviating(config)
    kept = ratios if include else ratios[~differing]
    kept = kept[~stand_ins(ratios).loc[kept.index]]
    count, excluded = int(differing.sum()), 0 if include else int(differing.sum())
    defs = placement | {
        "fwbNumPairsAll": str(len(ratios)),
        "fwbNumPairsDeviating": str(count),
        "fwbNumPairsExcludedDeviating": str(excluded),
    }
    return kept, defs


def eager_family(ratios: pd.DataFrame, config: dict[str, Any]) -> pd.DataFrame:
    """The ratios against eager PyTorch where the study has no compiled PyTorch cell (`summary.against_eager_baseline`),
    summarised as a family of their own; refused ones never, those whose cells ran with different workarounds only
    where `fallbacks.include_deviating_in_summary` is set (as for the column's family, `summary_ratios`)."""
    ratios = computed_ratios(ratios)
    if not include_deviating(config):
        ratios = ratios[~deviating(ratios)]
    return ratios[against_eager_baseline(ratios)]


# The families of ratios a summary speaks of: the column's pairing (compiled over compiled by default), and the pairs
# for which the study has no compiled PyTorch cell, against eager PyTorch (`eager_family`).
FAMILIES = {"": (), "eager": ("against", "eager")}


def ratio_names(framework: str = "", family: str = "") -> dict[str, str]:
    """The macro names of one framework's ratio summary, by role. Names end in the framework
    (fwbSpeedupGeomeanTensorflow, fwbNumPairsTensorflow, fwbTensorflowFasterPairs, fwbTorchFasterThanTensorflowPairs);
    without one they are the names the paper used when JAX was the only framework compared (fwbSpeedupGeomean,
    fwbNumPairs, fwbJaxFasterPairs, fwbTorchFasterPairs). The counts of resolved ratios are the adjusted verdicts
    (`summary.resolved_adjusted`); the ...Unadjusted ones count each ratio's own 95% interval. The family against
    eager PyTorch (`family="eager"`) has the same names with "AgainstEager" before the framework
    (fwbSpeedupGeomeanAgainstEagerJax, fwbJaxFasterPairsAgainstEager)."""
    suffix = FAMILIES[family]
    if suffix and not framework:
        raise ValueError("a family's macro names need the framework")

    def name(*parts: str) -> str:
        return macro_name(*parts, *suffix, framework)

    faster = macro_name(framework or "jax", "faster", "pairs", *suffix)
    slower = macro_name("torch", "faster", "than", framework, "pairs", *suffix) if framework else "fwbTorchFasterPairs"
    return {
        "geomean": name("speedup", "geomean"),
        "geomean_ci": name("speedup", "geomean", "CI"),
        "summary": name("speedup", "summary"),
        "interval": name("speedup", "geomean", "interval"),
        "min": name("speedup", "min"),
        "min_cell": name("speedup", "min", "cell"),
        "max": name("speedup", "max"),
        "max_cell": name("speedup", "max", "cell"),
        "pairs": name("num", "pairs"),
        "models": name("num", "pair", "models"),
        "faster": faster,
        "slower": slower,
        "faster_unadjusted": faster + "Unadjusted",
        "slower_unadjusted": slower + "Unadjusted",
        "unresolvable": name("num", "pairs", "unresolvable"),
    }


def summary_interval(summary: Summary) -> str:
    """What a summary's interval is, in words: "95\\% CI [0.553, 1.20] across 5 models" (the model as the unit),
    a single model's range (descriptive, "no interval"), or a single ratio's own interval."""
    if summary.kind == "models":
        return f"95\\% CI [{number(summary.low)}, {number(summary.high)}] across {summary.models} models"
    if summary.kind == "range":
        return f"one model: range {number(summary.low)}--{number(summary.high)}, no interval"
    if summary.kind == "one":
        if pd.notna(summary.low) and pd.notna(summary.high):
            return f"one pair: its own 95\\% CI [{number(summary.low)}, {number(summary.high)}]"
        return "one pair, no interval"
    return "no ratio"


def summary_text(summary: Summary) -> str:
    """A summary in prose: "0.814 (95\\% CI [0.553, 1.20] across 5 models)", "---" without a ratio."""
    if summary.kind == "none":
        return "---"
    return f"{number(summary.estimate)} ({summary_interval(summary)})"


def ratio_summary(ratios: pd.DataFrame) -> dict[str, str]:
    """One framework's ratios against PyTorch by role (see `ratio_names`): the geometric mean with its interval over
    models (`summary.geometric_summary`), the extremes and their cells (a descriptive range), the number of pairs
    and of models, how many resolve each way after the adjustment and by their own interval, and how many cannot
    resolve."""
    summary = geometric_summary(ratios)
    if ratios.empty:
        return (
            dict.fromkeys(("geomean", "geomean_ci", "summary", "interval", "min", "max"), "---")
            | {"min_cell": "no cell pair", "max_cell": "no cell pair"}
            | dict.fromkeys(("pairs", "models", "faster", "slower", "faster_unadjusted", "slower_unadjusted"), "0")
            | {"unresolvable": "0"}
        )
    lo, hi = ratios.loc[ratios["ratio"].idxmin()], ratios.loc[ratios["ratio"].idxmax()]
    adjusted, own = resolved_adjusted(ratios), resolved_unadjusted(ratios)
    above = ratios["ratio"] > 1
    return {
        "geomean": number(summary.estimate),
        "geomean_ci": f"[{number(summary.low)}, {number(summary.high)}]" if summary.kind == "models" else "---",
        "summary": summary_text(summary),
        "interval": summary_interval(summary),
        "min": number(float(lo["ratio"])),
        "min_cell": escape(f"{model_in_text(lo['model'])} at batch {lo['batch_size']}"),
        "max": number(float(hi["ratio"])),
        "max_cell": escape(f"{model_in_text(hi['model'])} at batch {hi['batch_size']}"),
        "pairs": str(len(ratios)),
        "models": str(summary.models),
        "faster": str(int((adjusted & above).sum())),
        "slower": str(int((adjusted & ~above).sum())),
        "faster_unadjusted": str(int((own & above).sum())),
        "slower_unadjusted": str(int((own & ~above).sum())),
        "unresolvable": str(int((~paired(ratios)).sum())),
    }


def ratio_macros(ratios: pd.DataFrame, framework: str = "", family: str = "") -> dict[str, str]:
    """One framework's ratio summary (deviating ratios already left out) under its macro names (of `family`)."""
    names = ratio_names(framework, family)
    return {names[role]: value for role, value in ratio_summary(ratios).items()}


def ratio_totals(ratios: pd.DataFrame) -> dict[str, str]:
    """Over the ratios of every framework (deviating ones left out): fwbNumRatios, and fwbNumRatiosUnresolvable,
    how many of them have only a within-process or unpaired interval."""
    return {
        "fwbNumRatios": str(len(ratios)),
        "fwbNumRatiosUnresolvable": str(int((~paired(ratios)).sum())) if len(ratios) else "0",
    }


# How each multiplicity setting (analysis.multiplicity) reads: the method in the paper's method text, and the phrase
# the ratio table's note gives its verdicts ("after Holm's adjustment within each framework pair").
MULTIPLICITY_METHODS = {
    "holm": "Holm's step-down method, which holds each family's family-wise error rate at 5\\%",
    "bh": "the Benjamini--Hochberg method, which holds each family's false discovery rate at 5\\%",
    "none": (
        "no method: the configuration tests each ratio alone at 5\\% (\\texttt{analysis.multiplicity: none}), so "
        "with many ratios some are resolved by chance"
    ),
}


def adjusted_phrase(method: str, unit: str = "framework pair") -> str:
    """How a count of resolved ratios was made: "after Holm's adjustment within each framework pair", "after the
    Benjamini--Hochberg adjustment within each ...", or "by their own 95\\% intervals, without adjustment"."""
    if method == "holm":
        return f"after Holm's adjustment within each {unit}"
    if method == "bh":
        return f"after the Benjamini--Hochberg adjustment within each {unit}"
    return "by their own 95\\% intervals, without adjustment for multiple comparisons"


def multiplicity_macros(ratios: pd.DataFrame, default: str = DEFAULT_MULTIPLICITY) -> dict[str, str]:
    """fwbMultiplicity (the setting the ratio table's verdicts were made with: holm, bh or none; `default`, the
    config's, where the table has no ratio) and fwbMultiplicityMethod (the method in words, for the method text)."""
    method = multiplicity_of(ratios, default)
    return {"fwbMultiplicity": method, "fwbMultiplicityMethod": MULTIPLICITY_METHODS.get(method, escape(method))}


def summary_gains(gains: pd.DataFrame | None, config: dict[str, Any]) -> pd.DataFrame:
    """The compiled-over-eager gains the summary is taken over: refused ones never, those whose two cells ran with
    different workarounds only when `fallbacks.include_deviating_in_summary` is set (as for the ratios)."""
    if gains is None or gains.empty:
        return pd.DataFrame(columns=["model", "batch_size", "framework", "ratio", "ci_low", "ci_high", "ci_scope"])
    gains = computed_ratios(gains)
    return gains if include_deviating(config) else gains[~deviating(gains)]
