"""The paper's training section, for every framework the study trains: its text (recipe, step-0 agreement, top-1
gaps, workarounds, execution modes, compile time, layouts, BatchNorm recalibration), the curves figure's float, the
tables, and the small-CNN cells beside the published reference (fwbench.analysis.training.reference).

Every cell is a (framework, execution mode) variant (fwbench.study.modes): where a framework trains in more than one
mode, the text says how each mode runs the step, how compiled PyTorch's step-0 probe agrees with eager PyTorch's and
how much faster the compiled run trained (`mode_gains`)."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.common.detail import DETAIL_MARK
from fwbench.analysis.common.latex import (
    BASELINE,
    escape,
    figure_float,
    join_words,
    label,
    macro_name,
    mode_label,
    number,
    ordered_frameworks,
    ordered_variants,
    others,
    table_float,
    variant_short,
)
from fwbench.analysis.common.names import model_in_text, models_in_text
from fwbench.analysis.common.partners import multi_mode, with_modes
from fwbench.analysis.training.macros import compiled_step0_text, macro_parts, training_macros
from fwbench.analysis.training.reference import comparison_section
from fwbench.analysis.training.step0 import agreement_variants
from fwbench.analysis.training.tables import compared_names, frame_names, step0_table, training_table
from fwbench.study.modes import DESCRIPTIONS, is_compiled, primary


def _recalibration_text(
    batches: str, twins: str = "the same average in the Flax twins", without_batch_norm: list[str] = ()
) -> str:
    """The recalibration sentence; names the trained models that have no BatchNorm (and skip it), if any."""
    if batches == "0":
        return "Evaluation uses the running BatchNorm statistics that training left behind."
    return (
        "Before each evaluation (and before the initial one), the recipe recomputes BatchNorm's statistics as the "
        f"plain average over the first {batches} training batches of the epoch's order, in train mode with dropout "
        f"and stochastic depth off and no gradients (torch's cumulative mode; {twins}), "
        "so top-1 reflects the weights rather than a running average that lags behind them; its time is reported "
        "apart from the epoch's and counts towards the time to accuracy, and top-1$^r$ gives the running "
        "statistics' figure beside it."
        + (
            f" {_model_list(without_batch_norm, start=True)} {_verb(without_batch_norm, 'has', 'have')} no "
            f"BatchNorm and {_verb(without_batch_norm, 'skips', 'skip')} it."
            if without_batch_norm
            else ""
        )
    )


def _curves_figure(wide: bool) -> list[str]:
    """The training-curves float: one panel column per model, so across both columns only when more than two
    models would not fit one (a single model's panels stretched to the page width would fill a page)."""
    return figure_float(
        "training_curves",
        "Training loss per step (top) and time to accuracy (bottom): validation top-1 against cumulative training "
        "time; frameworks overlaid.",
        "fig:training",
        [
            "Top-1 at each epoch end, starting from the measured top-1 of the initial weights; dashed: the target "
            "top-1. Each execution mode is its own line, a lighter shade for a framework's second mode."
        ],
        wide=wide,
    )


def _model_list(models: list[str], start: bool = False) -> str:
    """The models as a sentence names them ("the small CNN and ResNet-50"), capitalised at a sentence's `start`."""
    text = join_words([escape(name) for name in models_in_text(models)])
    return text[:1].upper() + text[1:] if start else text


def _verb(subjects: list, singular: str, plural: str) -> str:
    return singular if len(subjects) == 1 else plural


def _without_batch_norm(frame: pd.DataFrame) -> list[str]:
    """Trained models whose cells recalibrated nothing: no epoch recorded a recalibration time."""
    if "bn_recalibration_s" not in frame:
        return []
    recalibrated = frame.groupby("model")["bn_recalibration_s"].apply(lambda times: times.notna().any())
    return sorted(model for model, any_time in recalibrated.items() if not any_time)


def _deviation_text(defs: dict[str, str]) -> str:
    deviating, excluded = int(defs["fwbNumTrainDeviating"]), int(defs["fwbNumTrainPairsExcludedDeviating"])
    pairs = int(defs["fwbNumTrainPairsDeviating"])
    if deviating == 0:
        return ""
    text = (
        f" {deviating} training cell{'' if deviating == 1 else 's'} ran with a workaround from the fallback ladder "
        "(marked $^{d}$, see Section~\\ref{sec:failures})"
    )
    if pairs == 0:
        return text + "; every pair compares cells that ran with the same workarounds."
    if excluded:
        return text + (
            f"; {excluded} pair{'' if excluded == 1 else 's'} whose cells ran with different workarounds "
            f"{'is' if excluded == 1 else 'are'} left out of the step-0 and top-1 figures above."
        )
    one = pairs == 1
    return text + (
        f"; {pairs} pair{'' if one else 's'} whose cells ran with different workarounds {'is' if one else 'are'} "
        "counted in the figures above, as the study's configuration asks."
    )


def _frameworks_subject(frameworks: list[str]) -> str:
    """ "Both frameworks train", "All three frameworks train", or the one framework's name."""
    if len(frameworks) == 1:
        return f"{label(frameworks[0])} trains"
    return "Both frameworks train" if len(frameworks) == 2 else f"All {_count_word(len(frameworks))} frameworks train"


def _count_word(count: int) -> str:
    return {2: "two", 3: "three", 4: "four", 5: "five"}.get(count, str(count))


def _by_framework(defs: dict[str, str], compared: list[tuple[str, str]], role: str, unit: str = "") -> str:
    """ " (PyTorch (compiled): a; JAX/Flax: b; TensorFlow/Keras: c)" after a figure over every pair, when more than
    one variant is compared with eager PyTorch."""
    if len(compared) < 2:
        return ""
    names = compared_names(compared)
    return " (" + "; ".join(f"{names[v]}: {defs[macro_name(role, *macro_parts(*v))]}{unit}" for v in compared) + ")"


def _top1_text(defs: dict[str, str], compared: list[tuple[str, str]], frameworks: list[str]) -> str:
    if len(frameworks) < 2:
        return "With one framework there is no pair to compare."
    if len(compared) < 2:
        return (
            f"The final top-1 accuracies of the two frameworks differ by at most {defs['fwbTopOneMaxGap']} points "
            f"over {defs['fwbNumTrainPairs']} pairs."
        )
    return (
        f"The final top-1 accuracy of each framework differs from PyTorch's by at most {defs['fwbTopOneMaxGap']} "
        f"points over {defs['fwbNumTrainPairs']} pairs{_by_framework(defs, compared, 'top one max gap', ' points')}."
    )


# How each compiled variant compiles, for the compile-time sentence (eager PyTorch compiles nothing).
COMPILE_TEXT = {
    ("torch", "compile"): r"Dynamo's tracing and Inductor's code generation for \texttt{torch.compile}",
    ("torch", "cudagraphs"): (
        r"Dynamo's tracing and Inductor's code generation for \texttt{torch.compile} with CUDA graphs "
        "(mode reduce-overhead)"
    ),
    ("jax", "jit"): "JAX",
    ("tensorflow", "xla"): r"TensorFlow/Keras's XLA compilation of \texttt{tf.function(jit\_compile=True)}",
}


def _compile_text(variants: list[tuple[str, str]]) -> str:
    compiled = [COMPILE_TEXT[v] for v in variants if v in COMPILE_TEXT]
    eager = ["none in eager PyTorch"] if (BASELINE, "eager") in variants else []
    return "; ".join(compiled + eager)


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


def mode_gain_text(frame: pd.DataFrame) -> str:
    """One sentence on the frameworks trained in an eager and a compiled mode: the compiled run's speed in multiples
    of the eager one's, per model and batch, with its compile time apart ("" without such a framework)."""
    gains = mode_gains(frame)
    parts = [
        f"{escape(model_in_text(row.model))} at batch {int(row.batch_size)}: {number(row.time_s)}~s against "
        f"{number(row.eager_time_s)}~s eagerly, {number(row.gain)}$\\times$ the eager speed, with "
        f"{number(row.compile_s)}~s of compilation apart"
        for row in gains.itertuples()
    ]
    if not parts:
        return ""
    names = join_words([label(f) for f in ordered_frameworks(gains["framework"])])
    return f"Compiled, {names} trained {'; '.join(parts)} (one run each, so no interval)."


def _modes_text(frame: pd.DataFrame, agreement: pd.DataFrame | None) -> str:
    """What the execution modes are, where a framework trains in more than one: how each mode runs the step, that
    every mode is a cell of its own, the compiled step's step-0 agreement with the eager one, and its gain."""
    frame = with_modes(frame)
    variants = ordered_variants(zip(frame["framework"], frame["mode"], strict=True))
    several = multi_mode(variants)
    if not several:
        return ""
    names = frame_names(frame)
    described = [
        f"{label(f)} trains in {_count_word(len([v for v in variants if v[0] == f]))} modes, "
        + join_words([escape(DESCRIPTIONS.get((f, m), mode_label(m))) for g, m in variants if g == f])
        for f in ordered_frameworks(several)
    ]
    named = join_words([f"``{names[v]}''" for v in variants if v[0] in several])
    step0 = compiled_step0_text(agreement)
    return (
        f" {'; '.join(described)}: each mode is a cell of its own, named in every table and figure ({named})."
        + (f" {step0}" if step0 else "")
        + (f" {gain}" if (gain := mode_gain_text(frame)) else "")
    )


def _layout_text(frame: pd.DataFrame) -> str:
    """Which layout each framework's batches come in, read from the cells (" (NCHW for PyTorch, NHWC for ...)"),
    or nothing for a table from before the cells recorded it."""
    if "input_layout" not in frame or frame["input_layout"].isna().all():
        return ""
    cells = frame.dropna(subset=["input_layout"]).drop_duplicates("framework")
    by_layout: dict[str, list[str]] = {}
    for framework in ordered_frameworks(cells["framework"]):
        layout = cells.loc[cells["framework"] == framework, "input_layout"].iloc[0]
        by_layout.setdefault(str(layout), []).append(label(framework))
    return " (" + ", ".join(f"{escape(layout)} for {join_words(names)}" for layout, names in by_layout.items()) + ")"


def _twins_text(frameworks: list[str]) -> str:
    """The model libraries of the frameworks other than PyTorch (the label's part after the slash: Flax, Keras)."""
    libraries = [label(f).split("/")[-1] for f in frameworks if f != BASELINE and "/" in label(f)]
    return f"the same average in the {join_words(libraries)} twins" if libraries else "the same average elsewhere"


def _step0_caption(compared: list[tuple[str, str]]) -> str:
    what = (
        f"relative {variant_short(*compared[0])}--PyTorch differences"
        if len(compared) == 1
        else "relative differences of each framework from PyTorch"
        + (" (compiled PyTorch: from eager PyTorch)" if (BASELINE, "compile") in compared else "")
    )
    return f"Step-0 agreement: {what} on the first batch."


# The marks of the step-0 table (fwbench.analysis.training.tables.step0_table), explained under it.
STEP0_NOTE = (
    r"$\Delta$: relative differences; $^\ast$: in fp32, the loss after the step differs by more than $10^{-3}$ and "
    r"by more than three times PyTorch's own fp32-against-float64 difference; $^{d}$: the two cells ran with "
    r"different workarounds from the fallback ladder (Section~\ref{sec:failures})."
)
# The marks and columns of the two training tables that need words (fwbench.analysis.training.tables).
TIME_NOTE = (
    r"s/epoch: the mean time per epoch; img/s: the steady state of the last epoch ($^w$: the cell spent more than 5\% "
    r"of its step time waiting for data); RSS max: peak host memory; to target: the time to the target top-1 "
    r"(training plus recalibration). $^{d}$: the cell ran with a workaround from the fallback ladder "
    r"(Section~\ref{sec:failures}). Loss and accuracy: Table~\ref{tab:training-accuracy}."
)
ACCURACY_NOTE = (
    r"Loss: the final training loss. Top-1/top-5: validation, in eval mode as inference runs, with the BatchNorm "
    r"statistics the recipe delivers (recalibrated where it recalibrates); top-1$^r$: with the running statistics "
    r"training left behind; top-1$^b$: with each batch's own statistics (a diagnostic: where it is far above "
    r"top-1$^r$, the running statistics have not caught up with the weights). $^{d}$: the cell ran with a workaround "
    r"from the fallback ladder (Section~\ref{sec:failures})."
)


def training_section(
    frame: pd.DataFrame | None,
    agreement: pd.DataFrame | None,
    include_deviating: bool = False,
    published: pd.DataFrame | None = None,
) -> str:
    """The paper's training section, or one sentence when the study has no training suite (so the paper compiles
    for any config without stale figures). Every framework of the training table is named; with `published` (the
    reference's L4 rows, `reference.read_published`) the small-CNN cells are set beside them."""
    if frame is None:
        return (
            "\\section{Training}\n\\label{sec:training}\n"
            "This study has no training suite (\\texttt{suites} in its config).\n"
        )
    defs = training_macros(frame, agreement, include_deviating)
    frameworks = ordered_frameworks(frame["framework"])
    variants = ordered_variants(zip(with_modes(frame)["framework"], with_modes(frame)["mode"], strict=True))
    compared = agreement_variants(agreement)
    two = len(frameworks) == 2
    body = [
        r"\section{Training}",
        r"\label{sec:training}",
        f"{_frameworks_subject(frameworks)} {_model_list(sorted(frame['model'].unique()))} from the same "
        "converted weights on the same batches in the same order (the shared loader), with the same recipe: "
        "cross-entropy, Adam with identical hyperparameters "
        f"and the same learning rate at every step (computed once and passed to {'both' if two else 'each'}). "
        f"{defs['fwbNumTrainOk']} of {defs['fwbNumTrainCells']} training cells completed "
        f"{defs['fwbTrainEpochs']} epochs ({defs['fwbTrainTime']}~s of training in all); Tables~\\ref{{tab:training}} "
        "and~\\ref{tab:training-accuracy} give each cell's time, cost, loss and accuracy, and Fig.~\\ref{fig:training} "
        "its loss and accuracy curves. "
        "On the first batch, with dropout and stochastic depth off, each framework records its loss, gradient norm "
        "and the loss after one optimiser step (Table~\\ref{tab:step0}); the largest relative difference of the "
        f"loss after the step is {defs['fwbStepZeroMaxDiff']}{_by_framework(defs, compared, 'step zero max diff')}. "
        "PyTorch also runs the probe in float64: the "
        "difference between its own fp32 and float64 results is the yardstick for fp32 rounding (Adam's first step "
        "moves every parameter by about the learning rate whatever the size of its gradient, so ill-conditioned "
        "gradients, as in randomly initialised BatchNorm networks, amplify rounding), and a pair is flagged $^\\ast$ "
        f"when {'the frameworks differ' if len(compared) < 2 else 'a framework differs from PyTorch'} by more than "
        "$10^{-3}$ and by more than three times that yardstick "
        f"({defs['fwbStepZeroFlagged']} fp32 pairs). {_top1_text(defs, compared, frameworks)}{_deviation_text(defs)}"
        f"{_modes_text(frame, agreement)} "
        "Beyond the first step, "
        "training amplifies fp32 rounding differences, so short runs from scratch can end several points apart even "
        "within one framework when only the rounding changes (another thread count, or starting weights moved by "
        "one ulp); \\texttt{benchmarks/rounding\\_control.py} measures that spread, the yardstick for this gap. "
        "Throughput excludes the first "
        f"steps of each epoch. Compile time is one measure for {'both frameworks' if two else 'every framework'}: "
        "for every function a cell runs (train step, evaluation, recalibration, step-0 probe), its ahead-of-time "
        f"compilation ({_compile_text(variants)}) plus its first call's time beyond a steady-state call, taken "
        f"before the first timed step. Each framework receives batches in its own layout{_layout_text(frame)}, "
        "transposed by the shared loader's threads, so no layout change falls inside a timed step. RSS max is the "
        "peak over the training window without the checkpoint writes (sampled every 250~ms inside the step loops); "
        "$^w$ marks cells that spent more than 5\\% of their step time waiting for data. "
        + _recalibration_text(defs["fwbBnRecalBatches"], _twins_text(frameworks), _without_batch_norm(frame)),
        "",
        *_curves_figure(wide=frame["model"].nunique() > 2),
        DETAIL_MARK,
        *table_float(
            "Training time and cost per cell: time per epoch, throughput, compile time, energy per epoch, peak host "
            "memory and time to the target top-1.",
            "tab:training",
            training_table(frame, "time"),
            [TIME_NOTE],
        ),
        "",
        *table_float(
            "Training loss and accuracy per cell: final training loss, validation top-1 and top-5, and top-1 under "
            "the running and under each batch's BatchNorm statistics.",
            "tab:training-accuracy",
            training_table(frame, "accuracy"),
            [ACCURACY_NOTE],
        ),
        "",
        *([comparison_section(frame, published).rstrip(), ""] if published is not None else []),
        *table_float(
            _step0_caption(compared or [(f, primary(f)) for f in others(frameworks)]),
            "tab:step0",
            step0_table(agreement) if not agreement.empty else _no_pairs_text(frameworks),
            [STEP0_NOTE],
            setup=[r"\setlength{\tabcolsep}{3.5pt}"],  # with 8 pt text: ten columns fit the page unscaled
        ),
    ]
    return "\n".join(body) + "\n"


def _no_pairs_text(frameworks: list[str]) -> str:
    if len(frameworks) == 2:
        return "No cell pair completed in both frameworks."
    return "No cell completed both in PyTorch and in another framework."
