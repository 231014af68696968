"""How the training cells were measured, as values for the appendix's paragraph (report/templates/
training_detail.tex.j2): what compile time covers for each compiled variant, the layout each framework receives its
batches in, the data-wait mark's threshold, and the BatchNorm recalibration (how many batches, which model libraries
repeat it, which trained models have no BatchNorm). The body says what the reader should take from the results; these
are the definitions a reader checks a number against, so they sit beside the full tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from fwbench.analysis.common.latex import BASELINE, label, ordered_frameworks, ordered_variants
from fwbench.analysis.common.names import framework_name, models_in_text, variant_name
from fwbench.analysis.common.partners import multi_mode, with_modes
from fwbench.analysis.training.tables import DATA_WAIT_FRACTION
from fwbench.study.modes import is_compiled

# What compiles each compiled mode, by a name the template puts in words.
COMPILERS = {("torch", "compile"): "inductor", ("torch", "cudagraphs"): "cudagraphs", "jax": "xla", "tensorflow": "xla"}


@dataclass(frozen=True)
class Compiler:
    """What compiles (`kind`: inductor, cudagraphs, xla, or a mode this study does not know) and the compiled
    variants it compiles."""

    kind: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class Layout:
    """A batch layout (NCHW, NHWC) and the frameworks that receive their batches in it."""

    layout: str
    frameworks: tuple[str, ...]


@dataclass(frozen=True)
class Recalibration:
    """BatchNorm's statistics recomputed over `batches` training batches before each evaluation (0: not at all),
    in PyTorch and the model libraries of the other frameworks (`twins`: Flax, Keras); `without` the trained models
    with no BatchNorm, which skip it."""

    batches: int
    twins: tuple[str, ...]
    without: tuple[str, ...]


@dataclass(frozen=True)
class Method:
    compilers: tuple[Compiler, ...]
    eager: bool  # eager PyTorch trained: it compiles nothing
    several: int  # how many frameworks trained
    layouts: tuple[Layout, ...]
    wait_percent: float
    recalibration: Recalibration


def compilers(frame: pd.DataFrame) -> tuple[Compiler, ...]:
    frame = with_modes(frame)
    variants = ordered_variants(zip(frame["framework"], frame["mode"], strict=True))
    several = multi_mode(variants)
    found: dict[str, list[str]] = {}
    for framework, mode in (v for v in variants if is_compiled(v[1])):
        kind = COMPILERS.get((framework, mode), COMPILERS.get(framework, mode))
        found.setdefault(kind, []).append(variant_name(framework, mode, alone=framework not in several))
    return tuple(Compiler(kind, tuple(names)) for kind, names in found.items())


def layouts(frame: pd.DataFrame) -> tuple[Layout, ...]:
    """Which layout each framework's batches come in, read from the cells (none for a table from before the cells
    recorded it)."""
    if "input_layout" not in frame or frame["input_layout"].isna().all():
        return ()
    cells = frame.dropna(subset=["input_layout"]).drop_duplicates("framework")
    found: dict[str, list[str]] = {}
    for framework in ordered_frameworks(cells["framework"]):
        layout = cells.loc[cells["framework"] == framework, "input_layout"].iloc[0]
        found.setdefault(str(layout), []).append(framework_name(framework))
    return tuple(Layout(layout, tuple(names)) for layout, names in found.items())


def without_batch_norm(frame: pd.DataFrame) -> tuple[str, ...]:
    """Trained models whose cells recalibrated nothing: no epoch recorded a recalibration time."""
    if "bn_recalibration_s" not in frame:
        return ()
    recalibrated = frame.groupby("model")["bn_recalibration_s"].apply(lambda times: times.notna().any())
    return tuple(models_in_text(model for model, any_time in recalibrated.items() if not any_time))


def recalibration(frame: pd.DataFrame) -> Recalibration:
    ok = frame[frame["status"] == "ok"]
    batches = int(ok["bn_recalibration_batches"].max()) if not ok.empty and "bn_recalibration_batches" in ok else 0
    twins = tuple(
        label(f).split("/")[-1] for f in ordered_frameworks(frame["framework"]) if f != BASELINE and "/" in label(f)
    )
    return Recalibration(batches, twins, without_batch_norm(frame) if batches else ())


def method_values(frame: pd.DataFrame) -> dict[str, object]:
    """Everything report/templates/training_detail.tex.j2 says, by the names it uses."""
    modes = with_modes(frame)
    return {
        "method": Method(
            compilers(frame),
            bool(((modes["framework"] == BASELINE) & ~modes["mode"].map(is_compiled)).any()),
            frame["framework"].nunique(),
            layouts(frame),
            100 * DATA_WAIT_FRACTION,
            recalibration(frame),
        )
    }
