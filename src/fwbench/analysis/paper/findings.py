"""The conclusions' findings, read from the results for the conclusions' template
(report/templates/conclusions.tex.j2): whether a framework's ratio depends on the batch size (`batch_effects`, from a
test of the difference between two batch sizes, never a difference in significance), which ratios were refused or
kept across nodes (`placement`), and the training comparison (step-0 agreement, time per epoch, time to the target
accuracy) as measured (`training_findings`). The per-pair verdicts are the abstract's
(fwbench.analysis.paper.headline), so the conclusions and the abstract count the same comparisons the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fwbench.analysis.common import verdicts
from fwbench.analysis.common.latex import (
    ordered_frameworks,
    ordered_variants,
)
from fwbench.analysis.common.names import framework_name, model_name, variant_name
from fwbench.analysis.common.partners import (
    cell_mode,
    check_placement,
    mixed_modes,
    multi_mode,
    ratio_variant,
    with_modes,
)
from fwbench.analysis.inference.summary import (
    node_differs,
    paired,
    refused,
    resolved_adjusted,
)
from fwbench.analysis.published.matching import training_times
from fwbench.analysis.training.findings import ModeAgreement, ModeGain, counted_pairs, mode_agreements, mode_gain_values
from fwbench.study.modes import is_compiled

BASELINE = "torch"


def plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


@dataclass(frozen=True)
class BatchDifference:
    """One model's ratio at its largest batch size over its ratio at its smallest (`verdicts.difference`), with the
    p-value adjusted over the models of one framework pair."""

    model: str
    precision: str
    small: int
    large: int
    difference: verdicts.Difference
    p_adjusted: float
    reverses: bool


def _testable(ratios: pd.DataFrame) -> pd.DataFrame:
    """The ratios with a paired t interval (a finite log-scale standard error and degrees of freedom)."""
    if not {"se_log", "df"} <= set(ratios.columns):
        return ratios.iloc[0:0]
    se, df = pd.to_numeric(ratios["se_log"], errors="coerce"), pd.to_numeric(ratios["df"], errors="coerce")
    return ratios[paired(ratios) & se.notna() & df.notna() & (df > 0) & ratios["ratio"].notna()]


def batch_differences(ratios: pd.DataFrame, method: str) -> list[BatchDifference]:
    """For every model (and precision) with paired ratios at two or more batch sizes, whether its ratio at the
    largest batch size differs from its ratio at the smallest: a Welch t test on the difference of the two log
    ratios (independent groups), adjusted by `method` over the models. Whether the direction reverses is said only
    where both ratios are resolved after adjustment, in opposite directions."""
    testable = _testable(ratios)
    adjusted = resolved_adjusted(testable)
    found = []
    for (model, precision), group in testable.groupby(["model", "precision"], sort=True):
        if group["batch_size"].nunique() < 2:
            continue
        small = group.loc[group["batch_size"].astype(int).idxmin()]
        large = group.loc[group["batch_size"].astype(int).idxmax()]
        difference = verdicts.difference(
            math.log(float(large["ratio"])),
            float(large["se_log"]),
            float(large["df"]),
            math.log(float(small["ratio"])),
            float(small["se_log"]),
            float(small["df"]),
        )
        reverses = bool(adjusted[small.name] and adjusted[large.name]) and (float(small["ratio"]) > 1) != (
            float(large["ratio"]) > 1
        )
        found.append(
            (str(model), str(precision), int(small["batch_size"]), int(large["batch_size"]), difference, reverses)
        )
    p_adjusted = verdicts.adjust([d.p for *_, d, _ in found], method) if found else []
    return [
        BatchDifference(model, precision, small, large, difference, float(p), reverses)
        for (model, precision, small, large, difference, reverses), p in zip(found, p_adjusted, strict=True)
    ]


@dataclass(frozen=True)
class Shift:
    """One model's resolved dependence on the batch size: its ratio at batch `large` is `estimate` times its ratio
    at batch `small`, with that difference's 95% interval; `reverses` where the two ratios resolve either way."""

    model: str  # display name
    precision: str | None  # only where the framework's differences span several precisions
    small: int
    large: int
    estimate: float
    low: float
    high: float
    reverses: bool


@dataclass(frozen=True)
class BatchEffect:
    """Whether one framework's ratio to PyTorch depends on the batch size: tested on `tested` models (those with paired
    ratios at two batch sizes or more), resolved on `shifts`, after `adjustment` over the models."""

    framework: str  # display name
    tested: int
    adjustment: str  # "holm", "bh", "none" (another method by its name)
    sizes: tuple[int, int] | None  # the smallest and largest batch size where every tested model shares them
    only: str | None  # the model's display name where one model was tested
    shifts: tuple[Shift, ...]


def batch_effects(ratios: pd.DataFrame, frameworks: list[str], method: str) -> list[BatchEffect]:
    """Per framework against PyTorch, from a test of the difference between its log ratios at the smallest and the
    largest batch size of each model (`batch_differences`, never a difference in significance); frameworks without
    a model measured at two batch sizes are left out."""
    effects = []
    for framework in [f for f in ordered_frameworks(frameworks) if f != BASELINE]:
        mine = ratios[ratios["numerator"] == framework] if "numerator" in ratios else ratios.iloc[0:0]
        mine = mine.dropna(subset=["ratio"]) if "ratio" in mine else mine.iloc[0:0]
        differences = batch_differences(mine, method) if len(mine) else []
        if not differences:
            continue
        several = len({d.precision for d in differences}) > 1
        sizes = {(d.small, d.large) for d in differences}
        shifts = tuple(
            Shift(
                model_name(d.model),
                d.precision if several else None,
                d.small,
                d.large,
                d.difference.estimate,
                d.difference.low,
                d.difference.high,
                d.reverses,
            )
            for d in differences
            if d.p_adjusted < verdicts.ALPHA
        )
        effects.append(
            BatchEffect(
                framework_name(framework),
                len(differences),
                method,
                next(iter(sizes)) if len(sizes) == 1 else None,
                model_name(differences[0].model) if len(differences) == 1 else None,
                shifts,
            )
        )
    return effects


@dataclass(frozen=True)
class Placement:
    """Ratios the inference summary refused (their cells ran on different device models) and ratios it kept between
    cells on different nodes with the same device model."""

    refused: int
    across_nodes: int


def placement(ratios: pd.DataFrame) -> Placement:
    return Placement(int(refused(ratios).sum()), int(node_differs(ratios).sum()))


def _phrase(framework: str, mode: str, named: bool) -> str:
    """A variant in a training sentence as the abstract and the body name it: the framework ("JAX"), or with its
    mode in front where it must be named ("compiled PyTorch", "eager PyTorch")."""
    return variant_name(framework, mode, alone=not named)


@dataclass(frozen=True)
class TrainingVariant:
    """One framework's last epoch against PyTorch's: `status` "ok" (`seconds`, `speed`: PyTorch's time over its
    own), "failed", or "refused" (the cells ran on different device models, `devices`: a ratio would compare them);
    `nodes` where the two ran on different nodes of one device model; `pairing` "compiled" or "eager" where this
    variant's mode stands in and so sets a compiled program against an eager one or the reverse."""

    name: str
    status: str
    seconds: float | None = None
    speed: float | None = None
    nodes: str | None = None
    devices: str | None = None
    pairing: str | None = None


@dataclass(frozen=True)
class TrainingRun:
    """One trained model, precision (named where the study has several) and batch size: PyTorch's last epoch, the
    other frameworks' against it, and who reached the target accuracy in how long (None: no target)."""

    model: str
    precision: str | None
    batch: int
    baseline: str
    seconds: float
    variants: tuple[TrainingVariant, ...]
    target: float | None  # in percent
    reached: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True)
class TrainingFindings:
    """What the conclusions' training paragraph says: the step-0 agreement (`worst` relative loss difference over
    `comparisons`, `flagged`), compiled PyTorch's own step-0 agreement and the compile gain (the values the training
    section says them from, in training.j2's words in both), and the runs."""

    comparisons: int
    worst: float | None
    flagged: int
    compiled_step0: tuple[ModeAgreement, ...]
    runs: tuple[TrainingRun, ...]
    mode_gain: tuple[ModeGain, ...]


def _training_variant(num: pd.Series, base: pd.Series, named: set[str]) -> TrainingVariant:
    """One variant's last epoch against the baseline's: its time and speed ratio, failed, or the comparison refused
    when the two cells ran on different device models; a pair on different nodes of one device model keeps its
    ratio and says so, and so does a pair of an eager and a compiled program. `named`: the frameworks whose mode
    the sentence names."""
    framework, mode, base_mode = num["framework"], cell_mode(num), cell_mode(base)
    name = _phrase(framework, mode, framework in named)
    if num["status"] != "ok":
        return TrainingVariant(name, "failed")
    placement = check_placement([base, num])
    if placement.models_differ:
        return TrainingVariant(name, "refused", devices=placement.model_values(framework_name))
    t, reference = float(num["time_s"]), float(base["time_s"])
    nodes = placement.node_values(framework_name) if placement.nodes_differ else None
    pairing = ("compiled" if is_compiled(mode) else "eager") if mixed_modes(mode, base_mode) else None
    return TrainingVariant(name, "ok", t, reference / t, nodes, None, pairing)


def _pick(variants: dict[tuple[str, str], pd.Series], framework: str, config: Mapping[str, Any]) -> str | None:
    """The mode of `framework` a training ratio uses: its ratio mode, or its first successful mode standing in
    (`partners.ratio_variant`, as the inference ratios pick); a failed cell's where none succeeded."""
    modes = [m for f, m in variants if f == framework]
    succeeded = [m for m in modes if variants[(framework, m)]["status"] == "ok"]
    return ratio_variant(framework, succeeded or modes, config)[0]


def _reached(steady: dict[tuple[str, str], pd.Series], named: set[str]) -> tuple[tuple[str, float | None], ...]:
    found = []
    for framework, mode in ordered_variants(steady):
        value = steady[(framework, mode)].get("time_to_target_s")
        found.append((_phrase(framework, mode, framework in named), float(value) if pd.notna(value) else None))
    return tuple(found)


def training_findings(
    epochs: pd.DataFrame | None,
    agreement: pd.DataFrame | None,
    target: float | None,
    config: Mapping[str, Any] | None = None,
) -> TrainingFindings | None:
    """Step-0 agreement (compiled PyTorch's with eager PyTorch's apart), time per epoch against PyTorch (each
    framework in its ratio mode, `config`'s ratio_modes or compiled by default, its first mode standing in where that
    cell is missing), the compiled-over-eager gain within a framework, and the time to the target accuracy, per
    trained model, precision and batch size; None where the study trained nothing."""
    if epochs is None or epochs.empty:
        return None
    config = config or {}
    worst, flagged, comparisons = None, 0, 0
    if agreement is not None and not agreement.empty and "rel_diff_loss_after_step" in agreement:
        worst = float(agreement["rel_diff_loss_after_step"].astype(float).max())
        flagged = int((agreement.get("flagged", pd.Series(dtype=str)).astype(str) == "True").sum())
        comparisons = len(agreement)
    keys = ["model", "precision", "batch_size"]
    epochs = with_modes(epochs)
    last = epochs.sort_values("epoch").groupby(["framework", "mode", *keys]).tail(1)
    named = multi_mode(zip(epochs["framework"], epochs["mode"], strict=True))
    several_precisions = epochs["precision"].nunique() > 1
    runs = []
    for (model, precision, batch), _ in training_times(epochs).groupby(keys):
        rows = last[(last["model"] == model) & (last["precision"] == precision) & (last["batch_size"] == batch)]
        steady = {(row["framework"], row["mode"]): row for _, row in rows.iterrows()}
        base_mode = _pick(steady, BASELINE, config)
        if base_mode is None or steady[(BASELINE, base_mode)]["status"] != "ok":
            continue
        base = steady[(BASELINE, base_mode)]
        picked = [(f, _pick(steady, f, config)) for f in ordered_frameworks(f for f, _ in steady) if f != BASELINE]
        mixed = any(mixed_modes(mode, base_mode) for _, mode in picked)
        runs.append(
            TrainingRun(
                model_name(model),
                str(precision) if several_precisions else None,
                int(batch),
                _phrase(BASELINE, base_mode, BASELINE in named or mixed),
                float(base["time_s"]),
                tuple(_training_variant(steady[variant], base, named) for variant in picked),
                100 * float(target) if target is not None else None,
                _reached(steady, named) if target is not None else (),
            )
        )
    # what the training section says of compiled PyTorch too (training.j2)
    step0 = mode_agreements(counted_pairs(agreement, include_deviating=True)) if agreement is not None else ()
    gain = mode_gain_values(epochs) if epochs is not None else ()
    return TrainingFindings(comparisons, worst, flagged, tuple(step0), tuple(runs), tuple(gain))
