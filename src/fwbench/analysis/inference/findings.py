"""The Results/Inference subsection's findings as numbers, verdicts and display names, for its template
(report/templates/inference_results.tex.j2, rendered by fwbench.analysis.paper.inference): per framework against
PyTorch, how many comparisons resolved each way, the typical ratio and the range; the ratios against eager PyTorch
apart from those against the column's PyTorch; the ratios left out of those counts; the highest throughput; and the
gain of compiling within a framework.

A reader of the Results wants what to take from Fig. headline and Table ratios, not every number they already show,
so the findings are counts, a typical ratio and a range per framework pair. They are summarised over the same ratios
the ratio table's summaries were (fwbench.analysis.inference.ratio_macros: refused ratios never, ratios between
cells with different workarounds only where the configuration counts them, stand-ins apart), and counted with the
same adjusted verdicts (summary.resolved_adjusted). Nothing here is a sentence: the template decides the words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fwbench.analysis.common import partners
from fwbench.analysis.common.latex import BASELINE, ordered_frameworks, others
from fwbench.analysis.common.names import framework_name, model_name, variant_name
from fwbench.analysis.common.partners import multi_mode, with_modes
from fwbench.analysis.inference.mode_macros import compile_seconds, first_compiled
from fwbench.analysis.inference.ratio_macros import (
    computed_ratios,
    deviating,
    eager_family,
    include_deviating,
    stand_ins,
    summary_gains,
    summary_ratios,
)
from fwbench.analysis.inference.summary import (
    geometric_summary,
    paired,
    pairings,
    ratios_for,
    resolved_adjusted,
)


@dataclass(frozen=True)
class Tally:
    """A set of ratios (or compiled-over-eager gains) summarised: how many, how many resolved above 1 (`faster`) and
    below (after the adjustment the table was made with), how many have no paired interval and so cannot resolve,
    the typical ratio (the geometric mean) and the smallest and largest."""

    comparisons: int
    faster: int
    slower: int
    unresolvable: int
    typical: float
    low: float
    high: float


def tally(ratios: pd.DataFrame) -> Tally:
    if ratios.empty:
        return Tally(0, 0, 0, 0, math.nan, math.nan, math.nan)
    resolved, above = resolved_adjusted(ratios), ratios["ratio"].astype(float) > 1
    return Tally(
        len(ratios),
        int((resolved & above).sum()),
        int((resolved & ~above).sum()),
        int((~paired(ratios)).sum()),
        geometric_summary(ratios).estimate,
        float(ratios["ratio"].min()),
        float(ratios["ratio"].max()),
    )


@dataclass(frozen=True)
class RatioFinding:
    """One framework's ratios against the group's PyTorch."""

    framework: str  # display name
    tally: Tally


@dataclass(frozen=True)
class RatioGroup:
    """The ratios that stand against one PyTorch: the column's (compiled PyTorch by default), or, apart, those
    against eager PyTorch where the study has no compiled PyTorch cell to pair with (`stand_in`). `mixed`: the
    group's ratios set a compiled program against an eager one. `models`: the models its ratios cover (display
    names), `every_model` where that is every model with a ratio (the template names the models of the family
    against eager PyTorch always, and the column's where they are not every model)."""

    baseline: str  # "compiled PyTorch", "eager PyTorch", "PyTorch" (a table from before modes)
    stand_in: bool
    mixed: bool
    models: tuple[str, ...]
    every_model: bool
    findings: tuple[RatioFinding, ...]


@dataclass(frozen=True)
class Peak:
    """The study's highest throughput and the cell it was reached in."""

    variant: str  # "compiled PyTorch", "JAX"
    model: str  # display name
    batch: int
    throughput: float  # images per second


@dataclass(frozen=True)
class ModeGain:
    """Compiled over eager within a framework (each framework's first compiled mode), and what torch.compile's
    first call cost (None without a successful compiled PyTorch cell)."""

    frameworks: tuple[str, ...]  # display names
    tally: Tally
    compile_median: float | None
    compile_max: float | None


@dataclass(frozen=True)
class InferenceResults:
    """What the Results/Inference subsection says. `groups` is empty where the study compares no framework with
    PyTorch; `missing`: frameworks with no ratio at all (every cell failed or was refused); `stand_ins_left_out`:
    ratios where another mode stood in, outside the family against eager PyTorch, left out of the counts;
    `deviating`: ratios between cells that ran with different workarounds, counted only where `deviating_counted`."""

    groups: tuple[RatioGroup, ...]
    missing: tuple[str, ...]
    stand_ins_left_out: int
    deviating: int
    deviating_counted: bool
    peak: Peak | None
    gain: ModeGain


def _models(ratios: pd.DataFrame) -> tuple[str, ...]:
    return tuple(model_name(m) for m in sorted(set(ratios["model"].astype(str))))


def _group(
    ratios: pd.DataFrame, compared: list[str], baseline: str, stand_in: bool, mixed: bool, every: set[str]
) -> RatioGroup | None:
    findings = tuple(
        RatioFinding(framework_name(f), tally(ratios_for(ratios, f))) for f in compared if len(ratios_for(ratios, f))
    )
    if not findings:
        return None
    models = set(ratios["model"].astype(str))
    return RatioGroup(baseline, stand_in, mixed, _models(ratios), models == every, findings)


def ratio_groups(ratios: pd.DataFrame, frameworks: list[str], config: Mapping[str, Any]) -> tuple[RatioGroup, ...]:
    """The column's ratios grouped by the PyTorch they stand against (frameworks whose columns pair the same modes
    together, in the paper's order), then the family against eager PyTorch."""
    if BASELINE not in frameworks or ratios.empty:
        return ()
    compared = others(frameworks)
    computed = computed_ratios(ratios)
    kept, _ = summary_ratios(ratios, dict(config))
    eager = eager_family(ratios, dict(config))
    every = set(pd.concat([kept, eager])["model"].astype(str)) if len(kept) + len(eager) else set()
    pairing = pairings(computed)
    by_baseline: dict[str, list[str]] = {}
    for framework in compared:
        mode = pairing.get(framework, (None, None))[1]
        by_baseline.setdefault(mode or "", []).append(framework)
    groups = []
    for mode, names in by_baseline.items():
        mine = kept[kept["numerator"].isin(names)] if "numerator" in kept else kept
        baseline = variant_name(BASELINE, mode, alone=False) if mode else framework_name(BASELINE)
        mixed = any(partners.mixed_modes(*pairing[f]) for f in names if f in pairing)
        groups.append(_group(mine, names, baseline, False, mixed, every))
    eager_baseline = variant_name(BASELINE, "eager", alone=False)
    groups.append(_group(eager, compared, eager_baseline, True, True, every))
    return tuple(group for group in groups if group is not None)


def peak(frame: pd.DataFrame) -> Peak | None:
    """The successful cell with the highest throughput (its framework named with its mode where it ran in several)."""
    frame = with_modes(frame)
    ok = frame[(frame["status"] == "ok") & frame["throughput_img_s"].notna()]
    if ok.empty:
        return None
    several = multi_mode(zip(frame["framework"], frame["mode"], strict=True))
    best = ok.loc[ok["throughput_img_s"].astype(float).idxmax()]
    variant = variant_name(best["framework"], best["mode"], alone=best["framework"] not in several)
    return Peak(variant, model_name(best["model"]), int(best["batch_size"]), float(best["throughput_img_s"]))


def mode_gain(frame: pd.DataFrame, gains: pd.DataFrame | None, config: Mapping[str, Any]) -> ModeGain:
    """The compiled-over-eager gains summarised (each framework's first compiled mode, `first_compiled`, over the
    gains the ratios' rules keep, `summary_gains`), with torch.compile's compile time per process."""
    kept = first_compiled(summary_gains(gains, dict(config)))
    frameworks = ordered_frameworks(kept["framework"]) if len(kept) else []
    seconds = compile_seconds(frame)
    median, largest = (float(seconds.median()), float(seconds.max())) if len(seconds) else (None, None)
    return ModeGain(tuple(framework_name(f) for f in frameworks), tally(kept), median, largest)


def inference_results(
    frame: pd.DataFrame, ratios: pd.DataFrame, gains: pd.DataFrame | None, config: Mapping[str, Any]
) -> InferenceResults:
    """The subsection's values from the tidy table (`frame`), the ratio table and the compiled-over-eager gains."""
    frameworks = list(config.get("frameworks") or ordered_frameworks(frame["framework"]))
    groups = ratio_groups(ratios, frameworks, config)
    computed = computed_ratios(ratios) if len(ratios) else ratios
    named = {finding.framework for group in groups for finding in group.findings}
    compared = others(frameworks) if BASELINE in frameworks else []
    missing = tuple(framework_name(f) for f in compared if framework_name(f) not in named)
    eager = eager_family(ratios, dict(config)) if len(ratios) else ratios
    off = stand_ins(computed) & ~computed.index.isin(eager.index) if len(computed) else pd.Series(dtype=bool)
    counted = include_deviating(dict(config))
    differing = deviating(computed) if len(computed) else pd.Series(dtype=bool)
    # a stand-in between cells with different workarounds is counted once, as deviating, where it is left out
    left_out = int((off & ~differing).sum()) if not counted else int(off.sum())
    return InferenceResults(
        groups, missing, left_out, int(differing.sum()), counted, peak(frame), mode_gain(frame, gains, config)
    )
