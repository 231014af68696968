"""The micro suite's files below the paper (`write_micro_tables`): from the micro cells and the published reference,
the tables as CSV, the figure and the macros, each written atomically from one analysis
(fwbench.analysis.micro.analysis). The section's text is rendered a floor up, by
fwbench.analysis.paper.micro_section.write_micro_outputs, the entry point the workflow calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from fwbench.analysis.common.latex import define_macros
from fwbench.analysis.common.verdicts import DEFAULT_MULTIPLICITY
from fwbench.analysis.micro.analysis import MicroAnalysis, analyse_micro
from fwbench.analysis.micro.figure import micro_figure
from fwbench.analysis.micro.macros import micro_macros
from fwbench.io import atomic_write_text
from fwbench.trackers.stats import BOOTSTRAP_RESAMPLES

OUTPUT_KEYS = ("csv", "speedups", "crossovers", "macros", "pdf", "png")


def write_micro_tables(
    cell_paths: Iterable[str | Path],
    reference_csv: str | Path,
    *,
    outputs: Mapping[str, str | Path],
    resamples: int = BOOTSTRAP_RESAMPLES,
    multiplicity: str = DEFAULT_MULTIPLICITY,
) -> MicroAnalysis:
    """The micro cells' files below the paper, each written atomically: the tidy table (csv), the speedups, the
    crossovers beside the reference's (crossovers), the macros (LaTeX), and the figure (pdf, png; the section
    includes it by the pdf's base name); the analysis they come from, for the section."""
    lacking = [key for key in OUTPUT_KEYS if key not in outputs]
    if lacking:
        raise KeyError(f"write_micro_tables needs outputs {', '.join(lacking)}")
    analysis = analyse_micro(cell_paths, reference_csv, resamples=resamples, multiplicity=multiplicity)
    atomic_write_text(outputs["csv"], analysis.frame.to_csv(index=False))
    atomic_write_text(outputs["speedups"], analysis.speedups.to_csv(index=False))
    atomic_write_text(outputs["crossovers"], analysis.comparison.to_csv(index=False))
    micro_figure(
        analysis.frame, analysis.speedups, analysis.crossovers, analysis.published, outputs["pdf"], outputs["png"]
    )
    atomic_write_text(outputs["macros"], define_macros(micro_macros(analysis)))
    return analysis
