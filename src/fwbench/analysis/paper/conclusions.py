"""Conclusions and limitations, generated: every sentence is chosen from the results and carries its uncertainty.

A reader should not meet "JAX is faster" where the data say "faster in 2 of 10 pairs, slower in 4, a geometric mean
ratio of 1.02 [0.64, 1.39]". So the summary counts resolved pairs each way (the verdicts adjusted within each
framework pair, fwbench.analysis.common.verdicts), gives the geometric mean of the ratios with an interval that takes
the model as the unit, names the largest resolved difference with its simultaneous interval, says that a ratio depends
on the batch size only where a test of the difference between two batch sizes resolves it, and states the training
comparison (step-0 agreement, time per epoch, time to the target accuracy) as measured. The limitations paragraph
lists what this study lacked, read from the same results: the device, the number of trials, the resolution, the
data, missing energy or memory with the recorded reason, failed and noisy cells, and how far published figures
could be compared.

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
from fwbench.analysis.common.partners import (
    cell_mode,
    check_placement,
    mixed_modes,
    multi_mode,
    ratio_variant,
    with_modes,
)
from fwbench.analysis.inference.aggregate import (
    DEFAULT_MULTIPLICITY,
    geometric_summary,
    multiplicity_of,
    multiplicity_setting,
    node_differs,
    paired,
    quoted_interval,
    refused,
    resolved_adjusted,
)
from fwbench.analysis.inference.aggregate import mixed_modes as mixed_ratios
from fwbench.analysis.inference.macros import adjusted_phrase, summary_ratios, summary_text
from fwbench.analysis.published.comparison import modes_sentence as published_modes
from fwbench.analysis.published.comparison import summary_sentence as published_sentence
from fwbench.analysis.published.comparison import training_times
from fwbench.analysis.training.analysis import compiled_step0_text, mode_gain_text
from fwbench.study.modes import is_compiled

BASELINE = "torch"
REFERENCE_RESOLUTION = 224  # torchvision's and the published studies' input size


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


def _pair_text(num: str, num_mode: str, den_mode: str) -> str:
    """ "JAX/Flax jit over PyTorch compiled": the two modes a ratio pairs."""
    return f"{label(num)} {mode_label(num_mode)} over {label(BASELINE)} {mode_label(den_mode)}"


def _modes_sentence(mine: pd.DataFrame, every: pd.DataFrame, framework: str) -> str:
    """Which modes a framework's ratios pair, counted from them: the pairing of the summarised ratios, how many of
    them set an eager program against a compiled one (another mode standing in where the ratio mode's cell is
    missing), and how many further such ratios the summary leaves out. Empty for a table from before modes."""
    if "numerator_mode" not in mine or mine.empty:
        return ""
    pairs = mine.groupby(["numerator_mode", "denominator_mode"], sort=False).size().sort_values(ascending=False)
    described = [f"{_pair_text(framework, a, b)} in {_plural(int(n), 'pair')}" for (a, b), n in pairs.items()]
    mixed = int(mixed_ratios(mine).sum())
    text = f" The ratios pair {join_words(described)}"
    if mixed:
        one = mixed == 1
        text += (
            f"; {_plural(mixed, 'ratio')} of them set{'s' if one else ''} a compiled program against an eager one "
            f"(no {label(BASELINE)} cell in the ratio mode of {'its' if one else 'their'} comparison: marked in "
            "Table~\\ref{tab:inference})"
        )
    left_out = every.index.difference(mine.index)
    dropped = int(mixed_ratios(every.loc[left_out]).sum()) if len(left_out) else 0
    if dropped:
        text += (
            f"; {_plural(dropped, 'further ratio')} setting a compiled program against an eager one "
            f"{'is' if dropped == 1 else 'are'} left out of these figures"
        )
    return text + "."


def _largest_text(mine: pd.DataFrame, resolved: pd.Series, method: str) -> str:
    """The largest resolved difference (adjusted verdicts) with the interval it is quoted with: simultaneous over
    its family's tests (`aggregate.quoted_interval`), against the winner's curse of picking the extreme one."""
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
        f"{kind} on {escape(strongest['model'])} at batch {int(strongest['batch_size'])}"
    )


def inference_sentences(
    ratios: pd.DataFrame,
    frameworks: list[str],
    every: pd.DataFrame | None = None,
    multiplicity: str = DEFAULT_MULTIPLICITY,
) -> list[str]:
    """Per framework against PyTorch: resolved pairs each way (the adjusted verdicts, `aggregate.resolved_adjusted`),
    the geometric mean of the ratios with its interval over models (`aggregate.geometric_summary`), the largest
    resolved difference with its simultaneous interval, whether the ratio depends on the batch size
    (`batch_sentence`: a test of the difference, never a difference in significance), and which execution modes
    the ratios pair (`_modes_sentence`; `every`: all computed ratios, to count the mixed ones the summary left
    out; `multiplicity`: the config's, where no ratio carries its table's)."""
    sentences = []
    every = ratios if every is None else every
    method = multiplicity_of(every, multiplicity)
    for framework in [f for f in ordered_frameworks(frameworks) if f != BASELINE]:
        mine = ratios[ratios["numerator"] == framework] if "numerator" in ratios else ratios
        mine = mine.dropna(subset=["ratio"])
        all_mine = every[every["numerator"] == framework] if "numerator" in every else every
        name = label(framework)
        if mine.empty:
            sentences.append(f"{name} has no ratio to PyTorch in this study.")
            continue
        resolved = resolved_adjusted(mine)
        above = mine["ratio"].astype(float) > 1
        faster, slower = int((resolved & above).sum()), int((resolved & ~above).sum())
        summary = geometric_summary(mine)
        text = (
            f"{name} was faster than PyTorch in {faster} and slower in {slower} of "
            f"{_plural(len(mine), 'model and batch-size pair')} ({int(resolved.sum())} resolved by the paired test "
            f"{adjusted_phrase(method)}); the geometric mean of the {ratio_label(framework)} throughput ratios is "
            f"{summary_text(summary)}"
        )
        if resolved.any():
            text += _largest_text(mine, resolved, method)
        sentences.append(text + "." + batch_sentence(mine, name, method) + _modes_sentence(mine, all_mine, framework))
    return sentences


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
            where = f"{only.model} in {only.precision}" if several_precisions else only.model
            return f" {escape(name)}'s ratio on {escape(where)} does not differ resolvedly between {between} ({how})."
        return (
            f" {escape(name)}'s ratio differs resolvedly between {between} for none of the "
            f"{len(differences)} models measured at both ({how})."
        )
    parts, previous = [], None
    for d in resolved:
        where = f"{d.model} in {d.precision}" if several_precisions else d.model
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
    tail = f"; for {_plural(rest, 'other model')} the difference is not resolved" if rest else ""
    return f" {escape(name)}'s ratio depends on the batch size ({how}): {join_words(parts)}{tail}."


def placement_sentence(ratios: pd.DataFrame) -> str:
    """The ratios the inference summary refused (cells on different device models) or kept across nodes, in one
    sentence; empty when every ratio compared cells of one node."""
    count_refused, count_nodes = int(refused(ratios).sum()), int(node_differs(ratios).sum())
    parts = []
    if count_refused:
        one = count_refused == 1
        parts.append(
            f"{_plural(count_refused, 'ratio')} {'was' if one else 'were'} refused because {'its' if one else 'their'} "
            "two cells ran on different device models (marked $^{r}$ in Table~\\ref{tab:inference}) and "
            f"{'is' if one else 'are'} in none of these figures"
        )
    if count_nodes:
        one = count_nodes == 1
        parts.append(
            f"{_plural(count_nodes, 'ratio')} compare{'s' if one else ''} cells that ran on different nodes with the "
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
            f"{_plural(len(agreement), 'comparison')}; {flagged} flagged)."
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
        where = f"{escape(model)} in {escape(precision)}" if several_precisions else escape(model)
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


def _distinct(frame: pd.DataFrame, column: str) -> list[str]:
    return sorted({str(v) for v in frame.get(column, pd.Series(dtype=str)).dropna()})


def limitations(
    inference: pd.DataFrame,
    epochs: pd.DataFrame | None,
    published: pd.DataFrame,
    ledger: pd.DataFrame,
    config: Mapping[str, Any],
) -> list[str]:
    """What the study lacked, each read from the results or the configuration that produced them."""
    items = []
    ok = inference[inference["status"] == "ok"]
    platforms = set(_distinct(ok, "platform"))
    if platforms and platforms <= {"cpu"}:
        cpu = _distinct(ok, "cpu_model")
        items.append(
            f"every cell ran on a CPU ({escape(', '.join(cpu) or 'unnamed')}), so nothing here measures a GPU, where "
            "the published comparisons ran"
        )
    trials = sorted({int(t) for t in ok.get("trials", pd.Series(dtype=float)).dropna()})
    if trials == [1]:
        items.append("each cell ran in a single process, so no ratio can be resolved")
    elif trials:
        items.append(
            f"each cell ran in {trials[0]} processes, so a ratio's paired interval has {trials[0] - 1} degrees of "
            "freedom and only large differences resolve"
        )
    size = int(config["dataset"]["image_size"])
    if size < REFERENCE_RESOLUTION:
        items.append(
            f"images are {size}~px, {number((REFERENCE_RESOLUTION / size) ** 2)}$\\times$ fewer pixels than the "
            f"{REFERENCE_RESOLUTION}~px the models were designed for, so per-call overheads weigh more than at full "
            "size"
        )
    if config["dataset"].get("source") == "synthetic":
        items.append("the dataset is synthetic (generated from the seed), so accuracies say nothing about real images")
    precisions = list(config.get("precisions", []))
    if precisions == ["fp32"]:
        items.append("only fp32 was measured (no TF32 or bf16 cells)")
    energy = _distinct(inference, "energy_missing")
    if energy and ok.get("energy_j_per_image", pd.Series(dtype=float)).isna().all():
        items.append("energy was not measured: " + escape("; ".join(energy)))
    memory = _distinct(inference, "device_memory_missing")
    if memory and ok.get("device_peak_bytes", pd.Series(dtype=float)).isna().all():
        items.append("device memory was not measured (" + escape("; ".join(memory)) + "); host memory was")
    failed = inference[inference["status"] != "ok"]
    failed_training = (
        with_modes(epochs[epochs["status"] != "ok"]).drop_duplicates(["framework", "mode", "model", "batch_size"])
        if epochs is not None and not epochs.empty
        else []
    )
    if len(failed) or len(failed_training):
        items.append(f"{_plural(len(failed) + len(failed_training), 'cell')} failed (Section~\\ref{{sec:failures}})")
    noisy = int((ok.get("noisy", pd.Series(dtype=str)).astype(str) == "True").sum())
    if noisy:
        items.append(
            f"{noisy} of {len(ok)} inference cells had a noisy trial (a process whose step times' IQR exceeded 10\\% "
            "of their median)"
        )
    if epochs is not None and not epochs.empty:
        trained = sorted(set(epochs["model"]))
        untrained = [m for m in config.get("models", []) if m not in trained]
        runs = with_modes(epochs).groupby(["framework", "mode", "model", "batch_size"]).ngroups
        text = (
            f"training ran once per framework, mode and model ({_plural(runs, 'run')} of "
            f"{_plural(int(epochs['epoch'].max()) + 1, 'epoch')}), without an interval"
        )
        if untrained:
            text += f", and only for {escape(join_words(trained))} ({escape(join_words(untrained))} not trained)"
        items.append(text)
    if len(published) and not published["absolute_comparable"].astype(bool).all():
        items.append(
            "published figures come from other devices and resolutions, so only their ratios and directions "
            "could be compared"
        )
    missing = ledger[ledger["status"] == "not measured"]["control"].tolist()
    if missing:
        items.append("the ledger could not check " + escape(join_words([c.lower() for c in missing])))
    return items


def conclusions_section(
    *,
    ratios: pd.DataFrame,
    inference: pd.DataFrame,
    epochs: pd.DataFrame | None,
    agreement: pd.DataFrame | None,
    published: pd.DataFrame,
    ledger: pd.DataFrame,
    config: Mapping[str, Any],
) -> str:
    """The paper's closing section: results summary, training, published comparison, ledger, then limitations."""
    target = (config.get("training") or {}).get("target_top1")
    # The ratios the paper's summary figures count (those between cells with different workarounds left out unless
    # the configuration counts them), so that these sentences and the abstract agree.
    kept = summary_ratios(ratios, dict(config))[0]
    setting = multiplicity_setting(config.get("analysis"))
    summary = inference_sentences(kept, list(config["frameworks"]), ratios[~refused(ratios)], setting)
    summary += [sentence for sentence in [placement_sentence(ratios)] if sentence]
    trained = "training" in config.get("suites", [])
    training = training_sentences(epochs, agreement, target, config) if trained else []
    held = int((ledger["status"] == "held").sum())
    ledger_text = f"Of the {len(ledger)} fairness controls, {held} held (Section~\\ref{{sec:ledger}})."
    items = limitations(inference, epochs, published, ledger, config)
    limits = (
        "This study has these limitations: " + "; ".join(items) + "."
        if items
        else "The study records no limitation of the kinds it checks."
    )
    return (
        "\n\n".join(
            [
                r"\section{Conclusions and limitations}",
                r"\label{sec:conclusions}",
                r"\paragraph{Inference} " + " ".join(summary),
                *([r"\paragraph{Training} " + " ".join(training)] if training else []),
                r"\paragraph{Against published figures} "
                + " ".join(filter(None, [published_sentence(published), published_modes(published), ledger_text])),
                r"\paragraph{Limitations} " + limits,
            ]
        )
        + "\n"
    )
