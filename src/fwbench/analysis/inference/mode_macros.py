"""The execution-mode axis for the paper: the macros its method and table notes quote (`mode_macros`: the ratios
that pair another mode than their column, the settings that decide what a compiled number includes), the gains of
each framework's first compiled mode (`first_compiled`) and torch.compile's compile times (`compile_seconds`) that
the Results summarise (fwbench.analysis.inference.findings), and what ran in which mode (`mode_uses`), the values of
the method's sentence, whose words are report/templates/modes.tex.j2's.

Every macro is defined for every study, so the paper compiles without a second mode; apart from the rest of the
prose's numbers (fwbench.analysis.inference.macros) because the mode axis changes on its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import escape, ordered_frameworks, ordered_variants
from fwbench.analysis.common.names import framework_name, model_name
from fwbench.analysis.common.partners import with_modes
from fwbench.analysis.inference.ratio_macros import computed_ratios, stand_ins
from fwbench.study.modes import MODES, is_compiled


def compile_seconds(frame: pd.DataFrame) -> pd.Series:
    """torch.compile's compile time per successful compiled PyTorch cell (its first call: Dynamo tracing and
    Inductor code generation, apart from the timed steps)."""
    frame = with_modes(frame)
    mine = frame[(frame["status"] == "ok") & (frame["framework"] == "torch") & (frame["mode"] == "compile")]
    return mine["compile_s"].dropna().astype(float) if "compile_s" in mine else pd.Series(dtype=float)


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


def mode_macros(ratios: pd.DataFrame, env: dict[str, Any] | None = None) -> dict[str, str]:
    """Macros of the execution-mode axis: the ratios that pair another mode than their column
    (fwbNumRatiosStandIn, quoted by the ratio table's note) and the settings that decide what a compiled number
    includes as the setup table gives them (`env`, fwbench.analysis.setup.provenance: fwbTorchCompileMode,
    fwbAutotune). Every macro is defined for every study, so the paper compiles without a second mode."""
    env = env or {}
    return {
        "fwbNumRatiosStandIn": str(int(stand_ins(computed_ratios(ratios)).sum())),
        "fwbTorchCompileMode": escape(env.get("torch.compile mode") or "not used"),
        "fwbAutotune": escape(env.get("Kernel autotuning") or "not recorded"),
    }
