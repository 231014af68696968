"""What the body's training section says, as values (`section_values`): what every framework shares, how many cells
completed, who reached the target accuracy when, how closely the first optimiser step agrees with eager PyTorch's
(and against which yardstick), which pairs are flagged, what compiling PyTorch changed, and which cells ran with a
workaround. The words are the template's (report/templates/training.tex.j2), so an author rewords the section
without touching Python; the templates get display names ("compiled PyTorch", "the small CNN"), never identifiers.

Every cell is a (framework, execution mode) variant (fwbench.study.modes). The step-0 agreement between frameworks
and compiled PyTorch's own agreement with eager PyTorch are kept apart: the first says the frameworks compute the
same step, the second that torch.compile changed nothing the step computes before its speed is compared.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from fwbench.analysis.common.latex import BASELINE, ordered_frameworks, ordered_variants
from fwbench.analysis.common.names import framework_name, model_in_text, models_in_text, precision_name, variant_name
from fwbench.analysis.common.partners import multi_mode, with_modes
from fwbench.analysis.training.step0 import STEP0_TOLERANCE, agreement_variant, top1_gap
from fwbench.analysis.training.tables import present
from fwbench.study.modes import DESCRIPTIONS, MODES, is_compiled


@dataclass(frozen=True)
class Recipe:
    """What every variant shares: the frameworks (display names) and the trained models, as a sentence names them."""

    frameworks: tuple[str, ...]
    models: tuple[str, ...]


@dataclass(frozen=True)
class FailedCell:
    name: str  # the variant ("JAX", "compiled PyTorch")
    model: str  # in running text ("the small CNN")


@dataclass(frozen=True)
class Completion:
    """How many training cells completed how many epochs, their training time summed (None: none completed), and
    the cells that failed."""

    cells: int
    completed: int
    epochs: int
    seconds: float | None
    failed: tuple[FailedCell, ...]


@dataclass(frozen=True)
class Timing:
    """One variant's time: to the target accuracy (None: not reached within the run), or per epoch."""

    name: str
    seconds: float | None


@dataclass(frozen=True)
class TrainingRun:
    """One trained model, precision (named where the study has several) and batch size: each completed variant's
    time to the target top-1 (`target` in percent), fastest first and those that never reached it last, or, without
    a target, its mean time per epoch, fastest first. `named`: the study trained more than one such run, so the
    sentence says which."""

    model: str
    precision: str | None
    batch: int
    named: bool
    target: float | None
    epochs: int
    timings: tuple[Timing, ...]


@dataclass(frozen=True)
class Leader:
    """One variant over every run: in how many it reached the target first (or, without a target, trained fastest
    per epoch), and in how many it never reached the target."""

    name: str
    first: int
    missed: int


@dataclass(frozen=True)
class RunSummary:
    """The runs at a glance, for a study of many (a model at one batch size each): how many, whether they are led
    by the time to a target (`by_target`, else by the time per epoch) and the target they share (percent; None where
    they differ), and each variant's count of runs led and missed, most led first."""

    runs: int
    by_target: bool
    target: float | None
    leaders: tuple[Leader, ...]


@dataclass(frozen=True)
class FlaggedPair:
    """A pair whose loss after one step differs by more than its bar (`difference` and `bar`, relative)."""

    name: str
    model: str
    batch: int
    difference: float
    bar: float


@dataclass(frozen=True)
class Step0Agreement:
    """The first optimiser step between frameworks: over `comparisons` pairs of another framework (`frameworks` of
    them) with `baseline` (eager PyTorch, named so where PyTorch trained in several modes), the largest relative
    difference of the loss after the step (`worst`); PyTorch's own fp32-against-float64 difference (`own`, the
    largest; None where the probe did not run), the bar's floor (`floor`), the pairs flagged beyond it (every pair,
    compiled PyTorch's included), the pairs left out for different workarounds (`excluded`), and the largest gap in
    final top-1 (points; None without a pair)."""

    comparisons: int
    frameworks: int
    baseline: str
    worst: float | None
    own: float | None
    floor: float
    flagged: tuple[FlaggedPair, ...]
    excluded: int
    top1_gap: float | None


@dataclass(frozen=True)
class ModeAgreement:
    """A compiled PyTorch variant's step-0 probe against eager PyTorch's: the largest relative differences of the
    loss, the loss after one step and the gradient norm over its `pairs`, and how many are flagged."""

    name: str
    baseline: str
    loss: float
    loss_after_step: float
    grad_norm: float
    pairs: int
    flagged: int


@dataclass(frozen=True)
class ModeGain:
    """One run of a framework trained eagerly and compiled (`name`: the compiled variant, `eager`: the eager one):
    both runs' training time (compilation apart), the gain (eager time over compiled time) and the compile time."""

    name: str
    eager: str
    model: str
    batch: int
    seconds: float
    eager_seconds: float
    gain: float
    compile_seconds: float


@dataclass(frozen=True)
class Modes:
    """A framework that trains in more than one execution mode: its name and each mode's description."""

    framework: str
    descriptions: tuple[str, ...]


@dataclass(frozen=True)
class Workarounds:
    """Training cells that ran with a workaround from the fallback ladder, and the pairs whose cells ran with
    different ones: `excluded` of them left out of the step-0 and top-1 figures, or all counted (`counted`)."""

    cells: int
    pairs: int
    excluded: int
    counted: bool


def _deviating(agreement: pd.DataFrame) -> pd.Series:
    if "deviation_differs" not in agreement:
        return pd.Series(False, index=agreement.index)
    return agreement["deviation_differs"].astype(str) == "True"


def _flagged(agreement: pd.DataFrame) -> pd.Series:
    if "flagged" not in agreement:
        return pd.Series(False, index=agreement.index)
    return agreement["flagged"].astype(str) == "True"


def counted_pairs(agreement: pd.DataFrame | None, include_deviating: bool) -> pd.DataFrame:
    """The step-0 rows the section counts: those whose cells ran with different workarounds left out unless
    `include_deviating` (`fallbacks.include_deviating_in_summary`)."""
    if agreement is None or agreement.empty:
        return pd.DataFrame() if agreement is None else agreement
    return agreement if include_deviating else agreement[~_deviating(agreement)]


def _same_framework(agreement: pd.DataFrame) -> pd.Series:
    """Rows comparing a mode of PyTorch with eager PyTorch (compiled PyTorch's step-0 check)."""
    return agreement.apply(lambda row: agreement_variant(row)[0] == BASELINE, axis=1).astype(bool)


def _bar(row) -> float:
    own = row.get("torch_fp32_error_after_step")
    return max(STEP0_TOLERANCE, 3 * float(own)) if present(own) else STEP0_TOLERANCE


def _pair_names(agreement: pd.DataFrame) -> dict[tuple[str, str], str]:
    variants = ordered_variants(agreement.apply(agreement_variant, axis=1)) if not agreement.empty else []
    several = multi_mode([*variants, (BASELINE, MODES[BASELINE][0])])
    return {v: variant_name(v[0], v[1], alone=v[0] not in several) for v in variants}


def step0_agreement_values(agreement: pd.DataFrame | None, include_deviating: bool = False) -> Step0Agreement:
    """The step-0 finding over the counted pairs (`counted_pairs`)."""
    rows = counted_pairs(agreement, include_deviating)
    excluded = 0 if include_deviating or agreement is None or agreement.empty else int(_deviating(agreement).sum())
    names = _pair_names(agreement if agreement is not None else pd.DataFrame())
    baseline = variant_name(BASELINE, MODES[BASELINE][0], alone=not any(v[0] == BASELINE for v in names))
    if rows.empty:
        return Step0Agreement(0, 0, baseline, None, None, STEP0_TOLERANCE, (), excluded, None)
    between = rows[~_same_framework(rows)]
    own = pd.to_numeric(rows.get("torch_fp32_error_after_step"), errors="coerce")
    flagged = tuple(
        FlaggedPair(
            names[agreement_variant(row)],
            model_in_text(row["model"]),
            int(row["batch_size"]),
            float(row["rel_diff_loss_after_step"]),
            _bar(row),
        )
        for (_, row), flag in zip(rows.iterrows(), _flagged(rows), strict=True)
        if flag
    )
    return Step0Agreement(
        comparisons=len(between),
        frameworks=len({agreement_variant(row)[0] for _, row in between.iterrows()}),
        baseline=baseline,
        worst=float(between["rel_diff_loss_after_step"].astype(float).max()) if not between.empty else None,
        own=float(own.max()) if own is not None and own.notna().any() else None,
        floor=STEP0_TOLERANCE,
        flagged=flagged,
        excluded=excluded,
        top1_gap=float(top1_gap(between).max()) if not between.empty else None,
    )


def mode_agreements(agreement: pd.DataFrame | None) -> tuple[ModeAgreement, ...]:
    """Each compiled PyTorch variant's step-0 agreement with eager PyTorch (none without such a pair)."""
    if agreement is None or agreement.empty:
        return ()
    rows = agreement[_same_framework(agreement)]
    found = []
    for variant in ordered_variants(rows.apply(agreement_variant, axis=1)) if not rows.empty else []:
        own = rows[rows.apply(lambda row, v=variant: agreement_variant(row) == v, axis=1).astype(bool)]
        found.append(
            ModeAgreement(
                variant_name(*variant, alone=False),
                variant_name(BASELINE, MODES[BASELINE][0], alone=False),
                float(own["rel_diff_loss"].max()),
                float(own["rel_diff_loss_after_step"].max()),
                float(own["rel_diff_grad_norm"].max()),
                len(own),
                int(_flagged(own).sum()),
            )
        )
    return tuple(found)


def mode_gains(frame: pd.DataFrame) -> pd.DataFrame:
    """Per model, precision, batch and framework trained both eagerly and compiled: each run's training time (its
    epochs' step loops summed, compilation apart), the compiled run's compile time, and the gain (eager time over
    compiled time: the compiled run's speed in multiples of the eager run's). One run each, so no interval."""
    ok = with_modes(frame[frame["status"] == "ok"]) if "epoch" in frame else frame.iloc[0:0]
    rows = []
    for (model, precision, batch, framework), group in ok.groupby(["model", "precision", "batch_size", "framework"]):
        runs = {mode: cell for mode, cell in group.groupby("mode")}
        eager = [m for m in runs if not is_compiled(m)]
        for mode in (m for m in runs if is_compiled(m) and eager):
            compiled, base = runs[mode], runs[eager[0]]
            rows.append(
                {
                    "model": model,
                    "precision": precision,
                    "batch_size": batch,
                    "framework": framework,
                    "mode": mode,
                    "eager_mode": eager[0],
                    "eager_time_s": float(base["time_s"].sum()),
                    "time_s": float(compiled["time_s"].sum()),
                    "compile_s": float(compiled.sort_values("epoch")["compile_s"].iloc[0]),
                    "gain": float(base["time_s"].sum() / compiled["time_s"].sum()),
                }
            )
    return pd.DataFrame(rows)


def mode_gain_values(frame: pd.DataFrame) -> tuple[ModeGain, ...]:
    return tuple(
        ModeGain(
            variant_name(row.framework, row.mode, alone=False),
            variant_name(row.framework, row.eager_mode, alone=False),
            model_in_text(row.model),
            int(row.batch_size),
            row.time_s,
            row.eager_time_s,
            row.gain,
            row.compile_s,
        )
        for row in mode_gains(frame).itertuples()
    )


def modes_values(frame: pd.DataFrame) -> tuple[Modes, ...]:
    """The frameworks that train in more than one mode, with each mode's description."""
    frame = with_modes(frame)
    variants = ordered_variants(zip(frame["framework"], frame["mode"], strict=True))
    return tuple(
        Modes(framework_name(f), tuple(DESCRIPTIONS.get((f, m), m) for g, m in variants if g == f))
        for f in ordered_frameworks(multi_mode(variants))
    )


def _variant_names(frame: pd.DataFrame) -> dict[tuple[str, str], str]:
    variants = ordered_variants(zip(frame["framework"], frame["mode"], strict=True))
    several = multi_mode(variants)
    return {v: variant_name(v[0], v[1], alone=v[0] not in several) for v in variants}


def completion(frame: pd.DataFrame) -> Completion:
    frame = with_modes(frame)
    cells = frame.drop_duplicates("path")
    ok = frame[frame["status"] == "ok"]
    names = _variant_names(frame)
    failed = cells[cells["status"] != "ok"].sort_values(["model", "framework", "mode"])
    return Completion(
        cells=len(cells),
        completed=int((cells["status"] == "ok").sum()),
        epochs=int(ok["epoch"].max() + 1) if not ok.empty else 0,
        seconds=float(ok["time_s"].sum()) if not ok.empty else None,
        failed=tuple(
            FailedCell(names[(row["framework"], row["mode"])], model_in_text(row["model"]))
            for _, row in failed.iterrows()
        ),
    )


def training_runs(frame: pd.DataFrame, target: float | None) -> tuple[TrainingRun, ...]:
    """Per trained model, precision and batch size with a completed cell: who reached the target top-1 when
    (`target`: the config's, a fraction; the cells' own where they recorded one), or the time per epoch."""
    frame = with_modes(frame)
    ok = frame[frame["status"] == "ok"]
    if ok.empty:
        return ()
    names = _variant_names(frame)
    keys = ["model", "precision", "batch_size"]
    groups = list(ok.groupby(keys))
    several_precisions = ok["precision"].nunique() > 1
    runs = []
    for (model, precision, batch), group in groups:
        recorded = group["target_top1"].dropna() if "target_top1" in group else pd.Series(dtype=float)
        goal = float(recorded.iloc[0]) if not recorded.empty else target
        timings = []
        for (framework, mode), cell in group.groupby(["framework", "mode"]):
            last = cell.sort_values("epoch").iloc[-1]
            if goal is not None:
                seconds = last.get("time_to_target_s")
                timings.append(Timing(names[(framework, mode)], float(seconds) if present(seconds) else None))
            else:
                timings.append(Timing(names[(framework, mode)], float(cell["time_s"].mean())))
        timings.sort(key=lambda t: (t.seconds is None, t.seconds or 0.0))
        runs.append(
            TrainingRun(
                model_in_text(model),
                precision_name(precision) if several_precisions else None,
                int(batch),
                len(groups) > 1,
                100 * goal if goal is not None else None,
                int(group["epoch"].max() + 1),
                tuple(timings),
            )
        )
    return tuple(runs)


def run_summary(runs: tuple[TrainingRun, ...]) -> RunSummary:
    """The runs counted per variant, for a study with too many runs to say each: the section says who led how
    often, and the table gives every time."""
    targets = {run.target for run in runs}
    by_target = bool(runs) and None not in targets
    target = targets.pop() if by_target and len(targets) == 1 else None
    names = list(dict.fromkeys(t.name for run in runs for t in run.timings))
    first = {
        name: sum(1 for run in runs if run.timings[0].name == name and run.timings[0].seconds is not None)
        for name in names
    }
    missed = {
        name: sum(1 for run in runs for t in run.timings if t.name == name and t.seconds is None) for name in names
    }
    leaders = sorted(names, key=lambda name: (-first[name], names.index(name)))
    return RunSummary(len(runs), by_target, target, tuple(Leader(name, first[name], missed[name]) for name in leaders))


def workarounds(frame: pd.DataFrame, agreement: pd.DataFrame | None, include_deviating: bool) -> Workarounds:
    cells = frame.drop_duplicates("path")
    used = cells["deviations"].map(present) & (cells["status"] == "ok") if "deviations" in cells else []
    pairs = int(_deviating(agreement).sum()) if agreement is not None and not agreement.empty else 0
    return Workarounds(int(sum(used)), pairs, 0 if include_deviating else pairs, include_deviating)


def section_values(
    frame: pd.DataFrame,
    agreement: pd.DataFrame | None,
    include_deviating: bool = False,
    target: float | None = None,
) -> dict[str, object]:
    """Everything report/templates/training.tex.j2 says, by the names it uses."""
    return {
        "recipe": Recipe(
            tuple(framework_name(f) for f in ordered_frameworks(frame["framework"])),
            tuple(models_in_text(frame["model"].unique())),
        ),
        "cells": completion(frame),
        "runs": (runs := training_runs(frame, target)),
        "summary": run_summary(runs),
        "step0": step0_agreement_values(agreement, include_deviating),
        "modes": modes_values(frame),
        "compiled": mode_agreements(agreement),
        "gains": mode_gain_values(frame),
        "workarounds": workarounds(frame, agreement, include_deviating),
    }
