"""What the appendix says about the published small-CNN training figures beside this study's (`reference_values`),
read from the reference file and the table's rows (fwbench.analysis.training.reference.comparison): which frameworks
it shows, whether every published accuracy is one chance-level value, which published maxima lie below their own
initial values, and which of this study's execution modes stand beside it. The words are the template's
(report/templates/training_detail.tex.j2); nothing said about the published figures is typed in.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from fwbench.analysis.common.latex import mode_label, ordered_frameworks
from fwbench.analysis.common.names import framework_name, model_in_text, variant_name
from fwbench.analysis.training.reference import (
    REFERENCE_FILE,
    REFERENCE_GPU,
    REFERENCE_MODEL,
    REFERENCE_MODES,
    comparison,
)

# (what, initial column, peak column) of the reference's memory figures.
MEMORY_PAIRS = (("RAM", "initial_ram_gb", "max_ram_gb"), ("VRAM", "initial_vram_gb", "max_vram_gb"))


@dataclass(frozen=True)
class Inconsistency:
    """A published maximum below the same run's initial value (`kind`: RAM or VRAM; GB)."""

    framework: str
    kind: str
    peak: float
    initial: float


@dataclass(frozen=True)
class ModesBeside:
    """A framework of this study and the modes its cells stand beside the reference in ("eager", "compiled")."""

    framework: str
    modes: tuple[str, ...]


@dataclass(frozen=True)
class ReferenceBeside:
    """The published figures beside this study's: `table` false where the study has no cell of the reference's
    model (so there is no table); the frameworks the reference shows; `accuracy`, the one value every shown
    framework has (None: they differ), and `classes`, where that value is 1/k, k (a chance level; None otherwise);
    the inconsistent published memory figures; the reference's modes where it states them (`stated`), or this
    study's cells in every mode (`modes`, only where a framework trained in more than one)."""

    model: str
    gpu: str
    file: str
    table: bool
    frameworks: tuple[str, ...]
    accuracy: float | None
    classes: int | None
    inconsistent: tuple[Inconsistency, ...]
    stated: tuple[str, ...]
    modes: tuple[ModesBeside, ...]


def chance_classes(accuracy: float) -> int | None:
    """k where `accuracy` is 1/k for a whole k (chance level on k classes), else None."""
    if not 0 < accuracy < 1:
        return None
    classes = round(1 / accuracy)
    return classes if abs(classes * accuracy - 1) < 1e-9 else None


def inconsistencies(published: pd.DataFrame) -> tuple[Inconsistency, ...]:
    """Published maxima below their own initial values: a maximum cannot be below the initial value of the same
    run, so those figures cannot both be taken as they stand."""
    found = []
    for _, row in published.iterrows():
        for kind, initial, peak in (
            ("RAM", "initial_ram_gb", "max_ram_gb"),
            ("VRAM", "initial_vram_gb", "max_vram_gb"),
        ):
            if row[peak] < row[initial]:
                found.append(
                    Inconsistency(framework_name(row["framework"]), kind, float(row[peak]), float(row[initial]))
                )
    return tuple(found)


def _modes_beside(rows: pd.DataFrame) -> tuple[ModesBeside, ...]:
    ours = rows[rows["source"] == "measured"]
    ours = ours.dropna(subset=["mode_shown"]) if "mode_shown" in ours else ours.iloc[0:0]
    return tuple(
        ModesBeside(
            framework_name(f), tuple(mode_label(m) for m in dict.fromkeys(ours.loc[ours["framework"] == f, "mode"]))
        )
        for f in ordered_frameworks(ours["framework"])
    )


def reference_values(frame: pd.DataFrame, published: pd.DataFrame) -> ReferenceBeside:
    rows = comparison(frame, published)
    shown = rows[rows["source"] == "published"] if not rows.empty else published.iloc[0:0]
    values = shown["accuracy"].dropna().unique() if "accuracy" in shown else []
    accuracy = float(values[0]) if len(values) == 1 else None
    return ReferenceBeside(
        model=model_in_text(REFERENCE_MODEL),
        gpu=REFERENCE_GPU,
        file=REFERENCE_FILE,
        table=not rows.empty,
        frameworks=tuple(framework_name(f) for f in ordered_frameworks(shown["framework"])),
        accuracy=accuracy,
        classes=chance_classes(accuracy) if accuracy is not None else None,
        inconsistent=inconsistencies(shown),
        stated=tuple(variant_name(f, m, alone=False) for f, m in REFERENCE_MODES.items()),
        modes=_modes_beside(rows) if not REFERENCE_MODES and not rows.empty else (),
    )
