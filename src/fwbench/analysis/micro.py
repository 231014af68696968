"""The micro suite's analysis: from which batch size does each framework compute faster than plain NumPy?

A reference study (an NVIDIA T4) timed a matrix product and a small network at batch sizes 1 to 4096 for NumPy,
PyTorch and JAX and read conclusions off the batch size at which each framework overtakes NumPy. Here the same
question is answered from the micro cells (`results/cells/micro/...`):

Cells are keyed by framework and execution mode (fwbench.modes: a config may measure PyTorch both eagerly and
compiled in this suite), and every table, series, macro and label below keeps the two apart; a mode is named
wherever its framework has another one in the study.

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
from fwbench.analysis.latex import FRAMEWORK_LABELS, ordered_variants
from fwbench.analysis.partners import cell_mode, variant_names
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


def series_order(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Distinct (framework, mode) pairs, NumPy first, then the study's frameworks in the paper's order, each
    framework's modes eager first."""
    pairs = {(str(f), str(m)) for f, m in pairs}
    numpy = sorted(p for p in pairs if p[0] == NUMPY)
    return numpy + ordered_variants(pairs - set(numpy))


def mode_names(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(framework, mode) -> its name in the section, tables and figure: the framework alone where it has one mode in
    the study ("JAX/Flax", "NumPy"), with the mode where it has several ("PyTorch (eager)", "PyTorch (compiled)")."""
    pairs = series_order(pairs)
    names = variant_names(pairs)
    return {(f, m): label(f) if f == NUMPY and names[(f, m)] == f else names[(f, m)] for f, m in pairs}


def row_modes(frame: pd.DataFrame) -> pd.Series:
    """Each row's mode; a table from before modes (no `mode` column) has each framework's primary one."""
    if "mode" in frame:
        return frame["mode"].astype(str)
    return pd.Series([cell_mode({"framework": f}) for f in frame["framework"]], index=frame.index, dtype=object)


def frame_modes(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """The (framework, mode) pairs of a micro table, in `series_order`."""
    return series_order(zip(frame["framework"], row_modes(frame), strict=True))


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word if count == 1 else (many or word + 's')}"


_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def counted(count: int, word: str, many: str | None = None) -> str:
    """Like `plural`, with counts up to ten in words (for the start of a sentence)."""
    text = plural(count, word, many)
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
    mode: str = ""  # the execution mode (fwbench.modes); left out, the framework's primary one

    def __post_init__(self):
        self.mode = self.mode or cell_mode({"framework": self.framework})

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def key(self) -> tuple[str, str, int]:
        return self.operation, self.precision, self.batch_size

    def pooled(self, variant: str) -> np.ndarray:
        return np.concatenate(self.variants[variant])


# The mode's folder is optional: paths from before cells had a mode lack it.
_MICRO_PATH = re.compile(
    r"(?:^|/)cells/micro/(?P<framework>[^/]+)/(?:(?P<mode>[^/]+)/)?(?P<operation>[^/]+)/(?P<precision>[^/]+)/"
    r"bs(?P<batch>[0-9]+)\.json$"
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
    holds = (cell["framework"], cell_mode(cell), cell["model"], cell["precision"], str(cell["batch_size"]))
    if match:
        mode = match["mode"] or cell_mode({"framework": match["framework"]})
        if holds != (match["framework"], mode, match["operation"], match["precision"], match["batch"]):
            return "it holds the result of cell micro/{}/{}/{}/{}/bs{}".format(*holds)
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
        mode=cell_mode(cell),
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
    return sorted(
        cells, key=lambda c: (c.operation, c.precision, c.framework != NUMPY, c.framework, c.mode, c.batch_size)
    )


def _as_cells(cells_or_paths: Iterable[MicroCell | str | Path]) -> list[MicroCell]:
    items = list(cells_or_paths)
    if items and all(isinstance(item, MicroCell) for item in items):
        return items  # type: ignore[return-value]
    return load_micro_cells(items)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------------------------
# Tidy table

FRAME_COLUMNS = [
    "framework",
    "mode",
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
        "mode": cell.mode,
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


def integers(frame: pd.DataFrame) -> pd.DataFrame:
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
        "ci_method": f"order statistics of the samples pooled over {plural(trials, 'trial')}",
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
    return integers(pd.DataFrame(rows).reindex(columns=FRAME_COLUMNS))


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
    "mode",
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
            name = f"{cell.framework}/{cell.mode}/{cell.operation}/{cell.precision}/bs{cell.batch_size}/{variant}"
            self._cache[key] = median_draws(cell.variants[variant], _rng(name), self.resamples)
        return self._cache[key]


def _ci_method(baseline: MicroCell, cell: MicroCell, variant: str) -> str:
    counts = len(baseline.variants["resident"]), len(cell.variants[variant])
    if counts == (1, 1):
        return "percentile bootstrap of the samples (one trial per cell)"
    return (
        f"hierarchical percentile bootstrap: trials, then samples within them (NumPy {plural(counts[0], 'trial')}, "
        f"{label(cell.framework)} {cell.mode} {plural(counts[1], 'trial')})"
    )


def _missing_reason(cell: MicroCell, variant: str, baseline: MicroCell | None) -> str | None:
    """Why no speedup can be computed for this cell and variant, or None."""
    if baseline is None:
        return "no NumPy cell at this operation, precision and batch size"
    if not baseline.ok:
        return f"the NumPy cell failed: {_one_line(baseline.reason)}"
    if not cell.ok:
        return f"the {label(cell.framework)} {cell.mode} cell failed: {_one_line(cell.reason)}"
    if variant not in cell.variants:
        why = ((cell.result.get("metrics") or {}).get("missing") or {}).get(variant)
        return f"no {variant} samples" + (f": {_one_line(why)}" if why else "")
    return None


def _speedup_row(cell: MicroCell, variant: str, baseline: MicroCell | None, draws: _Draws) -> dict[str, Any]:
    platform, device = _device(cell.result)
    row = {
        "framework": cell.framework,
        "mode": cell.mode,
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


def _expected_variants(cells: Sequence[MicroCell]) -> dict[tuple[str, str, str, str], list[str]]:
    """(framework, mode, operation, precision) -> the variants its ok cells have (a failed cell stands for them all;
    "resident" when none succeeded)."""
    found: dict[tuple[str, str, str, str], set[str]] = {}
    for cell in cells:
        names = found.setdefault((cell.framework, cell.mode, cell.operation, cell.precision), set())
        names.update(cell.variants)
    return {
        key: [v for v in VARIANTS if v in names] + sorted(names - set(VARIANTS)) or ["resident"]
        for key, names in found.items()
    }


def micro_speedups(
    cells_or_paths: Iterable[MicroCell | str | Path], *, resamples: int = BOOTSTRAP_RESAMPLES
) -> pd.DataFrame:
    """Speedup over NumPy for every framework other than NumPy and each of its modes, operation, precision, variant
    and batch size:
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
        for variant in variants[(cell.framework, cell.mode, cell.operation, cell.precision)]
    ]
    frame = integers(pd.DataFrame(rows).reindex(columns=SPEEDUP_COLUMNS))
    keys = ["framework", "mode", "operation", "precision", "variant", "batch_size"]
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


def is_measured(value: Any) -> bool:
    return value is not None and not pd.isna(value) and math.isfinite(float(value))


def crossover(batch_sizes: Sequence[int], values: Sequence[float | None], threshold: float = 1.0) -> Crossover:
    """The crossover of one series: the smallest measured batch b such that at every measured batch >= b the value
    (a speedup CI's lower bound, or a point estimate) is above `threshold`. Missing values (None, NaN) are batches
    without a result: skipped, and reported (above the crossover they make it unverified)."""
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
CROSSOVER_COLUMNS = [
    "framework",
    "mode",
    "operation",
    "precision",
    "variant",
    *CROSSOVER_FIELDS,
    "ci_low_at_largest",
    "ci_high_at_largest",
    "platform",
    "device",
]


def crossover_columns(result: Crossover) -> dict[str, Any]:
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
        return int(value) if is_measured(value) else None

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
    )


def one_value(values: pd.Series) -> str | None:
    found = sorted({str(v) for v in values if is_measured_text(v)})
    return " / ".join(found) if found else None


def is_measured_text(value: Any) -> bool:
    return value is not None and not (not isinstance(value, str) and pd.isna(value)) and str(value) != ""


def micro_crossovers(speedups: pd.DataFrame) -> pd.DataFrame:
    """One row per framework, mode, operation, precision and variant: the crossover of the speedup's CI lower bound
    (`crossover`), and the speedup with its CI at the largest measured batch."""
    rows = []
    keys = ["framework", "mode", "operation", "precision", "variant"]
    for key, group in speedups.groupby(keys, sort=True):
        group = group.sort_values("batch_size")
        lows = [row["ci_low"] if row["status"] == "ok" else None for _, row in group.iterrows()]
        result = crossover(group["batch_size"].tolist(), lows)
        last = group[group["batch_size"] == result.largest].iloc[0] if result.largest is not None else None
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                **crossover_columns(result),
                "speedup_at_largest": None if last is None else last["speedup"],
                "ci_low_at_largest": None if last is None else last["ci_low"],
                "ci_high_at_largest": None if last is None else last["ci_high"],
                "platform": one_value(group["platform"]),
                "device": one_value(group["device"]),
            }
        )
    return integers(pd.DataFrame(rows).reindex(columns=CROSSOVER_COLUMNS))
