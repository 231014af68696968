"""The sentence counting failed and worked-around cells over every suite, in its template's words
(report/templates/failure_summary.tex.j2): \\fwbFailureSummary in the setup and the method, and the opening of the
failures section. The counts are the failures section's (fwbench.analysis.failures.report.FailureCounts); rendering
sits here, on the paper's floor, where the templates are.
"""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.failures.report import failure_tally, study_cells
from fwbench.analysis.paper.templates import render


def failure_summary(frame: pd.DataFrame, training: pd.DataFrame | None = None) -> str:
    """One sentence (LaTeX): how many cells of every suite failed, by kind, and how many ran with a workaround."""
    return render("failure_summary.tex.j2", {"failures": failure_tally(study_cells(frame, training))})
