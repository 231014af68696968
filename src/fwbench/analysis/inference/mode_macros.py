"""The macros of the execution-mode axis (`mode_macros`): the gain of compiling within a framework (the
compiled-over-eager ratios, summarised like the ratios between frameworks), torch.compile's compile times, the
ratios that set an eager against a compiled program or pair another mode than their column, the settings that
decide what a compiled number includes, and the sentences naming what ran in which mode.

Every macro is defined for every study, so the paper compiles without a second mode; apart from the rest of the
prose's numbers (fwbench.analysis.inference.macros) because the mode axis changes on its own."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fwbench.analysis.common import partners
from fwbench.analysis.common.latex import (
    escape,
    join_words,
    label,
    number,
    ordered_frameworks,
    ordered_variants,
    others,
    pairing_label,
)
from fwbench.analysis.common.names import models_in_text
from fwbench.analysis.common.partners import with_modes
from fwbench.analysis.common.verdicts import multiplicity_setting
from fwbench.analysis.inference.ratio_macros import (
    adjusted_phrase,
    computed_ratios,
    ratio_summary,
    stand_ins,
    summary_gains,
)
from fwbench.analysis.inference.summary import against_eager_baseline, mixed_modes, multiplicity_of, pairings
from fwbench.study.modes import MODES, is_compiled

# The summary roles of `ratio_macros.ratio_summary`, as the mode-gain macros name them (fwbModeGainGeomean,
# fwbNumModeGains, ...).
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
    models = set(mine["model"])
    return "for every model" if models == set(frame["model"]) else f"for {join_words(models_in_text(models))} only"


# How a mode other than plain compiled or eager reads in "PyTorch ran eagerly, compiled and ...".
WAYS = {"cudagraphs": "compiled with CUDA graphs"}


def first_compiled(gains: pd.DataFrame) -> pd.DataFrame:
    """The gains of each framework's first compiled mode (PyTorch: compile, torch.compile in the study's mode), the
    ones the summary macros speak for: a second compiled mode (cudagraphs) is a row of the gains table and figure,
    never pooled with the first in one "compiled/eager" figure. A table from before modes keeps every row."""
    if gains.empty or "mode" not in gains:
        return gains
    first = {f: next((m for m in MODES.get(f, ()) if is_compiled(m)), None) for f in set(gains["framework"])}
    keep = [first.get(f) in (None, m) for f, m in zip(gains["framework"], gains["mode"], strict=True)]
    return gains[keep]


def _ran(frame: pd.DataFrame, framework: str) -> str:
    """How a framework ran in this study: "eagerly for every model and compiled for the small CNN only", or "eagerly
    and compiled for every model"."""
    modes = [m for f, m in ordered_variants(zip(frame["framework"], frame["mode"], strict=True)) if f == framework]
    by_scope: dict[str, list[str]] = {}
    for mode in modes:
        by_scope.setdefault(_scope(frame, framework, mode), []).append(
            WAYS.get(mode, "compiled" if is_compiled(mode) else "eagerly")
        )
    return " and ".join(f"{join_words(ways)} {scope}" for scope, ways in by_scope.items())


def modes_sentence(frame: pd.DataFrame) -> str:
    """The method's sentence on what this study ran in which mode (fwbModesSentence), frameworks that ran alike
    named together: "In this study, PyTorch ran eagerly for every model and compiled for MobileNetV3-Small and
    the small CNN only; JAX/Flax and TensorFlow/Keras ran compiled for every model."."""
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
    off = stand_ins(computed)
    count, eager = int(off.sum()), int((off & against_eager_baseline(computed)).sum())
    if count:
        one = count == 1
        text += (
            f". In {count} ratio{'' if one else 's'} another mode stands in where a comparison has no successful cell "
            "in the column's mode (marked $^{m}$)"
        )
        if eager == count:
            text += f"; {'it belongs' if one else 'they belong'} to {EAGER_FAMILY_TEXT}"
        elif eager:
            text += (
                f"; {eager} of them belong{'s' if eager == 1 else ''} to {EAGER_FAMILY_TEXT}, and the other "
                f"{count - eager} {'is' if count - eager == 1 else 'are'} left out of the summary figures"
            )
        else:
            text += f"; {'it is' if one else 'they are'} left out of the summary figures"
    return text + "."


# What the ratios against eager PyTorch are to the summaries (summary.against_eager_baseline).
EAGER_FAMILY_TEXT = "the family against eager PyTorch (no compiled PyTorch cell to pair with), summarised apart"


def mode_macros(
    frame: pd.DataFrame,
    ratios: pd.DataFrame,
    gains: pd.DataFrame | None,
    config: dict[str, Any],
    env: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Macros of the execution-mode axis: the compiled-over-eager gains' summary (GAIN_NAMES, fwbModeGainSentence;
    each framework's first compiled mode, `first_compiled`),
    torch.compile's compile times (`compile_seconds_macros`), the ratios that set an eager against a compiled
    program (fwbNumRatiosMixedModes) or pair another mode than their column (fwbNumRatiosStandIn), the settings
    that decide what a compiled number includes as the setup table gives them (`env`,
    fwbench.analysis.setup.provenance: fwbTorchCompileMode, fwbAutotune, fwbCompilationCache) and the sentences naming
    the study's modes (fwbModesSentence, fwbRatioPairingSentence). Every macro is defined for every study, so the
    paper compiles without a second mode."""
    env = env or {}
    kept = first_compiled(summary_gains(gains, config))
    defs = {GAIN_NAMES[role]: value for role, value in ratio_summary(kept).items()}
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
