"""The paper's section "Where the time goes" as the paper \\inputs it (an appendix): its prose
(report/templates/profile.tex.j2, from fwbench.analysis.profile.findings), then the figure and the table
(fwbench.analysis.profile.section); one sentence where no cell was profiled, so the paper builds for any study.

It sits on the paper's floor because rendering a template is the paper's job (fwbench.analysis.paper.templates): the
profile package hands numbers, verdicts and display names up, never sentences. `write_profile_outputs` is the one
entry point the workflow calls: the profile package's files (fwbench.analysis.profile.outputs), then the section.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fwbench.analysis.paper.templates import render
from fwbench.analysis.profile.findings import profile_findings
from fwbench.analysis.profile.outputs import write_profile_tables
from fwbench.analysis.profile.section import profile_figure_float, profile_table_float
from fwbench.analysis.profile.tables import PANEL_KEYS, cell_rows
from fwbench.io import atomic_write_text


@dataclass(frozen=True)
class ProfileOutputs:
    """What `write_profile_outputs` wrote, as frames and text."""

    table: pd.DataFrame
    top: pd.DataFrame
    unmapped: pd.DataFrame
    section: str


def profile_section(
    table: pd.DataFrame,
    ratios: pd.DataFrame,
    unmapped: pd.DataFrame | None = None,
    figure: str = "op_profile",
    failed: list[tuple[dict[str, Any], str]] | None = None,
) -> str:
    """The section from the op-profile table (`tables.op_profile_table`), the speedups table and the unmapped names
    (`tables.op_profile_unmapped_table`); `figure`: the figure's base name for \\includegraphics; `failed`: (cell,
    reason) of the cells whose profiling failed (`tables.failed_profiles`). With no profiled cell, one sentence."""
    text = render("profile.tex.j2", {"profile": profile_findings(table, ratios, unmapped, failed)})
    if table.empty:
        return text + "\n"
    panels = len(cell_rows(table).drop_duplicates(PANEL_KEYS))
    floats = [*profile_figure_float(figure, panels), "", *profile_table_float(table)]
    return "\n".join([text, "", *floats]) + "\n"


def write_profile_outputs(
    cell_paths: Iterable[str | Path],
    inference_csv: str | Path | None,
    speedups_csv: str | Path | None,
    outputs: Mapping[str, str | Path],
) -> ProfileOutputs:
    """Every output of the section, each written atomically: the profile package's tables and figure
    (write_profile_tables), then the section (`section`). Either CSV may be None (a study without them): no timed
    median, no ratio to attribute."""
    if "section" not in outputs:
        raise KeyError("write_profile_outputs needs outputs section")
    written = write_profile_tables(cell_paths, inference_csv, speedups_csv, outputs)
    section = profile_section(
        written.table, written.ratios, written.unmapped, figure=Path(outputs["pdf"]).stem, failed=written.failed
    )
    atomic_write_text(outputs["section"], section)
    return ProfileOutputs(written.table, written.top, written.unmapped, section)
