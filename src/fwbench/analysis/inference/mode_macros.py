"""The macros of the execution-mode axis (`mode_macros`): the gain of compiling within a framework (the
compiled-over-eager ratios, summarised like the ratios between frameworks), torch.compile's compile times, the
ratios that set an eager against a compiled program or pair another mode than their column and the settings that
decide what a compiled number includes; and what ran in which mode (`mode_uses`), the values of the method's
sentence, whose words are report/templates/modes.tex.j2's.

Every macro is defined for every study, so the paper compiles without a second mode; apart from the rest of the
prose's numbers (fwbench.analysis.inference.macros) because the mode axis changes on its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import escape, number, ordered_frameworks, ordered_variants
from fwbench.analysis.common.names import framework_name, model_name
from fwbench.analysis.common.partners import with_modes
from fwbench.analysis.inference.ratio_macros import computed_ratios, ratio_summary, stand_ins, summary_gains
from fwbench.analysis.inference.summary import mixed_modes
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


def compile_seconds(frame: pd.DataFrame) -> pd.Series:
    """torch.compile's compile time per successful compiled PyTorch cell (its first call: Dynamo tracing and
    Inductor code generation, apart from the timed steps)."""
    frame = with_modes(frame)
    mine = frame[(frame["status"] == "ok") & (frame["framework"] == "torch") & (frame["mode"] == "compile")]
    return mine["compile_s"].dropna().astype(float) if "compile_s" in mine else pd.Series(dtype=float)


def compile_seconds_macros(frame: pd.DataFrame) -> dict[str, str]:
    """fwbTorchCompileSecondsMedian and fwbTorchCompileSecondsMax (`compile_seconds`), "---" without a compiled
    PyTorch cell; fwbNumGraphBreakCells: those cells whose compilation broke the graph."""
    frame = with_modes(frame)
    mine = frame[(frame["status"] == "ok") & (frame["framework"] == "torch") & (frame["mode"] == "compile")]
    seconds = compile_seconds(frame)
    breaks = mine["graph_breaks"].fillna(0).astype(float) if "graph_breaks" in mine else pd.Series(dtype=float)
    return {
        "fwbTorchCompileSecondsMedian": _seconds(seconds, "median"),
        "fwbTorchCompileSecondsMax": _seconds(seconds, "max"),
        "fwbNumGraphBreakCells": str(int((breaks > 0).sum())),
    }


@dataclass(frozen=True)
class ModeScope:
    """Some of one framework's modes and the models they ran on: `ways` in the registry's order, each "eager",
    "compiled" or another compiled mode by its name ("cudagraphs"); `models` (display names) None for every model."""

    ways: tuple[str, ...]
    models: tuple[str, ...] | None


@dataclass(frozen=True)
class ModeUse:
    """Frameworks that ran alike (display names) and how: one scope per set of models."""

    frameworks: tuple[str, ...]
    scopes: tuple[ModeScope, ...]


# Each framework's plain compiled mode; any other compiled mode (cudagraphs) is named apart in the modes sentence.
PLAIN_COMPILED = ("compile", "jit", "xla")


def _models_of(frame: pd.DataFrame, framework: str, mode: str) -> tuple[str, ...] | None:
    """The models a mode was measured on (display names, identifiers' order), None where it is every model."""
    mine = frame[(frame["framework"] == framework) & (frame["mode"] == mode)]
    models = set(mine["model"].astype(str))
    return None if models == set(frame["model"].astype(str)) else tuple(model_name(m) for m in sorted(models))


def _way(mode: str) -> str:
    """ "eager", "compiled" (a framework's plain compiled mode), or another compiled mode by its name."""
    if not is_compiled(mode):
        return "eager"
    return "compiled" if mode in PLAIN_COMPILED else mode


def _scopes(frame: pd.DataFrame, framework: str) -> tuple[ModeScope, ...]:
    modes = [m for f, m in ordered_variants(zip(frame["framework"], frame["mode"], strict=True)) if f == framework]
    by_models: dict[tuple[str, ...] | None, list[str]] = {}
    for mode in modes:
        by_models.setdefault(_models_of(frame, framework, mode), []).append(_way(mode))
    return tuple(ModeScope(tuple(ways), models) for models, ways in by_models.items())


def mode_uses(frame: pd.DataFrame) -> tuple[ModeUse, ...]:
    """What this study ran in which mode, for the method's sentence (report/templates/modes.tex.j2): frameworks
    that ran alike together, in the paper's order."""
    frame = with_modes(frame)
    by_scopes: dict[tuple[ModeScope, ...], list[str]] = {}
    for framework in ordered_frameworks(frame["framework"]):
        by_scopes.setdefault(_scopes(frame, framework), []).append(framework_name(framework))
    return tuple(ModeUse(tuple(names), scopes) for scopes, names in by_scopes.items())


def first_compiled(gains: pd.DataFrame) -> pd.DataFrame:
    """The gains of each framework's first compiled mode (PyTorch: compile, torch.compile in the study's mode), the
    ones the summary macros speak for: a second compiled mode (cudagraphs) is a row of the gains table and figure,
    never pooled with the first in one "compiled/eager" figure. A table from before modes keeps every row."""
    if gains.empty or "mode" not in gains:
        return gains
    first = {f: next((m for m in MODES.get(f, ()) if is_compiled(m)), None) for f in set(gains["framework"])}
    keep = [first.get(f) in (None, m) for f, m in zip(gains["framework"], gains["mode"], strict=True)]
    return gains[keep]


def mode_macros(
    frame: pd.DataFrame,
    ratios: pd.DataFrame,
    gains: pd.DataFrame | None,
    config: dict[str, Any],
    env: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Macros of the execution-mode axis: the compiled-over-eager gains' summary (GAIN_NAMES; each framework's first
    compiled mode, `first_compiled`), torch.compile's compile times (`compile_seconds_macros`), the ratios that set
    an eager against a compiled program (fwbNumRatiosMixedModes) or pair another mode than their column
    (fwbNumRatiosStandIn), and the settings that decide what a compiled number includes as the setup table gives
    them (`env`, fwbench.analysis.setup.provenance: fwbTorchCompileMode, fwbAutotune, fwbCompilationCache). Every
    macro is defined for every study, so the paper compiles without a second mode."""
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
    }
    return defs
