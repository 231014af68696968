"""The sentences that say where a ratio comes from: for every resolved ratio between frameworks beyond 1.25x either
way whose two cells were both profiled, the categories that account for most of the difference in ms per step,
with their times in both frameworks (`ratio_sentences`); and one sentence that lists the resolved ratios beyond
1.25x that cannot be attributed because a cell was not profiled, so none is silently left out.

"Resolved" is what bold type and the counts of resolved ratios mean everywhere in the paper: the paired test,
adjusted within its family (`fwbench.analysis.inference.summary.resolved_adjusted`); a refused ratio never is. Every
number is read from the tables (speedups.csv, op_profile.csv): the step times of the timed trials, the category
times of the profiled steps. The categories are chosen by their share of the profiled difference, largest first,
until they cover at least half of it (at most three); a category that moved the other way is not named as a cause.
Where the profiled steps order the two variants the other way round from the timed ones, the sentence says so and
attributes nothing: the profiler's overhead has then changed what it measures."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from fwbench.analysis.common.latex import escape, number, variant_label
from fwbench.analysis.common.names import model_in_text
from fwbench.analysis.inference.summary import refused, resolved_adjusted
from fwbench.analysis.profile.categories import category_phrase
from fwbench.analysis.profile.tables import Key, category_times, cell_rows, row_key
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


def _keys(row: pd.Series) -> tuple[Key, Key]:
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


def _ms(value: float) -> str:
    return f"{number(value)}~ms"


def _where(row: pd.Series) -> str:
    return f"On {escape(model_in_text(row['model']))} at batch {int(row['batch_size'])} ({escape(row['precision'])})"


def _ratio_text(row: pd.Series) -> str:
    return f"throughput ratio {_interval(row)}"


def _interval(row: pd.Series) -> str:
    """A ratio with its own 95% interval, as the ratio tables print it: "0.500 [0.475, 0.525]"."""
    return f"{number(float(row['ratio']))} [{number(float(row['ci_low']))}, {number(float(row['ci_high']))}]"


def _shares_text(shares: list[Share], total: float) -> str:
    """ "convolution accounts for 340~ms (381~ms against 38.0~ms) and data movement and layout for 21.0~ms (25.0
    against 4.00)", with what they cover where that is under COVER of the total."""
    parts = []
    for index, share in enumerate(shares):
        both = (
            f"({_ms(share.numerator_ms)} against {_ms(share.denominator_ms)})"
            if index == 0
            else f"({number(share.numerator_ms)} against {number(share.denominator_ms)})"
        )
        verb = "accounts for " if index == 0 else "for "
        parts.append(f"{category_phrase(share.category)} {verb}{_ms(abs(share.difference))} {both}")
    text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    covered = math.fsum(abs(s.difference) for s in shares)
    if covered < COVER * abs(total):
        text += f", together {_ms(covered)} of the {_ms(abs(total))}"
    return text


def ratio_sentence(row: pd.Series, cells: dict[Key, pd.Series], times: dict[Key, dict[str, float]]) -> str:
    """The sentence for one ratio row whose two cells are both profiled (`cells`: `tables.cell_rows` by key)."""
    num_key, den_key = _keys(row)
    num, den = cells[num_key], cells[den_key]
    num_name, den_name = (escape(variant_label(key[1], key[2])) for key in (num_key, den_key))
    timed = pd.notna(num["timed_step_ms"]) and pd.notna(den["timed_step_ms"])
    if timed:
        lead = (
            f"{_where(row)}, {num_name} takes {_ms(num['timed_step_ms'])} per step to {den_name}'s "
            f"{_ms(den['timed_step_ms'])} in the timed trials ({_ratio_text(row)})"
        )
    else:
        lead = f"{_where(row)}, {num_name} over {den_name} has a {_ratio_text(row)}, with no timed median to quote"
    num_total, den_total = math.fsum(times[num_key].values()), math.fsum(times[den_key].values())
    profiled = f"profiled, their categories add up to {_ms(num_total)} and {_ms(den_total)} per step"
    numerator_slower = float(row["ratio"]) < 1
    total = num_total - den_total
    if total == 0 or (total > 0) != numerator_slower:
        return f"{lead}; {profiled}, which does not order them as the timed trials do, so nothing is attributed."
    shares = attribution(times[num_key], times[den_key])
    return f"{lead}; {profiled}, and of the {_ms(abs(total))} difference {_shares_text(shares, total)}."


def _listed(row: pd.Series, missing: list[Key]) -> str:
    names = [escape(variant_label(key[1], key[2])) for key in missing]
    num_key, den_key = _keys(row)
    return (
        f"{escape(model_in_text(row['model']))} at batch {int(row['batch_size'])} ({escape(row['precision'])}), "
        "the ratio of "
        f"{escape(variant_label(num_key[1], num_key[2]))} over {escape(variant_label(den_key[1], den_key[2]))} "
        f"{_interval(row)} "
        f"({' and '.join(names)} not profiled)"
    )


def ratio_sentences(ratios: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """One sentence per resolved ratio beyond THRESHOLD either way whose cells are both in the op-profile table
    (`table`, `tables.op_profile_table`), in the speedups table's order; then one sentence listing those whose
    cells are not both profiled, or saying that no resolved ratio is beyond the threshold."""
    far = ratios[beyond_threshold(ratios)] if len(ratios) else ratios
    if far.empty:
        resolved = int(resolved_adjusted(ratios).sum()) if len(ratios) else 0
        return [
            f"No resolved ratio between frameworks is beyond {number(THRESHOLD)}$\\times$ either way ({resolved} "
            f"resolved of {len(ratios)}), so no difference is attributed to categories."
        ]
    cells = {row_key(r): r for _, r in cell_rows(table).iterrows()}
    times = category_times(table)
    sentences, unprofiled = [], []
    for _, row in far.iterrows():
        missing = [key for key in _keys(row) if key not in cells]
        if missing:
            unprofiled.append(_listed(row, missing))
        else:
            sentences.append(ratio_sentence(row, cells, times))
    if unprofiled:
        count = len(unprofiled)
        sentences.append(
            f"{count} resolved ratio{'' if count == 1 else 's'} beyond {number(THRESHOLD)}$\\times$ either way "
            f"cannot be attributed, for want of a profile of both cells: {'; '.join(unprofiled)}."
        )
    return sentences
