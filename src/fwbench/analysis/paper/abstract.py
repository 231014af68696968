"""The paper's abstract and the study's summary: the same findings, said the same way, in LaTeX for the paper
(report/templates/abstract.tex.j2) and in Markdown for the README and the HTML report's front page
(report/templates/summary.md.j2).

A practitioner who reads nothing else should learn, per framework pair, which framework is faster on which kind of
model and by how much, the one figure worth quoting with its interval and where it comes from, and what it was
measured on. The numbers are fwbench.analysis.paper.headline's; the words are the templates', which an author
rewords without touching Python. The abstract stays within MAX_WORDS by construction: a finding per pair and model
family, never per comparison, and where the verdicts take many words (a family with faster, slower and unresolved
comparisons: the default study measured on 2026-11-29 came to 157 words), details the paper's body gives are left
out, in a fixed order (`fitted`). tests/test_abstract.py holds the longest findings of the studies fwbench ships to it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pandas as pd

from fwbench.analysis.inference.ratio_macros import include_deviating as counts_deviating
from fwbench.analysis.paper.headline import Headline, headline
from fwbench.analysis.paper.templates import render

MAX_WORDS = 150


def words(text: str) -> int:
    """The words a reader counts in LaTeX text: commands and math markup dropped, a number (with its brackets) one
    word, and what is left of punctuation once the markup beside it is gone ("0.65$\\times$)," leaves ",") none."""
    plain = re.sub(r"\\[a-zA-Z]+(\{\})?|\$[^$]*\$|[{}~]", " ", text)
    return sum(1 for token in plain.split() if re.search(r"\w", token))


def shorter(study: Headline) -> Iterator[Headline]:
    """The study in full, then without the op profile's reason for each pair's largest difference (the profile
    section's), then also without each family's range and typical ratio (the results section's)."""
    yield study
    plain = dataclasses.replace(
        study,
        pairs=tuple(
            dataclasses.replace(p, largest=p.largest and dataclasses.replace(p.largest, reason=None))
            for p in study.pairs
        ),
    )
    yield plain
    yield dataclasses.replace(plain, spreads=False)


def fitted(study: Headline) -> Headline:
    """The first of `shorter`'s studies whose abstract is within MAX_WORDS, else the shortest (which the paper check
    then names as over the limit). The README's summary says the same, so it is fitted by the abstract's words."""
    for candidate in shorter(study):
        if words(render("abstract.tex.j2", {"study": candidate})) <= MAX_WORDS:
            break
    return candidate


def abstract(
    ratios: pd.DataFrame,
    inference: pd.DataFrame,
    profile: pd.DataFrame | None,
    frameworks: list[str],
    *,
    include_deviating: bool = False,
) -> str:
    """The abstract's text (LaTeX, one paragraph)."""
    study = fitted(headline(ratios, inference, profile, frameworks, include_deviating=include_deviating))
    return render("abstract.tex.j2", {"study": study})


def summary(
    ratios: pd.DataFrame,
    inference: pd.DataFrame,
    profile: pd.DataFrame | None,
    frameworks: list[str],
    measured: Mapping[str, str] | None = None,
    *,
    include_deviating: bool = False,
) -> str:
    """The same findings in Markdown (the README's summary, the HTML report's front page), with when, at which
    commit and in how long the study was measured (`measured`: date, commit, wall) where given."""
    study = fitted(headline(ratios, inference, profile, frameworks, include_deviating=include_deviating))
    return render("summary.md.j2", {"study": study, "measured": measured})


def abstract_from_tables(
    ratios: pd.DataFrame, inference: pd.DataFrame, profile: pd.DataFrame | None, config: Mapping[str, Any]
) -> str:
    counted = counts_deviating(dict(config))
    return abstract(ratios, inference, profile, list(config["frameworks"]), include_deviating=counted) + "\n"
