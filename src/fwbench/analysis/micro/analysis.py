"""Every table the micro outputs are made from (`MicroAnalysis`), derived once from the cells and the published
reference (`analyse_micro`): the figure, the macros, the section and the written files all read the same tables.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fwbench.analysis.common.verdicts import DEFAULT_MULTIPLICITY
from fwbench.analysis.micro.cells import load_micro_cells
from fwbench.analysis.micro.crossovers import micro_crossovers
from fwbench.analysis.micro.frame import micro_frame
from fwbench.analysis.micro.reference import (
    compare_crossovers,
    published_crossovers,
    published_micro,
    reference_baselines,
    reference_flatness,
)
from fwbench.analysis.micro.speedups import micro_speedups
from fwbench.trackers.stats import BOOTSTRAP_RESAMPLES


@dataclass
class MicroAnalysis:
    """Every table the micro outputs are made from."""

    frame: pd.DataFrame
    speedups: pd.DataFrame
    crossovers: pd.DataFrame
    published: pd.DataFrame
    published_crossovers: pd.DataFrame
    comparison: pd.DataFrame
    flatness: pd.DataFrame
    baselines: pd.DataFrame
    resamples: int = BOOTSTRAP_RESAMPLES


def analyse_micro(
    cell_paths: Iterable[str | Path],
    reference_csv: str | Path,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    multiplicity: str = DEFAULT_MULTIPLICITY,
) -> MicroAnalysis:
    """Load the cells once and derive every table (the speedups' verdicts adjusted by `multiplicity`)."""
    cells = load_micro_cells(cell_paths)
    speedups = micro_speedups(cells, resamples=resamples, multiplicity=multiplicity)
    crossovers = micro_crossovers(speedups, resamples=resamples)
    published = published_micro(reference_csv)
    published_cx = published_crossovers(published)
    return MicroAnalysis(
        frame=micro_frame(cells),
        speedups=speedups,
        crossovers=crossovers,
        published=published,
        published_crossovers=published_cx,
        comparison=compare_crossovers(crossovers, published_cx),
        flatness=reference_flatness(published),
        baselines=reference_baselines(published),
        resamples=resamples,
    )
