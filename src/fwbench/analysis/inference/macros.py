"""Numbers quoted in the paper's prose, as LaTeX macros computed from the results (never typed by hand)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fwbench.analysis.common import partners
from fwbench.analysis.common.latex import (
    BASELINE,
    FRAMEWORK_LABELS,
    default_title,
    define_macros,
    escape,
    join_words,
    label,
    macro_name,
    mode_label,
    number,
    ordered_frameworks,
    ordered_variants,
    others,
    pairing_label,
    ratio_label,
    variant_label,
)
from fwbench.analysis.common.partners import multi_mode, with_modes
from fwbench.analysis.inference.aggregate import (
    DEFAULT_MULTIPLICITY,
    Summary,
    geometric_summary,
    mixed_modes,
    multiplicity_of,
    multiplicity_setting,
    node_differs,
    off_pairing,
    paired,
    pairings,
    ratios_for,
    refused,
    resolved_adjusted,
    resolved_unadjusted,
)
from fwbench.scenarios.blocks import STEAL_FLAG
from fwbench.study.modes import is_compiled


def include_deviating(config: dict[str, Any]) -> bool:
    """Whether the summary statistics count ratios between cells that ran with different workarounds."""
    return bool((config.get("fallbacks") or {}).get("include_deviating_in_summary", False))


def _deviating(ratios: pd.DataFrame) -> pd.Series:
    if "deviation_differs" not in ratios:
        return pd.Series(False, index=ratios.index)
    return ratios["deviation_differs"].astype(str) == "True"


def computed_ratios(ratios: pd.DataFrame) -> pd.DataFrame:
    """The rows of a speedups table that hold a ratio: refused ones (cells on different device models, NaN) never
    enter a summary, whatever the configuration."""
    return ratios[~refused(ratios)]


def stand_ins(ratios: pd.DataFrame) -> pd.Series:
    """The computed ratios that pair other modes than their column (`aggregate.off_pairing`: a framework's first
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
    `fallbacks.include_deviating_in_summary` is set) and fwbDeviatingPairsSentence (one sentence for the text).
    Ratios that pair other modes than their column (a stand-in, `stand_ins`) are left out as well: a summary of
    compiled-over-compiled ratios must not mix in an eager program (`mode_ratio_macros` counts them)."""
    placement = placement_macros(ratios)
    ratios = computed_ratios(ratios)
    deviating = _deviating(ratios)
    include = include_deviating(config)
    kept = ratios if include else ratios[~deviating]
    kept = kept[~stand_ins(ratios).loc[kept.index]]
    count, excluded = int(deviating.sum()), 0 if include else int(deviating.sum())
    if count == 0:
        sentence = "No ratio compares cells that ran with different workarounds."
    elif include:
        sentence = (
            f"{count} of these ratios compare{'s' if count == 1 else ''} cells that ran with different workarounds "
            "(marked $^{d}$); the study's configuration counts them in these figures."
        )
    else:
        one = count == 1
        sentence = (
            f"{count} further ratio{'' if one else 's'} compare{'s' if one else ''} cells that ran with different "
            f"workarounds (marked $^{{d}}$) and {'is' if one else 'are'} left out of these figures."
        )
    defs = placement | {
        "fwbNumPairsAll": str(len(ratios)),
        "fwbNumPairsDeviating": str(count),
        "fwbNumPairsExcludedDeviating": str(excluded),
        "fwbDeviatingPairsSentence": sentence,
    }
    return kept, defs


def fallback_ladder(config: dict[str, Any]) -> str:
    """The configured fallback ladder in words: its rungs' names in order, or that it is off or empty."""
    fallbacks = config.get("fallbacks") or {}
    rungs = [rung["name"] for rung in fallbacks.get("ladder") or []]
    if not fallbacks.get("enabled", True):
        return "disabled in this study's configuration"
    if not rungs:
        return "empty in this study's configuration"
    names = ", ".join(rf"\texttt{{{escape(name)}}}" for name in rungs)
    return f"{len(rungs)} rung{'' if len(rungs) == 1 else 's'} in this study: {names}"


def ratio_names(framework: str = "") -> dict[str, str]:
    """The macro names of one framework's ratio summary, by role. Names end in the framework
    (fwbSpeedupGeomeanTensorflow, fwbNumPairsTensorflow, fwbTensorflowFasterPairs, fwbTorchFasterThanTensorflowPairs);
    without one they are the names the paper used when JAX was the only framework compared (fwbSpeedupGeomean,
    fwbNumPairs, fwbJaxFasterPairs, fwbTorchFasterPairs). The counts of resolved ratios are the adjusted verdicts
    (`aggregate.resolved_adjusted`); the ...Unadjusted ones count each ratio's own 95% interval."""

    def name(*parts: str) -> str:
        return macro_name(*parts, framework)

    faster = macro_name(framework or "jax", "faster", "pairs")
    slower = macro_name("torch", "faster", "than", framework, "pairs") if framework else "fwbTorchFasterPairs"
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


def _ratio_summary(ratios: pd.DataFrame) -> dict[str, str]:
    """One framework's ratios against PyTorch by role (see `ratio_names`): the geometric mean with its interval over
    models (`aggregate.geometric_summary`), the extremes and their cells (a descriptive range), the number of pairs
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
        "min_cell": escape(f"{lo['model']} at batch {lo['batch_size']}"),
        "max": number(float(hi["ratio"])),
        "max_cell": escape(f"{hi['model']} at batch {hi['batch_size']}"),
        "pairs": str(len(ratios)),
        "models": str(summary.models),
        "faster": str(int((adjusted & above).sum())),
        "slower": str(int((adjusted & ~above).sum())),
        "faster_unadjusted": str(int((own & above).sum())),
        "slower_unadjusted": str(int((own & ~above).sum())),
        "unresolvable": str(int((~paired(ratios)).sum())),
    }


def ratio_macros(ratios: pd.DataFrame, framework: str = "") -> dict[str, str]:
    """One framework's ratio summary (deviating ratios already left out) under its macro names."""
    names = ratio_names(framework)
    return {names[role]: value for role, value in _ratio_summary(ratios).items()}


def ratio_totals(ratios: pd.DataFrame) -> dict[str, str]:
    """Over the ratios of every framework (deviating ones left out): fwbNumRatios, and fwbNumRatiosUnresolvable,
    how many of them have only a within-process or unpaired interval."""
    return {
        "fwbNumRatios": str(len(ratios)),
        "fwbNumRatiosUnresolvable": str(int((~paired(ratios)).sum())) if len(ratios) else "0",
    }


# How each multiplicity setting (analysis.multiplicity) reads: the method in the paper's method text, and the phrase
# a count of resolved ratios carries ("after Holm's adjustment within each framework pair").
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


def _pairing_name(framework: str, pairing: dict[str, tuple[str, str]]) -> str:
    """A framework's ratio in prose with the modes it pairs ("JAX/PyTorch-compiled"), or without modes where the
    speedups table has none ("JAX/PyTorch")."""
    if framework not in pairing:
        return ratio_label(framework)
    return pairing_label(framework, *pairing[framework])


def _baseline_name(framework: str, pairing: dict[str, tuple[str, str]]) -> str:
    """The PyTorch a framework's ratios stand against, in prose: "compiled PyTorch", "eager PyTorch", or
    "PyTorch" where the speedups table has no modes."""
    if framework not in pairing:
        return label(BASELINE)
    return f"{mode_label(pairing[framework][1])} {label(BASELINE)}"


def _compared(frameworks: list[str]) -> list[str]:
    """The study's frameworks that have ratios against PyTorch (none when the study has no PyTorch), config order."""
    return [f for f in frameworks if f != BASELINE] if BASELINE in frameworks else []


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def _values(defs: dict[str, str], framework: str) -> dict[str, str]:
    return {role: defs[name] for role, name in ratio_names(framework).items()}


def _pairs(count: str | int) -> str:
    return f"{count} model and batch-size pair{'' if str(count) == '1' else 's'}"


def abstract_ratio_sentence(
    defs: dict[str, str], frameworks: list[str], pairing: dict[str, tuple[str, str]] | None = None
) -> str:
    """The abstract's headline (fwbAbstractRatioSentence): each framework's throughput over PyTorch's (in the modes
    its ratios pair) as the geometric mean of its ratios, with the interval that takes the model as the unit."""
    compared, pairing = _compared(frameworks), pairing or {}
    if not compared:
        return "The study has no framework to compare with PyTorch, so it reports no throughput ratio."
    if len(compared) == 1:
        framework = compared[0]
        values = _values(defs, framework)
        if values["pairs"] == "0":
            return f"No model and batch-size pair has both {label(framework)} and PyTorch results to compare."
        return (
            f"Over the {_pairs(values['pairs'])} where both frameworks succeeded, {label(framework)}'s throughput is "
            f"{values['geomean']}$\\times$ {_baseline_name(framework, pairing)}'s in geometric mean "
            f"({_interval_of(defs, framework)})."
        )
    measured = [f for f in compared if _values(defs, f)["pairs"] != "0"]
    baselines = {_baseline_name(f, pairing) for f in measured}
    common = baselines.pop() if len(baselines) == 1 else None
    clauses = []
    for framework in measured:
        values = _values(defs, framework)
        against = "" if common else f" against {_baseline_name(framework, pairing)}"
        clauses.append(
            f"{values['geomean']} for {label(framework)}{against} ({_interval_of(defs, framework)}; "
            f"{values['pairs']} pair{'' if values['pairs'] == '1' else 's'})"
        )
    lead = f"Against {common}, the" if common else "The"
    text = (
        f"{lead} throughput ratio's geometric mean over the model and batch-size pairs where both frameworks "
        f"succeeded is {join_words(clauses)}."
        if clauses
        else ""
    )
    missing = [label(f) for f in compared if f not in measured]
    if missing:
        text += f" {join_words(missing)} {'has' if len(missing) == 1 else 'have'} no pair with PyTorch to compare."
    return text.strip()


def _interval_of(defs: dict[str, str], framework: str) -> str:
    """The interval of a framework's geometric mean in words ("95\\% CI [0.553, 1.20] across 5 models")."""
    return _values(defs, framework)["interval"]


def abstract_verdict_sentence(defs: dict[str, str], frameworks: list[str], method: str) -> str:
    """The abstract's count of resolved ratios (fwbAbstractVerdictSentence), with the adjustment they were made
    with (`adjusted_phrase`); or that no ratio could be resolved (no paired interval)."""
    compared = [f for f in _compared(frameworks) if _values(defs, f)["pairs"] != "0"]
    if not compared:
        return ""
    values = {f: _values(defs, f) for f in compared}
    if all(v["unresolvable"] == v["pairs"] for v in values.values()):
        return "None of these ratios has a paired interval over interleaved rounds, so none is resolved."
    clauses = [
        f"{label(f)} is faster than PyTorch in {v['faster']} and slower in {v['slower']} of {v['pairs']} pairs"
        if index == 0
        else f"{label(f)} faster in {v['faster']} and slower in {v['slower']} of {v['pairs']}"
        for index, (f, v) in enumerate(values.items())
    ]
    return f"{_capitalised(adjusted_phrase(method))}, {join_words(clauses)}; the rest are not resolved."


def abstract_left_out_sentence(excluded: dict[str, int], stand_in: dict[str, int], mixed: bool) -> str:
    """The abstract's short note of the pairs its figures leave out (fwbAbstractLeftOutSentence): those in which
    another execution mode stood in for a missing cell (`mixed`: an eager against a compiled program), and those
    whose cells ran with different workarounds; empty when none was left out."""
    stood, deviating = sum(stand_in.values()), sum(excluded.values())
    kind = " (an eager against a compiled program)" if mixed else ""
    stood_text = f"in which another execution mode stood in for a missing cell{kind}"
    deviating_text = "whose cells ran with different workarounds"
    if stood and deviating:
        return (
            f"Left out of these figures are {stood + deviating} further pairs: {stood} {stood_text}, and {deviating} "
            f"{deviating_text}."
        )
    count = stood or deviating
    if not count:
        return ""
    lead = "One further pair" if count == 1 else f"A further {count} pairs"
    verb = "is" if count == 1 else "are"
    return f"{lead}, {stood_text if stood else deviating_text}, {verb} left out of these figures."


def faster_sentence(
    defs: dict[str, str],
    frameworks: list[str],
    pairing: dict[str, tuple[str, str]] | None = None,
    method: str = "none",
) -> str:
    """The results' count of resolved ratios, each framework against PyTorch in the modes its ratios pair
    (fwbFasterSentence): the adjusted verdicts (`adjusted_phrase`), and each ratio's own where they differ."""
    compared = _compared(frameworks)
    if not compared:
        return "No framework is compared with PyTorch in this study."
    clauses = []
    for framework in compared:
        values = _values(defs, framework)
        modes = f" ({_pairing_name(framework, pairing)})" if framework in (pairing or {}) else ""
        own = ""
        if method != "none" and (values["faster"], values["slower"]) != (
            values["faster_unadjusted"],
            values["slower_unadjusted"],
        ):
            own = f" ({values['faster_unadjusted']} and {values['slower_unadjusted']} by their own 95\\% intervals)"
        clauses.append(
            f"of {values['pairs']} comparable cells{modes}, {label(framework)} is faster in {values['faster']} and "
            f"PyTorch in {values['slower']}{own}"
        )
    return (
        _capitalised(adjusted_phrase(method))
        + " (paired $t$ tests over interleaved rounds), "
        + "; ".join(clauses)
        + "; the rest are not resolved."
    )


def range_sentence(
    defs: dict[str, str], frameworks: list[str], pairing: dict[str, tuple[str, str]] | None = None
) -> str:
    """The results' summary of each framework's ratios (fwbSpeedupRangeSentence): their geometric mean with its
    interval over models, and their range with the cells at its ends (descriptive); the ratios of a single model
    get the range alone (no interval)."""
    clauses = []
    for framework in _compared(frameworks):
        values = _values(defs, framework)
        if values["pairs"] == "0":
            continue
        name = _pairing_name(framework, pairing or {})
        ends = f"range from {values['min']} ({values['min_cell']}) to {values['max']} ({values['max_cell']})"
        if values["pairs"] == "1":
            text = f"the one {name} ratio is {values['summary']}"
        elif values["models"] == "1":
            text = f"the {name} ratios, all of one model (so no interval), have a geometric mean of {values['geomean']}"
            text += f" and {ends}"
        else:
            text = f"the {name} ratios have a geometric mean of {values['summary']} and {ends}"
        clauses.append(text)
    return _capitalised("; ".join(clauses)) + "." if clauses else ""


def peak_sentence(defs: dict[str, str], frameworks: list[str]) -> str:
    """Each framework's peak throughput and the cell it was reached in (fwbPeakSentence)."""
    clauses = [
        f"{label(f)}'s {'peak throughput ' if index == 0 else ''}is {defs[macro_name('peak', f)]}~img/s "
        f"({defs[macro_name('peak', f, 'cell')]})"
        for index, f in enumerate(frameworks)
    ]
    return "; ".join(clauses) + "."


def sentence_macros(
    defs: dict[str, str],
    frameworks: list[str],
    excluded: dict[str, int],
    stand_in: dict[str, int] | None = None,
    pairing: dict[str, tuple[str, str]] | None = None,
    method: str = "none",
    mixed_stand_in: bool = False,
) -> dict[str, str]:
    """The sentences of the abstract and the results that name every framework of the study (config order):
    fwbFrameworkList, the abstract's fwbAbstractRatioSentence, fwbAbstractVerdictSentence and
    fwbAbstractLeftOutSentence, and the results' fwbFasterSentence, fwbSpeedupRangeSentence and fwbPeakSentence;
    the ratios named with the modes they pair (`pairing`, `aggregate.pairings`), the counts made with the ratio
    table's adjustment (`method`)."""
    return {
        "fwbFrameworkList": join_words([label(f) for f in frameworks]),
        "fwbAbstractRatioSentence": abstract_ratio_sentence(defs, frameworks, pairing),
        "fwbAbstractVerdictSentence": abstract_verdict_sentence(defs, frameworks, method),
        "fwbAbstractLeftOutSentence": abstract_left_out_sentence(excluded, stand_in or {}, mixed_stand_in),
        "fwbFasterSentence": faster_sentence(defs, frameworks, pairing, method),
        "fwbSpeedupRangeSentence": range_sentence(defs, frameworks, pairing),
        "fwbPeakSentence": peak_sentence(defs, frameworks),
    }


# The summary roles of `_ratio_summary`, as the mode-gain macros name them (fwbModeGainGeomean, fwbNumModeGains, ...).
GAIN_NAMES = {
    "geomean": "fwbModeGainGeomean",
    "geomean_ci": "fwbModeGainGeomeanCI",
    "summary": "fwbModeGainSummary",
    "interval": "fwbModeGainGeomeanInterval",
    "min": "fwbModeGainMin",
    "min_cell": "fwbModeGainMinCell",
    "max": "fwbModeGainMax",
    "max_cell": "fwbModeGainMaxCell",
    "pairs": "fwbNumModeGains",
    "models": "fwbNumModeGainModels",
    "faster": "fwbModeGainFaster",
    "slower": "fwbModeGainSlower",
    "faster_unadjusted": "fwbModeGainFasterUnadjusted",
    "slower_unadjusted": "fwbModeGainSlowerUnadjusted",
    "unresolvable": "fwbModeGainUnresolvable",
}


def summary_gains(gains: pd.DataFrame | None, config: dict[str, Any]) -> pd.DataFrame:
    """The compiled-over-eager gains the summary is taken over: refused ones never, those whose two cells ran with
    different workarounds only when `fallbacks.include_deviating_in_summary` is set (as for the ratios)."""
    if gains is None or gains.empty:
        return pd.DataFrame(columns=["model", "batch_size", "framework", "ratio", "ci_low", "ci_high", "ci_scope"])
    gains = computed_ratios(gains)
    return gains if include_deviating(config) else gains[~_deviating(gains)]


def _seconds(values: pd.Series, how: str) -> str:
    return number(float(getattr(values, how)())) if len(values) else "---"


def compile_seconds_macros(frame: pd.DataFrame) -> dict[str, str]:
    """fwbTorchCompileSecondsMedian and fwbTorchCompileSecondsMax: torch.compile's compile time (its first call:
    Dynamo tracing and Inductor code generation, apart from the timed steps) over the successful compiled PyTorch
    cells, "---" without one; fwbNumGraphBreakCells: those cells whose compilation broke the graph."""
    frame = with_modes(frame)
    mine = frame[(frame["status"] == "ok") & (frame["framework"] == "torch") & (frame["mode"] == "compile")]
    seconds = mine["compile_s"].dropna().astype(float) if "compile_s" in mine else pd.Series(dtype=float)
    breaks = mine["graph_breaks"].fillna(0).astype(float) if "graph_breaks" in mine else pd.Series(dtype=float)
    return {
        "fwbTorchCompileSecondsMedian": _seconds(seconds, "median"),
        "fwbTorchCompileSecondsMax": _seconds(seconds, "max"),
        "fwbNumGraphBreakCells": str(int((breaks > 0).sum())),
    }


def _gain_frameworks(gains: pd.DataFrame) -> str:
    frameworks = ordered_frameworks(gains["framework"]) if "framework" in gains and len(gains) else ["torch"]
    return join_words([label(f) for f in frameworks])


def mode_gain_sentence(defs: dict[str, str], gains: pd.DataFrame, method: str = "none") -> str:
    """The results' sentence on the eager-vs-compiled gain (fwbModeGainSentence): over how many comparisons, the
    geometric mean of the compiled/eager throughput ratios with its interval over models and their range, how many
    resolve each way (after the adjustment within each framework's gains, `method`, and by their own intervals),
    and the compile time that buys it; or that the study measured no framework in both modes."""
    values = {role: defs[name] for role, name in GAIN_NAMES.items()}
    if values["pairs"] == "0":
        return (
            "No framework ran both eagerly and compiled in a comparison of this study, so there is no "
            "compiled-over-eager gain to report."
        )
    who = _gain_frameworks(gains)
    spread = (
        f", ranging from {values['min']} ({values['min_cell']}) to {values['max']} ({values['max_cell']})"
        if values["pairs"] != "1"
        else ""
    )
    own = ""
    if method != "none" and (values["faster"], values["slower"]) != (
        values["faster_unadjusted"],
        values["slower_unadjusted"],
    ):
        own = f" ({values['faster_unadjusted']} and {values['slower_unadjusted']} by their own 95\\% intervals)"
    text = (
        f"Over the {values['pairs']} model, precision and batch-size comparisons where {who} ran both eagerly and "
        f"compiled, the compiled/eager throughput ratio has a geometric mean of {values['summary']}{spread}; "
        f"{adjusted_phrase(method, 'framework')}, compiled is faster in {values['faster']} and eager in "
        f"{values['slower']}{own}, the rest are not resolved."
    )
    if defs["fwbTorchCompileSecondsMedian"] != "---":
        text += (
            f" torch.compile's first call (Dynamo tracing and Inductor code generation) took a median of "
            f"{defs['fwbTorchCompileSecondsMedian']}~s per process (at most {defs['fwbTorchCompileSecondsMax']}~s), "
            "apart from the timed steps."
        )
    return text


def _scope(frame: pd.DataFrame, framework: str, mode: str) -> str:
    """ "for every model", or "for m1 and m2 only" where a mode was measured on some of the study's models."""
    mine = frame[(frame["framework"] == framework) & (frame["mode"] == mode)]
    models = sorted(set(mine["model"]))
    return "for every model" if set(models) == set(frame["model"]) else f"for {join_words(models)} only"


def _ran(frame: pd.DataFrame, framework: str) -> str:
    """How a framework ran in this study: "eagerly for every model and compiled for small_cnn only", or "eagerly
    and compiled for every model"."""
    modes = [m for f, m in ordered_variants(zip(frame["framework"], frame["mode"], strict=True)) if f == framework]
    by_scope: dict[str, list[str]] = {}
    for mode in modes:
        by_scope.setdefault(_scope(frame, framework, mode), []).append("compiled" if is_compiled(mode) else "eagerly")
    return " and ".join(f"{join_words(ways)} {scope}" for scope, ways in by_scope.items())


def modes_sentence(frame: pd.DataFrame) -> str:
    """The method's sentence on what this study ran in which mode (fwbModesSentence), frameworks that ran alike
    named together: "In this study, PyTorch ran eagerly for every model and compiled for mobilenet_v3_small and
    small_cnn only; JAX/Flax and TensorFlow/Keras ran compiled for every model."."""
    frame = with_modes(frame)
    by_text: dict[str, list[str]] = {}
    for framework in ordered_frameworks(frame["framework"]):
        by_text.setdefault(_ran(frame, framework), []).append(label(framework))
    clauses = [f"{join_words(names)} ran {text}" for text, names in by_text.items()]
    return escape("In this study, " + "; ".join(clauses) + ".")


def ratio_pairing_sentence(ratios: pd.DataFrame) -> str:
    """The results' sentence on what the ratios between frameworks pair (fwbRatioPairingSentence): each column's
    modes and, where another mode stood in, how many such ratios were marked and left out of the summaries."""
    computed = computed_ratios(ratios)
    pairing = pairings(computed)
    if not pairing:
        return ""
    names = [pairing_label(f, *pairing[f]) for f in others(pairing)]
    text = f"The ratios between frameworks pair {join_words(names)}"
    mixed = [pairing_label(f, *pairing[f]) for f in others(pairing) if partners.mixed_modes(*pairing[f])]
    if mixed:
        who = "each" if len(mixed) == len(names) > 1 else join_words(mixed)
        text += f"; {who} set{'' if len(mixed) > 1 and who != 'each' else 's'} a compiled against an eager program"
    count = int(stand_ins(computed).sum())
    if count:
        one = count == 1
        text += (
            f". In {count} ratio{'' if one else 's'} another mode stands in where a comparison has no successful cell "
            f"in the column's mode (marked $^{{m}}$); {'it is' if one else 'they are'} left out of the summary figures"
        )
    return text + "."


def mode_macros(
    frame: pd.DataFrame,
    ratios: pd.DataFrame,
    gains: pd.DataFrame | None,
    config: dict[str, Any],
    env: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Macros of the execution-mode axis: the compiled-over-eager gains' summary (GAIN_NAMES, fwbModeGainSentence),
    torch.compile's compile times (`compile_seconds_macros`), the ratios that set an eager against a compiled
    program (fwbNumRatiosMixedModes) or pair another mode than their column (fwbNumRatiosStandIn), the settings
    that decide what a compiled number includes as the setup table gives them (`env`,
    fwbench.analysis.setup.provenance: fwbTorchCompileMode, fwbAutotune, fwbCompilationCache) and the sentences naming
    the study's modes (fwbModesSentence, fwbRatioPairingSentence). Every macro is defined for every study, so the
    paper compiles without a second mode."""
    env = env or {}
    kept = summary_gains(gains, config)
    defs = {GAIN_NAMES[role]: value for role, value in _ratio_summary(kept).items()}
    defs |= compile_seconds_macros(frame)
    computed = computed_ratios(ratios)
    defs |= {
        "fwbNumRatiosMixedModes": str(int(mixed_modes(computed).sum())),
        "fwbNumRatiosStandIn": str(int(stand_ins(computed).sum())),
        "fwbTorchCompileMode": escape(env.get("torch.compile mode") or "not used"),
        "fwbAutotune": escape(env.get("Kernel autotuning") or "not recorded"),
        "fwbCompilationCache": escape(env.get("Compilation cache") or "not recorded"),
        "fwbModesSentence": modes_sentence(frame),
        "fwbRatioPairingSentence": ratio_pairing_sentence(ratios),
    }
    setting = multiplicity_setting(config.get("analysis"))
    defs["fwbModeGainSentence"] = mode_gain_sentence(defs, kept, multiplicity_of(kept, setting))
    return defs


def _mode_suffix(row: pd.Series, several: set[str]) -> str:
    """ ", compiled" after a cell's name where its framework ran in several modes ("" otherwise)."""
    return f", {mode_label(row['mode'])}" if row["framework"] in several else ""


def burst_macros(ok: pd.DataFrame) -> dict[str, str]:
    """The burst checks the paper quotes: bursts in all, those flagged for steal and the cells they fell in, and
    the most CPU a waiting worker used (percent of one core, the worst launch of any cell); "n/a" where no cell was
    measured in blocks."""
    bursts = ok["bursts"].dropna() if "bursts" in ok else pd.Series(dtype=float)
    if bursts.empty:
        return {"fwbNumBursts": "n/a", "fwbNumStealBursts": "n/a", "fwbNumStealCells": "n/a", "fwbIdleCpuMax": "n/a"}
    flagged = ok["steal_flagged_bursts"].fillna(0)
    idle = ok["idle_cpu_per_wall"].dropna()
    return {
        "fwbNumBursts": str(int(bursts.sum())),
        "fwbNumStealBursts": str(int(flagged.sum())),
        "fwbNumStealCells": str(int((flagged > 0).sum())),
        "fwbIdleCpuMax": number(100 * float(idle.max()), 2) if not idle.empty else "n/a",
    }


def macros(
    frame: pd.DataFrame,
    ratios: pd.DataFrame,
    env: dict[str, Any],
    config: dict[str, Any],
    extra: dict[str, str] | None = None,
    gains: pd.DataFrame | None = None,
) -> str:
    """`extra`: macros computed elsewhere (the data section's), defined in the same file. `gains`: the
    compiled-over-eager gains (`aggregate.mode_gains`) summarised by `mode_macros`; without them the mode-gain
    macros say that none was measured.

    Refused ratios (cells on different device models) are in no summary (fwbNumRatiosRefused counts them). Ratios
    whose two cells ran with different workarounds from the fallback ladder (`deviation_differs`) are left
    out of every summary of the ratios (geometric mean, range, pair counts, resolved tallies) unless
    `fallbacks.include_deviating_in_summary` is set; fwbNumPairsExcludedDeviating counts them.

    Every framework's ratios against PyTorch are summarised under its own names (`ratio_names`), JAX's also under
    the names the paper used when it was the only one; the sentences naming the study's frameworks
    (`sentence_macros`) follow the config's order and name the modes each ratio pairs. Ratios with another mode
    standing in for their column's are left out of the summaries too (`stand_ins`; fwbNumRatiosStandIn)."""
    frame = with_modes(frame)
    ok = frame[frame["status"] == "ok"]
    several = multi_mode(zip(frame["framework"], frame["mode"], strict=True))
    every_ratio = computed_ratios(ratios)  # beyond refusals, the summary leaves out deviating pairs and stand-ins
    off = stand_ins(every_ratio)
    mode_defs = mode_macros(frame, ratios, gains, config, env)
    ratios, deviation_defs = summary_ratios(ratios, config)
    defs = {
        "fwbStudyName": escape(config["study"]),
        "fwbTitle": escape(config["report"]["title"] or default_title(config["frameworks"])),
        "fwbNumCells": str(len(frame)),
        "fwbNumOk": str(len(ok)),
        "fwbNumFailed": str(len(frame) - len(ok)),
        "fwbNumModels": str(frame["model"].nunique()),
        "fwbBatchSizes": ", ".join(str(b) for b in sorted(frame["batch_size"].unique())),
        "fwbImageSize": str(int(frame["image_size"].iloc[0])),
        "fwbNumClasses": str(config["dataset"]["num_classes"]),
        "fwbWarmupIters": str(config["inference"]["warmup_iters"]),
        "fwbTrials": str(int(config["inference"].get("trials", 1))),
        "fwbBlocks": str(int(config["inference"]["blocks"])),
        "fwbBurstMs": number(1000 * float(config["inference"]["burst_s"]), 3),
        "fwbBurstDiscard": str(int(config["inference"]["burst_discard"])),
        "fwbStealFlag": number(100 * STEAL_FLAG, 2),
        "fwbNumNoisy": str(int(ok["noisy"].fillna(False).astype(bool).sum())),
        **burst_macros(ok),
        "fwbNumSettingsDiffer": str(
            int((ok["settings_differ"].astype(str) == "True").sum()) if "settings_differ" in ok else 0
        ),
    }

    def _first(column: str, default: str) -> str:
        values = ok[column].dropna() if column in ok else []
        return escape(values.iloc[0]) if len(values) else default

    def _count(column: str) -> str:
        return str(int(ok[column].fillna(False).astype(bool).sum())) if column in ok else "0"

    defs.update(
        fwbNumEnergy=str(int(ok["energy_j_per_image"].notna().sum())) if "energy_j_per_image" in ok else "0",
        fwbEnergySource=_first("energy_source", "none"),
        fwbEnergyMissing=_first("energy_missing", "none"),
        fwbNumDeviceMemory=str(int(ok["device_peak_bytes"].notna().sum())) if "device_peak_bytes" in ok else "0",
        fwbDeviceMemoryMissing=_first("device_memory_missing", "none"),
        fwbNumRecompiled=_count("recompiled"),
        fwbNumOtherGPU=_count("other_gpu_processes"),
    )
    if "mfu" in ok and ok["mfu"].notna().any():
        best = ok.loc[ok["mfu"].idxmax()]
        fw = variant_label(best["framework"], best["mode"], alone=best["framework"] not in several)
        defs["fwbMaxMFU"] = number(100 * float(best["mfu"]), 2)
        defs["fwbMaxMFUCell"] = escape(f"{fw} {best['model']} at batch {best['batch_size']}")
        fp32_peaks = ok.loc[ok["precision"] == "fp32", "peak_flops"].dropna()  # the tf32 peak has its own row
        defs["fwbPeakGflopsFloat"] = number(float(fp32_peaks.max()) / 1e9) if len(fp32_peaks) else "---"
    else:
        defs["fwbMaxMFU"], defs["fwbMaxMFUCell"], defs["fwbPeakGflopsFloat"] = "---", "no cell", "---"
    for key, name in (
        ("CPU", "fwbCPU"),
        ("Device", "fwbDevice"),
        ("PyTorch", "fwbTorchVersion"),
        ("JAX", "fwbJaxVersion"),
        ("Flax", "fwbFlaxVersion"),
        ("TensorFlow", "fwbTensorflowVersion"),
        ("Keras", "fwbKerasVersion"),
        ("Python", "fwbPythonVersion"),
        ("Threads per cell", "fwbThreads"),
        ("fwbench commit", "fwbCommit"),
    ):
        defs[name] = escape(env.get(key) if env.get(key) is not None else "---")
    for framework, text in FRAMEWORK_LABELS.items():  # every framework defined, so the paper compiles for any subset
        mine = ok[ok["framework"] == framework]
        best = mine.sort_values("throughput_img_s").iloc[-1] if not mine.empty else None
        defs[macro_name("peak", framework)] = number(best["throughput_img_s"]) if best is not None else "---"
        defs[macro_name("peak", framework, "cell")] = (
            escape(f"{best['model']} at batch {best['batch_size']}{_mode_suffix(best, several)}")
            if best is not None
            else "no successful cell"
        )
        defs[macro_name("label", framework)] = text
    defs.update(deviation_defs)
    defs["fwbFallbackLadder"] = fallback_ladder(config)
    for framework in others(FRAMEWORK_LABELS):  # every framework defined, so the paper compiles for any subset
        defs |= ratio_macros(ratios_for(ratios, framework), framework)
    defs |= ratio_macros(ratios_for(ratios, "jax"))  # the names the paper used when JAX was the only ratio
    defs |= ratio_totals(ratios)
    stand_in = {f: int(off[ratios_for(every_ratio, f).index].sum()) for f in others(FRAMEWORK_LABELS)}
    excluded = {
        f: len(ratios_for(every_ratio, f)) - len(ratios_for(ratios, f)) - stand_in[f] for f in others(FRAMEWORK_LABELS)
    }
    frameworks = list(config.get("frameworks") or ordered_frameworks(frame["framework"]))
    setting = multiplicity_setting(config.get("analysis"))
    defs |= multiplicity_macros(every_ratio, setting)
    mixed_stand_in = bool((off & mixed_modes(every_ratio)).any())
    method = multiplicity_of(every_ratio, setting)
    defs |= sentence_macros(defs, frameworks, excluded, stand_in, pairings(every_ratio), method, mixed_stand_in)
    defs |= mode_defs
    defs.update(extra or {})
    return "% Generated by fwbench.analysis.inference.macros from the study's results; do not edit.\n" + define_macros(
        defs
    )
