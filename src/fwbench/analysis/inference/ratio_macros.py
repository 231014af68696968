"""Which ratios a summary of the ratio tables is taken over (refused, deviating and stand-in ratios left out, and
counted as macros the paper's method and table notes quote), the family against eager PyTorch, the totals, and how
the counts of resolved ratios were adjusted for multiple comparisons, in words.

Part of the numbers quoted in the paper's prose (fwbench.analysis.inference.macros), apart because the Results'
findings (fwbench.analysis.inference.findings), the mode axis (fwbench.analysis.inference.mode_macros), the inference
tables' legend and the paper's abstract and conclusions all summarise ratios this same way."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import escape
from fwbench.analysis.common.verdicts import DEFAULT_MULTIPLICITY
from fwbench.analysis.inference.summary import (
    against_eager_baseline,
    multiplicity_of,
    node_differs,
    off_pairing,
    paired,
    refused,
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
