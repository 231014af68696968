"""The micro suite's analysis: from which batch size does each framework compute faster than plain NumPy?

A reference study (an NVIDIA T4) timed a matrix product and a small network at batch sizes 1 to 4096 for NumPy,
PyTorch and JAX and read conclusions off the batch size at which each framework overtakes NumPy. Here the same
question is answered from the micro cells (`results/cells/micro/...`):

Cells are keyed by framework and execution mode (fwbench.study.modes: a config may measure PyTorch both eagerly and
compiled in this suite), and every table, series, macro and label below keeps the two apart; a mode is named
wherever its framework has another one in the study.

- the tidy table (`micro_frame`): one row per cell and timing variant ("resident": each call on device-resident
  inputs; "transfer": the host-to-device copy of the input batch plus the call), failed cells one row;
- the speedup over NumPy (`micro_speedups`): NumPy's median time per call over the framework's, at the same
  operation, precision label and batch size. The process is the unit, as in the inference suite: with two or more
  trials per cell, the speedup is the geometric mean of the per-round ratios of the trials' medians (NumPy's trial
  and the framework's trial of the same round of the group paired), with a Student-t 95% interval on their logs
  (rounds - 1 df; its standard error and df kept for verdicts at other levels); with one trial only a percentile
  bootstrap of one process's samples remains, labelled within-process, which never resolves a difference or a
  crossover;
- the crossover (`crossover`, `micro_crossovers`): from the point estimates, as for the reference, the smallest
  measured batch size from which the speedup stays above 1 at every larger measured batch size (no interpolation,
  on either side), or "never" in the measured range; with intervals over processes, a 95% interval for it from
  resampling the whole series (`crossover_interval`), and a statement of only what the intervals show (`shown`:
  "faster from 256 on; not resolved at 64");
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

from fwbench.analysis.common.cells import CellFileError
from fwbench.analysis.common.latex import FRAMEWORK_LABELS, ordered_variants
from fwbench.analysis.common.partners import cell_mode, variant_names
from fwbench.analysis.common.verdicts import DEFAULT_MULTIPLICITY, VERDICT_COLUMNS, adjust_verdicts, p_value
from fwbench.results import load_result
from fwbench.trackers.hardware import recorded_core_type
from fwbench.trackers.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    WITHIN_PROCESS_ONLY,
    Interval,
    geometric_mean_interval,
    order_statistic_median,
    summary,
    welch_ratio_interval,
)

SUITE = "micro"
NUMPY = "numpy"
VARIANTS = ("resident", "transfer")
LABELS = {**FRAMEWORK_LABELS, NUMPY: "NumPy"}
VARIANT_LABELS = {"resident": "resident", "transfer": "with copy"}
# Elements of one chunk of bootstrap resamples (index int64 + gathered float64 + np.median's partition copy, about
# 24 MB): a cell of 20,000 samples is resampled 52 rows at a time instead of 2000 x 20,000 at once (640 MB).
CHUNK_ELEMENTS = 2**20
CONFIDENCE = 0.95
# Where an interval's variation comes from (the words of the inference suite's ci_scope,
# fwbench.analysis.inference.aggregate): NumPy's and the framework's trials paired by round; trials of both, not paired;
# one process's samples only.
PAIRED, UNPAIRED, WITHIN = "paired_rounds", "unpaired_trials", "within_process"
BETWEEN_PROCESSES = (PAIRED, UNPAIRED)
# A speedup's verdict from its 95% interval; only an interval over processes resolves anything.
FASTER, SLOWER, NOT_RESOLVED, WITHIN_ONLY = "faster", "slower", "not resolved", "within one process"
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
    mode: str = ""  # the execution mode (fwbench.study.modes); left out, the framework's primary one

    def __post_init__(self):
        self.mode = self.mode or cell_mode({"framework": self.framework})

    @property
    def group(self) -> str | None:
        """The id of the comparison group (one job: every framework at this operation, precision and batch size)
        whose rounds measured the cell."""
        return ((self.result.get("provenance") or {}).get("group") or {}).get("id")

    def rounds(self, variant: str) -> tuple[int, ...] | None:
        """The round of the group each of the variant's trials ran in (`metrics.trials[i].round`, trial i of
        `variants[variant]`), or None where the cell does not record one per trial."""
        trials = (self.result.get("metrics") or {}).get("trials") or []
        rounds = [trial.get("round") if isinstance(trial, dict) else None for trial in trials]
        if len(rounds) != len(self.variants.get(variant, ())) or any(r is None for r in rounds):
            return None
        rounds = [int(r) for r in rounds]
        return tuple(rounds) if len(set(rounds)) == len(rounds) else None

    def trial_medians(self, variant: str) -> np.ndarray:
        """Each trial's (process's) median time per call of the variant."""
        return np.array([float(np.median(trial)) for trial in self.variants[variant]])

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
    "ci_scope",
    "n_samples",
    "trials",
    "noisy",
    "noisy_trials",
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
    "blas_core_type",
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


def _kernels(settings: dict[str, Any], pool: dict[str, Any]) -> str:
    """The kernels the process's own record (`process_blas`) says this BLAS chose, as ", Haswell kernels"; nothing
    where the cell recorded none."""
    libraries = (settings.get("process_blas") or {}).get("libraries") or []
    for library in libraries:
        same = all(library.get(key) == pool.get(key) for key in ("internal_api", "version"))
        if same and library.get("architecture"):
            return f", {library['architecture']} kernels"
    return ""


def _blas(result: dict[str, Any]) -> str | None:
    """The BLAS pools threadpoolctl found in a NumPy cell, e.g. "openblas 0.3.29, Haswell kernels, 2 threads" (the
    kernels where the cell recorded them)."""
    settings = _framework_provenance(result).get("settings") or {}
    described = {
        f"{pool.get('internal_api') or pool.get('user_api') or 'BLAS'} {pool.get('version') or ''}".strip()
        + _kernels(settings, pool)
        + (f", {pool['num_threads']} threads" if pool.get("num_threads") is not None else "")
        for pool in settings.get("blas") or []
        if isinstance(pool, dict)
    }
    return "; ".join(sorted(described)) or None


def _forced_core_type(cell: MicroCell) -> str | None:
    """The OPENBLAS_CORETYPE a NumPy cell ran under; None where unset, and for a framework's cell, whose matmuls do
    not run on NumPy's OpenBLAS."""
    if cell.framework != NUMPY:
        return None
    return recorded_core_type(cell.result.get("provenance") or {})[0]


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
        "blas_core_type": _forced_core_type(cell),
        "platform": platform,
        "device": device,
        "cpu_model": (cell.result.get("provenance") or {}).get("cpu_model"),
        "path": cell.path,
    }


INTEGER_COLUMNS = {
    "batch_size",
    "n_samples",
    "trials",
    "noisy_trials",
    "numpy_trials",
    "pairs",
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
    """Time per call of one variant. With several trials the process is the unit: the geometric mean of the trials'
    medians with a Student-t 95% CI on their logs (trials - 1 df), as the inference suite summarises trials. With
    one trial: the median of its samples with the distribution-free order-statistic 95% CI (O(n), no resampling),
    which leaves out the variation between processes and says so. Noisy: a trial whose IQR exceeds 10% of its
    median (each process on its own; pooling processes would count their differences as noise)."""
    trials = cell.variants[variant]
    pooled = cell.pooled(variant)
    noisy = sum(bool(summary(trial)["noisy"]) for trial in trials)
    if len(trials) >= 2:
        interval = geometric_mean_interval(cell.trial_medians(variant), confidence=CONFIDENCE)
        method = (
            f"geometric mean of the {len(trials)} trials' medians, Student-t 95% CI on their logs "
            f"({len(trials) - 1} df): between processes"
        )
        scope = "between_processes"
    else:
        interval = order_statistic_median(pooled, confidence=CONFIDENCE)
        method = f"order statistics of the samples, {WITHIN_PROCESS_ONLY}"
        scope = WITHIN
    return {
        "variant": variant,
        "median_ms": interval.estimate,
        "median_ci_low": _finite(interval.low),
        "median_ci_high": _finite(interval.high),
        "ci_method": method,
        "ci_scope": scope,
        "n_samples": int(pooled.size),
        "trials": len(trials),
        "noisy": noisy > 0,
        "noisy_trials": noisy,
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
# Speedup over NumPy


def _rng(key: str, seed: int = BOOTSTRAP_SEED) -> np.random.Generator:
    """A stream of its own per key (fixed seed, stable key): rerunning the analysis gives the same interval."""
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


def median_draws(
    samples: Sequence[float], rng: np.random.Generator, resamples: int = BOOTSTRAP_RESAMPLES
) -> np.ndarray:
    """Bootstrap distribution of the median of one process's samples (`_single_trial_draws`). It shows how precisely
    that process measured its own median, never how much another process's median would differ."""
    values = np.asarray(samples, dtype=np.float64)
    if values.size == 0:
        raise ValueError("no samples")
    return _single_trial_draws(values, rng, resamples)


@dataclass(frozen=True)
class Speedup:
    """A speedup over NumPy with its 95% interval, where that interval's variation comes from (`scope`: PAIRED,
    UNPAIRED or WITHIN), the number of round pairs behind a paired one, and the method in words. `numpy_ms` and
    `median_ms` are the two times per call the speedup divides (geometric means of the trials' medians; with one
    trial, the medians of the samples)."""

    interval: Interval
    scope: str
    pairs: int
    method: str
    numpy_ms: float
    median_ms: float


def _time_per_call(trials: Sequence[np.ndarray]) -> float:
    """The geometric mean of the trials' medians (one trial: its median)."""
    return float(np.exp(np.mean([np.log(np.median(trial)) for trial in trials])))


def speedup_interval(
    baseline_trials: Sequence[Sequence[float]],
    trials: Sequence[Sequence[float]],
    *,
    baseline_rounds: Sequence[int] | None = None,
    rounds: Sequence[int] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    key: str = "speedup",
    baseline_key: str | None = None,
    cache: dict[str, np.ndarray] | None = None,
) -> Speedup:
    """Speedup = NumPy's time per call over the framework's, from their per-trial samples (ms per call).

    - Paired (two or more rounds in common; pass the rounds only for cells of one comparison group): the geometric
      mean of the per-round ratios of the trials' medians, NumPy's and the framework's trial of the same round paired,
      with a Student-t 95% interval on their logs (rounds - 1 df): drift that moves both trials of a round alike
      cancels, and the process is the unit.
    - Unpaired (two or more trials on each side, rounds unknown): the ratio of the geometric means of the trials'
      medians with a Welch t interval.
    - Within one process (one trial on a side): the ratio of the medians of the samples with a 95% percentile
      bootstrap of each side's samples (`resamples`, seeded by `key`; NumPy's by `baseline_key` where given, its
      draws kept in `cache` for every framework compared with the same NumPy cell); it leaves out the variation
      between processes, so it is labelled and never resolves anything.
    """
    baseline = [np.asarray(t, dtype=np.float64) for t in baseline_trials]
    framework = [np.asarray(t, dtype=np.float64) for t in trials]
    if not baseline or not framework or any(t.size == 0 for t in (*baseline, *framework)):
        raise ValueError("no samples")
    numpy_ms, median_ms = _time_per_call(baseline), _time_per_call(framework)
    base_medians = {r: float(np.median(t)) for r, t in zip(baseline_rounds or (), baseline, strict=False)}
    medians = {r: float(np.median(t)) for r, t in zip(rounds or (), framework, strict=False)}
    common = sorted(set(base_medians) & set(medians)) if baseline_rounds and rounds else []
    if len(common) >= 2:
        interval = geometric_mean_interval([base_medians[r] / medians[r] for r in common], confidence=CONFIDENCE)
        method = (
            f"geometric mean of {len(common)} per-round ratios of the trials' medians (NumPy's and the framework's "
            f"trial of each round paired), Student-t 95% CI on their logs ({len(common) - 1} df)"
        )
        return Speedup(interval, PAIRED, len(common), method, numpy_ms, median_ms)
    if len(baseline) >= 2 and len(framework) >= 2:
        base_trials = [float(np.median(t)) for t in baseline]
        interval = welch_ratio_interval(base_trials, [float(np.median(t)) for t in framework], confidence=CONFIDENCE)
        method = "ratio of the geometric means of the trials' medians, Welch t 95% CI: trials not paired by round"
        return Speedup(interval, UNPAIRED, 0, method, numpy_ms, median_ms)
    base_pooled, pooled = np.concatenate(baseline), np.concatenate(framework)

    def medians_of(name: str, values: np.ndarray) -> np.ndarray:
        if cache is None or name not in cache:
            drawn = median_draws(values, _rng(name), resamples)
            if cache is None:
                return drawn
            cache[name] = drawn
        return cache[name]

    draws = medians_of(baseline_key or f"{key}/numpy", base_pooled) / medians_of(f"{key}/framework", pooled)
    low, high = np.quantile(draws, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    estimate = float(np.median(base_pooled) / np.median(pooled))
    method = f"ratio of the samples' medians, percentile bootstrap of the samples ({resamples} resamples), "
    return Speedup(
        Interval(estimate, float(low), float(high)),
        WITHIN,
        0,
        method + WITHIN_PROCESS_ONLY,
        float(np.median(base_pooled)),
        float(np.median(pooled)),
    )


def verdict(scope: Any, low: Any, high: Any) -> str:
    """What a speedup's interval shows: FASTER (its 95% interval over processes lies above 1), SLOWER (below 1),
    NOT_RESOLVED, or WITHIN_ONLY (one process per cell: no verdict)."""
    if scope not in BETWEEN_PROCESSES or not (is_measured(low) and is_measured(high)):
        return WITHIN_ONLY
    if float(low) > 1.0:
        return FASTER
    if float(high) < 1.0:
        return SLOWER
    return NOT_RESOLVED


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
    "ci_scope",
    "verdict",
    "se_log",
    "df",
    "p_value",
    *VERDICT_COLUMNS,
    "pairs",
    "numpy_median_ms",
    "median_ms",
    "numpy_trials",
    "trials",
    "ci_method",
    "platform",
    "device",
]


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


def _speedup_row(
    cell: MicroCell, variant: str, baseline: MicroCell | None, resamples: int, cache: dict[str, np.ndarray]
) -> dict[str, Any]:
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
    assert baseline is not None
    same_group = baseline.group is not None and baseline.group == cell.group
    result = speedup_interval(
        baseline.variants["resident"],
        cell.variants[variant],
        baseline_rounds=baseline.rounds("resident") if same_group else None,
        rounds=cell.rounds(variant) if same_group else None,
        resamples=resamples,
        key=f"{cell.framework}/{cell.mode}/{cell.operation}/{cell.precision}/bs{cell.batch_size}/{variant}",
        baseline_key=f"{NUMPY}/{baseline.operation}/{baseline.precision}/bs{baseline.batch_size}/resident",
        cache=cache,
    )
    interval = result.interval
    return {
        **row,
        "status": "ok",
        "reason": None,
        "speedup": interval.estimate,
        "ci_low": interval.low,
        "ci_high": interval.high,
        "ci_scope": result.scope,
        "verdict": verdict(result.scope, interval.low, interval.high),
        "se_log": interval.se_log,
        "df": interval.df,
        "p_value": p_value(math.log(interval.estimate), interval.se_log, interval.df)
        if interval.se_log is not None
        else None,
        "pairs": result.pairs,
        "numpy_median_ms": result.numpy_ms,
        "median_ms": result.median_ms,
        "numpy_trials": len(baseline.variants["resident"]),
        "trials": len(cell.variants[variant]),
        "ci_method": result.method,
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
    cells_or_paths: Iterable[MicroCell | str | Path],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    multiplicity: str = DEFAULT_MULTIPLICITY,
) -> pd.DataFrame:
    """Speedup over NumPy for every framework other than NumPy and each of its modes, operation, precision, variant
    and batch size: NumPy's resident time per call over the framework's in that variant (NumPy computes on the host,
    so it has only the resident variant), with its 95% interval (`speedup_interval`: over processes, paired by round,
    where the cells have two or more trials), where the interval's variation comes from (`ci_scope`), its verdict,
    and for a t interval its log-scale standard error, df and two-sided p-value (fwbench.analysis.common.verdicts). A
    missing or failed cell on either side gives a row with status "missing" and the reason, never a speedup of 0."""
    cells = _as_cells(cells_or_paths)
    baselines = {cell.key: cell for cell in cells if cell.framework == NUMPY}
    variants = _expected_variants(cells)
    cache: dict[str, np.ndarray] = {}  # a NumPy cell's bootstrap medians serve every framework compared with it
    rows = [
        _speedup_row(cell, variant, baselines.get(cell.key), resamples, cache)
        for cell in cells
        if cell.framework != NUMPY
        for variant in variants[(cell.framework, cell.mode, cell.operation, cell.precision)]
    ]
    frame = pd.DataFrame(rows).reindex(columns=[c for c in SPEEDUP_COLUMNS if c not in VERDICT_COLUMNS])
    frame = adjusted(frame, multiplicity)
    keys = ["framework", "mode", "operation", "precision", "variant", "batch_size"]
    return integers(frame[SPEEDUP_COLUMNS]).sort_values(keys, kind="stable").reset_index(drop=True)


def adjusted(frame: pd.DataFrame, multiplicity: str) -> pd.DataFrame:
    """The speedups with the adjusted verdicts of their family (`verdicts.adjust_verdicts`): one family per framework
    and mode against NumPy, every operation, variant and batch size in it, as the inference suite has one per
    framework pair. `verdict` then says faster or slower only where the adjusted test resolves it (the interval
    itself stays each speedup's own 95% one)."""
    families = [f"micro {fw}/{mode} over numpy" for fw, mode in zip(frame["framework"], frame["mode"], strict=True)]
    frame = adjust_verdicts(frame, families, multiplicity, estimate="speedup")
    frame["verdict"] = frame["verdict"].astype(object)  # all missing (every cell failed) reads as floats
    between = frame["verdict"].isin([FASTER, SLOWER, NOT_RESOLVED])
    resolved = frame["resolved_adjusted"].fillna(False).astype(bool)
    frame.loc[between & ~resolved, "verdict"] = NOT_RESOLVED
    return frame


# --------------------------------------------------------------------------------------------------------------------
# Crossover


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


def is_measured(value: Any) -> bool:
    return value is not None and not pd.isna(value) and math.isfinite(float(value))


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
    draws = np.sort(crossover_draws(logs, np.asarray(se_logs)[order], np.asarray(dfs)[order], _rng(key), resamples))
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


def one_value(values: pd.Series) -> str | None:
    found = sorted({str(v) for v in values if is_measured_text(v)})
    return " / ".join(found) if found else None


def is_measured_text(value: Any) -> bool:
    return value is not None and not (not isinstance(value, str) and pd.isna(value)) and str(value) != ""


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
