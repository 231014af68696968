"""The micro suite's analysis: crossovers, speedups over NumPy, the published reference and the outputs, on
constructed samples and constructed cell results (no framework runs); the coverage of its intervals by simulation
over a constructed population of processes."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fwbench.analysis.common.detail import DETAIL_MARK
from fwbench.analysis.micro import analysis as micro_analysis
from fwbench.analysis.micro import details as micro_details_module
from fwbench.analysis.micro import reference as micro_reference
from fwbench.analysis.micro import section as micro_section_module
from fwbench.analysis.micro import speedups as micro
from fwbench.analysis.micro import tables as micro_tables
from fwbench.analysis.micro.cells import load_micro_cells
from fwbench.analysis.micro.crossovers import (
    UNVERIFIED_MARK,
    Crossover,
    crossover,
    crossover_interval,
    crossover_text,
    from_row,
    interval_text,
    micro_crossovers,
    shown,
)
from fwbench.analysis.micro.figure import (
    micro_figure,
)
from fwbench.analysis.micro.findings import micro_findings
from fwbench.analysis.micro.frame import FRAME_COLUMNS, micro_frame
from fwbench.analysis.micro.macros import micro_macros
from fwbench.analysis.micro.reference import (
    agreement,
    published_crossovers,
    published_micro,
    reference_flatness,
)
from fwbench.analysis.micro.speedups import (
    adjusted,
    micro_speedups,
    speedup_interval,
)
from fwbench.analysis.micro.vocabulary import (
    FASTER,
    NOT_RESOLVED,
    PAIRED,
    SLOWER,
    UNPAIRED,
    WITHIN,
    WITHIN_ONLY,
)
from fwbench.analysis.paper.micro_section import micro_section, write_micro_outputs
from fwbench.analysis.paper.structure_check import long_sentences
from fwbench.analysis.paper.templates import TemplateValueError, render
from fwbench.study.modes import primary
from fwbench.trackers.stats import paired_ratio_interval
from tests.test_analysis import BASE
from tests.test_pdf_check import TEXT, _build, _check, needs_latex

REPO = Path(__file__).resolve().parents[1]
REFERENCE_CSV = REPO / "reference" / "published-t4-micro.csv"
RESAMPLES = 200  # enough for the intervals these tests ask about, and fast

SETTINGS = {"dim": 64, "hidden": 256, "classes": 10, "include_transfer": True, "trials": 1}


def _samples(median_ms: float, n: int, seed: int) -> list[float]:
    """Per-call times scattered by a few percent around `median_ms`."""
    rng = np.random.default_rng(seed)
    return (median_ms * np.exp(rng.normal(0.0, 0.03, n))).tolist()


def _seed(*key: object) -> int:
    """A seed from a key, the same in every process (hash() of a str is salted per process)."""
    return zlib.crc32("/".join(map(str, key)).encode())


def _trials(median_ms: float, trials: int, n: int, seed: int, spread: float) -> list[list[float]]:
    """`trials` processes of n samples each, their medians scattered around `median_ms` by `spread` on the log
    scale (the variation between processes that no process's own samples show)."""
    offsets = np.random.default_rng(seed).normal(0.0, spread, trials) if spread else np.zeros(trials)
    return [_samples(median_ms * math.exp(offset), n, seed + 1 + k) for k, offset in enumerate(offsets)]


def _framework_provenance(framework: str, platform: str) -> dict:
    settings = {"intra_op_threads": 2, "dtype": "float32"}
    if framework == "numpy":
        settings["blas"] = [{"internal_api": "openblas", "version": "0.3.30", "num_threads": 2, "user_api": "blas"}]
    name = "Test CPU" if platform == "cpu" else "NVIDIA Test GPU"
    return {
        "name": framework,
        "versions": {framework: "1.0"},
        "device": {"platform": platform, "name": name},
        "settings": settings,
        "threads": {"requested": 2, "effective": 2},
    }


def _result(
    framework: str,
    operation: str,
    batch: int,
    *,
    ms: float | list[list[float]] = 1.0,
    transfer_ms: float | None = None,
    precision: str = "fp32",
    reason: str | None = None,
    platform: str = "cpu",
    n: int = 200,
    trials: int = 1,
    spread: float = 0.0,
    group: str | None = None,
) -> dict:
    """A micro cell result as the runner writes it; `ms` is a median (`trials` processes of n samples, their medians
    scattered by `spread`) or the trials' samples themselves. Trial k ran in round k of its comparison group
    (`group`: its id; by default one per operation, precision and batch size, as one micro job runs them)."""
    result = copy.deepcopy(BASE)
    result["cell"] = {
        "suite": "micro",
        "framework": framework,
        "model": operation,
        "precision": precision,
        "batch_size": batch,
        "image_size": None,
    }
    result["settings"] = dict(SETTINGS)
    if reason:
        result.update(status="failed", reason=reason, metrics=None, samples_ms=[])
        result["failure"] = {
            "kind": "exception",
            "reason": reason,
            "exit_code": 1,
            "signal": None,
            "trial": 1,
            "workarounds_tried": [],
        }
        result["provenance"]["framework"] = None
        return result
    seed = _seed(framework, operation, batch, precision)
    trials = ms if isinstance(ms, list) else _trials(ms, trials, n, seed, spread)
    variants = {"resident": {"trial_samples_ms": trials, "what": "each call on device-resident inputs"}}
    if transfer_ms is not None:
        samples = _trials(transfer_ms, len(trials), n, seed + 100, spread)
        variants["transfer"] = {"trial_samples_ms": samples, "what": "the copy of the input batch, then the call"}
    p50 = float(np.median(np.concatenate(trials)))
    result.update(status="ok", reason=None, samples_ms=[s for t in trials for s in t])
    result["metrics"] = {
        "throughput_img_s": batch / p50 * 1000.0,
        "latency_ms": {"p50": p50, "p95": p50, "p99": p50, "mean": p50},
        "compile_s": 0.25 if framework == "jax" else None,
        "first_call_s": 0.01,
        "variants": variants,
        "agreement": {"max_rel_error": 3e-7, "bound": 1e-4, "reference": "float64 NumPy"},
        "operation": {"name": operation, "dim": 64, "hidden": 256, "classes": 10, "flops_per_row": 8192},
        "missing": {} if framework != "numpy" else {"transfer": "numpy computes on the host"},
        "flags": {"noisy": False, "ci_not_reached": False, "recompiled": False},
        "trials": [{"round": k + 1, "order": 1} for k in range(len(trials))],
    }
    result["provenance"]["framework"] = _framework_provenance(framework, platform)
    result["provenance"]["group"] = {"id": group or f"{operation}/{precision}/bs{batch}"}
    return result


def _write(root: Path, result: dict) -> Path:
    """At the cell's path (its mode's folder included: a result without a mode ran its framework's primary one)."""
    cell = result["cell"]
    mode = cell.get("mode") or primary(cell["framework"])
    path = root / "cells" / "micro" / cell["framework"] / mode / cell["model"] / cell["precision"]
    path = path / f"bs{cell['batch_size']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    return path


BATCHES = [1, 4, 16, 64, 256]
# NumPy's time per call grows with the batch; torch's is flat (dispatch-bound), so it wins from 64 on; jax's is
# always 5x NumPy's: it never wins.
NUMPY_MS = {1: 0.01, 4: 0.03, 16: 0.1, 64: 0.4, 256: 1.6}
TORCH_MS = {1: 0.1, 4: 0.1, 16: 0.12, 64: 0.2, 256: 0.3}


def _study(root: Path, *, failed: dict | None = None, trials: int = 1, spread: float = 0.0) -> list[Path]:
    """numpy, torch (with the copy variant) and jax cells of matmul at BATCHES, each in `trials` processes;
    `failed`: {(framework, batch): reason}."""
    failed = failed or {}
    paths = []
    for batch in BATCHES:
        specs = [
            ("numpy", {"ms": NUMPY_MS[batch]}),
            ("torch", {"ms": TORCH_MS[batch], "transfer_ms": TORCH_MS[batch] * 2.5}),
            ("jax", {"ms": NUMPY_MS[batch] * 5}),
        ]
        for framework, kwargs in specs:
            reason = failed.get((framework, batch))
            kwargs = {"reason": reason} if reason else {**kwargs, "trials": trials, "spread": spread}
            paths.append(_write(root, _result(framework, "matmul", batch, **kwargs)))
    return paths


# ---------------------------------------------------------------------------------------------------------------
# The crossover on constructed point estimates


def test_clear_crossover():
    result = crossover([1, 4, 16, 64, 256], [0.2, 0.5, 0.8, 1.4, 3.0])
    assert (result.kind, result.batch, result.below) == ("crossover", 64, 16)
    assert not result.at_smallest
    assert crossover_text(result) == "64"


def test_never_in_range():
    result = crossover([1, 4, 16, 64], [0.2, 1.5, 1.2, 0.97])
    assert result.kind == "never" and result.batch is None
    assert crossover_text(result) == "never in 1--64"
    assert result.bracket() == (64.0, math.inf)


def test_a_dip_to_one_or_below_moves_the_crossover_later():
    result = crossover([1, 4, 16, 64, 256, 1024], [0.5, 0.9, 1.2, 0.95, 1.3, 1.5])
    assert (result.kind, result.batch, result.below) == ("crossover", 256, 64)


def test_a_speedup_of_exactly_one_is_not_above_one():
    assert crossover([1, 2], [1.0, 1.0]).kind == "never"
    assert crossover([1, 2], [1.0, 1.0000001]).batch == 2


def test_faster_everywhere_is_at_or_below_the_smallest_batch():
    result = crossover([4, 16, 64], [1.1, 2.0, 9.0])
    assert result.kind == "crossover" and result.batch == 4 and result.at_smallest
    assert result.below is None and result.bracket() == (0.0, 4.0)
    assert crossover_text(result) == r"$\le$ 4"


def test_unsorted_input_is_sorted_by_batch_size():
    assert crossover([256, 1, 64, 16], [3.0, 0.2, 1.4, 0.8]).batch == 64


def test_a_missing_batch_above_the_crossover_makes_it_unverified():
    result = crossover([1, 4, 16, 64, 256], [0.5, 1.5, None, 2.0, float("nan")])
    assert (result.kind, result.batch, result.below) == ("crossover", 4, 1)
    assert result.missing == (16, 256) and result.unverified == (16, 256)
    assert crossover_text(result).endswith(UNVERIFIED_MARK)


def test_a_missing_batch_below_widens_the_bracket_but_is_not_unverified():
    result = crossover([1, 4, 16], [0.5, None, 2.0])
    assert (result.batch, result.below, result.unverified, result.missing) == (16, 1, (), (4,))


def test_nothing_measured():
    result = crossover([1, 4], [None, None])
    assert result.kind == "no data" and result.bracket() is None and crossover_text(result) == "---"
    with pytest.raises(ValueError):
        crossover([1, 4], [1.0])


def _interval(low: float, high: float, below: float) -> dict:
    return {"ci_low": low, "ci_high": high, "ci_below": below}


REF_256 = Crossover("crossover", 256, 64, 1, 4096)  # the reference's bracket: (64, 256]


@pytest.mark.parametrize(
    ("ours", "published", "expected"),
    [
        # an interval inside the reference's bracket: the same crossover, resolved to the reference's grid step
        (Crossover("crossover", 256, 64, 1, 4096, **_interval(256, 256, 64)), REF_256, "same"),
        # on a finer grid, (128, 256] lies inside (64, 256]
        (Crossover("crossover", 256, 128, 1, 4096, **_interval(256, 256, 128)), REF_256, "same"),
        # the same point crossover with a wider interval: not evidence of sameness
        (Crossover("crossover", 256, 64, 1, 4096, **_interval(64, 1024, 16)), REF_256, "inconclusive"),
        (Crossover("crossover", 16, 4, 1, 4096, **_interval(16, 64, 4)), REF_256, "earlier"),
        (Crossover("never", None, 4096, 1, 4096, **_interval(math.inf, math.inf, 4096)), REF_256, "later"),
        (Crossover("crossover", 1024, 256, 1, 4096, **_interval(1024, math.inf, 256)), REF_256, "later"),
        (
            Crossover("never", None, 4096, 1, 4096, **_interval(math.inf, math.inf, 4096)),
            Crossover("never", None, 4096, 1, 4096),
            "same",
        ),
        # never up to 64 here says nothing against a crossover at 256 there
        (Crossover("never", None, 64, 1, 64, **_interval(math.inf, math.inf, 64)), REF_256, "inconclusive"),
        # without an interval (one process per cell), point estimates only: never a plain "same"
        (Crossover("crossover", 256, 64, 1, 4096), REF_256, "same, no interval"),
        (Crossover("crossover", 16, 4, 1, 4096), REF_256, "earlier, no interval"),
        (Crossover("never", None, 4096, 1, 4096), REF_256, "later, no interval"),
        (Crossover("crossover", 256, 16, 1, 4096), REF_256, "inconclusive, no interval"),
        (Crossover("no data", None, None, None, None), Crossover("crossover", 4, 1, 1, 4096), "not comparable"),
    ],
)
def test_agreement_sets_our_interval_against_the_reference_bracket(ours, published, expected):
    assert agreement(ours, published) == expected
    assert micro_reference.is_agreement(expected) == (expected == "same")


def test_interval_text_names_the_ends():
    series = Crossover("crossover", 256, 64, 1, 4096)
    assert interval_text(series) is None
    assert interval_text(Crossover("crossover", 256, 64, 1, 4096, **_interval(64, 1024, 16))) == "[64, 1024]"
    assert interval_text(Crossover("crossover", 1, None, 1, 4096, **_interval(1, 16, 0))) == r"[$\le$ 1, 16]"
    assert interval_text(Crossover("never", None, 4096, 1, 4096, **_interval(1024, math.inf, 256))) == "[1024, never]"
    assert interval_text(Crossover("never", None, 4096, 1, 4096, **_interval(math.inf, math.inf, 4096))) == "[never]"


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        (
            [SLOWER, SLOWER, SLOWER, NOT_RESOLVED, FASTER, FASTER],
            "slower at 1--16; not resolved at 64; faster from 256 on",
        ),
        ([FASTER] * 6, "faster at every batch size (1--1024)"),
        ([SLOWER] * 5 + [FASTER], "slower at 1--256; faster at 1024"),
        (
            [SLOWER, FASTER, SLOWER, NOT_RESOLVED, NOT_RESOLVED, SLOWER],
            "slower at 1, 16, 1024; faster at 4; not resolved at 64--256",
        ),
        ([WITHIN_ONLY] * 6, "not resolved: one process per cell (intervals within one process)"),
        ([None] * 6, "no data"),
    ],
)
def test_shown_states_only_what_the_intervals_show(verdicts, expected):
    assert shown([1, 4, 16, 64, 256, 1024], verdicts) == expected


def test_a_failed_batch_is_left_out_of_what_is_shown():
    assert shown([1, 4, 16], [SLOWER, None, FASTER]) == "slower at 1; faster at 16"


# ---------------------------------------------------------------------------------------------------------------
# Speedup intervals


def test_one_trial_gives_a_within_process_interval_labelled_so():
    baseline, framework = _samples(10.0, 300, 1), _samples(2.0, 300, 2)
    result = speedup_interval([baseline], [framework], resamples=RESAMPLES)
    interval = result.interval
    assert result.scope == WITHIN and "within one process only" in result.method
    assert interval.estimate == pytest.approx(np.median(baseline) / np.median(framework))
    assert interval.low < interval.estimate < interval.high
    assert interval.low > 4.7 and interval.high < 5.3
    assert interval.se_log is None and interval.df is None, "no t interval: nothing a verdict could use"
    assert speedup_interval([baseline], [framework], resamples=RESAMPLES) == result  # fixed seed


def test_trials_paired_by_round_give_the_t_interval_of_the_per_round_ratios():
    baseline = _trials(10.0, 3, 200, 3, 0.05)
    framework = _trials(2.0, 3, 200, 4, 0.05)
    result = speedup_interval(baseline, framework, baseline_rounds=[1, 2, 3], rounds=[1, 2, 3])
    medians = [np.median(t) for t in baseline], [np.median(t) for t in framework]
    expected = paired_ratio_interval(*medians)
    assert result.scope == PAIRED and result.pairs == 3 and "2 df" in result.method
    assert result.interval == expected and result.interval.df == 2 and result.interval.se_log > 0
    assert result.numpy_ms / result.median_ms == pytest.approx(result.interval.estimate)
    # rounds are matched by number, not by position
    swapped = speedup_interval(baseline[::-1], framework[::-1], baseline_rounds=[3, 2, 1], rounds=[3, 2, 1])
    assert swapped.interval.estimate == pytest.approx(expected.estimate)
    assert swapped.interval.high == pytest.approx(expected.high)


def test_drift_shared_by_a_round_cancels_in_the_paired_interval():
    """Round 2 ran 30% slower for NumPy and the framework alike (the machine, not the frameworks): the per-round
    ratios do not move; the same trials unpaired (rounds unknown) carry the drift into a Welch interval."""
    drift = [1.0, 1.3, 1.0, 0.9]
    baseline = [_samples(10.0 * d, 200, 10 + k) for k, d in enumerate(drift)]
    framework = [_samples(2.0 * d * (1 + 0.01 * k), 200, 20 + k) for k, d in enumerate(drift)]
    paired = speedup_interval(baseline, framework, baseline_rounds=[1, 2, 3, 4], rounds=[1, 2, 3, 4])
    unpaired = speedup_interval(baseline, framework)
    assert paired.scope == PAIRED and unpaired.scope == UNPAIRED and "Welch" in unpaired.method
    assert paired.interval.estimate == pytest.approx(unpaired.interval.estimate, rel=1e-9)
    assert unpaired.interval.high - unpaired.interval.low > 5 * (paired.interval.high - paired.interval.low)


def test_trials_that_disagree_widen_the_interval_beyond_one_process():
    """Four processes whose medians differ by 5% steps: the interval over processes shows their disagreement, a
    within-process bootstrap of one of them cannot."""
    baseline = [_samples(10.0, 400, 30 + k) for k in range(4)]
    trials = [_samples(median, 400, 4 + i) for i, median in enumerate([1.0, 1.05, 1.1, 1.15])]
    over = speedup_interval(baseline, trials, baseline_rounds=[1, 2, 3, 4], rounds=[1, 2, 3, 4]).interval
    one = speedup_interval(baseline[:1], trials[:1], resamples=RESAMPLES).interval
    assert over.high - over.low > 4 * (one.high - one.low)


@pytest.mark.parametrize("n", [1, 2, 7, 200])
def test_resampled_medians_equal_the_median_of_the_gathered_values(n):
    """The counting shortcut gives exactly np.median of each resample (odd and even sizes)."""
    values = np.random.default_rng(n).lognormal(size=n)
    draws = micro.median_draws(values, np.random.default_rng(5), resamples=300)
    ranks = np.random.default_rng(5).integers(0, n, size=(300, n))
    assert np.array_equal(draws, np.median(np.sort(values)[ranks], axis=1))


def test_large_cells_are_resampled_in_bounded_chunks(monkeypatch):
    class Recording:
        """A generator that records the size of every index array it is asked for."""

        def __init__(self):
            self.rng, self.sizes = np.random.default_rng(0), []

        def integers(self, low, high, size):
            self.sizes.append(int(np.prod(size)))
            return self.rng.integers(low, high, size=size)

    monkeypatch.setattr(micro, "CHUNK_ELEMENTS", 50_000)
    values, rng = _samples(1.0, 20_000, 6), Recording()
    draws = micro.median_draws(values, rng, resamples=20)
    assert draws.shape == (20,) and max(rng.sizes) <= 50_000 and len(rng.sizes) == 10
    assert np.all(np.abs(draws / np.median(values) - 1) < 0.01)


# ---------------------------------------------------------------------------------------------------------------
# Coverage, by simulation over a constructed population of processes

TRUE_SPEEDUP = 1.3
PROCESS_SD = 0.05  # between processes, on the log scale: what no process's own samples show
SAMPLE_SD = 0.03  # within a process, per call


def _population_study(rng: np.random.Generator, trials: int, n: int = 20) -> tuple[list, list]:
    """One simulated comparison group: NumPy and the framework in `trials` rounds, each trial a fresh process whose
    median time per call departs from its framework's population median by a process effect, with n samples."""
    sides = []
    for log_median in (math.log(TRUE_SPEEDUP), 0.0):  # NumPy's time is 1.3 x the framework's
        processes = log_median + rng.normal(0.0, PROCESS_SD, trials)
        sides.append([np.exp(p + rng.normal(0.0, SAMPLE_SD, n)) for p in processes])
    return sides[0], sides[1]


def _hierarchical_percentile(trials: list, rng: np.random.Generator, resamples: int = 400) -> np.ndarray:
    """The interval this suite used before (issue 32): medians of two-stage resamples, the trials with replacement,
    then the samples within each chosen trial; NumPy and the framework resampled independently."""
    samples = np.stack(trials)
    k, n = samples.shape
    chosen = rng.integers(0, k, size=(resamples, k))
    within = rng.integers(0, n, size=(resamples, k, n))
    return np.median(samples[chosen[:, :, None], within].reshape(resamples, -1), axis=1)


def test_the_interval_over_processes_covers_the_true_speedup_at_its_nominal_level():
    """1000 simulated groups of 3 rounds from a population with variation between processes: the paired t interval
    covers the true speedup in about 95% of them; the old hierarchical percentile bootstrap over the 3 trials
    under-covers (about 85%), and one process's within-process interval misses it most of the time (it
    covers about 27%)."""
    rng = np.random.default_rng(32)
    repeats, covered = 1000, {"paired": 0, "hierarchical": 0, "one process": 0}
    for repeat in range(repeats):
        baseline, framework = _population_study(rng, 3)
        paired = speedup_interval(baseline, framework, baseline_rounds=[1, 2, 3], rounds=[1, 2, 3]).interval
        covered["paired"] += paired.low <= TRUE_SPEEDUP <= paired.high
        draws = _hierarchical_percentile(baseline, rng) / _hierarchical_percentile(framework, rng)
        low, high = np.quantile(draws, [0.025, 0.975])
        covered["hierarchical"] += low <= TRUE_SPEEDUP <= high
        one = speedup_interval(baseline[:1], framework[:1], resamples=200, key=str(repeat)).interval
        covered["one process"] += one.low <= TRUE_SPEEDUP <= one.high
    coverage = {name: count / repeats for name, count in covered.items()}
    assert 0.93 <= coverage["paired"] <= 0.97, coverage  # binomial SE at 95%: 0.007
    assert coverage["hierarchical"] < 0.90, coverage
    assert coverage["one process"] < 0.5, coverage


GRID = [1, 4, 16, 64, 256, 1024, 4096]
FLAT = [0.8, 0.9, 0.95, 0.98, 1.03, 1.06, 1.1]  # crosses at 256, close to 1 throughout


def _round_bootstrap(log_ratios: np.ndarray, rng: np.random.Generator, resamples: int) -> tuple[float, float]:
    """The alternative rejected in fwbench.analysis.micro.crossovers.crossover_draws: resample each batch size's rounds
    (NumPy and the framework together) with replacement, the crossover of each resampled series, its 2.5% and 97.5%
    quantiles (batch sizes, inf for never)."""
    batches, rounds = log_ratios.shape
    chosen = rng.integers(0, rounds, size=(resamples, batches, rounds))
    means = np.take_along_axis(np.broadcast_to(log_ratios, chosen.shape), chosen, axis=2).mean(axis=2)
    from_here_on = np.logical_and.accumulate((means > 0)[:, ::-1], axis=1)[:, ::-1]
    index = np.sort(np.where(from_here_on.any(axis=1), from_here_on.argmax(axis=1), batches))
    ends = [*map(float, GRID), math.inf]
    return ends[index[math.ceil(0.025 * resamples) - 1]], ends[index[math.ceil(0.975 * resamples) - 1]]


def _crossover_coverage(curve: list[float], repeats: int = 400) -> tuple[float, float]:
    """Coverage of the true crossover by the interval from resampling the series (t draws), and by the round
    bootstrap, over `repeats` simulated series of 3 paired rounds per batch size (each round's log ratio scattered
    by two process effects of 0.1)."""
    truth = crossover(GRID, curve)
    true_end = float(truth.batch) if truth.kind == "crossover" else math.inf
    rng = np.random.default_rng(len(curve) + int(curve[0] * 100))
    covered = {"t draws": 0, "round bootstrap": 0}
    for repeat in range(repeats):
        logs = np.log(curve)[:, None] + rng.normal(0, 0.1, (len(GRID), 3)) - rng.normal(0, 0.1, (len(GRID), 3))
        se = logs.std(axis=1, ddof=1) / math.sqrt(3)
        low, high, _ = crossover_interval(
            GRID, np.exp(logs.mean(axis=1)), se, [2.0] * len(GRID), key=str(repeat), resamples=1000
        )
        covered["t draws"] += low <= true_end <= high
        low, high = _round_bootstrap(logs, rng, 1000)
        covered["round bootstrap"] += low <= true_end <= high
    return covered["t draws"] / repeats, covered["round bootstrap"] / repeats


@pytest.mark.parametrize(
    "curve",
    [
        [0.2, 0.4, 0.7, 0.9, 1.3, 1.8, 2.5],  # crosses at 256, steeply
        FLAT,
        [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97],  # never in the measured range
    ],
)
def test_the_crossover_interval_covers_the_true_crossover(curve):
    """The 95% interval from resampling the series contains the true curve's crossover (the same rule on the true
    speedups) in at least 93% of 400 simulated series; resampling the 3 rounds themselves falls short where the
    curve stays close to 1 (10 distinct resamples per batch size, a spread sqrt(2/3) of the t interval's)."""
    t_draws, round_bootstrap = _crossover_coverage(curve)
    assert t_draws >= 0.93, (t_draws, round_bootstrap)
    if curve is FLAT:
        assert round_bootstrap < 0.88, (t_draws, round_bootstrap)


# ---------------------------------------------------------------------------------------------------------------
# From cell results


def test_tidy_frame_has_a_row_per_cell_and_variant(tmp_path):
    paths = _study(tmp_path, failed={("jax", 4): "XLA ran out of memory"})
    frame = micro_frame(paths)
    assert list(frame.columns) == FRAME_COLUMNS
    torch = frame[(frame["framework"] == "torch") & (frame["batch_size"] == 16)]
    assert sorted(torch["variant"]) == ["resident", "transfer"]
    resident = torch[torch["variant"] == "resident"].iloc[0]
    assert resident["median_ms"] == pytest.approx(0.12, rel=0.02)
    assert resident["median_ci_low"] < resident["median_ms"] < resident["median_ci_high"]
    assert resident["n_samples"] == 200 and resident["trials"] == 1
    failed = frame[frame["status"] == "failed"]
    assert len(failed) == 1 and failed.iloc[0]["reason"] == "XLA ran out of memory"
    assert failed.iloc[0]["variant"] == "resident" and pd.isna(failed.iloc[0]["median_ms"])
    numpy = frame[frame["framework"] == "numpy"].iloc[0]
    assert numpy["blas"] == "openblas 0.3.30, 2 threads" and numpy["threads"] == 2
    assert frame.loc[frame["framework"] == "jax", "compile_s"].dropna().eq(0.25).all()


def test_a_numpy_baseline_under_a_forced_blas_core_type_is_said_in_one_sentence(tmp_path):
    """The machine's OPENBLAS_CORETYPE reaches the NumPy rows (recorded, never changed), the kernels OpenBLAS ran
    are named with its version, and the method text says what the forced type means; unforced, it says nothing."""
    numpy_cell = _result("numpy", "matmul", 1)
    numpy_cell["provenance"]["env"] = {"OPENBLAS_CORETYPE": "Haswell"}
    pool = numpy_cell["provenance"]["framework"]["settings"]["blas"][0]
    numpy_cell["provenance"]["framework"]["settings"]["process_blas"] = {
        "libraries": [pool | {"architecture": "Haswell", "library": "libopenblas.so"}]
    }
    torch_cell = _result("torch", "matmul", 1)
    torch_cell["provenance"]["env"] = {"OPENBLAS_CORETYPE": "Haswell"}
    frame = micro_frame([_write(tmp_path, numpy_cell), _write(tmp_path, torch_cell)])
    numpy = frame[frame["framework"] == "numpy"].iloc[0]
    assert numpy["blas_core_type"] == "Haswell" and numpy["blas"] == "openblas 0.3.30, Haswell kernels, 2 threads"
    assert frame.loc[frame["framework"] == "torch", "blas_core_type"].isna().all()
    paths = list(dict.fromkeys(frame["path"]))
    threads = micro_details_module.micro_details(_analysis_of(paths, frame)).threads
    assert threads.forced == ("Haswell",) and threads.pools == (("PyTorch", "2"),)
    text = _detail_text(_analysis_of(paths, frame))
    assert (
        r"NumPy ran under OPENBLAS\_CORETYPE=Haswell, a BLAS core type this machine forces. It slows current NumPy "
        "and so flatters every speedup over it; the study records the setting and does not change it."
    ) in text
    # negative control: unforced, the sentence is gone
    unforced = _analysis_of(paths, frame.assign(blas_core_type=None))
    assert micro_details_module.micro_details(unforced).threads.forced == ()
    assert "CORETYPE" not in _detail_text(unforced)


def _analysis_of(paths: list[str], frame: pd.DataFrame) -> micro_analysis.MicroAnalysis:
    """An analysis of the cells at `paths` whose tidy table is `frame` (a table changed by the test)."""
    analysis = micro_analysis.analyse_micro(paths, REFERENCE_CSV, resamples=RESAMPLES)
    return dataclasses.replace(analysis, frame=frame)


def _detail_text(analysis: micro_analysis.MicroAnalysis) -> str:
    """The appendix's text, its tables left out."""
    return render("micro_detail.tex.j2", {"detail": micro_details_module.micro_details(analysis)})


def test_speedups_and_crossovers_from_cells(tmp_path):
    cells = load_micro_cells(_study(tmp_path))
    speedups = micro_speedups(cells, resamples=RESAMPLES)
    torch = speedups[(speedups["framework"] == "torch") & (speedups["variant"] == "resident")]
    assert torch["speedup"].tolist() == pytest.approx([NUMPY_MS[b] / TORCH_MS[b] for b in BATCHES], rel=0.02)
    crossovers = micro_crossovers(speedups).set_index(["framework", "variant"])
    assert crossovers.loc[("torch", "resident"), "crossover_batch"] == 64
    assert crossovers.loc[("torch", "resident"), "platform"] == "cpu"
    # with the copy (2.5x the time) torch only wins at 256
    assert crossovers.loc[("torch", "transfer"), "crossover_batch"] == 256
    assert crossovers.loc[("jax", "resident"), "kind"] == "never"
    assert crossovers.loc[("jax", "resident"), "speedup_at_largest"] == pytest.approx(0.2, rel=0.02)


def test_one_trial_per_cell_resolves_nothing_and_gives_no_crossover_interval(tmp_path):
    speedups = micro_speedups(_study(tmp_path), resamples=RESAMPLES)
    ok = speedups[speedups["status"] == "ok"]
    assert set(ok["ci_scope"]) == {WITHIN} and set(ok["verdict"]) == {WITHIN_ONLY}
    assert ok["se_log"].isna().all() and ok["df"].isna().all() and ok["p_value"].isna().all()
    crossovers = micro_crossovers(speedups, resamples=RESAMPLES).set_index(["framework", "variant"])
    torch = crossovers.loc[("torch", "resident")]
    assert torch["crossover_batch"] == 64, "the point crossover is there, as for the reference"
    assert pd.isna(torch["crossover_ci_low"]) and pd.isna(torch["crossover_ci_high"])
    assert torch["interval_method"].startswith("none: within one process only")
    assert torch["shown"].startswith("not resolved: one process per cell")


def test_trials_paired_by_round_give_t_intervals_verdicts_and_crossover_intervals(tmp_path):
    speedups = micro_speedups(_study(tmp_path, trials=3, spread=0.02), resamples=RESAMPLES)
    ok = speedups[speedups["status"] == "ok"]
    assert set(ok["ci_scope"]) == {PAIRED} and (ok["pairs"] == 3).all() and (ok["df"] == 2).all()
    assert (ok["se_log"] > 0).all() and ok["p_value"].between(0, 1).all()
    torch = ok[(ok["framework"] == "torch") & (ok["variant"] == "resident")].set_index("batch_size")
    # NumPy over torch: 0.1 at 1, 0.3 at 4, 0.83 at 16, 2 at 64, 5.3 at 256
    assert torch["verdict"].tolist() == [SLOWER, SLOWER, SLOWER, FASTER, FASTER]
    assert (torch["numpy_median_ms"] / torch["median_ms"]).tolist() == pytest.approx(torch["speedup"].tolist())
    crossovers = micro_crossovers(speedups, resamples=RESAMPLES).set_index(["framework", "variant"])
    row = crossovers.loc[("torch", "resident")]
    assert row["crossover_batch"] == 64 and row["crossover_ci_low"] == 64 and row["crossover_ci_high"] == 64
    assert row["crossover_ci_below"] == 16 and "paired by round" in row["interval_method"]
    assert row["shown"] == "slower at 1--16; faster from 64 on"
    jax = crossovers.loc[("jax", "resident")]
    assert jax["kind"] == "never" and jax["crossover_ci_low"] == math.inf and jax["shown"] == "slower at 1--256"
    assert from_row(jax).interval_bracket() == (256.0, math.inf)


def test_rounds_of_different_groups_are_not_paired(tmp_path):
    """Cells of one batch size measured in two jobs (groups): their rounds are not the same rounds."""
    numpy = _result("numpy", "matmul", 4, ms=1.0, trials=3, spread=0.02, group="job-1")
    torch = _result("torch", "matmul", 4, ms=0.5, trials=3, spread=0.02, group="job-2")
    speedups = micro_speedups([_write(tmp_path, numpy), _write(tmp_path, torch)], resamples=RESAMPLES)
    assert speedups["ci_scope"].tolist() == [UNPAIRED] and speedups["verdict"].tolist() == [FASTER]


def _reference_csv(path: Path, speedups: dict[int, float]) -> Path:
    """A reference file whose JAX series (both suites) has the given speedups over its NumPy column."""
    rows = ["suite,batch_size,jax_s,numpy_s_in_jax_table,pytorch_cpu_s,pytorch_cuda_s,numpy_s_in_pytorch_table"]
    for suite in ("matrix", "network"):
        rows += [f"{suite},{b},{1.0 / v!r},1.0,1.0,1.0,1.0" for b, v in speedups.items()]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("trials", [1, 3])
def test_identical_true_curves_give_equal_crossovers_on_both_sides(tmp_path, trials):
    """Our cells and the reference's numbers from one true speedup curve, at the reference's batch sizes: the two
    crossovers are the same batch, and the comparison says "same" (with an interval: it lies in the reference's
    bracket) or, with one process per cell, "same, no interval". Under the old rule (ours from the CI's lower bound)
    a speedup of 1.05 at 256 with a CI reaching below 1 moved ours later."""
    curve = {1: 0.3, 4: 0.5, 16: 0.8, 64: 0.95, 256: 1.05, 1024: 1.6, 4096: 2.2}
    paths = []
    for batch, speedup in curve.items():
        paths.append(_write(tmp_path, _result("numpy", "mlp", batch, ms=speedup, trials=trials, spread=0.002)))
        paths.append(_write(tmp_path, _result("jax", "mlp", batch, ms=1.0, trials=trials, spread=0.002)))
    reference = _reference_csv(tmp_path / "reference.csv", curve)
    analysis = micro_analysis.analyse_micro(paths, reference, resamples=RESAMPLES)
    ours = analysis.comparison[analysis.comparison["kind"] != "not measured"].iloc[0]
    assert ours["reference"] == "jax" and ours["crossover_batch"] == ours["published_crossover_batch"] == 256
    assert ours["below_batch"] == ours["published_below_batch"] == 64
    assert ours["agreement"] == ("same" if trials > 1 else "same, no interval")


def test_a_failed_cell_gives_a_missing_speedup_with_its_reason_never_zero(tmp_path):
    paths = _study(tmp_path, failed={("numpy", 16): "BLAS crashed", ("torch", 256): "out of memory"})
    speedups = micro_speedups(paths, resamples=RESAMPLES)
    missing = speedups[speedups["status"] == "missing"]
    assert not (speedups["speedup"] == 0).any()
    assert missing["speedup"].isna().all()
    at16 = missing[missing["batch_size"] == 16]
    assert set(at16["framework"]) == {"torch", "jax"} and at16["reason"].str.contains("NumPy cell failed").all()
    # the failed torch cell stands for both of torch's variants
    at256 = missing[(missing["framework"] == "torch") & (missing["batch_size"] == 256)]
    assert sorted(at256["variant"]) == ["resident", "transfer"]
    assert at256["reason"].str.contains("torch|PyTorch").all() and at256["reason"].str.contains("out of memory").all()
    crossovers = micro_crossovers(speedups).set_index(["framework", "variant"])
    # torch wins at 64; 256 failed: the claim "from 64 on" is unverified there
    row = crossovers.loc[("torch", "resident")]
    assert row["crossover_batch"] == 64 and row["unverified_batches"] == "256" and row["largest_batch"] == 64


def test_foreign_and_corrupt_files_are_named(tmp_path):
    good = _write(tmp_path, _result("numpy", "matmul", 1))
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"schema_version": 2, "cell": ')
    inference = _result("torch", "matmul", 1)
    inference["cell"] |= {"suite": "inference", "model": "small_cnn", "image_size": 32}
    foreign = tmp_path / "inference.json"
    foreign.write_text(json.dumps(inference))
    with pytest.raises(ValueError, match="corrupt.json") as error:
        load_micro_cells([good, corrupt, foreign])
    assert "inference.json" in str(error.value) and "not valid JSON" in str(error.value)
    moved = tmp_path / "cells" / "micro" / "numpy" / "eager" / "matmul" / "fp32" / "bs4.json"
    moved.write_text(good.read_text())
    with pytest.raises(ValueError, match=r"bs4.json.*holds the result of cell micro/numpy/eager/matmul/fp32/bs1"):
        load_micro_cells([moved])
    old_layout = tmp_path / "cells" / "micro" / "numpy" / "matmul" / "fp32" / "bs8.json"  # before modes
    old_layout.parent.mkdir(parents=True, exist_ok=True)
    old_layout.write_text(good.read_text())
    with pytest.raises(ValueError, match=r"bs8.json.*holds the result of cell micro/numpy/eager/matmul/fp32/bs1"):
        load_micro_cells([old_layout])
    with pytest.raises(ValueError, match="no micro cell"):
        load_micro_cells([])


def test_unusable_samples_are_named(tmp_path):
    result = _result("torch", "matmul", 1)
    result["metrics"]["variants"]["resident"]["trial_samples_ms"] = [[1.0, -2.0]]
    path = _write(tmp_path, result)
    # the schema's own check or the analysis's, whichever sees it first
    with pytest.raises(ValueError, match="bs1.json.*(not positive finite|less than or equal to the minimum)"):
        load_micro_cells([path])


# ---------------------------------------------------------------------------------------------------------------
# The published reference


def test_published_reference_crossovers_and_flatness():
    published = published_micro(REFERENCE_CSV)
    crossovers = published_crossovers(published).set_index(["reference", "operation"])
    assert crossovers.loc[("jax", "matmul"), "crossover_batch"] == 256
    assert crossovers.loc[("torch_cuda", "matmul"), "crossover_batch"] == 64
    # PyTorch CPU wins from 64 to 1024 but loses again at 4096 (by 3%)
    assert crossovers.loc[("torch_cpu", "matmul"), "kind"] == "never"
    assert crossovers.loc[("torch_cpu", "matmul"), "speedup_at_largest"] == pytest.approx(0.973, abs=0.001)
    network = published[(published["operation"] == "mlp") & (published["reference"] != "jax")]
    assert set(network["baseline"]) == {"numpy_s_in_jax_table"}
    matrix = published[(published["operation"] == "matmul") & (published["reference"] == "torch_cuda")]
    assert set(matrix["baseline"]) == {"numpy_s_in_pytorch_table"}
    flat = reference_flatness(published).set_index("operation")
    assert f"{flat.loc['matmul', 'jax_ratio']:.1f}" == "3.0" and round(flat.loc["matmul", "numpy_ratio"]) == 367


def test_a_foreign_reference_file_is_named(tmp_path):
    bad = tmp_path / "ref.csv"
    bad.write_text("suite,batch_size\nmatrix,1\n")
    with pytest.raises(ValueError, match="ref.csv"):
        published_micro(bad)


def test_torch_is_compared_with_the_reference_series_of_its_platform(tmp_path):
    paths = [_write(tmp_path, _result("numpy", "matmul", b, ms=NUMPY_MS[b], trials=3)) for b in BATCHES]
    paths += [_write(tmp_path, _result("torch", "matmul", b, ms=0.05, platform="cuda", trials=3)) for b in BATCHES]
    analysis = micro_analysis.analyse_micro(paths, REFERENCE_CSV, resamples=RESAMPLES)
    comparison = analysis.comparison
    ours = comparison[comparison["framework"].eq("torch") & comparison["kind"].ne("not measured")].iloc[0]
    assert ours["reference"] == "torch_cuda" and ours["reference_device"] == "NVIDIA T4"
    # 0.05 ms against NumPy's 0.03 at 4 and 0.1 at 16: ours in (4, 16], the reference's in (16, 64]
    assert ours["crossover_batch"] == 16 and ours["published_crossover_batch"] == 64
    assert ours["agreement"] == "earlier" and ours["crossover_ci_high"] == 16
    others = comparison[comparison["kind"] == "not measured"]
    assert {"torch_cpu", "jax"} <= set(others["reference"]) and (others["agreement"] == "not comparable").all()


# ---------------------------------------------------------------------------------------------------------------
# Outputs


OUTPUTS = ("csv", "speedups", "crossovers", "section", "detail", "macros", "pdf", "png")


def _outputs(root: Path) -> dict[str, str]:
    names = {"csv": "micro.csv", "speedups": "micro_speedups.csv", "crossovers": "micro_crossovers.csv"}
    names |= {"section": "micro_section.tex", "macros": "micro_macros.tex", "pdf": "micro.pdf", "png": "micro.png"}
    names |= {"detail": "micro_detail.tex"}
    return {key: str(root / "out" / names[key]) for key in OUTPUTS}


def test_write_micro_outputs_end_to_end(tmp_path):
    paths = _study(tmp_path, failed={("torch", 256): "out of memory"})
    paths.append(_write(tmp_path, _result("numpy", "mlp", 64, ms=0.5)))
    paths.append(_write(tmp_path, _result("torch", "mlp", 64, ms=0.1, transfer_ms=0.2)))
    outputs = _outputs(tmp_path)
    analysis = write_micro_outputs(paths, REFERENCE_CSV, outputs=outputs, resamples=RESAMPLES)
    assert all(Path(path).stat().st_size > 0 for path in outputs.values())
    assert list(pd.read_csv(outputs["speedups"]).columns) == micro.SPEEDUP_COLUMNS
    comparison = pd.read_csv(outputs["crossovers"])
    assert list(comparison.columns) == micro_reference.COMPARISON_COLUMNS
    section = Path(outputs["section"]).read_text()
    assert section.startswith("\\section{Micro-benchmarks} \\label{sec:micro}\n\n")
    assert r"\includegraphics[width=\textwidth]{micro}" in section
    # the body keeps the text and the figure; the tables are the appendix's (fwbench.analysis.common.detail)
    detail = Path(outputs["detail"]).read_text()
    assert detail.startswith("\\section{Micro-benchmarks in full}\n\\label{app:micro}")
    for needle in (r"\label{tab:micro}", r"\label{tab:micro-crossover}"):
        assert needle in detail and needle not in section
    # numbers from the data, in the appendix: the reference's JAX flatness, the BLAS found, the batch sizes
    assert "its JAX time per call varies by a factor of 2.96 over batch sizes 1--4096" in detail and "367" in detail
    assert "openblas 0.3.30, 2 threads" in detail and "batch sizes $b$ = 1, 4, 16, 64 and 256" in detail
    # the body's finding per framework, from the values: PyTorch crosses at 64 (unverified: its cell at 256 failed)
    findings = {f.name: f for f in micro_findings(analysis).frameworks}
    torch = findings["PyTorch"].series
    assert [(s.operation, s.kind, s.batch, s.unverified) for s in torch] == [
        ("matrix product", "crossover", 64, (256,)),
        ("MLP", "crossover", 64, ()),
    ]
    assert (
        "PyTorch overtakes NumPy on the matrix product from batch 64, unverified since the cells at 256 failed"
        in section
    )
    assert [s.kind for s in findings["JAX"].series] == ["never"]
    assert "JAX never overtakes NumPy up to batch 256, on the matrix product." in section
    assert "One of 17 cells failed." in section
    macros = Path(outputs["macros"]).read_text()
    assert "\\newcommand{\\fwbMicroCrossoverTorchMatmulFpThreeTwoResident}{64$^{m}$}" in macros
    assert "\\newcommand{\\fwbMicroCrossoverJaxMatmulFpThreeTwoResident}{never in 1--256}" in macros
    assert "\\newcommand{\\fwbMicroRefCrossoverJaxMatmul}{256}" in macros
    assert "\\newcommand{\\fwbMicroNumFailed}{1}" in macros


def test_the_section_states_the_definitions_for_trials_over_processes(tmp_path):
    analysis = micro_analysis.analyse_micro(_study(tmp_path, trials=3, spread=0.02), REFERENCE_CSV, resamples=RESAMPLES)
    section = micro_section(analysis)
    for needle in (
        "Each cell runs in 3 fresh processes (trials).",
        "at batch sizes 1 to 256, in three fresh processes per cell.",
        "the framework's trial of the same round paired. Its 95\\% CI is a Student-t interval on their logs",
        "The crossover is defined as for the reference, from the point estimates",
        "Its 95\\% interval comes from resampling the whole series",
        "PyTorch overtakes NumPy on the matrix product from batch 64 (95\\% interval: 64 only).",
        "Its 95\\% interval comes from resampling the whole series over processes.",
        "[95\\% CI over processes, paired by round]; bold: faster after the adjustment for multiple comparisons",
    ):
        assert needle in section, needle
    torch = next(f for f in micro_findings(analysis).frameworks if f.name == "PyTorch").series[0]
    assert (torch.batch, torch.has_interval, torch.low, torch.high) == (64, True, 64, 64)
    assert "one process" not in _results_and_comparison(section)
    table = micro_tables.micro_table(analysis.frame, analysis.speedups)
    assert len(re.findall(r"\\textbf\{[0-9]", table)) == 2, "bold: torch at 64 and 256 only"
    defs = micro_macros(analysis)
    assert defs["fwbMicroCrossoverIntervalTorchMatmulFpThreeTwoResident"] == "[64]"
    assert defs["fwbMicroShownTorchMatmulFpThreeTwoResident"] == "slower at 1--16; faster from 64 on"
    assert defs["fwbMicroTrials"] == "3" and defs["fwbMicroNumNoInterval"] == "0"
    # PyTorch CPU never crosses in the reference: ours, at 64 (resident) and 256 (with copy), resolved, are earlier
    assert defs["fwbMicroNumEarlier"] == "2" and defs["fwbMicroNumSame"] == "0"


def _results_and_comparison(section: str) -> str:
    return section[section.index(r"\paragraph{Results}") : section.index(r"\begin{table*}", section.index("Results"))]


def test_with_one_trial_the_section_claims_nothing_resolved(tmp_path):
    analysis = micro_analysis.analyse_micro(_study(tmp_path), REFERENCE_CSV, resamples=RESAMPLES)
    section = micro_section(analysis)
    assert "Each cell runs in one fresh process (one trial)" in section
    assert "It leaves out the variation between processes, so it resolves no difference and no crossover" in section
    assert "have intervals within one process only (one trial per cell)" in section
    assert "set against the reference's by point estimates only" in section and "95\\% interval [" not in section
    # the body claims no interval: a point estimate, said once (negative control: with trials, the interval is there)
    body = section.partition(DETAIL_MARK)[0]
    assert "With one process per cell it is a point estimate without an interval" in body
    assert "95\\% interval:" not in body
    assert not any(s.has_interval for f in micro_findings(analysis).frameworks for s in f.series)
    table = micro_tables.micro_table(analysis.frame, analysis.speedups)
    assert not re.findall(r"\\textbf\{[0-9]", table), "nothing bold from one process"
    assert "CI within one process: one trial per cell" in section
    crossovers = micro_tables.crossover_table(analysis.comparison)
    assert r"{\scriptsize no interval}" in crossovers and ", no interval" in crossovers
    assert micro_macros(analysis)["fwbMicroNumSame"] == "0"


def test_a_study_with_one_trial_at_some_batch_sizes_marks_those_cis(tmp_path):
    paths = [
        _write(tmp_path, _result("numpy", "matmul", batch, ms=NUMPY_MS[batch], trials=trials))
        for batch, trials in ((16, 1), (64, 3))
    ]
    paths += [
        _write(tmp_path, _result("torch", "matmul", batch, ms=TORCH_MS[batch], trials=trials))
        for batch, trials in ((16, 1), (64, 3))
    ]
    analysis = micro_analysis.analyse_micro(paths, REFERENCE_CSV, resamples=RESAMPLES)
    table = micro_tables.micro_table(analysis.frame, analysis.speedups)
    assert table.count(micro_tables.WITHIN_MARK) == 1 and r"\textbf{2" in table
    row = analysis.crossovers.iloc[0]
    assert row["crossover_batch"] == 64 and pd.isna(row["crossover_ci_high"]), "no interval from a mixed series"


def test_macros_are_valid_latex_names_and_values(tmp_path):
    analysis = micro_analysis.analyse_micro(_study(tmp_path), REFERENCE_CSV, resamples=RESAMPLES)
    defs = micro_macros(analysis)
    assert all(name.isalpha() and name.startswith("fwbMicro") for name in defs)
    assert defs["fwbMicroNumCrossovers"] == "2" and defs["fwbMicroNumNever"] == "1"
    assert defs["fwbMicroRefJaxRatioMatmul"] == "2.96" and defs["fwbMicroRefNumpyRatioMatmul"] == "367"
    assert defs["fwbMicroNumpyThreads"] == "2" and defs["fwbMicroDim"] == "64"


def test_section_without_micro_suite():
    text = micro_section(None)
    assert text.startswith("\\section{Micro-benchmarks}")
    assert "This study has no micro suite (\\texttt{suites} in its config)." in text


@pytest.mark.parametrize("case", ["numpy only", "one batch", "all failed"])
def test_figure_and_section_in_degenerate_studies(tmp_path, case):
    if case == "numpy only":
        paths = [_write(tmp_path, _result("numpy", "matmul", b, ms=NUMPY_MS[b])) for b in (1, 4)]
    elif case == "one batch":
        paths = [_write(tmp_path, _result(f, "mlp", 8, ms=ms)) for f, ms in (("numpy", 1.0), ("jax", 0.5))]
    else:
        paths = [_write(tmp_path, _result(f, "matmul", 4, reason="crashed")) for f in ("numpy", "torch", "jax")]
    outputs = _outputs(tmp_path)
    analysis = write_micro_outputs(paths, REFERENCE_CSV, outputs=outputs, resamples=RESAMPLES)
    assert Path(outputs["png"]).stat().st_size > 0
    section = Path(outputs["section"]).read_text()
    table = micro_tables.micro_table(analysis.frame, analysis.speedups)
    assert section.startswith("\\section{Micro-benchmarks}") and table in Path(outputs["detail"]).read_text()
    if case == "numpy only":
        assert "No framework besides NumPy was measured" in section and r"\cmidrule" not in table
        assert r"\multicolumn{2}{l}{\texttt{matmul}, fp32}" in table, "the operation heads its rows"
    if case == "one batch":
        assert "JAX overtakes NumPy on the MLP already at batch 8, the smallest measured." in section
    if case == "all failed":
        assert "PyTorch has no successful pair of cells with NumPy on the matrix product." in section
        assert "Two series have no successful pair of cells." in Path(outputs["detail"]).read_text()
        assert table.count(micro_tables.FAILED) == 3


def test_figure_marks_crossovers_and_reference_points(tmp_path, monkeypatch):
    analysis = micro_analysis.analyse_micro(_study(tmp_path), REFERENCE_CSV, resamples=RESAMPLES)
    drawn = {}

    def keep(fig, pdf, png):
        drawn["fig"] = fig

    monkeypatch.setattr("fwbench.analysis.inference.figures.save_figure", keep)
    micro_figure(analysis.frame, analysis.speedups, analysis.crossovers, analysis.published, "x.pdf", "x.png")
    bottom = drawn["fig"].axes[1]
    texts = [t.get_text() for t in bottom.texts]
    assert "64" in texts and "256 copy" in texts  # torch resident and with copy
    labels = bottom.get_legend_handles_labels()[1]
    assert "JAX, reference (T4 report)" in labels and "PyTorch CPU, reference (T4 report)" in labels


def test_micro_verdicts_are_adjusted_within_each_framework_family():
    """Two speedups of one framework each resolved on their own (p 0.03 and 0.04) are not after Holm's adjustment
    within the framework's family; without adjustment they stay faster; another framework is its own family."""
    import pandas as pd

    frame = pd.DataFrame(
        {
            "framework": ["jax", "jax", "torch"],
            "mode": ["jit", "jit", "eager"],
            "speedup": [1.2, 1.3, 1.5],
            "verdict": [FASTER, FASTER, FASTER],
            "p_value": [0.03, 0.04, 0.01],
            "se_log": [0.05, 0.06, 0.05],
            "df": [2.0, 2.0, 2.0],
        }
    )
    holm = adjusted(frame.copy(), "holm")
    assert list(holm["verdict"]) == [NOT_RESOLVED, NOT_RESOLVED, FASTER]
    assert list(holm["family"]) == ["micro jax/jit over numpy"] * 2 + ["micro torch/eager over numpy"]
    assert list(adjusted(frame.copy(), "none")["verdict"]) == [FASTER, FASTER, FASTER]


def test_an_interval_in_powers_of_ten_takes_two_lines():
    """An interval over two processes under load once spanned 7.37e-19 to 1.32e15: written in powers of ten, its two
    ends go on two lines, so that the crossover table's cell stays as narrow as its column."""
    from fwbench.analysis.micro.tables import at_largest, interval_lines

    assert interval_lines(0.0342, 0.0837) == [r"{\scriptsize[0.0342, 0.0837]}"]
    wide = interval_lines(7.37e-19, 1.32e15)
    assert wide == [
        r"{\scriptsize[7.37\ensuremath{\times 10^{-19}},}",
        r"{\scriptsize\phantom{[}1.32\ensuremath{\times 10^{15}}]}",
    ]
    cell = at_largest(
        {"speedup_at_largest": 0.025, "largest_batch": 64, "ci_low_at_largest": 7.37e-19, "ci_high_at_largest": 1.32e15}
    )
    assert cell.count(r"\\") == 2 and "0.0250$\\times$ at 64" in cell


@needs_latex
def test_the_crossover_table_fits_the_page_at_its_widest_plain_numbers(tmp_path):
    """A workflow study under load once drew [0.000553, 0.00448] at its largest batch size: on one line, that cell
    made the crossover table 3.8 pt wider than the page, and the paper check refused the paper. At the widest
    numbers written without powers of ten (eight characters each), at both ends and in the speedup at 4096, it
    fits: what is longer than a line's room takes two. One document holds the table at each of the cases (one LaTeX
    run and one check instead of four), and the check names the table of a problem by its input line."""
    cases = [
        (0.00157, 0.000553, 0.00448, 64),
        (0.000157, 0.000111, 0.000448, 4096),
        (0.00171, 0.00117, 0.00250, 4096),
        (0.0663, 0.00117, 0.00250, 4096),  # each line at its most characters
    ]
    analysis = micro_analysis.analyse_micro(_study(tmp_path / "cells"), REFERENCE_CSV, resamples=RESAMPLES)
    body = []
    for number, at_largest in enumerate(cases):
        comparison = analysis.comparison.copy()
        measured = comparison["kind"] != "not measured"
        columns = ["speedup_at_largest", "ci_low_at_largest", "ci_high_at_largest", "largest_batch"]
        comparison.loc[measured, columns] = at_largest
        table = micro_tables.crossover_table(comparison)
        speedup, low, high, batch = at_largest
        cell = micro_tables.at_largest(
            {
                "speedup_at_largest": speedup,
                "largest_batch": batch,
                "ci_low_at_largest": low,
                "ci_high_at_largest": high,
            }
        )
        assert cell in table, (number, at_largest)  # the case's cell is in its table
        (tmp_path / f"crossovers{number}.tex").write_text(table)
        label = f"tab:x{number}"
        body += micro_section_module.table_float(
            f"Crossovers {number}", label, rf"\input{{crossovers{number}}}", ["A note."]
        )
        body.append(rf"Table~\ref{{{label}}}. " + TEXT)
    pdf, log, tex = _build(tmp_path, "\n".join(body))
    report = _check(tmp_path, pdf, log, tex)
    assert report["problems"] == [], report["problems"]


# ---------------------------------------------------------------------------------------------------------------
# The section's words (report/templates/micro.tex.j2, micro_detail.tex.j2) on the studies it must render for

# A configuration identifier of the micro suite that must not reach the body's prose.
IDENTIFIERS = re.compile(r"matmul|mlp|fp32|\\texttt|jax_jit|torch/|JAX/Flax|TensorFlow/Keras")


def _studies(root: Path, case: str) -> list[Path]:
    """The cells of one edge case: `resolved` (three trials each), `unresolved` (one trial), `failed` (a cell
    failed), `one framework` (PyTorch alone against NumPy), `gpu` (the frameworks on a GPU)."""
    if case == "resolved":
        return _study(root, trials=3, spread=0.02)
    if case == "unresolved":
        return _study(root)
    if case == "failed":
        return _study(root, failed={("torch", 64): "out of memory"}, trials=3, spread=0.02)
    frameworks = {"one framework": ("numpy", "torch"), "gpu": ("numpy", "torch", "jax")}[case]
    paths = []
    for batch in BATCHES:
        for framework in frameworks:
            ms = {"numpy": NUMPY_MS[batch], "torch": TORCH_MS[batch], "jax": NUMPY_MS[batch] * 5}[framework]
            platform = "cuda" if case == "gpu" and framework != "numpy" else "cpu"
            paths.append(_write(root, _result(framework, "matmul", batch, ms=ms, trials=3, platform=platform)))
    return paths


def _prose(section: str) -> tuple[str, str]:
    """(body, appendix text): the two texts a reader reads, floats left out."""
    body, _, detail = section.partition(DETAIL_MARK)
    return body.partition(r"\begin{figure*}")[0], detail.partition(r"\begin{table*}")[0]


@pytest.mark.parametrize("case", ["resolved", "unresolved", "failed", "one framework", "gpu"])
def test_the_sections_render_short_sentences_in_display_names(tmp_path, case):
    analysis = micro_analysis.analyse_micro(_studies(tmp_path, case), REFERENCE_CSV, resamples=RESAMPLES)
    body, detail = _prose(micro_section(analysis))
    for text in (body, detail):
        assert long_sentences(text, "micro") == [], case
    assert not IDENTIFIERS.search(body), IDENTIFIERS.search(body)
    findings = micro_findings(analysis)
    names = [f.name for f in findings.frameworks]
    assert names == {"one framework": ["PyTorch"]}.get(case, ["PyTorch", "JAX"])
    torch = findings.frameworks[0].series[0]
    if case == "resolved":
        assert (torch.kind, torch.batch, torch.low, torch.high) == ("crossover", 64, 64, 64)
        assert "PyTorch overtakes NumPy on the matrix product from batch 64 (95\\% interval: 64 only)." in body
    if case == "unresolved":
        assert not torch.has_interval and "95\\% interval" not in body
    if case == "failed":
        assert findings.failed == 1 and "One of 15 cells failed." in body
        # the crossover at 256 stands on the cell at 256 only, the cell below it failed
        assert torch.batch == 256 and torch.unverified == ()
    if case == "one framework":
        assert "JAX" not in body and "PyTorch" in body
    if case == "gpu":
        assert findings.devices == ("NVIDIA Test GPU",)
        assert "We ask the same of this study's NVIDIA Test GPU:" in body
    else:
        assert "We ask the same of this study's Test CPU:" in body


def test_the_checks_of_the_sections_words_fail_the_old_wording():
    """Negative controls: the f-string section's longest sentence and its identifiers are caught by the checks the
    test above applies."""
    old = (
        "With several trials the process is the unit, as in the inference suite: the speedup is the geometric mean of "
        "the per-round ratios of the trials' medians, NumPy's and the framework's trial of the same round paired, "
        "with a Student-t 95\\% CI on their logs."
    )
    assert len(long_sentences(old, "micro")) == 1
    assert IDENTIFIERS.search("JAX/Flax \\texttt{mlp} from 4096")


def test_a_template_missing_a_value_names_itself():
    with pytest.raises(TemplateValueError, match=r"micro\.tex\.j2"):
        render("micro.tex.j2", {})
