"""Conclusions and limitations, generated: every sentence is chosen from the results and carries its uncertainty.

A reader should not meet "JAX is faster" where the data say "faster in 2 of 10 pairs, slower in 4, a geometric mean
ratio of 1.02 [0.64, 1.39]". So the summary counts resolved pairs each way (the verdicts adjusted within each
framework pair, fwbench.analysis.common.verdicts), gives the geometric mean of the ratios with an interval that takes
the model as the unit, names the largest resolved difference with its simultaneous interval, says that a ratio depends
on the batch size only where a test of the difference between two batch sizes resolves it, and states the training
comparison (step-0 agreement, time per epoch, time to the target accuracy) as measured. The limitations paragraph
lists what this study lacked, read from the same results: the device, the number of trials, the resolution, the
data, missing energy or memory with the recorded reason, failed and noisy cells, and how far published figures
could be compared.

Every ratio names the execution modes it pairs (fwbench.study.modes): each framework's ratio mode (compiled by default)
where both cells exist, and where one side's cell in that mode is missing its first mode stands in; a ratio that then
sets an eager program against a compiled one says so in the sentence that counts it.

The sentences of the findings are `fwbench.analysis.paper.findings`, the limitations
`fwbench.analysis.paper.limitations`; this module writes the section from them, with the published comparison's and
the ledger's sentences, so that the section's order and paragraphs change here alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from fwbench.analysis.common.verdicts import multiplicity_setting
from fwbench.analysis.fairness.ledger import ledger_sentence
from fwbench.analysis.inference.ratio_macros import eager_family, summary_ratios
from fwbench.analysis.inference.summary import refused
from fwbench.analysis.paper.findings import inference_sentences, placement_sentence, training_sentences
from fwbench.analysis.paper.limitations import limitations
from fwbench.analysis.published.section import modes_sentence as published_modes
from fwbench.analysis.published.section import summary_sentence as published_sentence


def conclusions_section(
    *,
    ratios: pd.DataFrame,
    inference: pd.DataFrame,
    epochs: pd.DataFrame | None,
    agreement: pd.DataFrame | None,
    published: pd.DataFrame,
    ledger: pd.DataFrame,
    config: Mapping[str, Any],
) -> str:
    """The paper's closing section: results summary, training, published comparison, ledger, then limitations."""
    target = (config.get("training") or {}).get("target_top1")
    # The ratios the paper's summary figures count (those between cells with different workarounds left out unless
    # the configuration counts them), so that these sentences and the abstract agree.
    kept = summary_ratios(ratios, dict(config))[0]
    eager = eager_family(ratios, dict(config))  # pairs without a compiled PyTorch cell: a family of their own
    setting = multiplicity_setting(config.get("analysis"))
    summary = inference_sentences(kept, list(config["frameworks"]), ratios[~refused(ratios)], setting, eager)
    summary += [sentence for sentence in [placement_sentence(ratios)] if sentence]
    trained = "training" in config.get("suites", [])
    training = training_sentences(epochs, agreement, target, config) if trained else []
    # the controls that did not hold, by name (the full ledger is an appendix): a reader weighs the ratios by what
    # failed, not by how many rows held
    ledger_text = ledger_sentence(ledger)
    items = limitations(inference, epochs, published, ledger, config)
    limits = (
        "This study has these limitations: " + "; ".join(items) + "."
        if items
        else "The study records no limitation of the kinds it checks."
    )
    return (
        "\n\n".join(
            [
                r"\section{Conclusions and limitations}",
                r"\label{sec:conclusions}",
                r"\paragraph{Inference} " + " ".join(summary),
                *([r"\paragraph{Training} " + " ".join(training)] if training else []),
                r"\paragraph{Against published figures} "
                + " ".join(filter(None, [published_sentence(published), published_modes(published), ledger_text])),
                r"\paragraph{Limitations} " + limits,
            ]
        )
        + "\n"
    )
