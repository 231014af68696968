"""The training section's floats, for every framework the study trains: the curves figure (the body's), and the
appendix's tables (time and cost, loss and accuracy, the small-CNN cells beside the published reference
(fwbench.analysis.training.reference), the step-0 agreement), each with its caption and the note under it. The
section's prose is the templates' (report/templates/training.tex.j2 and training_detail.tex.j2, from
fwbench.analysis.training.findings and method), set around these floats by fwbench.analysis.paper.training_section.

Every cell is a (framework, execution mode) variant (fwbench.study.modes): the tables and the figure name each mode
where a framework trains in more than one."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.common.latex import BASELINE, figure_float, ordered_frameworks, others, table_float, variant_short
from fwbench.analysis.training.reference import comparison_float
from fwbench.analysis.training.step0 import agreement_variants
from fwbench.analysis.training.tables import step0_table, training_table
from fwbench.study.modes import primary


def curves_figure(wide: bool) -> list[str]:
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


def detail_floats(frame: pd.DataFrame, agreement: pd.DataFrame, published: pd.DataFrame | None = None) -> list[str]:
    """The appendix's tables, line by line: time and cost, loss and accuracy, the small-CNN cells beside the
    published reference (with `published`: the reference's L4 rows, `reference.read_published`), and the step-0
    agreement (or the reason it has no row)."""
    frameworks = ordered_frameworks(frame["framework"])
    compared = agreement_variants(agreement)
    return [
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
        *([*table, ""] if published is not None and (table := comparison_float(frame, published)) else []),
        *table_float(
            _step0_caption(compared or [(f, primary(f)) for f in others(frameworks)]),
            "tab:step0",
            step0_table(agreement) if not agreement.empty else _no_pairs_text(frameworks),
            [STEP0_NOTE],
            setup=[r"\setlength{\tabcolsep}{3.5pt}"],  # with 8 pt text: ten columns fit the page unscaled
        ),
    ]


def _no_pairs_text(frameworks: list[str]) -> str:
    if len(frameworks) == 2:
        return "No cell pair completed in both frameworks."
    return "No cell completed both in PyTorch and in another framework."
