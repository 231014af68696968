"""The crossover: from which batch size a framework computes faster than NumPy, and how sure that is.

From the point estimates, as for the reference (`crossover`), the smallest measured batch size from which the speedup
stays above 1 at every larger measured batch size (no interpolation, on either side), or "never" in the measured
range; with intervals over processes, a 95% interval for it from resampling the whole series (`crossover_interval`),
and a statement of only what the intervals show (`shown`: "faster from 256 on; not resolved at 64"); one row per
series in `micro_crossovers`. `Crossover` and its columns serve the reference's crossovers too
(fwbench.analysis.micro.reference), and `crossover_text` and `interval_text` write both in LaTeX.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fwbench.analysis.micro.speedups import keyed_rng
from fwbench.analysis.micro.vocabulary import (
    BETWEEN_PROCESSES,
    CONFIDENCE,
    FASTER,
    NOT_RESOLVED,
    PAIRED,
    SLOWER,
    WITHIN_ONLY,
    integers,
    is_measured,
    is_measured_text,
    one_value,
)
from fwbench.trackers.stats import BOOTSTRAP_RESAMPLES, WITHIN_PROCESS_ONLY

UNVERIFIED_MARK = r"$^{m}$"


@dataclass(frozen=True)
class Crossover:
    """Where a speedup series crosses 1 for good, from its point estimates (ours and the reference's alike).

    kind: "crossover" (`batch` is the smallest measured batch from which every measured value is above the
    threshold), "never" (the largest measured one is not) or "no data" (nothing measured). `below`: the largest
    measured batch under `batch` (the grid places the crossover in (below, batch]; None when `batch` is the smallest
    measured: the framework is faster at or below it). `missing`: batches without a value; `unverified`: those above
    `batch`, where a failed cell leaves the claim "from here on" unchecked.

    The interval (ours only, with intervals over processes at every measured batch; `crossover_interval`):
    `ci_low` and `ci_high` are measured batch sizes, or inf for "never in the measured range"; `ci_below` is the
    measured batch under `ci_low` (0 when `ci_low` is the smallest, the largest when `ci_low` is never)."""

    kind: str
    batch: int | None
    below: int | None
    smallest: int | None
    largest: int | None
    missing: tuple[int, ...] = ()
    unverified: tuple[int, ...] = ()
    ci_low: float | None = None
    ci_high: float | None = None
    ci_below: float | None = None

    @property
    def at_smallest(self) -> bool:
        return self.kind == "crossover" and self.batch == self.smallest

    @property
    def has_interval(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None and self.ci_below is not None

    def bracket(self) -> tuple[float, float] | None:
        """The point crossover as a half-open interval (low, high] of batch sizes, given the batch grid; None
        without data. "Never" is (largest, inf): it may still happen beyond the measured range."""
        if self.kind == "crossover":
            return float(self.below or 0), float(self.batch)
        if self.kind == "never":
            return float(self.largest), math.inf
        return None

    def interval_bracket(self) -> tuple[float, float] | None:
        """The 95% interval as a half-open interval (low, high] of batch sizes, given the batch grid; None without
        an interval (one process per cell)."""
        if not self.has_interval:
            return None
        return float(self.ci_below), float(self.ci_high)  # type: ignore[arg-type]


def crossover(batch_sizes: Sequence[int], values: Sequence[float | None], threshold: float = 1.0) -> Crossover:
    """The crossover of one series of point estimates: the smallest measured batch b such that at every measured
    batch >= b the value is above `threshold` (no interpolation between batch sizes). Missing values (None, NaN)
    are batches without a result: skipped, and reported (above the crossover they make it unverified)."""
    if len(batch_sizes) != len(values):
        raise ValueError("batch_sizes and values differ in length")
    pairs = sorted(zip((int(b) for b in batch_sizes), values, strict=True))
    measured = [(b, float(v)) for b, v in pairs if is_measured(v)]
    missing = tuple(b for b, v in pairs if not is_measured(v))
    if not measured:
        return Crossover("no data", None, None, None, None, missing)
    start = len(measured)
    while start > 0 and measured[start - 1][1] > threshold:
        start -= 1
    smallest, largest = measured[0][0], measured[-1][0]
    if start == len(measured):
        return Crossover("never", None, largest, smallest, largest, missing)
    batch = measured[start][0]
    below = measured[start - 1][0] if start > 0 else None
    return Crossover("crossover", batch, below, smallest, largest, missing, tuple(b for b in missing if b > batch))


def crossover_draws(
    log_speedups: Sequence[float],
    se_logs: Sequence[float],
    dfs: Sequence[float],
    rng: np.random.Generator,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> np.ndarray:
    """Crossovers of `resamples` resampled series, as indices into the measured batch sizes (ascending; the
    series' length for "never"). Each resample redraws every batch size's log speedup from its own t distribution
    (estimate + se x t_df: the distribution its t interval over the paired rounds describes), independently across
    batch sizes, since each batch size is a comparison group (a job) of its own; the crossover of each resampled
    series follows `crossover`'s rule."""
    logs, se, df = (np.asarray(v, dtype=np.float64) for v in (log_speedups, se_logs, dfs))
    series = logs + se * rng.standard_t(df, size=(resamples, logs.size))
    above = series > 0.0
    from_here_on = np.logical_and.accumulate(above[:, ::-1], axis=1)[:, ::-1]
    return np.where(from_here_on.any(axis=1), from_here_on.argmax(axis=1), logs.size)


def crossover_interval(
    batch_sizes: Sequence[int],
    speedups: Sequence[float],
    se_logs: Sequence[float],
    dfs: Sequence[float],
    *,
    key: str = "crossover",
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> tuple[float, float, float]:
    """The 95% interval of a series' crossover from resampling the whole series (`crossover_draws`): the 2.5% and
    97.5% quantiles of the resampled crossovers, each a measured batch size or inf ("never in the measured range"),
    and the measured batch under the lower end (0 when it is the smallest) that opens its bracket. Pass the
    measured batch sizes only, each with its speedup and its t interval's log-scale standard error and df."""
    order = np.argsort(np.asarray(batch_sizes))
    grid = np.asarray(batch_sizes, dtype=np.float64)[order]
    if grid.size == 0:
        raise ValueError("no measured batch size")
    logs = np.log(np.asarray(speedups, dtype=np.float64))[order]
    draws = np.sort(
        crossover_draws(logs, np.asarray(se_logs)[order], np.asarray(dfs)[order], keyed_rng(key), resamples)
    )
    alpha = (1.0 - confidence) / 2.0
    low, high = (int(draws[max(0, math.ceil(q * resamples) - 1)]) for q in (alpha, 1.0 - alpha))
    ends = np.append(grid, math.inf)
    below = 0.0 if low == 0 else float(grid[low - 1])
    return float(ends[low]), float(ends[high]), below


def crossover_text(result: Crossover) -> str:
    """LaTeX for a crossover: the batch, "$\\le$ b" when already faster at the smallest measured batch, "never in
    a--b", marked $^{m}$ when a missing cell above leaves it unverified."""
    if result.kind not in ("crossover", "never"):
        return "---"
    if result.kind == "never":
        text = f"never in {result.smallest}--{result.largest}"
    elif result.at_smallest:
        text = rf"$\le$ {result.batch}"
    else:
        text = str(result.batch)
    return text + (UNVERIFIED_MARK if result.unverified else "")


def interval_text(result: Crossover) -> str | None:
    """LaTeX for a crossover's 95% interval, e.g. "[64, 1024]", "[$\\le$ 1, 16]", "[1024, never]", "[never]"
    (never: not in the measured range); None without one."""
    if not result.has_interval:
        return None

    def end(value: float) -> str:
        if math.isinf(value):
            return "never"
        return rf"$\le$ {int(value)}" if int(value) == result.smallest else str(int(value))

    low, high = end(result.ci_low), end(result.ci_high)  # type: ignore[arg-type]
    return f"[{low}]" if low == high else f"[{low}, {high}]"


def _ranges(batches: Sequence[int], grid: Sequence[int]) -> str:
    """Batch sizes as runs of consecutive measured ones: "1--16, 256"."""
    position = {b: i for i, b in enumerate(grid)}
    runs: list[list[int]] = []
    for batch in batches:
        if runs and position[batch] == position[runs[-1][-1]] + 1:
            runs[-1].append(batch)
        else:
            runs.append([batch])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}--{run[-1]}" for run in runs)


def shown(batch_sizes: Sequence[int], verdicts: Sequence[str | None]) -> str:
    """What a series' speedup intervals show, batch size by batch size, and nothing more, e.g. "slower at 1--16;
    not resolved at 64; faster from 256 on": faster or slower where a 95% interval over processes lies above or
    below 1, not resolved where it contains 1. With intervals within one process only it says that nothing is
    resolved. Batch sizes without a speedup (a failed cell) are left out."""
    pairs = sorted((int(b), v) for b, v in zip(batch_sizes, verdicts, strict=True) if v)
    if not pairs:
        return "no data"
    if any(v == WITHIN_ONLY for _, v in pairs):
        return "not resolved: one process per cell (intervals within one process)"
    grid = [b for b, _ in pairs]
    tail = len(pairs)
    while tail > 0 and pairs[tail - 1][1] == FASTER:
        tail -= 1
    parts = []
    for word in (SLOWER, NOT_RESOLVED, FASTER):
        batches = [b for b, v in pairs[:tail] if v == word]
        if batches:
            parts.append((batches[0], f"{word} at {_ranges(batches, grid)}"))
    if tail == 0 and len(pairs) > 1:
        parts.append((grid[0], f"faster at every batch size ({grid[0]}--{grid[-1]})"))
    elif tail < len(pairs):
        first = pairs[tail][0]
        parts.append((first, f"faster from {first} on" if first != grid[-1] else f"faster at {first}"))
    return "; ".join(text for _, text in sorted(parts))


def _joined(batches: Iterable[int]) -> str | None:
    return "+".join(map(str, batches)) or None


# What a crossover is, for ours and the reference's alike (the reference's columns are these, prefixed published_).
CROSSOVER_FIELDS = [
    "kind",
    "crossover_batch",
    "below_batch",
    "at_smallest",
    "smallest_batch",
    "largest_batch",
    "missing_batches",
    "unverified_batches",
    "speedup_at_largest",
]
# Ours only: the crossover's interval from resampling the series, and what the speedups' intervals show.
INTERVAL_FIELDS = ["crossover_ci_low", "crossover_ci_high", "crossover_ci_below", "interval_method", "shown"]
CROSSOVER_COLUMNS = [
    "framework",
    "mode",
    "operation",
    "precision",
    "variant",
    *CROSSOVER_FIELDS,
    *INTERVAL_FIELDS,
    "ci_low_at_largest",
    "ci_high_at_largest",
    "verdict_at_largest",
    "platform",
    "device",
]


def crossover_columns(result: Crossover) -> dict[str, Any]:
    """The point crossover's columns (CROSSOVER_FIELDS but the speedup at the largest batch)."""
    return {
        "kind": result.kind,
        "crossover_batch": result.batch,
        "below_batch": result.below,
        "at_smallest": result.at_smallest,
        "smallest_batch": result.smallest,
        "largest_batch": result.largest,
        "missing_batches": _joined(result.missing),
        "unverified_batches": _joined(result.unverified),
    }


def from_row(row: Mapping[str, Any], prefix: str = "") -> Crossover:
    """The Crossover of a crossovers-table row (`prefix` "published_" for the reference's columns, which have no
    interval)."""

    def get(name: str) -> int | None:
        value = row.get(prefix + name)
        return int(value) if is_measured(value) else None

    def end(name: str) -> float | None:
        value = row.get(prefix + name)
        if value is None or (not isinstance(value, str) and pd.isna(value)) or str(value) == "":
            return None
        return float(value)  # inf: never in the measured range

    def batches(name: str) -> tuple[int, ...]:
        value = row.get(prefix + name)
        return tuple(int(float(b)) for b in str(value).split("+")) if is_measured_text(value) else ()

    return Crossover(
        str(row.get(prefix + "kind")),
        get("crossover_batch"),
        get("below_batch"),
        get("smallest_batch"),
        get("largest_batch"),
        batches("missing_batches"),
        batches("unverified_batches"),
        end("crossover_ci_low"),
        end("crossover_ci_high"),
        end("crossover_ci_below"),
    )


def _series_interval(group: pd.DataFrame, key: str, resamples: int) -> dict[str, Any]:
    """The interval columns of one series (its rows sorted by batch size): an interval where every measured batch
    has a t interval over processes, else none, saying why."""
    ok = group[group["status"] == "ok"]
    if ok.empty:
        return {"interval_method": None}
    scopes = set(ok["ci_scope"])
    if not scopes <= set(BETWEEN_PROCESSES) or not all(
        is_measured(se) and is_measured(df) and float(df) > 0 for se, df in zip(ok["se_log"], ok["df"], strict=True)
    ):
        return {"interval_method": f"none: {WITHIN_PROCESS_ONLY}"}
    low, high, below = crossover_interval(
        ok["batch_size"].astype(int).tolist(),
        ok["speedup"].astype(float).tolist(),
        ok["se_log"].astype(float).tolist(),
        ok["df"].astype(float).tolist(),
        key=key,
        resamples=resamples,
    )
    paired = "paired by round" if scopes == {PAIRED} else "trials not all paired by round"
    method = (
        f"2.5% and 97.5% quantiles of the crossovers of {resamples} resampled series: each batch size's log speedup "
        f"drawn from its Student-t interval over processes (NumPy and the framework {paired}), batch sizes "
        "independently (one comparison group each)"
    )
    return {
        "crossover_ci_low": low,
        "crossover_ci_high": high,
        "crossover_ci_below": below,
        "interval_method": method,
    }


def micro_crossovers(speedups: pd.DataFrame, *, resamples: int = BOOTSTRAP_RESAMPLES) -> pd.DataFrame:
    """One row per framework, mode, operation, precision and variant: the crossover of the speedup's point
    estimates (`crossover`, the reference's definition), its 95% interval from resampling the whole series where
    the speedups have intervals over processes (`crossover_interval`), what the speedups' intervals show (`shown`),
    and the speedup with its CI and verdict at the largest measured batch."""
    rows = []
    keys = ["framework", "mode", "operation", "precision", "variant"]
    for key, group in speedups.groupby(keys, sort=True):
        group = group.sort_values("batch_size")
        ok = group["status"] == "ok"
        points = [row["speedup"] if good else None for (_, row), good in zip(group.iterrows(), ok, strict=True)]
        result = crossover(group["batch_size"].tolist(), points)
        interval = _series_interval(group, "/".join(map(str, key)), resamples)
        verdicts = [row["verdict"] if good else None for (_, row), good in zip(group.iterrows(), ok, strict=True)]
        last = group[group["batch_size"] == result.largest].iloc[0] if result.largest is not None else None
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                **crossover_columns(result),
                **interval,
                "shown": shown(group["batch_size"].tolist(), verdicts),
                "speedup_at_largest": None if last is None else last["speedup"],
                "ci_low_at_largest": None if last is None else last["ci_low"],
                "ci_high_at_largest": None if last is None else last["ci_high"],
                "verdict_at_largest": None if last is None else last["verdict"],
                "platform": one_value(group["platform"]),
                "device": one_value(group["device"]),
            }
        )
    return integers(pd.DataFrame(rows).reindex(columns=CROSSOVER_COLUMNS))
