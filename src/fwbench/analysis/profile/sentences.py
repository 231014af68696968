"""Where a ratio comes from, as values: for a resolved ratio between frameworks beyond 1.25x either way whose two cells
were both profiled, the categories that account for most of the difference in ms per step (`attribution`), with
their times in both frameworks. The section's sentences are the template's (report/templates/profile.tex.j2, from
fwbench.analysis.profile.findings); the abstract names the first category the same way (fwbench.analysis.paper
.headline), which is why this module keeps its name.

"Resolved" is what bold type and the counts of resolved ratios mean everywhere in the paper: the paired test,
adjusted within its family (`fwbench.analysis.inference.summary.resolved_adjusted`); a refused ratio never is. The
categories are chosen by their share of the profiled difference, largest first, until they cover at least half of it
(at most three); a category that moved the other way is not named as a cause. Where the profiled steps order the two
variants the other way round from the timed ones, nothing is attributed: the profiler's overhead has then changed
what it measures."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from fwbench.analysis.inference.summary import refused, resolved_adjusted
from fwbench.analysis.profile.tables import Key
from fwbench.study.modes import primary

THRESHOLD = 1.25
COVER = 0.5  # the named categories cover at least this share of the profiled difference
MOST = 3  # categories named at most


@dataclass(frozen=True)
class Share:
    """One category's part of a difference: its ms per step in the numerator's and the denominator's cell."""

    category: str
    numerator_ms: float
    denominator_ms: float

    @property
    def difference(self) -> float:
        return self.numerator_ms - self.denominator_ms


def beyond_threshold(ratios: pd.DataFrame) -> pd.Series:
    """Which rows of a speedups table are resolved (the paper's reading) and beyond THRESHOLD either way."""
    if ratios.empty:
        return pd.Series(False, index=ratios.index, dtype=bool)
    value = pd.to_numeric(ratios["ratio"], errors="coerce")
    far = (value >= THRESHOLD) | (value <= 1 / THRESHOLD)
    return resolved_adjusted(ratios) & ~refused(ratios) & far.fillna(False)


def _mode(row: pd.Series, side: str) -> str:
    """A side's mode in a speedups row; its framework's primary mode in a table written before modes."""
    value = row.get(f"{side}_mode")
    framework = str(row[side])
    return primary(framework) if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


def ratio_keys(row: pd.Series) -> tuple[Key, Key]:
    """The (model, framework, mode, precision, batch) keys of a speedups row's numerator and denominator cells."""
    model, precision, batch = str(row["model"]), str(row["precision"]), int(row["batch_size"])
    numerator = (model, str(row["numerator"]), _mode(row, "numerator"), precision, batch)
    denominator = (model, str(row.get("denominator", "torch")), _mode(row, "denominator"), precision, batch)
    return numerator, denominator


def attribution(numerator: dict[str, float], denominator: dict[str, float]) -> list[Share]:
    """The categories that account for most of the difference between two cells' profiled steps: those that moved
    the way the total moved, the largest absolute difference first, until they cover at least COVER of the total
    difference, at most MOST; none where the totals are equal."""
    categories = list(dict.fromkeys([*numerator, *denominator]))
    shares = [Share(c, numerator.get(c, 0.0), denominator.get(c, 0.0)) for c in categories]
    total = math.fsum(s.difference for s in shares)
    if total == 0:
        return []
    with_total = sorted((s for s in shares if s.difference * total > 0), key=lambda s: -abs(s.difference))
    chosen, covered = [], 0.0
    for share in with_total[:MOST]:
        chosen.append(share)
        covered += abs(share.difference)
        if covered >= COVER * abs(total):
            break
    return chosen
