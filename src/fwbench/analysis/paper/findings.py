"""The conclusions' findings, generated: every sentence is chosen from the results and carries its uncertainty.

A reader should not meet "JAX is faster" where the data say "faster in 2 of 10 pairs, slower in 4, a geometric mean
ratio of 1.02 [0.64, 1.39]". So the inference sentences count resolved pairs each way (the verdicts adjusted within
each framework pair, fwbench.analysis.common.verdicts), give the geometric mean of the ratios with an interval that
takes the model as the unit, name the largest resolved difference with its simultaneous interval, and say that a ratio
depends on the batch size only where a test of the difference between two batch sizes resolves it; the training
sentences state the training comparison (step-0 agreement, time per epoch, time to the target accuracy) as measured.

Every ratio names the execution modes it pairs (fwbench.study.modes): each framework's ratio mode (compiled by default)
where both cells exist, and where one side's cell in that mode is missing its first mode stands in; a ratio that then
sets an eager program against a compiled one says so in the sentence that counts it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fwbench.analysis.common import verdicts
from fwbench.analysis.common.latex import (
    escape,
    join_words,
    label,
    mode_label,
    number,
    ordered_frameworks,
    ordered_variants,
    ratio_label,
)
from fwbench.analysis.common.names import model_in_text, models_in_text
from fwbench.analysis.common.partners import (
    cell_mode,
    check_placement,
    mixed_modes,
    multi_mode,
    ratio_variant,
    with_modes,
)
from fwbench.analysis.common.verdicts import DEFAULT_MULTIPLICITY
from fwbench.analysis.inference.ratio_macros import adjusted_phrase, summary_text
from fwbench.analysis.inference.summary import (
    geometric_summary,
    multiplicity_of,
    node_differs,
    paired,
    quoted_interval,
    refused,
    resolved_adjusted,
)
from fwbench.analysis.inference.summary import mixed_modes as mixed_ratios
from fwbench.analysis.published.matching import training_times
from fwbench.analysis.training.macros import compiled_step0_text
from fwbench.analysis.training.section import mode_gain_text
from fwbench.study.modes import is_compiled

BASELINE = "torch"


def plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


def _pair_text(num: str, num_mode: str, den_mode: str) -> str:
    """ "JAX/Flax jit over PyTorch compiled": the two modes a ratio pairs."""
    return f"{label(num)} {mode_label(num_mode)} over {label(BASELINE)} {mode_label(den_mode)}"


def _modes_sentence(mine: pd.DataFrame, every: pd.DataFrame, framework: str, apart: pd.Index | None = None) -> str:
    """Which modes a framework's ratios pair, counted from them: the pairing of the summarised ratios, how many of
    them set an eager program against a compiled one (another mode standing in where the ratio mode's cell is
    missing), and how many further such ratios the summary leaves out (not counting those summarised `apart`, the
    family against eager PyTorch). Empty for a table from before modes."""
    apart = pd.Index([]) if apart is None else apart
    if "numerator_mode" not in mine or mine.empty:
        return ""
    pairs = mine.groupby(["numerator_mode", "denominator_mode"], sort=False).size().sort_values(ascending=False)
    described = [f"{_pair_text(framework, a, b)} in {plural(int(n), 'pair')}" for (a, b), n in pairs.items()]
    mixed = int(mixed_ratios(mine).sum())
    text = f" The ratios pair {join_words(described)}"
    if mixed:
        one = mixed == 1
        text += (
            f"; {plural(mixed, 'ratio')} of them set{'s' if one else ''} a compiled program against an eager one "
            f"(no {label(BASELINE)} cell in the ratio mode of {'its' if one else 'their'} comparison: marked in "
            "Table~\\ref{tab:inference})"
        )
    left_out = every.index.difference(mine.index).difference(apart)
    dropped = int(mixed_ratios(every.loc[left_out]).sum()) if len(left_out) else 0
    if dropped:
        text += (
            f"; {plural(dropped, 'further ratio')} setting a compiled program against an eager one "
            f"{'is' if dropped == 1 else 'are'} left out of these figures"
        )
    return text + "."


def _largest_text(mine: pd.DataFrame, resolved: pd.Series, method: str) -> str:
    """The largest resolved difference (adjusted verdicts) with the interval it is quoted with: simultaneous over
    its family's tests (`summary.quoted_interval`), against the winner's curse of picking the extreme one."""
    chosen = mine[resolved]
    strongest = chosen.loc[np.log(chosen["ratio"].astype(float)).abs().idxmax()]
    low, high, simultaneous = quoted_interval(strongest)
    size = strongest.get("family_size")
    if simultaneous and method != "none" and pd.notna(size) and int(size) > 1:
        kind = f" (a simultaneous 95\\% CI over the {int(size)} tests of its family)"
    else:
        kind = " (its 95\\% CI)"
    return (
        f", and the largest resolved difference is {number(strongest['ratio'])} [{number(low)}, {number(high)}]"
        f"{kind} on {escape(model_in_text(strongest['model']))} at batch {int(strongest['batch_size'])}"
    )


def inference_sentences(
    ratios: pd.DataFrame,
    frameworks: list[str],
    every: pd.DataFrame | None = None,
    multiplicity: str = DEFAULT_MULTIPLICITY,
    eager: pd.DataFrame | None = None,
) -> list[str]:
    """Per framework against PyTorch: resolved pairs each way (the adjusted verdicts, `summary.resolved_adjusted`),
    the geometric mean of the ratios with its interval over models (`summary.geometric_summary`), the largest
    resolved difference with its simultaneous interval, whether the ratio depends on the batch size
    (`batch_sentence`: a test of the difference, never a difference in significance), and which execution modes
    the ratios pair (`_modes_sentence`; `every`: all computed ratios, to count the mixed ones the summary left
    out; `multiplicity`: the config's, where no ratio carries its table's). `eager`: the family against eager
    PyTorch (`ratio_macros.eager_family`), summarised the same way in a sentence of its own (`eager_sentence`)."""
    sentences = []
    every = ratios if every is None else every
    eager = every.iloc[0:0] if eager is None else eager
    method = multiplicity_of(every, multiplicity)
    for framework in [f for f in ordered_frameworks(frameworks) if f != BASELINE]:
        mine = ratios[ratios["numerator"] == framework] if "numerator" in ratios else ratios
        # a study whose PyTorch cells all failed has no ratio at all (not even the column)
        mine = mine.dropna(subset=["ratio"]) if "ratio" in mine else mine.iloc[0:0]
        all_mine = every[every["numerator"] == framework] if "numerator" in every else every
        mine_eager = eager[eager["numerator"] == framework].dropna(subset=["ratio"]) if len(eager) else eager
        name = label(framework)
        family = eager_sentence(mine_eager, name, method)
        if mine.empty:
            sentences.append(family or f"{name} has no ratio to PyTorch in this study.")
            continue
        resolved = resolved_adjusted(mine)
        above = mine["ratio"].astype(float) > 1
        faster, slower = int((resolved & above).sum()), int((resolved & ~above).sum())
        summary = geometric_summary(mine)
        text = (
            f"{name} was faster than PyTorch in {faster} and slower in {slower} of "
            f"{plural(len(mine), 'model and batch-size pair')} ({int(resolved.sum())} resolved by the paired test "
            f"{adjusted_phrase(method)}); the geometric mean of the {ratio_label(framework)} throughput ratios is "
            f"{summary_text(summary)}"
        )
        if resolved.any():
            text += _largest_text(mine, resolved, method)
        modes = _modes_sentence(mine, all_mine, framework, mine_eager.index)
        sentences.append(text + "." + batch_sentence(mine, name, method) + modes + (" " + family if family else ""))
    return sentences


def eager_sentence(ratios: pd.DataFrame, name: str, method: str) -> str:
    """One framework's family against eager PyTorch (the models without a compiled PyTorch cell to pair with),
    summarised as its compiled pairs are: resolved pairs each way, the geometric mean with its interval over models,
    the largest resolved difference; empty without such ratios."""
    if ratios.empty:
        return ""
    resolved = resolved_adjusted(ratios)
    above = ratios["ratio"].astype(float) > 1
    models = join_words([escape(model) for model in models_in_text(ratios["model"])])
    text = (
        f"Against eager PyTorch, in the pairs without a compiled PyTorch cell to pair with (on {models}), {name} was "
        "faster in "
        f"{int((resolved & above).sum())} and slower in {int((resolved & ~above).sum())} of "
        f"{plural(len(ratios), 'pair')} ({int(resolved.sum())} resolved {adjusted_phrase(method)}), with a "
        f"geometric mean ratio of {summary_text(geometric_summary(ratios))}"
    )
    if resolved.any():
        text += _largest_text(ratios, resolved, method)
    return text + "."


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


BATCH_ADJUSTMENT = {
    "holm": "Holm-adjusted over the models",
    "bh": "Benjamini--Hochberg-adjusted over the models",
    "none": "not adjusted for multiple comparisons",
}


def batch_sentence(ratios: pd.DataFrame, name: str, method: str) -> str:
    """Whether a framework's ratio depends on the batch size, said only from a test of the difference between its
    log ratios at the smallest and largest batch size of each model (`batch_differences`), each resolved difference
    with its own 95% interval; empty where no model has paired ratios at two batch sizes."""
    differences = batch_differences(ratios, method)
    if not differences:
        return ""
    several_precisions = len({d.precision for d in differences}) > 1
    how = f"a test of the difference of the log ratios, {BATCH_ADJUSTMENT.get(method, escape(method))}"
    resolved = [d for d in differences if d.p_adjusted < verdicts.ALPHA]
    if not resolved:
        sizes = sorted({(d.small, d.large) for d in differences})
        between = f"batch {sizes[0][0]} and {sizes[0][1]}" if len(sizes) == 1 else "its smallest and largest batch size"
        if len(differences) == 1:
            only = differences[0]
            where = model_in_text(only.model) + (f" in {only.precision}" if several_precisions else "")
            return f" {escape(name)}'s ratio on {escape(where)} does not differ resolvedly between {between} ({how})."
        return (
            f" {escape(name)}'s ratio differs resolvedly between {between} for none of the "
            f"{len(differences)} models measured at both ({how})."
        )
    parts, previous = [], None
    for d in resolved:
        where = model_in_text(d.model) + (f" in {d.precision}" if several_precisions else "")
        what = f"its ratio at batch {d.large} is " if (d.small, d.large) != previous else ""
        than = f" that at batch {d.small}" if (d.small, d.large) != previous else ""
        previous = (d.small, d.large)
        parts.append(
            f"on {escape(where)} {what}{number(d.difference.estimate)}$\\times${than} (95\\% CI "
            f"[{number(d.difference.low)}, {number(d.difference.high)}]"
            + ("; the direction reverses" if d.reverses else "")
            + ")"
        )
    rest = len(differences) - len(resolved)
    tail = f"; for {plural(rest, 'other model')} the difference is not resolved" if rest else ""
    return f" {escape(name)}'s ratio depends on the batch size ({how}): {join_words(parts)}{tail}."


def placement_sentence(ratios: pd.DataFrame) -> str:
    """The ratios the inference summary refused (cells on different device models) or kept across nodes, in one
    sentence; empty when every ratio compared cells of one node."""
    count_refused, count_nodes = int(refused(ratios).sum()), int(node_differs(ratios).sum())
    parts = []
    if count_refused:
        one = count_refused == 1
        parts.append(
            f"{plural(count_refused, 'ratio')} {'was' if one else 'were'} refused because {'its' if one else 'their'} "
            "two cells ran on different device models (marked $^{r}$ in Table~\\ref{tab:inference}) and "
            f"{'is' if one else 'are'} in none of these figures"
        )
    if count_nodes:
        one = count_nodes == 1
        parts.append(
            f"{plural(count_nodes, 'ratio')} compare{'s' if one else ''} cells that ran on different nodes with the "
            f"same device model (marked $^{{x}}$) and {'is' if one else 'are'} kept"
        )
    return "; ".join(parts) + "." if parts else ""


def _phrase(framework: str, mode: str, named: bool) -> str:
    """A variant in a training sentence: the framework ("JAX/Flax"), or with its mode in front where it must be
    named ("compiled PyTorch", "eager PyTorch")."""
    return f"{mode_label(mode)} {label(framework)}" if named else label(framework)


def _training_comparison(num: pd.Series, base: pd.Series, named: set[str]) -> str:
    """One variant's last epoch against the baseline's: its time and speed ratio, "failed", or the comparison
    refused when the two cells ran on different device models (a ratio would compare the devices); a pair on
    different nodes of one device model keeps its ratio and says so, and a pair of an eager and a compiled program
    says that too. `named`: the frameworks whose mode the sentence names."""
    framework, mode, base_mode = num["framework"], cell_mode(num), cell_mode(base)
    mixed = mixed_modes(mode, base_mode)
    name = _phrase(framework, mode, framework in named)
    if num["status"] != "ok":
        return f"{name} failed"
    placement = check_placement([base, num])
    if placement.models_differ:
        return (
            f"{name} no comparable time (the comparison is refused: the cells ran on different device models, "
            f"{escape(placement.model_values())})"
        )
    t, reference = float(num["time_s"]), float(base["time_s"])
    node = (
        f", on another node of the same device model: {escape(placement.node_values())}"
        if placement.nodes_differ
        else ""
    )
    whose = _phrase(BASELINE, base_mode, BASELINE in named or mixed)
    kinds = ("a compiled program against an eager one", "an eager program against a compiled one")
    pairing = f"; {kinds[0] if is_compiled(mode) else kinds[1]}, for want of a cell in the ratio mode" if mixed else ""
    return f"{name} {number(t)}~s ({number(reference / t)}$\\times$ {whose}'s speed{node}{pairing})"


def _pick(variants: dict[tuple[str, str], pd.Series], framework: str, config: Mapping[str, Any]) -> str | None:
    """The mode of `framework` a training ratio uses: its ratio mode, or its first successful mode standing in
    (`partners.ratio_variant`, as the inference ratios pick); a failed cell's where none succeeded."""
    modes = [m for f, m in variants if f == framework]
    succeeded = [m for m in modes if variants[(framework, m)]["status"] == "ok"]
    return ratio_variant(framework, succeeded or modes, config)[0]


def _target_text(steady: dict[tuple[str, str], pd.Series], target: float, named: set[str]) -> str:
    reached = []
    for framework, mode in ordered_variants(steady):
        value = steady[(framework, mode)].get("time_to_target_s")
        name = _phrase(framework, mode, framework in named)
        measured = value is not None and pd.notna(value)
        reached.append(f"{name} in {number(float(value))}~s" if measured else f"{name} not within the run")
    return f"The target of {number(100 * target)}\\% top-1 was reached by " + join_words(reached) + "."


def training_sentences(
    epochs: pd.DataFrame | None,
    agreement: pd.DataFrame | None,
    target: float | None,
    config: Mapping[str, Any] | None = None,
) -> list[str]:
    """Step-0 agreement (compiled PyTorch's with eager PyTorch's named apart), time per epoch against PyTorch
    (`_training_comparison`: each framework in its ratio mode, `config`'s ratio_modes or compiled by default, its
    first mode standing in where that cell is missing, and said so where that pairs an eager program with a compiled
    one), the compiled-over-eager gain within a framework, and the time to the target accuracy, per trained model,
    precision (named when the study has several) and batch size."""
    if epochs is None or epochs.empty:
        return ["The study trained no model."]
    config = config or {}
    sentences = []
    if agreement is not None and not agreement.empty and "rel_diff_loss_after_step" in agreement:
        worst = agreement["rel_diff_loss_after_step"].astype(float).max()
        flagged = int((agreement.get("flagged", pd.Series(dtype=str)).astype(str) == "True").sum())
        sentences.append(
            f"After one identical training step from the same weights on the same batch, the frameworks' losses "
            f"agree to {worst:.1e} (largest relative difference to PyTorch over "
            f"{plural(len(agreement), 'comparison')}; {flagged} flagged)."
        )
        sentences += [text for text in [compiled_step0_text(agreement)] if text]
    keys = ["model", "precision", "batch_size"]
    epochs = with_modes(epochs)
    last = epochs.sort_values("epoch").groupby(["framework", "mode", *keys]).tail(1)
    named = multi_mode(zip(epochs["framework"], epochs["mode"], strict=True))
    several_precisions = epochs["precision"].nunique() > 1
    for (model, precision, batch), _ in training_times(epochs).groupby(keys):
        rows = last[(last["model"] == model) & (last["precision"] == precision) & (last["batch_size"] == batch)]
        steady = {(row["framework"], row["mode"]): row for _, row in rows.iterrows()}
        base_mode = _pick(steady, BASELINE, config)
        if base_mode is None or steady[(BASELINE, base_mode)]["status"] != "ok":
            continue
        base = steady[(BASELINE, base_mode)]
        picked = [(f, _pick(steady, f, config)) for f in ordered_frameworks(f for f, _ in steady) if f != BASELINE]
        parts = [_training_comparison(steady[variant], base, named) for variant in picked]
        mixed = any(mixed_modes(mode, base_mode) for _, mode in picked)
        where = escape(model_in_text(model)) + (f" in {escape(precision)}" if several_precisions else "")
        if parts:
            sentences.append(
                f"Training {where} at batch {int(batch)}, the last epoch took "
                f"{_phrase(BASELINE, base_mode, BASELINE in named or mixed)} {number(float(base['time_s']))}~s and "
                + join_words(parts)
                + " (one run per framework, so no interval)."
            )
        if target is not None:
            sentences.append(_target_text(steady, target, named))
    sentences += [text for text in [mode_gain_text(epochs)] if text]
    return sentences
