"""The paper's micro-benchmarks section as the paper \\inputs it: the body's prose (report/templates/micro.tex.j2)
and the figure, then, after the detail mark, the appendix's prose (micro_detail.tex.j2) and the full tables
(fwbench.analysis.micro.section); one sentence when the study has no micro suite. The values come from
fwbench.analysis.micro.findings and details; the words are the templates', which an author rewords without touching
Python.

It sits on the paper's floor because rendering a template is the paper's job (fwbench.analysis.paper.templates): the
micro package hands numbers, verdicts and display names up, never sentences. `write_micro_outputs` is the one entry
point the workflow calls: the micro package's files (fwbench.analysis.micro.outputs), then the section's two.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from fwbench.analysis.common.detail import DETAIL_MARK, split_detail
from fwbench.analysis.common.verdicts import DEFAULT_MULTIPLICITY
from fwbench.analysis.micro.analysis import MicroAnalysis
from fwbench.analysis.micro.details import micro_details
from fwbench.analysis.micro.findings import micro_findings
from fwbench.analysis.micro.outputs import write_micro_tables
from fwbench.analysis.micro.section import detail_tables, micro_figure_float
from fwbench.analysis.paper.templates import render
from fwbench.io import atomic_write_text
from fwbench.trackers.stats import BOOTSTRAP_RESAMPLES

DETAIL_HEADING, DETAIL_LABEL = "Micro-benchmarks in full", "app:micro"


def micro_section(analysis: MicroAnalysis | None, figure: str = "micro") -> str:
    """The body's section and its figure, the detail mark, then the appendix's text and tables
    (fwbench.analysis.common.detail.split_detail cuts the two apart); one sentence when the study has no micro
    suite (`analysis` None), so the paper compiles for any config."""
    if analysis is None:
        return render("micro.tex.j2", {"micro": None}) + "\n"
    body = render("micro.tex.j2", {"micro": micro_findings(analysis)})
    detail = render("micro_detail.tex.j2", {"detail": micro_details(analysis)})
    lines = [body, "", *micro_figure_float(figure), DETAIL_MARK, detail, "", *detail_tables(analysis)]
    return "\n".join(lines) + "\n"


def write_micro_outputs(
    cell_paths: Iterable[str | Path],
    reference_csv: str | Path,
    *,
    outputs: Mapping[str, str | Path],
    resamples: int = BOOTSTRAP_RESAMPLES,
    multiplicity: str = DEFAULT_MULTIPLICITY,
) -> MicroAnalysis:
    """Everything the workflow needs from the micro cells, each file written atomically: the micro package's
    tables, figure and macros (write_micro_tables), then the body's section (`section`) and the appendix's
    (`detail`)."""
    lacking = [key for key in ("section", "detail") if key not in outputs]
    if lacking:
        raise KeyError(f"write_micro_outputs needs outputs {', '.join(lacking)}")
    analysis = write_micro_tables(
        cell_paths, reference_csv, outputs=outputs, resamples=resamples, multiplicity=multiplicity
    )
    section = micro_section(analysis, figure=Path(outputs["pdf"]).stem)
    body, detail = split_detail(section, DETAIL_HEADING, DETAIL_LABEL)
    atomic_write_text(outputs["section"], body)
    atomic_write_text(outputs["detail"], detail)
    return analysis
