"""The micro-benchmarks section's floats: the figure (the body's, `micro_figure_float`) and the appendix's tables
(each variant's times and speedups, the crossovers beside the reference's: `detail_tables`), each with its caption
and the note under it. The section's prose is the templates' (report/templates/micro.tex.j2 and
micro_detail.tex.j2, from fwbench.analysis.micro.findings and details), set around these floats by
fwbench.analysis.paper.micro_section.
"""

from __future__ import annotations

from collections.abc import Sequence

from fwbench.analysis.common.latex import figure_float
from fwbench.analysis.common.latex import table_float as page_table
from fwbench.analysis.micro.analysis import MicroAnalysis
from fwbench.analysis.micro.reference import REFERENCE_GPU
from fwbench.analysis.micro.tables import (
    CROSSOVER_CAPTION,
    CROSSOVER_NOTE,
    crossover_names,
    crossover_table,
    micro_caption,
    micro_label,
    micro_note,
    micro_table,
    micro_variants,
)

# with 8 pt text the widest table (crossovers, with a mode in its framework names) fits the page unscaled
TABLE_SPACING = (r"\setlength{\tabcolsep}{3.5pt}",)


def table_float(caption: str, label_: str, body: str, notes: Sequence[str] = ()) -> list[str]:
    """A page-wide table of the section, set as its widest table needs, its note under it."""
    return page_table(caption, label_, body, notes, setup=TABLE_SPACING)


def micro_figure_float(figure: str) -> list[str]:
    """The body's figure, the graphic `figure` (the pdf's base name) across the page."""
    return figure_float(
        figure,
        r"Micro-benchmarks against batch size, log-log: time per call (top) and speedup over NumPy (bottom) of each "
        r"framework and execution mode.",
        "fig:micro",
        [
            r"Bars: 95\% CIs, over processes where the cells have several trials, else within one process. Dashed: "
            r"with the host-to-device copy of the input batch. Vertical dotted lines (dash-dotted with the copy): "
            r"crossovers of the point estimates, labelled with their batch size. Hollow squares: the reference's "
            rf"published speedups on the {REFERENCE_GPU}; $\times$: a failed cell."
        ],
        wide=True,
    )


def detail_tables(analysis: MicroAnalysis) -> list[str]:
    """The appendix's tables: each variant's times and speedups, then the crossovers beside the reference's."""
    lines = [
        line
        for variant in micro_variants(analysis.frame)
        for line in table_float(
            micro_caption(variant),
            micro_label(variant),
            micro_table(analysis.frame, analysis.speedups, variant),
            [micro_note(analysis.frame, analysis.speedups)],
        )
    ]
    return [
        *lines,
        "",
        *table_float(
            CROSSOVER_CAPTION,
            "tab:micro-crossover",
            crossover_table(analysis.comparison),
            [CROSSOVER_NOTE + crossover_names(analysis.comparison)],
        ),
    ]
