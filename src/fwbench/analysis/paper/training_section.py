"""The paper's training section as the paper \\inputs it: the body's prose (report/templates/training.tex.j2) and
the curves figure, then, after the detail mark, the appendix's paragraphs on how training was measured and on the
published figures beside this study's (training_detail.tex.j2), and the full tables
(fwbench.analysis.training.section). The values come from fwbench.analysis.training.findings, method and
reference_findings; the words are the templates', which an author rewords without touching Python.

It sits on the paper's floor because rendering a template is the paper's job (fwbench.analysis.paper.templates): the
training package hands numbers, verdicts and display names up, never sentences. The conclusions repeat two of its
sentences, on compiled PyTorch, from the same values in the same words (training.j2's macros, which both import).
"""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.common.detail import DETAIL_MARK
from fwbench.analysis.paper.templates import render
from fwbench.analysis.training.findings import section_values
from fwbench.analysis.training.method import method_values
from fwbench.analysis.training.reference_findings import reference_values
from fwbench.analysis.training.section import curves_figure, detail_floats


def training_section(
    frame: pd.DataFrame | None,
    agreement: pd.DataFrame | None,
    include_deviating: bool = False,
    published: pd.DataFrame | None = None,
) -> str:
    """The paper's training section, or one sentence when the study has no training suite (so the paper compiles
    for any config without stale figures). Pairs whose cells ran with different workarounds are left out of the
    step-0 and top-1 findings unless `include_deviating`; with `published` (the reference's L4 rows,
    `reference.read_published`) the appendix sets the small-CNN cells beside them."""
    if frame is None:
        return render("training.tex.j2", {"trained": False}) + "\n"
    agreement = agreement if agreement is not None else pd.DataFrame()
    body = render("training.tex.j2", {"trained": True, **section_values(frame, agreement, include_deviating)})
    beside = reference_values(frame, published) if published is not None else None
    method = render("training_detail.tex.j2", {**method_values(frame), "reference": beside})
    lines = [
        body,
        "",
        *curves_figure(wide=frame["model"].nunique() > 2),
        DETAIL_MARK,
        method,
        "",
        *detail_floats(frame, agreement, published),
    ]
    return "\n".join(lines) + "\n"
