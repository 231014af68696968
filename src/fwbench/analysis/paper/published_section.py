"""The paper's published-vs-reproduced section (results/tables/published_section.tex), in the words of
report/templates/published.tex.j2, which an author rewords without touching Python.

The values are fwbench.analysis.published.section's (counts, verdicts, display names, the tables as LaTeX); they are
rendered here, on the paper's floor, because the templates are the paper's: a section's package hands numbers up and
never imports the paper. What is LaTeX already (a table's or the figure's label) is marked so here; the tables and
the figure follow the prose as the published package writes them, line by line."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from fwbench.analysis.paper.templates import Latex, render
from fwbench.analysis.published.section import floats, section_values
from fwbench.analysis.published.sources import Source


def published_section(
    rows: pd.DataFrame, sources: list[Source], figure: str | None, margin: float | None = None
) -> str:
    """The section for the matched `rows` (matching.compare) of `sources`; `figure`: the figure's file stem (None:
    no figure); `margin`: the study's equivalence margin (the rows' where not given)."""
    values = section_values(rows, sources, figure, margin)
    values["sources"] = [replace(source, label=Latex(source.label)) for source in values["sources"]]
    values["figure"] = Latex(values["figure"])
    tables_and_figure = floats(rows, sources, figure)
    return render("published.tex.j2", values) + ("\n\n" + tables_and_figure if tables_and_figure else "") + "\n"
