"""The inference text of the paper, in its templates' words: the Results' findings (results/tables/
inference_results.tex, report/templates/inference_results.tex.j2) and the method's sentence on what ran in which
mode (\\fwbModesSentence, report/templates/modes.tex.j2).

The values come from the inference section (fwbench.analysis.inference.findings and .mode_macros), which hands over
numbers, verdicts and display names; rendering sits here, on the paper's floor, where the templates are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from fwbench.analysis.inference.findings import inference_results
from fwbench.analysis.inference.mode_macros import mode_uses
from fwbench.analysis.paper.templates import render


def inference_results_section(
    frame: pd.DataFrame, ratios: pd.DataFrame, gains: pd.DataFrame | None, config: Mapping[str, Any]
) -> str:
    """The Results/Inference subsection's findings: per framework pair against each PyTorch, what was left out of
    the counts, the highest throughput, then a paragraph on the compiled-over-eager gain."""
    return render("inference_results.tex.j2", {"results": inference_results(frame, ratios, gains, config)}) + "\n"


def modes_sentence(frame: pd.DataFrame) -> str:
    """The method's sentence naming what ran in which mode, frameworks that ran alike together."""
    return render("modes.tex.j2", {"uses": mode_uses(frame)})
