"""Conclusions and limitations, generated: every statement is chosen from the results and carries its uncertainty,
and its words are the template's (report/templates/conclusions.tex.j2), which an author rewords without touching
Python.

A reader should not meet "JAX is faster" where the data say "slower on five of eight comparisons, faster on three".
So the section restates the abstract's findings per framework pair and model family (fwbench.analysis.paper.headline:
resolved comparisons each way after adjustment within the pair, the typical ratio and range, the largest difference
with its simultaneous interval and the op profile's reason), says that a ratio depends on the batch size only where a
test of the difference between two batch sizes resolves it (findings.batch_effects), states the training comparison
as measured, the published comparison and the fairness controls that did not hold, and lists what the study lacked
(fwbench.analysis.paper.limitations). This module gathers those values; the template decides the order and words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from fwbench.analysis.common.verdicts import multiplicity_setting
from fwbench.analysis.fairness.ledger import ledger_counts
from fwbench.analysis.inference.ratio_macros import include_deviating
from fwbench.analysis.inference.summary import multiplicity_of, refused
from fwbench.analysis.paper.findings import batch_effects, placement, training_findings
from fwbench.analysis.paper.headline import headline
from fwbench.analysis.paper.limitations import limitations
from fwbench.analysis.paper.templates import render
from fwbench.analysis.published.counts import published_counts, published_modes


def conclusions_section(
    *,
    ratios: pd.DataFrame,
    inference: pd.DataFrame,
    epochs: pd.DataFrame | None,
    agreement: pd.DataFrame | None,
    published: pd.DataFrame,
    ledger: pd.DataFrame,
    config: Mapping[str, Any],
    profile: pd.DataFrame | None = None,
) -> str:
    """The paper's closing section (report/templates/conclusions.tex.j2): the abstract's findings per framework
    pair, the batch-size dependence, training, the published comparison, the ledger, then the limitations."""
    frameworks = list(config["frameworks"])
    # the ratios the abstract counts (between cells with different workarounds left out unless the configuration
    # counts them), so that the two agree
    study = headline(ratios, inference, profile, frameworks, include_deviating=include_deviating(dict(config)))
    kept = ratios[~refused(ratios)] if "ratio" in ratios else ratios
    method = multiplicity_of(kept, multiplicity_setting(config.get("analysis")))
    trained = "training" in config.get("suites", [])
    target = (config.get("training") or {}).get("target_top1")
    training = training_findings(epochs, agreement, target, config) if trained else None
    values = {
        "study": study,
        "batch": batch_effects(kept, frameworks, method),
        "placement": placement(ratios),
        "training": training,
        "trained_nothing": trained and training is None,
        "published": published_counts(published),
        "published_modes": published_modes(published),
        # the controls that did not hold, by name (the full ledger is an appendix)
        "ledger": ledger_counts(ledger),
        "limits": limitations(inference, epochs, published, ledger, config),
    }
    return render("conclusions.tex.j2", values) + "\n"
