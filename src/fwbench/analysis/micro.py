"""The micro suite's analysis: from which batch size does each framework compute faster than plain NumPy?

A reference study (an NVIDIA T4) timed a matrix product and a small network at batch sizes 1 to 4096 for NumPy,
PyTorch and JAX and read conclusions off the batch size at which each framework overtakes NumPy. Here the same
question is answered from the micro cells (`results/cells/micro/...`):

- the tidy table (`micro_frame`): one row per cell and timing variant ("resident": each call on device-resident
  inputs; "transfer": the host-to-device copy of the input batch plus the call), failed cells one row;
- the speedup over NumPy (`micro_speedups`): NumPy's median time per call over the framework's, at the same
  operation, precision label and batch size, with a 95% percentile bootstrap CI; hierarchical (trials, then samples
  within them) when a cell has several trials, because the process, not the sample, is then the unit;
- the crossover (`crossover`, `micro_crossovers`): the smallest measured batch size from which the CI's lower bound
  stays above 1 at every larger measured batch size, or "never" in the measured range;
- the published reference (`published_micro`, `published_crossovers`) and the comparison of its crossovers with
  ours (`compare_crossovers`), with caveats computed from the reference's own numbers;
- the figure, LaTeX tables, macros and the paper's section, written by `write_micro_outputs`.

Nothing in the section is typed by hand: every number and every comparison word comes from the data.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pandas as pd

from fwbench.analysis.cells import CellFileError
from fwbench.analysis.latex import FRAMEWORK_LABELS, define_macros, escape, macro_name, number
from fwbench.io import atomic_write_text
from fwbench.results import load_result
from fwbench.trackers.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, Interval, order_statistic_median, summary

SUITE = "micro"
NUMPY = "numpy"
VARIANTS = ("resident", "transfer")
LABELS = {**FRAMEWORK_LABELS, NUMPY: "NumPy"}
VARIANT_LABELS = {"resident": "resident", "transfer": "with copy"}
# Elements of one chunk of bootstrap resamples (index int64 + gathered float64 + np.median's partition copy, about
# 24 MB): a cell of 20,000 samples is resampled 52 rows at a time instead of 2000 x 20,000 at once (640 MB).
CHUNK_ELEMENTS = 2**20
CONFIDENCE = 0.95
FAILED = r"failed$^\dagger$"
UNVERIFIED_MARK = r"$^{m}$"


def label(framework: str) -> str:
    return LABELS.get(framework, framework)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _counted(count: int, word: str, plural: str | None = None) -> str:
    """Like `_plural`, with counts up to ten in words (for the start of a sentence)."""
    text = _plural(count, word, plural)
    return text.replace(str(count), _WORDS[count], 1) if 0 <= count < len(_WORDS) else text


# --------------------------------------------------------------------------------------------------------------------
# Reading the cells


@dataclass
class MicroCell:
    """One micro cell result as the analysis needs it: its key, status and per-variant samples (one array per
    trial, in ms per call)."""

    path: str
    framework: str
    operation: str
    precision: str
    batch_size: int
    status: str
    reason: str | None
    variants: dict[str, tuple[np.ndarray, ...]] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def key(self) -> tuple[str, str, int]:
        return self.operation, self.precision, self.batch_size

    def pooled(self, variant: str) -> np.ndarray:
        return np.concatenate(self.variants[variant])


_MICRO_PATH = re.compile(
    r"(?:^|/)cells/micro/(?P<framework>[^/]+)/(?P<operation>[^/]+)/(?P<precision>[^/]+)/bs(?P<batch>[0-9]+)\.json$"
)


def _read(path: str | Path) -> tuple[dict[str, Any] | None, str | None]:
    """(result, None), or (None, why the file cannot be used)."""
    try:
        return load_result(path), None
    except UnicodeDecodeError:
        return None, "not valid JSON: not UTF-8 text"
    except json.JSONDecodeError as error:
        return None, f"not valid JSON: {_one_line(error)}"
    except jsonschema.ValidationError as error:
        return None, _one_line(error.message)
    except OSError as error:
        return None, f"cannot be read: {_one_line(error.strerror or error)}"


def _variant_trials(result: dict[str, Any]) -> dict[str, tuple[np.ndarray, ...]]:
    """Variant -> per-trial sample arrays of an ok cell; the resident variant falls back to `samples_ms` (one trial).
    Raises ValueError when a variant's samples are not positive finite numbers."""
    metrics = result.get("metrics") or {}
    found: dict[str, tuple[np.ndarray, ...]] = {}
    for name, variant in (metrics.get("variants") or {}).items():
        trials = [np.asarray(t, dtype=np.float64) for t in (variant or {}).get("trial_samples_ms") or []]
        trials = [t for t in trials if t.size]
        if trials:
            found[name] = tuple(trials)
    if "resident" not in found and result.get("samples_ms"):
        found["resident"] = (np.asarray(result["samples_ms"], dtype=np.float64),)
    if "resident" not in found:
        raise ValueError("an ok cell without resident samples")
    for name, trials in found.items():
        if any(t.ndim != 1 or not (np.isfinite(t).all() and (t > 0).all()) for t in trials):
            raise ValueError(f"variant {name} has samples that are not positive finite numbers")
    order = [v for v in VARIANTS if v in found] + sorted(set(found) - set(VARIANTS))
    return {name: found[name] for name in order}


def _micro_problem(path: str | Path, result: Any) -> str | None:
    """Why a readable JSON file is not a usable micro cell result, or None."""
    cell = result.get("cell") if isinstance(result, dict) else None
    if not isinstance(cell, dict):
        return "not a cell result (no cell)"
    if cell.get("suite") != SUITE:
        return f"it holds a cell of suite {cell.get('suite')!r}, not a micro cell"
    missing = [key for key in ("framework", "model", "precision", "batch_size") if key not in cell]
    if missing:
        return f"its cell lacks {', '.join(missing)}"
    if result.get("status") not in ("ok", "failed"):
        return f"status {result.get('status')!r} is neither ok nor failed"
    match = _MICRO_PATH.search(str(path))
    holds = (cell["framework"], cell["model"], cell["precision"], str(cell["batch_size"]))
    if match and holds != (match["framework"], match["operation"], match["precision"], match["batch"]):
        return "it holds the result of cell micro/{}/{}/{}/bs{}".format(*holds)
    if result["status"] == "ok":
        try:
            _variant_trials(result)
        except ValueError as error:
            return str(error)
    return None


def _cell(path: str | Path, result: dict[str, Any]) -> MicroCell:
    cell = result["cell"]
    return MicroCell(
        path=str(path),
        framework=cell["framework"],
        operation=cell["model"],
        precision=cell["precision"],
        batch_size=int(cell["batch_size"]),
        status=result["status"],
        reason=result.get("reason"),
        variants=_variant_trials(result) if result["status"] == "ok" else {},
        result=result,
    )


def load_micro_cells(paths: Iterable[str | Path]) -> list[MicroCell]:
    """Every micro cell result of `paths`, each checked before any is used. A file that is not JSON, breaks the
    result schema (`load_result`), is a cell of another suite, holds another cell than its path names, or has
    unusable samples raises `CellFileError` (a ValueError) naming every such file and the command that regenerates
    it."""
    cells, problems = [], []
    for path in paths:
        result, why = _read(path)
        why = why or _micro_problem(path, result)
        if why:
            problems.append((str(path), why))
        else:
            cells.append(_cell(path, result))
    if problems:
        raise CellFileError(problems)
    if not cells:
        raise ValueError("no micro cell results to analyse")
    return sorted(cells, key=lambda c: (c.operation, c.precision, c.framework != NUMPY, c.framework, c.batch_size))


def _as_cells(cells_or_paths: Iterable[MicroCell | str | Path]) -> list[MicroCell]:
    items = list(cells_or_paths)
    if items and all(isinstance(item, MicroCell) for item in items):
        return items  # type: ignore[return-value]
    return load_micro_cells(items)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------------------------
# Tidy table

FRAME_COLUMNS = [
    "framework",
    "operation",
    "precision",
    "batch_size",
    "variant",
    "status",
    "reason",
    "median_ms",
    "median_ci_low",
    "median_ci_high",
    "ci_method",
    "n_samples",
    "trials",
    "noisy",
    "compile_s",
    "first_call_s",
    "max_rel_error",
    "error_bound",
    "dim",
    "hidden",
    "classes",
    "flops_per_row",
    "dtype",
    "threads",
    "blas",
    "platform",
    "device",
    "cpu_model",
    "path",
]


def _framework_provenance(result: dict[str, Any]) -> dict[str, Any]:
    return (result.get("provenance") or {}).get("framework") or {}


def _device(result: dict[str, Any]) -> tuple[str | None, str | None]:
    """(platform, device name): the CPU model for a cell that computed on the host, else the device's name."""
    device = _framework_provenance(result).get("device") or {}
    platform = device.get("platform")
    if platform is None:
        return None, None
    if platform == "cpu":
        return platform, (result.get("provenance") or {}).get("cpu_model") or "CPU"
    return platform, device.get("name") or platform


def _blas(result: dict[str, Any]) -> str | None:
    """The BLAS pools threadpoolctl found in a NumPy cell, e.g. "openblas 0.3.29, 2 threads"."""
    pools = (_framework_provenance(result).get("settings") or {}).get("blas") or []
    described = {
        f"{pool.get('internal_api') or pool.get('user_api') or 'BLAS'} {pool.get('version') or ''}".strip()
        + (f", {pool['num_threads']} threads" if pool.get("num_threads") is not None else "")
        for pool in pools
        if isinstance(pool, dict)
    }
    return "; ".join(sorted(described)) or None


def _threads(result: dict[str, Any]) -> int | None:
    framework = _framework_provenance(result)
    effective = (framework.get("threads") or {}).get("effective")
    return effective if effective is not None else (framework.get("settings") or {}).get("intra_op_threads")


def _sizes(result: dict[str, Any]) -> dict[str, Any]:
    operation = (result.get("metrics") or {}).get("operation") or {}
    settings = result.get("settings") or {}
    return {key: operation.get(key, settings.get(key)) for key in ("dim", "hidden", "classes", "flops_per_row")}


def _common(cell: MicroCell) -> dict[str, Any]:
    """The columns a cell's variant rows share."""
    metrics = cell.result.get("metrics") or {}
    agreement = metrics.get("agreement") or {}
    framework = _framework_provenance(cell.result)
    platform, device = _device(cell.result)
    return {
        "framework": cell.framework,
        "operation": cell.operation,
        "precision": cell.precision,
        "batch_size": cell.batch_size,
        "status": cell.status,
        "reason": cell.reason,
        "compile_s": metrics.get("compile_s"),
        "first_call_s": metrics.get("first_call_s"),
        "max_rel_error": agreement.get("max_rel_error"),
        "error_bound": agreement.get("bound"),
        **_sizes(cell.result),
        "dtype": (framework.get("settings") or {}).get("dtype") or (metrics.get("operation") or {}).get("dtype"),
        "threads": _threads(cell.result),
        "blas": _blas(cell.result) if cell.framework == NUMPY else None,
        "platform": platform,
        "device": device,
        "cpu_model": (cell.result.get("provenance") or {}).get("cpu_model"),
        "path": cell.path,
    }


INTEGER_COLUMNS = {
    "batch_size",
    "n_samples",
    "trials",
    "numpy_trials",
    "dim",
    "hidden",
    "classes",
    "flops_per_row",
    "threads",
    *(
        f"{prefix}{name}_batch"
        for prefix in ("", "published_")
        for name in ("crossover", "below", "smallest", "largest")
    ),
}


def _integers(frame: pd.DataFrame) -> pd.DataFrame:
    """Counts and batch sizes as nullable integers: a failed cell's missing value must not turn a column of counts
    into floats (2000.0) in the CSV."""
    return frame.astype({column: "Int64" for column in INTEGER_COLUMNS & set(frame.columns)})


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _variant_row(cell: MicroCell, variant: str) -> dict[str, Any]:
    """Median time per call of one variant, samples pooled over the cell's trials, with the distribution-free
    order-statistic 95% CI of the median (O(n), no resampling; it does not carry process-to-process variation,
    which the speedup's hierarchical bootstrap does)."""
    pooled = cell.pooled(variant)
    interval = order_statistic_median(pooled, confidence=CONFIDENCE)
    trials = len(cell.variants[variant])
    return {
        "variant": variant,
        "median_ms": interval.estimate,
        "median_ci_low": _finite(interval.low),
        "median_ci_high": _finite(interval.high),
        "ci_method": f"order statistics of the samples pooled over {_plural(trials, 'trial')}",
        "n_samples": int(pooled.size),
        "trials": trials,
        "noisy": bool(summary(pooled)["noisy"]),
    }


def micro_frame(cells_or_paths: Iterable[MicroCell | str | Path]) -> pd.DataFrame:
    """The tidy table: one row per cell and variant (a failed cell: one row, variant "resident", with its reason).
    Accepts cell result paths or cells already loaded by `load_micro_cells`."""
    rows = []
    for cell in _as_cells(cells_or_paths):
        common = _common(cell)
        if not cell.ok:
            rows.append({**common, "variant": "resident"})
            continue
        rows += [{**common, **_variant_row(cell, variant)} for variant in cell.variants]
    return _integers(pd.DataFrame(rows).reindex(columns=FRAME_COLUMNS))


# --------------------------------------------------------------------------------------------------------------------
# Speedup over NumPy, bootstrap


def _rng(key: str, seed: int = BOOTSTRAP_SEED) -> np.random.Generator:
    """A stream of its own per cell and variant (fixed seed, stable key): resamples of the baseline and of the
    framework are independent, and rerunning the analysis gives the same interval."""
    return np.random.default_rng([seed, zlib.crc32(key.encode("utf-8"))])


def _single_trial_draws(values: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Medians of `resamples` resamples of `values`, CHUNK_ELEMENTS at a time (bounded memory).

    Each resample draws n ranks of the sorted values; its median is the mean of the values at the two middle ranks
    (one when n is odd), found from the cumulative counts of the ranks drawn: O(n) per resample, like np.median of
    the gathered values, but without the partition (about 2.5x faster on cells of 20,000 samples)."""
    ordered = np.sort(values)
    n = ordered.size
    rows = max(1, CHUNK_ELEMENTS // n)
    medians = np.empty(resamples)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        ranks = rng.integers(0, n, size=(stop - start, n))
        ranks += np.arange(stop - start)[:, None] * n  # one block of n counts per resample
        drawn = np.cumsum(np.bincount(ranks.ravel(), minlength=(stop - start) * n).reshape(stop - start, n), axis=1)
        lower, upper = ((drawn <= k).sum(axis=1) for k in ((n - 1) // 2, n // 2))  # k-th smallest rank drawn
        medians[start:stop] = (ordered[lower] + ordered[upper]) / 2.0
    return medians


def _hierarchical_draws(trials: Sequence[np.ndarray], rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Medians of two-stage resamples: the trials with replacement, then the samples within each chosen trial; one
    resample at a time (memory of one pooled resample)."""
    medians = np.empty(resamples)
    for row in range(resamples):
        chosen = rng.integers(0, len(trials), size=len(trials))
        pooled = np.concatenate([trials[i][rng.integers(0, trials[i].size, size=trials[i].size)] for i in chosen])
        medians[row] = np.median(pooled)
    return medians


def median_draws(
    trials: Sequence[np.ndarray], rng: np.random.Generator, resamples: int = BOOTSTRAP_RESAMPLES
) -> np.ndarray:
    """Bootstrap distribution of the pooled median of a cell's samples: plain with one trial, hierarchical with
    several (a process's median carries variation that no number of samples inside it shows)."""
    arrays = [np.asarray(t, dtype=np.float64) for t in trials]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError("no samples")
    if len(arrays) == 1:
        return _single_trial_draws(arrays[0], rng, resamples)
    return _hierarchical_draws(arrays, rng, resamples)


def _interval(estimate: float, draws: np.ndarray, confidence: float = CONFIDENCE) -> Interval:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(draws, [alpha, 1.0 - alpha])
    return Interval(float(estimate), float(low), float(high))


def _pooled_median(trials: Sequence[np.ndarray]) -> float:
    return float(np.median(np.concatenate([np.asarray(t, dtype=np.float64) for t in trials])))


def speedup_interval(
    baseline_trials: Sequence[Sequence[float]],
    trials: Sequence[Sequence[float]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval:
    """Speedup = median(baseline) / median(framework) (times per call, pooled over trials), with the 95% percentile
    bootstrap CI of the two independently resampled medians' ratio (see `median_draws`)."""
    baseline = [np.asarray(t, dtype=np.float64) for t in baseline_trials]
    framework = [np.asarray(t, dtype=np.float64) for t in trials]
    draws = median_draws(baseline, _rng("baseline", seed), resamples) / median_draws(
        framework, _rng("framework", seed), resamples
    )
    return _interval(_pooled_median(baseline) / _pooled_median(framework), draws)


SPEEDUP_COLUMNS = [
    "framework",
    "operation",
    "precision",
    "variant",
    "batch_size",
    "status",
    "reason",
    "speedup",
    "ci_low",
    "ci_high",
    "numpy_median_ms",
    "median_ms",
    "numpy_trials",
    "trials",
    "ci_method",
    "platform",
    "device",
]


class _Draws:
    """Bootstrap medians per (cell, variant), computed once: a NumPy cell's serve every framework compared with
    it."""

    def __init__(self, resamples: int):
        self.resamples = resamples
        self._cache: dict[tuple[str, str], np.ndarray] = {}

    def __call__(self, cell: MicroCell, variant: str) -> np.ndarray:
        key = (cell.path, variant)
        if key not in self._cache:
            name = f"{cell.framework}/{cell.operation}/{cell.precision}/bs{cell.batch_size}/{variant}"
            self._cache[key] = median_draws(cell.variants[variant], _rng(name), self.resamples)
        return self._cache[key]


def _ci_method(baseline: MicroCell, cell: MicroCell, variant: str) -> str:
    counts = len(baseline.variants["resident"]), len(cell.variants[variant])
    if counts == (1, 1):
        return "percentile bootstrap of the samples (one trial per cell)"
    return (
        f"hierarchical percentile bootstrap: trials, then samples within them (NumPy {_plural(counts[0], 'trial')}, "
        f"{label(cell.framework)} {_plural(counts[1], 'trial')})"
    )


def _missing_reason(cell: MicroCell, variant: str, baseline: MicroCell | None) -> str | None:
    """Why no speedup can be computed for this cell and variant, or None."""
    if baseline is None:
        return "no NumPy cell at this operation, precision and batch size"
    if not baseline.ok:
        return f"the NumPy cell failed: {_one_line(baseline.reason)}"
    if not cell.ok:
        return f"the {label(cell.framework)} cell failed: {_one_line(cell.reason)}"
    if variant not in cell.variants:
        why = ((cell.result.get("metrics") or {}).get("missing") or {}).get(variant)
        return f"no {variant} samples" + (f": {_one_line(why)}" if why else "")
    return None


def _speedup_row(cell: MicroCell, variant: str, baseline: MicroCell | None, draws: _Draws) -> dict[str, Any]:
    platform, device = _device(cell.result)
    row = {
        "framework": cell.framework,
        "operation": cell.operation,
        "precision": cell.precision,
        "variant": variant,
        "batch_size": cell.batch_size,
        "platform": platform,
        "device": device,
    }
    why = _missing_reason(cell, variant, baseline)
    if why is not None:
        return {**row, "status": "missing", "reason": why}
    numpy_ms, median_ms = _pooled_median(baseline.variants["resident"]), _pooled_median(cell.variants[variant])
    interval = _interval(numpy_ms / median_ms, draws(baseline, "resident") / draws(cell, variant))
    return {
        **row,
        "status": "ok",
        "reason": None,
        "speedup": interval.estimate,
        "ci_low": interval.low,
        "ci_high": interval.high,
        "numpy_median_ms": numpy_ms,
        "median_ms": median_ms,
        "numpy_trials": len(baseline.variants["resident"]),
        "trials": len(cell.variants[variant]),
        "ci_method": _ci_method(baseline, cell, variant),
    }


def _expected_variants(cells: Sequence[MicroCell]) -> dict[tuple[str, str, str], list[str]]:
    """(framework, operation, precision) -> the variants its ok cells have (a failed cell stands for them all;
    "resident" when none succeeded)."""
    found: dict[tuple[str, str, str], set[str]] = {}
    for cell in cells:
        names = found.setdefault((cell.framework, cell.operation, cell.precision), set())
        names.update(cell.variants)
    return {
        key: [v for v in VARIANTS if v in names] + sorted(names - set(VARIANTS)) or ["resident"]
        for key, names in found.items()
    }


def micro_speedups(
    cells_or_paths: Iterable[MicroCell | str | Path], *, resamples: int = BOOTSTRAP_RESAMPLES
) -> pd.DataFrame:
    """Speedup over NumPy for every framework other than NumPy, operation, precision, variant and batch size:
    NumPy's resident median over the framework's median of that variant (NumPy computes on the host, so it has
    only the resident variant), with a 95% CI (`median_draws`). A missing or failed cell on either side gives a
    row with status "missing" and the reason, never a speedup of 0."""
    cells = _as_cells(cells_or_paths)
    baselines = {cell.key: cell for cell in cells if cell.framework == NUMPY}
    variants = _expected_variants(cells)
    draws = _Draws(resamples)
    rows = [
        _speedup_row(cell, variant, baselines.get(cell.key), draws)
        for cell in cells
        if cell.framework != NUMPY
        for variant in variants[(cell.framework, cell.operation, cell.precision)]
    ]
    frame = _integers(pd.DataFrame(rows).reindex(columns=SPEEDUP_COLUMNS))
    keys = ["framework", "operation", "precision", "variant", "batch_size"]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------------------------------------------------
# Crossover


@dataclass(frozen=True)
class Crossover:
    """Where a speedup series crosses 1 for good.

    kind: "crossover" (`batch` is the smallest measured batch from which every measured value is above the
    threshold), "never" (the largest measured one is not) or "no data" (nothing measured). `below`: the largest
    measured batch under `batch` (the crossover lies in (below, batch]; None when `batch` is the smallest measured:
    the framework is faster at or below it). `missing`: batches without a value; `unverified`: those above `batch`,
    where a failed cell leaves the claim "from here on" unchecked."""

    kind: str
    batch: int | None
    below: int | None
    smallest: int | None
    largest: int | None
    missing: tuple[int, ...] = ()
    unverified: tuple[int, ...] = ()

    @property
    def at_smallest(self) -> bool:
        return self.kind == "crossover" and self.batch == self.smallest

    def bracket(self) -> tuple[float, float] | None:
        """The crossover as a half-open interval (low, high] of batch sizes, given the batch grid; None without
        data. "Never" is (largest, inf): it may still happen beyond the measured range."""
        if self.kind == "crossover":
            return float(self.below or 0), float(self.batch)
        if self.kind == "never":
            return float(self.largest), math.inf
        return None


def _measured(value: Any) -> bool:
    return value is not None and not pd.isna(value) and math.isfinite(float(value))


def crossover(batch_sizes: Sequence[int], values: Sequence[float | None], threshold: float = 1.0) -> Crossover:
    """The crossover of one series: the smallest measured batch b such that at every measured batch >= b the value
    (a speedup CI's lower bound, or a point estimate) is above `threshold`. Missing values (None, NaN) are batches
    without a result: skipped, and reported (above the crossover they make it unverified)."""
    if len(batch_sizes) != len(values):
        raise ValueError("batch_sizes and values differ in length")
    pairs = sorted(zip((int(b) for b in batch_sizes), values, strict=True))
    measured = [(b, float(v)) for b, v in pairs if _measured(v)]
    missing = tuple(b for b, v in pairs if not _measured(v))
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


def _joined(batches: Iterable[int]) -> str | None:
    return "+".join(map(str, batches)) or None


CROSSOVER_COLUMNS = [
    "framework",
    "operation",
    "precision",
    "variant",
    "kind",
    "crossover_batch",
    "below_batch",
    "at_smallest",
    "smallest_batch",
    "largest_batch",
    "missing_batches",
    "unverified_batches",
    "speedup_at_largest",
    "ci_low_at_largest",
    "ci_high_at_largest",
    "platform",
    "device",
]


def _crossover_columns(result: Crossover) -> dict[str, Any]:
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
    """The Crossover of a crossovers-table row (`prefix` "published_" for the reference's columns)."""

    def get(name: str) -> int | None:
        value = row.get(prefix + name)
        return int(value) if _measured(value) else None

    def batches(name: str) -> tuple[int, ...]:
        value = row.get(prefix + name)
        return tuple(int(float(b)) for b in str(value).split("+")) if _measured_text(value) else ()

    return Crossover(
        str(row.get(prefix + "kind")),
        get("crossover_batch"),
        get("below_batch"),
        get("smallest_batch"),
        get("largest_batch"),
        batches("missing_batches"),
        batches("unverified_batches"),
    )


def _one_value(values: pd.Series) -> str | None:
    found = sorted({str(v) for v in values if _measured_text(v)})
    return " / ".join(found) if found else None


def _measured_text(value: Any) -> bool:
    return value is not None and not (not isinstance(value, str) and pd.isna(value)) and str(value) != ""


def micro_crossovers(speedups: pd.DataFrame) -> pd.DataFrame:
    """One row per framework, operation, precision and variant: the crossover of the speedup's CI lower bound
    (`crossover`), and the speedup with its CI at the largest measured batch."""
    rows = []
    keys = ["framework", "operation", "precision", "variant"]
    for key, group in speedups.groupby(keys, sort=True):
        group = group.sort_values("batch_size")
        lows = [row["ci_low"] if row["status"] == "ok" else None for _, row in group.iterrows()]
        result = crossover(group["batch_size"].tolist(), lows)
        last = group[group["batch_size"] == result.largest].iloc[0] if result.largest is not None else None
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                **_crossover_columns(result),
                "speedup_at_largest": None if last is None else last["speedup"],
                "ci_low_at_largest": None if last is None else last["ci_low"],
                "ci_high_at_largest": None if last is None else last["ci_high"],
                "platform": _one_value(group["platform"]),
                "device": _one_value(group["device"]),
            }
        )
    return _integers(pd.DataFrame(rows).reindex(columns=CROSSOVER_COLUMNS))


# --------------------------------------------------------------------------------------------------------------------
# The published reference (reference/published-t4-micro.csv)

REFERENCE_STUDY = "T4 report"
REFERENCE_GPU = "NVIDIA T4"
REFERENCE_COLUMNS = [
    "suite",
    "batch_size",
    "jax_s",
    "numpy_s_in_jax_table",
    "pytorch_cpu_s",
    "pytorch_cuda_s",
    "numpy_s_in_pytorch_table",
]
SUITE_OPERATIONS = {"matrix": "matmul", "network": "mlp"}


@dataclass(frozen=True)
class ReferenceSeries:
    """One framework series of the reference: its time column, its NumPy baseline columns in order of preference
    (the first non-empty one is used, and recorded) and where it ran."""

    name: str
    framework: str
    time_column: str
    baselines: tuple[str, ...]
    device: str
    label: str


REFERENCE_SERIES = (
    ReferenceSeries("jax", "jax", "jax_s", ("numpy_s_in_jax_table",), REFERENCE_GPU, "JAX"),
    ReferenceSeries(
        "torch_cpu",
        "torch",
        "pytorch_cpu_s",
        ("numpy_s_in_pytorch_table", "numpy_s_in_jax_table"),
        f"CPU of the {REFERENCE_GPU} host",
        "PyTorch CPU",
    ),
    ReferenceSeries(
        "torch_cuda",
        "torch",
        "pytorch_cuda_s",
        ("numpy_s_in_pytorch_table", "numpy_s_in_jax_table"),
        REFERENCE_GPU,
        "PyTorch CUDA",
    ),
)
SERIES = {series.name: series for series in REFERENCE_SERIES}
PUBLISHED_COLUMNS = [
    "reference",
    "framework",
    "operation",
    "batch_size",
    "time_s",
    "numpy_s",
    "baseline",
    "speedup",
    "device",
    "numpy_s_in_jax_table",
    "numpy_s_in_pytorch_table",
]


def reference_for(framework: str, platform: str | None) -> str | None:
    """The reference series our cells compare with: JAX with its JAX (a GPU there), PyTorch with its PyTorch CPU
    or CUDA series by the platform our PyTorch cells computed on."""
    if framework == "jax":
        return "jax"
    if framework == "torch" and platform == "cpu":
        return "torch_cpu"
    if framework == "torch" and platform in ("cuda", "gpu"):
        return "torch_cuda"
    return None


def _read_reference(csv_path: str | Path) -> pd.DataFrame:
    """The reference CSV, checked: known columns and suites, positive times (NumPy's PyTorch-table column may be
    empty); a bad file raises ValueError naming it."""
    raw = pd.read_csv(csv_path)
    lacking = [column for column in REFERENCE_COLUMNS if column not in raw]
    if lacking:
        raise ValueError(f"{csv_path}: not the T4 micro reference (no column {', '.join(lacking)})")
    unknown = sorted(set(raw["suite"]) - set(SUITE_OPERATIONS))
    if unknown:
        raise ValueError(f"{csv_path}: unknown suite(s) {', '.join(map(str, unknown))}")
    times = raw[REFERENCE_COLUMNS[2:]].apply(pd.to_numeric, errors="coerce")
    required = times.drop(columns="numpy_s_in_pytorch_table")
    if required.isna().any().any() or (times.fillna(1.0) <= 0).any().any():
        raise ValueError(f"{csv_path}: times must be positive numbers (only numpy_s_in_pytorch_table may be empty)")
    return raw.assign(**times)


def _baseline(row: pd.Series, series: ReferenceSeries) -> tuple[str, float]:
    for column in series.baselines:
        if not pd.isna(row[column]):
            return column, float(row[column])
    raise ValueError(f"no NumPy time for {series.name} at batch {row['batch_size']}")


def published_micro(csv_path: str | Path) -> pd.DataFrame:
    """The reference's per-batch times as a long table: one row per series (jax, torch_cpu, torch_cuda), operation
    (matrix -> matmul, network -> mlp) and batch size, with the published speedup numpy_s / time_s against the
    NumPy column that series' table gives (`baseline`: the PyTorch table's where it has one, else the JAX
    table's)."""
    rows = []
    for _, row in _read_reference(csv_path).iterrows():
        for series in REFERENCE_SERIES:
            baseline, numpy_s = _baseline(row, series)
            time_s = float(row[series.time_column])
            rows.append(
                {
                    "reference": series.name,
                    "framework": series.framework,
                    "operation": SUITE_OPERATIONS[row["suite"]],
                    "batch_size": int(row["batch_size"]),
                    "time_s": time_s,
                    "numpy_s": numpy_s,
                    "baseline": baseline,
                    "speedup": numpy_s / time_s,
                    "device": series.device,
                    "numpy_s_in_jax_table": row["numpy_s_in_jax_table"],
                    "numpy_s_in_pytorch_table": row["numpy_s_in_pytorch_table"],
                }
            )
    frame = pd.DataFrame(rows).reindex(columns=PUBLISHED_COLUMNS)
    return frame.sort_values(["reference", "operation", "batch_size"], kind="stable").reset_index(drop=True)


def published_crossovers(published: pd.DataFrame) -> pd.DataFrame:
    """The reference's crossovers, with `crossover`'s definition applied to its point estimates (it gives no
    interval): the smallest batch from which its speedup stays above 1."""
    rows = []
    for (name, operation), group in published.groupby(["reference", "operation"], sort=True):
        group = group.sort_values("batch_size")
        result = crossover(group["batch_size"].tolist(), group["speedup"].tolist())
        rows.append(
            {
                "reference": name,
                "framework": SERIES[name].framework,
                "operation": operation,
                "device": SERIES[name].device,
                "baseline": " / ".join(sorted(set(group["baseline"]))),
                **_crossover_columns(result),
                "speedup_at_largest": float(group["speedup"].iloc[-1]),
            }
        )
    return pd.DataFrame(rows)


def reference_flatness(published: pd.DataFrame) -> pd.DataFrame:
    """Per operation: how much the reference's JAX time per call changes across its batch sizes (max/min), over all
    of them and over those above the smallest, next to its NumPy times (the JAX table's): a time that does not grow
    with the work points to a fixed cost (compilation, transfer) inside its timed region."""
    rows = []
    for operation, group in published[published["reference"] == "jax"].groupby("operation", sort=True):
        group = group.sort_values("batch_size")
        tail = group.iloc[1:] if len(group) > 1 else group
        rows.append(
            {
                "operation": operation,
                "batch_min": int(group["batch_size"].iloc[0]),
                "batch_next": int(tail["batch_size"].iloc[0]),
                "batch_max": int(group["batch_size"].iloc[-1]),
                "jax_min_s": float(group["time_s"].min()),
                "jax_max_s": float(group["time_s"].max()),
                "jax_ratio": float(group["time_s"].max() / group["time_s"].min()),
                "numpy_ratio": float(group["numpy_s"].max() / group["numpy_s"].min()),
                "jax_tail_ratio": float(tail["time_s"].max() / tail["time_s"].min()),
                "numpy_tail_ratio": float(tail["numpy_s"].max() / tail["numpy_s"].min()),
            }
        )
    return pd.DataFrame(rows)


def reference_baselines(published: pd.DataFrame) -> pd.DataFrame:
    """Per operation: how far the reference's two NumPy columns disagree at the same batch size (JAX table over
    PyTorch table, min and max), or that the PyTorch table has none (its speedups then use the JAX table's)."""
    rows = []
    for operation, group in published[published["reference"] == "jax"].groupby("operation", sort=True):
        both = group.dropna(subset=["numpy_s_in_pytorch_table"])
        ratio = both["numpy_s_in_jax_table"] / both["numpy_s_in_pytorch_table"]
        rows.append(
            {
                "operation": operation,
                "rows_with_both": len(both),
                "rows": len(group),
                "ratio_min": float(ratio.min()) if len(both) else None,
                "ratio_max": float(ratio.max()) if len(both) else None,
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------------------------
# Ours against the reference


def agreement(ours: Crossover, published: Crossover) -> str:
    """ "same" when the two crossover brackets overlap (each study's batch grid decides how finely it can place
    its crossover), "earlier"/"later" when ours lies entirely below/above the reference's, "not comparable"
    without data on either side."""
    a, b = ours.bracket(), published.bracket()
    if a is None or b is None:
        return "not comparable"
    if a[0] < b[1] and b[0] < a[1]:
        return "same"
    return "earlier" if a[1] <= b[0] else "later"


_PUBLISHED_FIELDS = [
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
COMPARISON_COLUMNS = [
    *CROSSOVER_COLUMNS,
    "reference",
    "reference_device",
    "reference_baseline",
    *(f"published_{name}" for name in _PUBLISHED_FIELDS),
    "agreement",
    "note",
]


def _published_columns(published: pd.Series) -> dict[str, Any]:
    return {
        "reference": published["reference"],
        "reference_device": published["device"],
        "reference_baseline": published["baseline"],
        **{f"published_{name}": published[name] for name in _PUBLISHED_FIELDS},
    }


def _unmatched_ours(row: pd.Series) -> str:
    """Why one of our series has no reference series to compare with."""
    if row["framework"] == "torch" and not _measured_text(row["platform"]):
        return "no PyTorch cell succeeded, so whether to compare with its CPU or CUDA series is unknown"
    return f"the reference has no {label(row['framework'])} {row['operation']} series on {row['platform']}"


def _unmatched_note(crossovers: pd.DataFrame, series: pd.Series) -> str:
    """Why a reference series has no counterpart among our crossovers."""
    operation, framework = series["operation"], series["framework"]
    if crossovers.empty or operation not in set(crossovers["operation"]):
        return f"this study did not measure {operation}"
    ours = crossovers[(crossovers["operation"] == operation) & (crossovers["framework"] == framework)]
    if ours.empty:
        return f"this study did not measure {label(framework)}"
    platforms = ", ".join(sorted({str(p) for p in ours["platform"] if _measured_text(p)})) or "an unknown platform"
    return f"our {label(framework)} cells ran on {platforms}, not where this series ran"


def compare_crossovers(crossovers: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """Our crossovers with the reference's beside them (the series `reference_for` picks) and the `agreement`;
    reference series that none of ours compares with (e.g. its PyTorch CPU when our PyTorch ran on a GPU) are
    listed too, as "not comparable"."""
    by_key = {(row["reference"], row["operation"]): row for _, row in published.iterrows()}
    rows, used = [], set()
    for _, row in crossovers.iterrows():
        name = reference_for(row["framework"], row["platform"])
        match = by_key.get((name, row["operation"]))
        out = {**row.to_dict(), "agreement": "not comparable"}
        if match is None:
            out["note"] = _unmatched_ours(row)
        else:
            used.add((name, row["operation"]))
            out |= _published_columns(match)
            out["agreement"] = agreement(from_row(row), from_row(match))
        rows.append(out)
    for key, match in by_key.items():
        if key not in used:
            note = _unmatched_note(crossovers, match)
            base = {"framework": match["framework"], "operation": match["operation"], "kind": "not measured"}
            rows.append({**base, **_published_columns(match), "agreement": "not comparable", "note": note})
    return _integers(pd.DataFrame(rows).reindex(columns=COMPARISON_COLUMNS))


# --------------------------------------------------------------------------------------------------------------------
# Figure


def _framework_order(frameworks: Iterable[str]) -> list[str]:
    """NumPy first, then the study's frameworks in the paper's usual order (PyTorch, JAX), then any other."""
    known = [NUMPY, *FRAMEWORK_LABELS]
    found = set(frameworks)
    return [f for f in known if f in found] + sorted(found - set(known))


def _color(framework: str) -> str:
    from fwbench.analysis.figures import PALETTE

    return {**PALETTE, "NumPy": "#333333"}.get(label(framework), "#888888")


def _panels(frame: pd.DataFrame) -> list[tuple[str, str]]:
    return sorted({(o, p) for o, p in zip(frame["operation"], frame["precision"], strict=True)})


def _batch_axis(ax, batches: Sequence[int]) -> None:
    """Log2 x axis with the measured batch sizes as ticks (every other label when there are many)."""
    import matplotlib.ticker

    ax.set_xscale("log", base=2)
    batches = sorted({int(b) for b in batches})
    if batches:
        step = max(1, math.ceil(len(batches) / 7))
        ax.set_xticks(batches)
        ax.set_xticklabels([str(b) if i % step == 0 else "" for i, b in enumerate(batches)])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        if len(batches) == 1:
            ax.set_xlim(batches[0] / 2, batches[0] * 2)


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=7, color="#555555")


def _line(ax, x, y, low, high, *, color: str, dashed: bool, text: str) -> None:
    ax.plot(x, y, "--" if dashed else "-", marker="o", markersize=3, color=color, linewidth=1, label=text)
    bars = pd.DataFrame({"x": x, "low": low, "high": high}).dropna()
    if not bars.empty:
        ax.vlines(bars["x"], bars["low"], bars["high"], color=color, linewidth=2, alpha=0.5)


def _series_label(framework: str, variant: str) -> str:
    return label(framework) + (" + copy" if variant == "transfer" else "")


def _log_y(ax, values: Iterable[float]) -> None:
    positive = [v for v in values if _measured(v) and v > 0]
    if not positive:
        ax.set_ylim(0.1, 10)
    ax.set_yscale("log")


def _time_panel(ax, panel: pd.DataFrame) -> None:
    """Median time per call against batch size, one line per framework and variant (copy dashed)."""
    ok = panel[panel["status"] == "ok"]
    for framework in _framework_order(panel["framework"]):
        for variant, rows in ok[ok["framework"] == framework].groupby("variant", sort=False):
            rows = rows.sort_values("batch_size")
            _line(
                ax,
                rows["batch_size"],
                rows["median_ms"],
                rows["median_ci_low"],
                rows["median_ci_high"],
                color=_color(framework),
                dashed=variant != "resident",
                text=_series_label(framework, variant),
            )
    failed = panel[panel["status"] != "ok"]
    if not failed.empty:
        floor = float(ok["median_ms"].min()) if not ok.empty else 1.0
        ax.scatter(failed["batch_size"], [floor] * len(failed), marker="x", color="black", zorder=5, label="failed")
    if ok.empty:
        _note(ax, "no successful cell")
    _log_y(ax, ok["median_ms"])
    ax.set_ylabel("time per call (ms)")


def _mark_crossovers(ax, crossovers: pd.DataFrame) -> None:
    """A dotted vertical line per crossover, labelled with its batch size ("<=b" when already at the smallest)."""
    import matplotlib.transforms

    blend = matplotlib.transforms.blended_transform_factory(ax.transData, ax.transAxes)
    for index, (_, row) in enumerate(crossovers[crossovers["kind"] == "crossover"].iterrows()):
        batch, color = int(row["crossover_batch"]), _color(row["framework"])
        ax.axvline(batch, color=color, linestyle=":" if row["variant"] == "resident" else "-.", linewidth=1)
        text = (f"≤{batch}" if bool(row["at_smallest"]) else str(batch)) + (" copy" * (row["variant"] != "resident"))
        ax.text(batch, 0.96 - 0.07 * index, text, transform=blend, color=color, fontsize=6, ha="left", va="top")


def _published_points(ax, published: pd.DataFrame, speedups: pd.DataFrame, operation: str) -> None:
    """The reference's speedups, as hollow markers, for the series each of our frameworks is compared with."""
    names = {
        reference_for(framework, _one_value(rows["platform"])): framework
        for framework, rows in speedups.groupby("framework")
    }
    for name, framework in names.items():
        rows = published[(published["reference"] == name) & (published["operation"] == operation)]
        if name is None or rows.empty:
            continue
        ax.scatter(
            rows["batch_size"],
            rows["speedup"],
            marker="s",
            s=14,
            facecolors="none",
            edgecolors=_color(framework),
            linewidths=0.8,
            label=f"{SERIES[name].label}, reference ({REFERENCE_STUDY})",
        )


def _speedup_panel(ax, speedups: pd.DataFrame, crossovers: pd.DataFrame, published: pd.DataFrame, operation: str):
    """Speedup over NumPy with CI bars, the line at 1, crossovers and the reference's points."""
    ok = speedups[speedups["status"] == "ok"]
    for framework in _framework_order(speedups["framework"]):
        for variant, rows in ok[ok["framework"] == framework].groupby("variant", sort=False):
            rows = rows.sort_values("batch_size")
            _line(
                ax,
                rows["batch_size"],
                rows["speedup"],
                rows["ci_low"],
                rows["ci_high"],
                color=_color(framework),
                dashed=variant != "resident",
                text=_series_label(framework, variant),
            )
    missing = speedups[speedups["status"] != "ok"]
    if not missing.empty:
        ax.scatter(missing["batch_size"], [1.0] * len(missing), marker="x", color="black", zorder=5, label="failed")
    ax.axhline(1.0, color="#777777", linewidth=0.8)
    _mark_crossovers(ax, crossovers)
    if published is not None and not published.empty:
        _published_points(ax, published, speedups, operation)
    if ok.empty:
        _note(ax, "no speedup: no framework besides NumPy" if speedups.empty else "no successful pair of cells")
    _log_y(ax, [*ok["speedup"], *ok["ci_low"], *(published["speedup"] if published is not None else [])])
    ax.set_ylabel("speedup over NumPy")
    ax.set_xlabel("batch size")


def _select(frame: pd.DataFrame, operation: str, precision: str | None = None) -> pd.DataFrame:
    if frame is None or frame.empty:
        return frame
    keep = frame["operation"] == operation
    if precision is not None and "precision" in frame:
        keep &= frame["precision"] == precision
    return frame[keep]


def micro_figure(
    frame: pd.DataFrame,
    speedups: pd.DataFrame,
    crossovers: pd.DataFrame,
    published: pd.DataFrame | None,
    pdf: str | Path,
    png: str | Path,
) -> None:
    """Time per call (top) and speedup over NumPy (bottom) against batch size, log-log, one column per operation
    (and precision, when the study has several): one line per framework, the copy variant dashed, 95% CI bars,
    crossovers as dotted lines labelled with their batch size, the reference's speedups as hollow squares, failed
    cells as x. A column without a successful cell is drawn empty, with a note."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    from fwbench.analysis.figures import save_figure

    sns.set_theme(context="paper", style="whitegrid", font_scale=0.8)
    panels = _panels(frame)
    several = len({p for _, p in panels}) > 1
    fig, axes = plt.subplots(2, max(1, len(panels)), figsize=(3.3 * max(1, len(panels)), 4.8), squeeze=False)
    for column, (operation, precision) in enumerate(panels):
        top, bottom = axes[0, column], axes[1, column]
        cells = _select(frame, operation, precision)
        _time_panel(top, cells)
        _speedup_panel(
            bottom,
            _select(speedups, operation, precision),
            _select(crossovers, operation, precision),
            _select(published, operation),
            operation,
        )
        for ax in (top, bottom):
            _batch_axis(ax, cells["batch_size"])
        top.set_title(f"{operation} ({precision})" if several else operation)
    _legend(fig, axes)
    fig.tight_layout()
    save_figure(fig, pdf, png)
    plt.close(fig)


def _legend(fig, axes) -> None:
    """One legend for the figure, below it: every series any panel drew, once."""
    entries: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(text, handle)
    if entries:
        fig.legend(
            list(entries.values()),
            list(entries),
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=min(4, len(entries)),
            fontsize=6,
            frameon=False,
        )


# --------------------------------------------------------------------------------------------------------------------
# LaTeX tables


def _speedup_text(row: Mapping[str, Any] | None) -> str:
    """Speedup with its 95% CI; bold when the CI lies above 1 (faster than NumPy, resolved)."""
    if row is None or row.get("status") != "ok":
        return "---"
    text = rf"{number(row['speedup'])}$\times$ {{\scriptsize[{number(row['ci_low'])}, {number(row['ci_high'])}]}}"
    return rf"\textbf{{{text}}}" if row["ci_low"] > 1 else text


def _time_text(frame: pd.DataFrame, framework: str, variant: str) -> str:
    rows = frame[frame["framework"] == framework]
    if rows.empty:
        return "---"
    if (rows["status"] != "ok").all():
        return FAILED
    match = rows[rows["variant"] == variant]
    return number(match["median_ms"].iloc[0]) if not match.empty else "---"


def _variants_of(frame: pd.DataFrame, framework: str) -> list[str]:
    found = set(frame.loc[frame["framework"] == framework, "variant"])
    return [v for v in VARIANTS if v in found] + sorted(found - set(VARIANTS))


def _lookup(speedups: pd.DataFrame, **key: Any) -> dict[str, Any] | None:
    rows = speedups
    for column, value in key.items():
        rows = rows[rows[column] == value]
    return rows.iloc[0].to_dict() if not rows.empty else None


def _table_header(frame: pd.DataFrame, frameworks: list[str]) -> tuple[list[str], int]:
    """The two header rows (framework groups, then per-variant columns) and the number of columns."""
    groups, columns, rules, position = [], [], [], 5
    for framework in frameworks:
        variants = _variants_of(frame, framework)
        groups.append(rf"\multicolumn{{{2 * len(variants)}}}{{c}}{{\textbf{{{escape(label(framework))}}}}}")
        rules.append(rf"\cmidrule(lr){{{position}-{position + 2 * len(variants) - 1}}}")
        position += 2 * len(variants)
        for variant in variants:
            columns += [rf"\textbf{{{VARIANT_LABELS.get(variant, escape(variant))} ms}}", r"\textbf{$\times$ NumPy}"]
    head = [r"\textbf{Op.}", r"\textbf{Prec.}", r"\textbf{BS}", r"\textbf{NumPy ms}"]
    lines = [" & ".join(["", "", "", "", *groups]) + r" \\", "".join(rules)] if frameworks else []
    return [*lines, " & ".join(head + columns) + r" \\"], position - 1


def micro_table(frame: pd.DataFrame, speedups: pd.DataFrame) -> str:
    """Per operation, precision and batch size: NumPy's median ms per call and, per framework and variant, its
    median ms per call and speedup over NumPy [95% CI] (booktabs tabular)."""
    frameworks = [f for f in _framework_order(frame["framework"]) if f != NUMPY]
    header, ncols = _table_header(frame, frameworks)
    lines = [r"\begin{tabular}{ll r r " + "r" * (ncols - 4) + "}", r"\toprule", *header, r"\midrule"]
    groups = list(frame.groupby(["operation", "precision"], sort=True))
    for index, ((operation, precision), group) in enumerate(groups):
        for row_index, (batch, cells) in enumerate(group.groupby("batch_size", sort=True)):
            first = row_index == 0
            values = [rf"\texttt{{{escape(operation)}}}" if first else "", escape(precision) if first else ""]
            values += [str(batch), _time_text(cells, NUMPY, "resident")]
            for framework in frameworks:
                for variant in _variants_of(frame, framework):
                    key = {"framework": framework, "operation": operation, "precision": precision}
                    match = _lookup(speedups, **key, variant=variant, batch_size=batch)
                    values += [_time_text(cells, framework, variant), _speedup_text(match)]
            lines.append(" & ".join(values) + r" \\")
        if index < len(groups) - 1:
            lines.append(r"\midrule")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def _at_largest(row: Mapping[str, Any]) -> str:
    if not _measured(row.get("speedup_at_largest")):
        return "---"
    return (
        rf"{number(row['speedup_at_largest'])}$\times$ {{\scriptsize[{number(row['ci_low_at_largest'])}, "
        rf"{number(row['ci_high_at_largest'])}]}} at {int(row['largest_batch'])}"
    )


def _text(value: Any) -> str:
    return escape(value) if _measured_text(value) else "---"


def crossover_table(comparison: pd.DataFrame) -> str:
    """Our crossovers (with the speedup at the largest batch size) beside the reference's, the devices, and the
    agreement (booktabs tabular)."""
    lines = [
        r"\begin{tabular}{l l l l l l l l l l l}",
        r"\toprule",
        r"\textbf{Framework} & \textbf{Op.} & \textbf{Prec.} & \textbf{Variant} & \textbf{Crossover} & "
        r"\textbf{Speedup at largest BS} & \textbf{Device} & \textbf{Reference series} & \textbf{Ref.\ crossover} & "
        r"\textbf{Ref.\ device} & \textbf{Agreement} \\",
        r"\midrule",
    ]
    for _, row in comparison.iterrows():
        measured = row["kind"] != "not measured"
        series = SERIES.get(row["reference"]) if _measured_text(row["reference"]) else None
        values = [
            escape(label(row["framework"])),
            rf"\texttt{{{escape(row['operation'])}}}",
            _text(row["precision"]),
            escape(VARIANT_LABELS.get(row["variant"], row["variant"])) if measured else "---",
            crossover_text(from_row(row)) if measured else "not measured",
            _at_largest(row) if measured else "---",
            _text(row["device"]) if measured else "---",
            escape(series.label) if series else "---",
            crossover_text(from_row(row, "published_")) if series else "---",
            _text(row["reference_device"]),
            escape(row["agreement"]),
        ]
        lines.append(" & ".join(values) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------------------------
# The analysis as one object; macros and the section


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
    cell_paths: Iterable[str | Path], reference_csv: str | Path, *, resamples: int = BOOTSTRAP_RESAMPLES
) -> MicroAnalysis:
    """Load the cells once and derive every table."""
    cells = load_micro_cells(cell_paths)
    speedups = micro_speedups(cells, resamples=resamples)
    crossovers = micro_crossovers(speedups)
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


def _sci(value: float) -> str:
    """A small number as $m \\times 10^{e}$ (LaTeX math, no package needed)."""
    if not _measured(value):
        return "---"
    if value == 0:
        return "0"
    mantissa, exponent = f"{float(value):.1e}".split("e")
    return rf"${mantissa}\times10^{{{int(exponent)}}}$"


def _values(series: pd.Series) -> list[Any]:
    return sorted({v for v in series if _measured_text(v)}, key=str)


def _joined_text(values: Sequence[Any], empty: str = "not recorded") -> str:
    return " / ".join(escape(v) for v in values) if values else empty


def _int_text(values: Sequence[Any]) -> str:
    return " / ".join(str(int(v)) for v in values) if values else "---"


def _cell_counts(frame: pd.DataFrame) -> tuple[int, int, int]:
    cells = frame.drop_duplicates("path")
    ok = int((cells["status"] == "ok").sum())
    return len(cells), ok, len(cells) - ok


def _series_name(row: Mapping[str, Any], several_precisions: bool) -> str:
    precision = f" {escape(row['precision'])}" if several_precisions else ""
    copy = " with copy" if row["variant"] == "transfer" else ""
    return rf"{escape(label(row['framework']))} \texttt{{{escape(row['operation'])}}}{precision}{copy}"


def micro_macros(analysis: MicroAnalysis) -> dict[str, str]:
    """The section's numbers as macros (names from `macro_name`): sizes, batch range, cell counts, crossover counts
    by kind and by agreement, each crossover (ours per framework/operation/precision/variant, the reference's per
    series/operation), the speedup at the largest batch size, the reference's JAX flatness ratios, NumPy's BLAS and
    thread count, and the worst output error per framework."""
    frame, crossovers, comparison = analysis.frame, analysis.crossovers, analysis.comparison
    total, ok, failed = _cell_counts(frame)
    kinds = crossovers["kind"]
    defs = {
        "fwbMicroDim": _int_text(_values(frame["dim"])),
        "fwbMicroHidden": _int_text(_values(frame["hidden"])),
        "fwbMicroClasses": _int_text(_values(frame["classes"])),
        "fwbMicroBatchMin": str(int(frame["batch_size"].min())),
        "fwbMicroBatchMax": str(int(frame["batch_size"].max())),
        "fwbMicroNumCells": str(total),
        "fwbMicroNumOk": str(ok),
        "fwbMicroNumFailed": str(failed),
        "fwbMicroNumSeries": str(len(crossovers)),
        "fwbMicroNumCrossovers": str(int((kinds == "crossover").sum())),
        "fwbMicroNumAtSmallest": str(int(crossovers["at_smallest"].astype(bool).sum())) if len(crossovers) else "0",
        "fwbMicroNumNever": str(int((kinds == "never").sum())),
        "fwbMicroNumUnverified": str(int(crossovers["unverified_batches"].map(_measured_text).sum())),
        "fwbMicroBlas": _joined_text(_values(frame.loc[frame["framework"] == NUMPY, "blas"])),
        "fwbMicroNumpyThreads": _int_text(_values(frame.loc[frame["framework"] == NUMPY, "threads"])),
        "fwbMicroErrorBound": " / ".join(_sci(v) for v in _values(frame["error_bound"])) or "---",
    }
    for word in ("same", "earlier", "later", "not comparable"):
        defs[macro_name("MicroNum", word)] = str(int((comparison["agreement"] == word).sum()))
    for _, row in crossovers.iterrows():
        parts = (row["framework"], row["operation"], row["precision"], row["variant"])
        defs[macro_name("MicroCrossover", *parts)] = crossover_text(from_row(row))
        defs[macro_name("MicroSpeedupAtLargest", *parts)] = _at_largest(row)
    for _, row in analysis.published_crossovers.iterrows():
        defs[macro_name("MicroRefCrossover", row["reference"], row["operation"])] = crossover_text(from_row(row))
    for _, row in analysis.flatness.iterrows():
        for column in ("jax_ratio", "numpy_ratio", "jax_tail_ratio", "numpy_tail_ratio"):
            defs[macro_name("MicroRef", column, row["operation"])] = number(row[column])
    for framework in _framework_order(frame["framework"]):
        rows = frame[frame["framework"] == framework]
        errors = rows["max_rel_error"].dropna()
        defs[macro_name("MicroMaxRelError", framework)] = _sci(errors.max()) if len(errors) else "---"
        defs[macro_name("MicroDevice", framework)] = _joined_text(_values(rows["device"]))
    return defs


def micro_absent_section() -> str:
    """The section of a study without the micro suite: one sentence, so the paper compiles for any config."""
    return (
        "\\section{Micro-benchmarks}\n\\label{sec:micro}\n"
        "This study has no micro suite (\\texttt{suites} in its config).\n"
    )


def _and(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _intro(analysis: MicroAnalysis) -> str:
    published = analysis.published
    low, high = int(published["batch_size"].min()), int(published["batch_size"].max())
    return (
        f"A published report timed matrix and neural-network operations on an {REFERENCE_GPU} machine at batch "
        f"sizes {low} to {high} for NumPy, PyTorch (CPU and CUDA) and JAX, and read off the batch size from which "
        "each framework beats NumPy. This section asks the same question of this study's machine: from which "
        "batch size does each framework compute faster than plain NumPy, and with what confidence?"
    )


def _operations_text(frame: pd.DataFrame) -> str:
    described = {
        "matmul": r"\texttt{matmul}, the product of a $b \times d$ batch with a $d \times d$ matrix",
        "mlp": r"\texttt{mlp}, inference of a fixed multilayer perceptron $d \to h \to d \to c$ with ReLU",
    }
    operations = sorted(set(frame["operation"]))
    parts = [described.get(o, rf"\texttt{{{escape(o)}}}") for o in operations]
    sizes = rf"$d = {_int_text(_values(frame['dim']))}$"
    if "mlp" in operations:
        sizes += rf", $h = {_int_text(_values(frame['hidden']))}$, $c = {_int_text(_values(frame['classes']))}$"
    batches = _and([str(int(b)) for b in sorted(set(frame["batch_size"]))])
    total, ok, _ = _cell_counts(frame)
    return (
        f"\\paragraph{{Method}} {_counted(len(operations), 'operation').capitalize()} "
        f"{'is' if len(operations) == 1 else 'are'} "
        f"timed: {'; '.join(parts)}; with {sizes}, at batch sizes $b$ = {batches} ({ok} of "
        f"{_plural(total, 'cell')} succeeded). The weights are generated once from the study's seed and every "
        "framework reads the same weight and input bytes."
    )


def _timing_text(frame: pd.DataFrame) -> str:
    compiled = frame[frame["compile_s"].map(_measured)].drop_duplicates("path")
    text = (
        " Every framework, NumPy included, is timed per call on inputs and weights already on its device, each call "
        "followed by a synchronise: the wall clock of the call, Python dispatch included, for every framework alike."
    )
    for framework, rows in compiled.groupby("framework"):
        seconds = rows["compile_s"].astype(float)
        text += (
            f" {escape(label(framework))} compiles before the timed calls, on the exact shapes timed; its compile "
            f"time is reported apart and never timed (median {number(seconds.median())}~s per cell, at most "
            f"{number(seconds.max())}~s)."
        )
    if (frame["variant"] == "transfer").any():
        text += (
            r" The \emph{with copy} variant times the host-to-device copy of the input batch followed by the call "
            "(the weights stay resident): the closest analogue of what the reference probably timed. NumPy computes "
            "on the host, so its time per call is the baseline of both variants."
        )
    else:
        text += " The variant with the host-to-device copy of the input batch was not measured in this study."
    return text


def _threads_text(frame: pd.DataFrame) -> str:
    numpy_rows = frame[frame["framework"] == NUMPY]
    if numpy_rows.empty:
        return " This study has no NumPy cell: no speedup can be computed."
    others = [
        f"{escape(label(f))} {_int_text(_values(frame.loc[frame['framework'] == f, 'threads']))}"
        for f in _framework_order(frame["framework"])
        if f != NUMPY
    ]
    pools = f" (the frameworks' own pools: {', '.join(others)})" if others else ""
    return (
        f" Threadpoolctl pins NumPy's BLAS ({_joined_text(_values(numpy_rows['blas']))}) to "
        f"{_int_text(_values(numpy_rows['threads']))} threads{pools}."
    )


def _agreement_text(frame: pd.DataFrame) -> str:
    errors = [
        f"{_sci(rows['max_rel_error'].max())} for {escape(label(f))}"
        for f in _framework_order(frame["framework"])
        if (rows := frame[frame["framework"] == f])["max_rel_error"].notna().any()
    ]
    if not errors:
        return ""
    bounds = " / ".join(_sci(v) for v in _values(frame["error_bound"])) or "not recorded"
    return (
        " Before any call is timed, each cell's output is compared with NumPy in float64 on the same float32 "
        f"operands: the largest relative error is {_and(errors)} (bound {bounds})."
    )


def _statistics_text(analysis: MicroAnalysis) -> str:
    frame = analysis.frame
    trials = _values(frame["trials"])
    several = any(int(t) > 1 for t in trials)
    hierarchy = "; where a cell has several trials, the trials are resampled first, then samples within them" * several
    return (
        f" A cell's time is the median of its per-call samples pooled over its trials ({_int_text(trials)} per "
        "cell); the speedup is NumPy's median over the framework's at the same operation, precision and batch "
        f"size, with a 95\\% percentile bootstrap CI ({analysis.resamples} resamples{hierarchy}). The crossover is "
        "the smallest measured batch size from which the CI's lower bound stays above 1 at every larger measured "
        "batch size; ``never'' when it is not above 1 at the largest."
    )


def _precision_text(frame: pd.DataFrame) -> str:
    others = sorted(set(frame["precision"]) - {"fp32"})
    if not others:
        return ""
    return (
        f" NumPy has no {' or '.join(map(escape, others))} arithmetic: at every precision label its cell computes in "
        f"float32, so a {escape(others[0])} speedup compares a framework in {escape(others[0])} with NumPy in float32."
    )


def _method(analysis: MicroAnalysis) -> str:
    frame = analysis.frame
    return (
        _operations_text(frame)
        + _timing_text(frame)
        + _threads_text(frame)
        + _agreement_text(frame)
        + _statistics_text(analysis)
        + _precision_text(frame)
    )


def _listed(rows: pd.DataFrame, several: bool, what) -> str:
    return _and([f"{_series_name(row, several)} {what(row)}".rstrip() for _, row in rows.iterrows()])


def _results(analysis: MicroAnalysis) -> str:
    """How many series cross over, which never do, and the range of speedups at the largest batch: only counts and
    numbers from the crossovers table."""
    crossovers = analysis.crossovers
    if crossovers.empty:
        return "No framework besides NumPy was measured, so there is no speedup to report."
    several = analysis.frame["precision"].nunique() > 1
    crossed = crossovers[crossovers["kind"] == "crossover"]
    text = (
        f"Of {_plural(len(crossovers), 'speedup series', 'speedup series')} (framework, operation, "
        f"{'precision, ' if several else ''}variant; Figure~\\ref{{fig:micro}}, Table~\\ref{{tab:micro}}), "
        f"{len(crossed)} cross{'es' if len(crossed) == 1 else ''} over within the measured batch sizes"
    )
    if len(crossed):
        text += ": " + _listed(crossed, several, lambda r: f"from {crossover_text(from_row(r))}")
    text += "." + _at_smallest_text(crossed) + _never_text(crossovers, several) + _unverified_text(crossed, several)
    return text + _largest_text(crossovers, several)


def _at_smallest_text(crossed: pd.DataFrame) -> str:
    if crossed.empty:
        return ""
    count = int(crossed["at_smallest"].astype(bool).sum())
    if count == 0:
        return " None of them lies at the smallest batch size measured."
    return (
        f" {_counted(count, 'crossover').capitalize()} of {len(crossed)} already lie{'s' if count == 1 else ''} at "
        "the smallest batch size measured."
    )


def _never_text(crossovers: pd.DataFrame, several: bool) -> str:
    never = crossovers[crossovers["kind"] == "never"]
    empty = crossovers[crossovers["kind"] == "no data"]
    text = ""
    if len(never):
        one = len(never) == 1
        text += (
            f" {len(never)} never {'does' if one else 'do'} (the CI's lower bound at the largest batch size is not "
            f"above 1): {_listed(never, several, lambda r: '')}."
        )
    if len(empty):
        text += f" {_plural(len(empty), 'series', 'series')} {'has' if len(empty) == 1 else 'have'} no successful "
        text += "pair of cells."
    return text


def _unverified_text(crossed: pd.DataFrame, several: bool) -> str:
    unverified = crossed[crossed["unverified_batches"].map(_measured_text)]
    if unverified.empty:
        return ""
    one = len(unverified) == 1
    at = _listed(unverified, several, lambda r: f"at {str(r['unverified_batches']).replace('+', ', ')}")
    return (
        f" {_counted(len(unverified), 'crossover').capitalize()} {'is' if one else 'are'} unverified ($^{{m}}$): "
        "a cell at a "
        f"larger batch size failed ({at})."
    )


def _largest_text(crossovers: pd.DataFrame, several: bool) -> str:
    measured = crossovers[crossovers["speedup_at_largest"].map(_measured)]
    if measured.empty:
        return ""
    low = measured.loc[measured["speedup_at_largest"].astype(float).idxmin()]
    high = measured.loc[measured["speedup_at_largest"].astype(float).idxmax()]
    if len(measured) == 1:
        return f" At its largest batch size, the speedup is {_at_largest(high)}."
    return (
        f" At the largest batch size of each series, the speedup ranges from {_at_largest(low)} "
        f"({_series_name(low, several)}) to {_at_largest(high)} ({_series_name(high, several)})."
    )


def _device_caveat(analysis: MicroAnalysis) -> str:
    frame = analysis.frame
    ours = [
        f"{escape(label(f))} on {_joined_text(_values(frame.loc[frame['framework'] == f, 'device']))}"
        for f in _framework_order(frame["framework"])
    ]
    return (
        f"(i) Devices: the reference ran on an {REFERENCE_GPU} (its PyTorch CPU series on that machine's CPU); "
        f"this study ran {_and(ours)}."
    )


def _flatness_caveat(analysis: MicroAnalysis) -> str:
    parts, fixed = [], []
    for _, row in analysis.flatness.iterrows():
        parts.append(
            f"for \\texttt{{{escape(row['operation'])}}} its JAX time per call varies by a factor of "
            f"{number(row['jax_ratio'])} over batch sizes {row['batch_min']}--{row['batch_max']} "
            f"({number(row['jax_tail_ratio'])} from {row['batch_next']} to {row['batch_max']}), its NumPy time by "
            f"{number(row['numpy_ratio'])} ({number(row['numpy_tail_ratio'])})"
        )
        if row["jax_tail_ratio"] * 10 < row["numpy_tail_ratio"]:
            fixed.append((row, row["batch_max"] / row["batch_next"]))
    text = "(ii) The reference's JAX timing: " + "; ".join(parts) + "."
    if fixed:
        operations = _and([rf"\texttt{{{escape(row['operation'])}}}" for row, _ in fixed])
        text += (
            f" For {operations}, a JAX time whose factor of change is under a tenth of NumPy's while the number of "
            f"rows grows {number(max(work for _, work in fixed))}-fold points to a fixed cost inside its timed "
            "region, such as compilation or a host transfer; our with-copy variant includes the transfer, never the "
            "compilation."
        )
    return text


def _baselines_caveat(analysis: MicroAnalysis) -> str:
    parts = []
    for _, row in analysis.baselines.iterrows():
        operation = rf"\texttt{{{escape(row['operation'])}}}"
        if row["rows_with_both"]:
            parts.append(
                f"for {operation} its JAX table's NumPy time is {number(row['ratio_min'])} to "
                f"{number(row['ratio_max'])} times its PyTorch table's at the same batch size"
            )
        else:
            parts.append(f"for {operation} its PyTorch table has no NumPy time, so the JAX table's is used")
    return (
        "(iv) Baselines: the reference's two tables give their own NumPy times; "
        + "; ".join(parts)
        + ". Each reference series is compared with its own table's NumPy time where there is one."
    )


def _comparison_text(analysis: MicroAnalysis) -> str:
    counts = analysis.comparison["agreement"].value_counts()
    words = [f"{int(counts.get(w, 0))} {w}" for w in ("same", "earlier", "later", "not comparable")]
    return (
        f"Table~\\ref{{tab:micro-crossover}} sets our crossovers beside the reference's (the same definition applied "
        f"to its point estimates, since it gives no interval): {_and(words)}. Four caveats, computed from the "
        "reference's own numbers where it gives them. "
        + _device_caveat(analysis)
        + " "
        + _flatness_caveat(analysis)
        + " (iii) Sizes: the reference does not state the sizes of its matrices or network; ours are given above. "
        + _baselines_caveat(analysis)
    )


def _float(kind: str, caption: str, label_: str, body: str) -> list[str]:
    return [
        rf"\begin{{{kind}*}}[t]",
        r"\centering",
        rf"\caption{{{caption}}}",
        rf"\label{{{label_}}}",
        r"\footnotesize",
        r"\begin{adjustbox}{max width=\textwidth}",
        body.rstrip(),
        r"\end{adjustbox}",
        rf"\end{{{kind}*}}",
    ]


def _figure(figure: str) -> list[str]:
    return [
        r"\begin{figure*}[t]",
        r"\centering",
        rf"\includegraphics[width=\textwidth]{{{figure}}}",
        r"\caption{Micro-benchmarks against batch size, log-log: median time per call (top; 95\% CI bars; dashed: "
        r"with the host-to-device copy of the input batch) and speedup over NumPy (bottom; 95\% bootstrap CI bars; "
        r"vertical dotted lines: crossovers, labelled with their batch size; hollow squares: the reference's "
        rf"published speedups on the {REFERENCE_GPU}). $\times$: a failed cell.}}",
        r"\label{fig:micro}",
        r"\end{figure*}",
    ]


def _micro_caption(frame: pd.DataFrame) -> str:
    caption = (
        r"Micro-benchmarks: NumPy's median time per call and, per framework and variant (resident: inputs on the "
        r"device; with copy: the host-to-device copy of the input batch included), its median time per call and "
        r"speedup over NumPy [95\% CI]; bold: the CI lies above 1. failed$^\dagger$: the cell failed (its reason "
        r"is in the suite's tidy table); ---: no cell, or no speedup because a cell of the pair failed."
    )
    if set(frame["precision"]) - {"fp32"}:
        caption += r" NumPy computes in float32 at every precision label."
    return caption


CROSSOVER_CAPTION = (
    r"Crossover batch sizes: ours, the smallest measured batch size from which the speedup's 95\% CI stays above 1 "
    r"($\le b$: faster already at the smallest measured batch size $b$; $^{m}$: unverified, a cell at a larger batch "
    r"size failed), with the speedup at the largest batch size; and the reference's, from its point estimates, "
    rf"beside its device ({REFERENCE_STUDY}). Agreement: same when the two crossovers' brackets (from the last "
    r"batch size below to the crossover, as each study's batch grid places it) overlap; earlier or later when ours "
    r"lies entirely below or above; not comparable without a series on either side."
)


def micro_section(analysis: MicroAnalysis | None, figure: str = "micro") -> str:
    """The paper's micro-benchmarks section: method, figure, both tables, results and the published-vs-reproduced
    comparison with its caveats; one sentence when the study has no micro suite (`analysis` None)."""
    if analysis is None:
        return micro_absent_section()
    body = [
        r"\section{Micro-benchmarks}",
        r"\label{sec:micro}",
        _intro(analysis),
        "",
        _method(analysis),
        "",
        *_figure(figure),
        "",
        *_float("table", _micro_caption(analysis.frame), "tab:micro", micro_table(analysis.frame, analysis.speedups)),
        "",
        r"\paragraph{Results} " + _results(analysis),
        "",
        r"\paragraph{Published against reproduced} " + _comparison_text(analysis),
        "",
        *_float("table", CROSSOVER_CAPTION, "tab:micro-crossover", crossover_table(analysis.comparison)),
    ]
    return "\n".join(body) + "\n"


# --------------------------------------------------------------------------------------------------------------------
# Entry point

OUTPUT_KEYS = ("csv", "speedups", "crossovers", "section", "macros", "pdf", "png")


def write_micro_outputs(
    cell_paths: Iterable[str | Path],
    reference_csv: str | Path,
    *,
    outputs: Mapping[str, str | Path],
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> MicroAnalysis:
    """Everything the workflow needs from the micro cells, each file written atomically: the tidy table (csv), the
    speedups, the crossovers beside the reference's (crossovers), the section and its macros (LaTeX), and the
    figure (pdf, png; the section includes it by the pdf's base name)."""
    lacking = [key for key in OUTPUT_KEYS if key not in outputs]
    if lacking:
        raise KeyError(f"write_micro_outputs needs outputs {', '.join(lacking)}")
    analysis = analyse_micro(cell_paths, reference_csv, resamples=resamples)
    atomic_write_text(outputs["csv"], analysis.frame.to_csv(index=False))
    atomic_write_text(outputs["speedups"], analysis.speedups.to_csv(index=False))
    atomic_write_text(outputs["crossovers"], analysis.comparison.to_csv(index=False))
    micro_figure(
        analysis.frame, analysis.speedups, analysis.crossovers, analysis.published, outputs["pdf"], outputs["png"]
    )
    atomic_write_text(outputs["section"], micro_section(analysis, figure=Path(outputs["pdf"]).stem))
    atomic_write_text(outputs["macros"], define_macros(micro_macros(analysis)))
    return analysis
