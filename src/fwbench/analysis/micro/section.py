"""The paper's micro-benchmarks section (`micro_section`): the question it asks, the method paragraph (what is timed,
in which execution mode, how, on which threads, how the output is checked, and how times, speedups, intervals and
crossovers are defined for the trials this study has), the figure, the tables, and the results paragraphs
(fwbench.analysis.micro.results); one sentence when the study has no micro suite.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from fwbench.analysis.common.detail import DETAIL_MARK
from fwbench.analysis.common.latex import escape, figure_float, number
from fwbench.analysis.common.latex import table_float as page_table
from fwbench.analysis.micro.analysis import MicroAnalysis
from fwbench.analysis.micro.figure import framework_order
from fwbench.analysis.micro.reference import REFERENCE_GPU
from fwbench.analysis.micro.results import comparison_text, results
from fwbench.analysis.micro.tables import (
    CROSSOVER_CAPTION,
    CROSSOVER_NOTE,
    ci_scopes,
    crossover_names,
    crossover_table,
    micro_caption,
    micro_label,
    micro_note,
    micro_table,
    micro_variants,
    of,
)
from fwbench.analysis.micro.text import and_list, cell_counts, counted, distinct, int_text, joined_text, plural, sci
from fwbench.analysis.micro.vocabulary import (
    BETWEEN_PROCESSES,
    NUMPY,
    PAIRED,
    WITHIN,
    frame_modes,
    is_measured,
    label,
    mode_names,
    row_modes,
)
from fwbench.study.modes import DESCRIPTIONS, is_compiled


def _intro(analysis: MicroAnalysis) -> str:
    published = analysis.published
    low, high = int(published["batch_size"].min()), int(published["batch_size"].max())
    return (
        f"A published report timed matrix and neural-network operations on an {REFERENCE_GPU} machine at batch "
        f"sizes {low} to {high} for NumPy, PyTorch (CPU and CUDA) and JAX, and read off the batch size from which "
        "each framework beats NumPy. This section asks the same question of this study's machine: from which "
        "batch size does each framework compute faster than plain NumPy, and with what confidence?"
    )


def _operations_text(frame: pd.DataFrame) -> str:
    described = {
        "matmul": r"\texttt{matmul}, the product of a $b \times d$ batch with a $d \times d$ matrix",
        "mlp": r"\texttt{mlp}, inference of a fixed multilayer perceptron $d \to h \to d \to c$ with ReLU",
    }
    operations = sorted(set(frame["operation"]))
    parts = [described.get(o, rf"\texttt{{{escape(o)}}}") for o in operations]
    sizes = rf"$d = {int_text(distinct(frame['dim']))}$"
    if "mlp" in operations:
        sizes += rf", $h = {int_text(distinct(frame['hidden']))}$, $c = {int_text(distinct(frame['classes']))}$"
    batches = and_list([str(int(b)) for b in sorted(set(frame["batch_size"]))])
    total, ok, _ = cell_counts(frame)
    return (
        f"\\paragraph{{Method}} {counted(len(operations), 'operation').capitalize()} "
        f"{'is' if len(operations) == 1 else 'are'} "
        f"timed: {'; '.join(parts)}; with {sizes}, at batch sizes $b$ = {batches} ({ok} of "
        f"{plural(total, 'cell')} succeeded). The weights are generated once from the study's seed and every "
        "framework reads the same weight and input bytes."
    )


def _timing_text(frame: pd.DataFrame) -> str:
    compiled = frame[frame["compile_s"].map(is_measured)].drop_duplicates("path")
    names = mode_names(frame_modes(frame))
    text = (
        " Every framework, NumPy included, is timed per call on inputs and weights already on its device, each call "
        "followed by a synchronise: the wall clock of the call, Python dispatch included, for every framework alike."
    )
    for (framework, mode), rows in compiled.groupby(["framework", row_modes(compiled)]):
        seconds = rows["compile_s"].astype(float)
        text += (
            f" {escape(names[(framework, mode)])} compiles before the timed calls, on the exact shapes timed; its "
            f"compile time is reported apart and never timed (median {number(seconds.median())}~s per cell, at most "
            f"{number(seconds.max())}~s)."
        )
    if (frame["variant"] == "transfer").any():
        text += (
            r" The \emph{with copy} variant times the host-to-device copy of the input batch followed by the call "
            "(the weights stay resident): the closest analogue of what the reference probably timed. NumPy computes "
            "on the host, so its time per call is the baseline of both variants."
        )
    else:
        text += " The variant with the host-to-device copy of the input batch was not measured in this study."
    return text


def _threads_text(frame: pd.DataFrame) -> str:
    numpy_rows = frame[frame["framework"] == NUMPY]
    if numpy_rows.empty:
        return " This study has no NumPy cell: no speedup can be computed."
    others = [
        f"{escape(label(f))} {int_text(distinct(frame.loc[frame['framework'] == f, 'threads']))}"
        for f in framework_order(frame["framework"])
        if f != NUMPY
    ]
    pools = f" (the frameworks' own pools: {', '.join(others)})" if others else ""
    return (
        f" Threadpoolctl pins NumPy's BLAS ({joined_text(distinct(numpy_rows['blas']))}) to "
        f"{int_text(distinct(numpy_rows['threads']))} threads{pools}."
    ) + _forced_core_text(numpy_rows)


def _forced_core_text(numpy_rows: pd.DataFrame) -> str:
    """One sentence where the NumPy baseline ran under a forced OpenBLAS core type (the machine sets it; the study
    records it and never changes it), since it slows current NumPy and so favours every framework; else nothing."""
    forced = distinct(numpy_rows["blas_core_type"]) if "blas_core_type" in numpy_rows else []
    if not forced:
        return ""
    values = " / ".join(escape(f"OPENBLAS_CORETYPE={value}") for value in forced)
    return (
        f" NumPy ran under {values}, a BLAS core type this machine forces, which slows current NumPy and so "
        "flatters every speedup over it; the study records the setting and does not change it."
    )


def _agreement_text(frame: pd.DataFrame) -> str:
    errors = [
        f"{sci(rows['max_rel_error'].max())} for {escape(name)}"
        for (f, m), name in mode_names(frame_modes(frame)).items()
        if (rows := of(frame, f, m))["max_rel_error"].notna().any()
    ]
    if not errors:
        return ""
    bounds = " / ".join(sci(v) for v in distinct(frame["error_bound"])) or "not recorded"
    return (
        " Before any call is timed, each cell's output is compared with NumPy in float64 on the same float32 "
        f"operands: the largest relative error is {and_list(errors)} (bound {bounds})."
    )


def _statistics_text(analysis: MicroAnalysis) -> str:
    """How times, speedups, their intervals and the crossovers are defined, for the trials this study has."""
    frame, scopes = analysis.frame, ci_scopes(analysis.speedups)
    trials = distinct(frame["trials"])
    processes = "one fresh process (one trial)" if trials == [1] else f"{int_text(trials)} fresh processes (trials)"
    text = (
        f" Each cell runs in {processes}; the cells of one operation, precision and batch size run as one job, in "
        "rounds of one trial of every framework and NumPy. A cell's time per call is the geometric mean of its "
        "trials' medians (one trial: its median), and the speedup is NumPy's time per call over the framework's at "
        "the same operation, precision and batch size."
    )
    if scopes & set(BETWEEN_PROCESSES):
        paired = (
            "the geometric mean of the per-round ratios of the trials' medians, NumPy's and the framework's trial of "
            r"the same round paired, with a Student-t 95\% CI on their logs (rounds $-$ 1 degrees of freedom)"
            if PAIRED in scopes
            else r"the ratio of the trials' geometric means with a Welch t 95\% CI"
        )
        text += (
            f" With several trials the process is the unit, as in the inference suite: the speedup is {paired}; "
            "bold and ``faster'' or ``slower'' mean that this interval lies above or below 1 and that the test of "
            "speedup 1 resolves it after the study's adjustment for multiple comparisons within each framework's "
            "family (every operation, variant and batch size against NumPy; Section~\\ref{sec:verdicts})."
        )
    if WITHIN in scopes:
        text += (
            rf" With one trial, the speedup's 95\% CI is a percentile bootstrap of that process's samples "
            f"({analysis.resamples} resamples): it leaves out the variation between processes, so it resolves no "
            "difference and no crossover, and none is claimed from it."
        )
    text += (
        " The crossover is defined as for the reference, from the point estimates: the smallest measured batch size "
        "from which the speedup stays above 1 at every larger measured batch size (no interpolation between batch "
        "sizes), ``never'' when it is not above 1 at the largest."
    )
    if scopes & set(BETWEEN_PROCESSES):
        text += (
            r" Its 95\% interval comes from resampling the whole series: each batch size's log speedup is redrawn "
            f"from its t interval over processes, the batch sizes independently ({analysis.resamples} series), and "
            r"the interval runs from the 2.5\% to the 97.5\% quantile of the resampled crossovers."
        )
    return text


def _precision_text(frame: pd.DataFrame) -> str:
    others = sorted(set(frame["precision"]) - {"fp32"})
    if not others:
        return ""
    return (
        f" NumPy has no {' or '.join(map(escape, others))} arithmetic: at every precision label its cell computes in "
        f"float32, so a {escape(others[0])} speedup compares a framework in {escape(others[0])} with NumPy in float32."
    )


def _modes_text(frame: pd.DataFrame) -> str:
    """What each framework's mode is, since a speedup over NumPy (which calls its routines one by one) folds in
    whatever a compiler gains: each series is named with its mode where its framework has several."""
    pairs = [pair for pair in frame_modes(frame) if pair[0] != NUMPY]
    if not pairs:
        return ""
    described = [f"{escape(label(f))} {escape(DESCRIPTIONS.get((f, m), m))}" for f, m in pairs]
    compiled = [pair for pair in pairs if is_compiled(pair[1])]
    return (
        f" Each framework runs in its execution mode: {and_list(described)}"
        + (
            "; NumPy calls its routines eagerly, so the speedups of compiled modes include what their compiler gains"
            if compiled
            else ""
        )
        + "."
    )


def _method(analysis: MicroAnalysis) -> str:
    frame = analysis.frame
    return (
        _operations_text(frame)
        + _modes_text(frame)
        + _timing_text(frame)
        + _threads_text(frame)
        + _agreement_text(frame)
        + _statistics_text(analysis)
        + _precision_text(frame)
    )


# with 8 pt text the widest table (crossovers, with a mode in its framework names) fits the page unscaled
TABLE_SPACING = (r"\setlength{\tabcolsep}{3.5pt}",)


def table_float(caption: str, label_: str, body: str, notes: Sequence[str] = ()) -> list[str]:
    """A page-wide table of the section, set as its widest table needs, its note under it."""
    return page_table(caption, label_, body, notes, setup=TABLE_SPACING)


def _figure(figure: str) -> list[str]:
    return figure_float(
        figure,
        r"Micro-benchmarks against batch size, log-log: time per call (top) and speedup over NumPy (bottom) of each "
        r"framework and execution mode.",
        "fig:micro",
        [
            r"Bars: 95\% CIs (the speedups': over processes where the cells have several trials, else within one "
            r"process); dashed: with the host-to-device copy of the input batch; vertical dotted lines (dash-dotted "
            r"with the copy): crossovers of the point estimates, labelled with their batch size; hollow squares: the "
            rf"reference's published speedups on the {REFERENCE_GPU}; $\times$: a failed cell."
        ],
        wide=True,
    )


def micro_section(analysis: MicroAnalysis | None, figure: str = "micro") -> str:
    """The paper's micro-benchmarks section: method, figure, both tables, results and the published-vs-reproduced
    comparison with its caveats; one sentence when the study has no micro suite (`analysis` None)."""
    if analysis is None:  # one sentence, so the paper compiles for any config
        return (
            "\\section{Micro-benchmarks}\n\\label{sec:micro}\n"
            "This study has no micro suite (\\texttt{suites} in its config).\n"
        )
    body = [
        r"\section{Micro-benchmarks}",
        r"\label{sec:micro}",
        _intro(analysis),
        "",
        _method(analysis),
        "",
        *_figure(figure),
        "",
        r"\paragraph{Results} " + results(analysis),
        "",
        r"\paragraph{Published against reproduced} " + comparison_text(analysis),
        DETAIL_MARK,
        *[
            line
            for variant in micro_variants(analysis.frame)
            for line in table_float(
                micro_caption(variant),
                micro_label(variant),
                micro_table(analysis.frame, analysis.speedups, variant),
                [micro_note(analysis.frame, analysis.speedups)],
            )
        ],
        "",
        *table_float(
            CROSSOVER_CAPTION,
            "tab:micro-crossover",
            crossover_table(analysis.comparison),
            [CROSSOVER_NOTE + crossover_names(analysis.comparison)],
        ),
    ]
    return "\n".join(body) + "\n"
