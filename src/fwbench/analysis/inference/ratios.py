"""The ratio tables: each framework's throughput over PyTorch's (`speedups`, results/tables/speedups.csv) and the
gain of compiling within one framework (`mode_gains`, results/tables/mode_gains.csv), each ratio with its 95%
interval (`ratio_interval`), its marks (deviations, nodes, modes) and its verdicts adjusted within its family.

They are computed from the cell results themselves, not from the tidy table: a paired interval needs each trial's
round, which the tidy table (one row per cell) does not keep. Reading a ratio table back is
fwbench.analysis.inference.summary's."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from fwbench.analysis.common import partners, verdicts
from fwbench.analysis.common.cells import load_cells
from fwbench.analysis.common.latex import BASELINE, ordered_frameworks
from fwbench.analysis.common.moderation import (
    DEFAULT_LAUNCH_VARIANCE,
    LAUNCH_VARIANCES,
    launch_variance_setting,
    moderate,
)
from fwbench.analysis.common.partners import (
    cell_mode,
    check_placement,
    deviations_differ,
    failure_columns,
    ratio_variant,
    variant_key,
)
from fwbench.analysis.common.verdicts import (
    DEFAULT_MULTIPLICITY,
    VERDICT_COLUMNS,
    adjust_verdicts,
    multiplicity_setting,
)
from fwbench.analysis.inference.tidy import mode_rank
from fwbench.io import atomic_write_text
from fwbench.study import modes as execution_modes
from fwbench.trackers.stats import (
    WITHIN_PROCESS_ONLY,
    Interval,
    bootstrap_ratio_of_medians,
    paired_ratio_interval,
    welch_ratio_interval,
)

COMPARISON_COLUMNS = ["model", "precision", "batch_size"]
# What every ratio row has, between frameworks (SPEEDUP_COLUMNS) or between one framework's modes (MODE_GAIN_COLUMNS):
# the estimate with its interval, and its marks.
# `se_log` and `df`: the interval's standard error on the log scale and its degrees of freedom (a t interval; empty
# for a bootstrap), from which fwbench.analysis.common.verdicts tests it at other levels; `p_value`: the two-sided test
# of ratio 1 (paired intervals only: they alone can resolve a difference).
INTERVAL_COLUMNS = ["ratio", "ci_low", "ci_high", "ci_scope", "pairs", "resolved", "method", "se_log", "df", "p_value"]
# A paired ratio's own interval and degrees of freedom where its launch variance was moderated (analysis.moderation)
INTERVAL_COLUMNS += ["ci_low_own", "ci_high_own", "df_own"]
MARK_COLUMNS = ["deviation_differs", "deviation_detail", "refused", "node_differs", "node_detail"]
# The denominator's fastest variant at the comparison (`fastest_variant`: its mode and the memory format its cell
# recorded) and the numerator's ratio against it, with that ratio's own 95% interval (never moderated): beside the
# ratio in the configured modes, whatever they are, the ratio against the best PyTorch the study measured.
FASTEST_COLUMNS = [
    "fastest_denominator_mode",
    "fastest_denominator_memory_format",
    "ratio_vs_fastest",
    "ci_low_vs_fastest",
    "ci_high_vs_fastest",
]
SPEEDUP_COLUMNS = [
    *COMPARISON_COLUMNS,
    *INTERVAL_COLUMNS,
    *VERDICT_COLUMNS,
    "numerator",
    "denominator",
    "numerator_mode",
    "denominator_mode",
    "mixed_modes",
    "stand_in",
    *MARK_COLUMNS,
    *FASTEST_COLUMNS,
]
PAIRED, UNPAIRED, WITHIN = "paired_rounds", "unpaired_trials", "within_process"


def _trial_rates(result: dict[str, Any]) -> dict[int, float]:
    """Round -> throughput of each of a cell's trials (empty for results without per-trial rounds)."""
    trials = (result["metrics"] or {}).get("trials") or []
    if any("round" not in trial for trial in trials):
        return {}
    return {int(trial["round"]): float(trial["throughput_img_s"]) for trial in trials}


def _group_id(result: dict[str, Any]) -> str | None:
    return (result["provenance"].get("group") or {}).get("id")


def ratio_interval(num: dict[str, Any], den: dict[str, Any]) -> tuple[Interval, str, int, str]:
    """Throughput ratio num/den of two cell results: (interval, scope, pairs, method).

    Cells measured in one group are compared round by round: ratio = geometric mean of the per-round ratios, t CI on
    their logs (pairs - 1 df); drift that moves both frameworks alike cancels. Cells with several trials measured
    apart get a Welch interval on the ratio of their geometric means (drift between their runs not controlled).
    With a single trial on either side only the within-process bootstrap of the raw samples remains."""
    rates_num, rates_den = _trial_rates(num), _trial_rates(den)
    same_group = _group_id(num) is not None and _group_id(num) == _group_id(den)
    rounds = sorted(set(rates_num) & set(rates_den)) if same_group else []
    if len(rounds) >= 2:
        interval = paired_ratio_interval([rates_num[k] for k in rounds], [rates_den[k] for k in rounds])
        blocks = (num["metrics"].get("blocks") or {}).get("plan", {}).get("blocks")
        unit = (
            f"per-launch ratios (warm workers, {blocks} interleaved blocks per launch)"
            if blocks
            else "per-round ratios (interleaved trials)"
        )
        method = f"geometric mean of {len(rounds)} {unit}, Student-t 95% CI on their logs ({len(rounds) - 1} df)"
        return interval, PAIRED, len(rounds), method
    if len(rates_num) >= 2 and len(rates_den) >= 2:
        interval = welch_ratio_interval(list(rates_num.values()), list(rates_den.values()))
        method = "ratio of the trials' geometric means, Welch t 95% CI: trials not interleaved, drift not controlled"
        return interval, UNPAIRED, 0, method
    # throughput ratio = median latency of the denominator / median latency of the numerator
    interval = bootstrap_ratio_of_medians(den["samples_ms"], num["samples_ms"])
    method = f"ratio of median-step throughputs, percentile bootstrap of the raw samples, {WITHIN_PROCESS_ONLY}"
    return interval, WITHIN, len(rounds), method


Variants = dict[tuple[str, str], dict[str, Any]]


def _ok_cells_by_comparison(results: Iterable[dict[str, Any]]) -> dict[tuple, Variants]:
    """(model, precision, batch) -> {(framework, mode): result} of the successful cells: the cells a ratio can
    compare. One framework may have a cell in each of its modes (PyTorch eager and compiled)."""
    cells: dict[tuple, Variants] = {}
    for result in results:
        if result["status"] != "ok":
            continue
        cell = result["cell"]
        key = (cell["model"], cell["precision"], cell["batch_size"])
        cells.setdefault(key, {})[(cell["framework"], cell_mode(cell))] = result
    return cells


def _modes_present(variants: Variants, framework: str) -> list[str]:
    """The modes `framework` has a successful cell in, in the registry's order (its primary mode first)."""
    present = {mode for f, mode in variants if f == framework}
    return sorted(present, key=mode_rank)


def _refused_row(ratio: dict[str, Any], reason: str) -> dict[str, Any]:
    """A ratio refused because its two cells ran on different device models: no estimate, no interval, never
    resolved; `refused` says why (each framework's device model)."""
    nan = float("nan")
    return ratio | {
        "ratio": nan,
        "ci_low": nan,
        "ci_high": nan,
        "ci_scope": None,
        "pairs": 0,
        "resolved": False,
        "method": "none: the cells ran on different device models, so a ratio would compare the devices",
        "se_log": nan,
        "df": nan,
        "p_value": nan,
        "refused": reason,
    }


def _name(result: dict[str, Any]) -> str:
    """How detail texts name a ratio's cell (`partners.variant_key`: the framework, with its mode where that is not
    the primary one), so that the two modes of one framework stay apart."""
    return variant_key(result["cell"]["framework"], cell_mode(result["cell"]))


def _ratio_row(key: tuple, num: dict[str, Any], den: dict[str, Any]) -> dict[str, Any]:
    """The ratio num/den of one comparison, with its interval, deviation and node marks; refused (`_refused_row`)
    when the two cells ran on different device models."""
    model, precision, batch = key
    names = {_name(cell): failure_columns(cell)["deviations"] for cell in (num, den)}
    differs = deviations_differ(*names.values())
    placement = check_placement([den, num])  # the denominator first, as the ratio is read
    row = {
        "model": model,
        "precision": precision,
        "batch_size": batch,
        "deviation_differs": differs,
        "deviation_detail": "; ".join(f"{name}: {n or 'none'}" for name, n in names.items()) if differs else None,
        "refused": None,
        "node_differs": placement.nodes_differ,
        "node_detail": placement.nodes_detail,
    }
    if placement.models_differ:
        return _refused_row(row, placement.models_detail)
    ci, scope, pairs, method = ratio_interval(num, den)
    paired = scope == PAIRED
    return row | {
        "ratio": ci.estimate,
        "ci_low": ci.low,
        "ci_high": ci.high,
        "ci_scope": scope,
        "pairs": pairs,
        "resolved": bool(paired and (ci.low > 1 or ci.high < 1)),
        "method": method,
        "se_log": ci.se_log if ci.se_log is not None else math.nan,
        "df": ci.df if ci.df is not None else math.nan,
        # only a paired interval can resolve a difference (drift between unpaired runs is not controlled)
        "p_value": verdicts.p_value(math.log(ci.estimate), ci.se_log, ci.df) if paired else math.nan,
    }


def _speedup_row(
    key: tuple, numerator: str, denominator: str, variants: Variants, config: dict[str, Any]
) -> dict[str, Any] | None:
    """One framework's ratio to the baseline at one comparison: each side's cell in its ratio mode, or its first
    successful mode standing in (`partners.ratio_variant`; `stand_in` says which); `mixed_modes` where one side is
    compiled and the other not. None when either framework has no successful cell."""
    picked = {f: ratio_variant(f, _modes_present(variants, f), config) for f in (numerator, denominator)}
    num_mode, den_mode = picked[numerator][0], picked[denominator][0]
    if num_mode is None or den_mode is None:
        return None
    stand_ins = [
        f"{f}: {mode} for {execution_modes.ratio_mode(config, f)}"
        for f, (mode, fell_back) in picked.items()
        if fell_back
    ]
    row = {
        "numerator": numerator,
        "denominator": denominator,
        "numerator_mode": num_mode,
        "denominator_mode": den_mode,
        "mixed_modes": partners.mixed_modes(num_mode, den_mode),
        "stand_in": "; ".join(stand_ins) or None,
    }
    row |= _ratio_row(key, variants[(numerator, num_mode)], variants[(denominator, den_mode)])
    fastest = fastest_variant(variants, denominator)
    against = _ratio_row(key, variants[(numerator, num_mode)], variants[(denominator, fastest)])
    return row | {
        "fastest_denominator_mode": fastest,
        "fastest_denominator_memory_format": memory_format(variants[(denominator, fastest)]),
        "ratio_vs_fastest": against["ratio"],
        "ci_low_vs_fastest": against["ci_low"],
        "ci_high_vs_fastest": against["ci_high"],
    }


def memory_format(result: dict[str, Any]) -> str | None:
    """The memory format a cell recorded as read from its tensors (PyTorch: channels_last or contiguous); None for a
    framework without the choice, or a result from before it was recorded."""
    return ((result["provenance"].get("framework") or {}).get("settings") or {}).get("memory_format")


def fastest_variant(variants: Variants, framework: str) -> str:
    """The mode of `framework`'s highest-throughput successful cell at one comparison (`variants`: its ok cells),
    by the cells' own throughput (the geometric mean of their launches); ties go to the registry's order."""
    modes = _modes_present(variants, framework)
    return max(modes, key=lambda mode: (_throughput(variants[(framework, mode)]), -mode_rank(mode)))


def _throughput(result: dict[str, Any]) -> float:
    value = (result.get("metrics") or {}).get("throughput_img_s")
    return float(value) if value is not None and math.isfinite(float(value)) else -math.inf


def _suite(variants: Variants) -> str:
    """The suite of one comparison's cells (inference for every ratio table the workflow writes)."""
    return str(next(iter(variants.values()))["cell"].get("suite", "inference"))


def _family(suite: str, numerator: str, denominator: str) -> str:
    """A family of tests: one suite and framework pair ("inference jax/torch"), or one framework's modes
    ("inference torch compiled/eager")."""
    return f"{suite} {numerator}/{denominator}"


def speedups(
    results: Iterable[dict[str, Any]],
    numerator: str | None = None,
    denominator: str = BASELINE,
    ratio_modes: Mapping[str, str] | None = None,
    multiplicity: str = DEFAULT_MULTIPLICITY,
    launch_variance: str = DEFAULT_LAUNCH_VARIANCE,
) -> pd.DataFrame:
    """Throughput ratio numerator/denominator with a 95% CI (see `ratio_interval`; with `launch_variance`
    "moderated", the paired ratios' launch variances moderated across the table, fwbench.analysis.common.moderation),
    for every (model, precision, batch) where both frameworks have a successful cell; with no `numerator`, one row per
    other framework of the
    results against the denominator (PyTorch), the framework in the `numerator` column, rows ordered by comparison
    and then framework in the paper's order.

    Modes: each side is the framework's cell in its ratio mode (`ratio_modes`, the config's; by default each
    framework's compiled mode, fwbench.study.modes.ratio_mode), or, where that cell is missing or failed, its first
    successful mode, which `stand_in` names. `numerator_mode` and `denominator_mode` say what was paired;
    `mixed_modes`: one side compiled and the other not (an eager program against a compiled one), which every
    table marks.

    `resolved`: the CI excludes 1 and comes from paired, interleaved rounds; a within-process or unpaired interval
    never resolves a comparison. `resolved_adjusted`: the paired test of ratio 1 resolves it after the adjustment
    `multiplicity` (analysis.multiplicity: holm by default) within its family, one per suite and framework pair
    (`adjust_verdicts`); the paper's bold type and counts use it. `deviation_differs`: the two cells ran with
    different workarounds from the fallback ladder (`deviation_detail` says which), so the ratio is marked and left
    out of the summary statistics.
    `refused`: the two cells ran on different device models (GPU models, CPU models, or a GPU and a CPU; the reason
    names each), so the ratio and its interval are NaN and it is in no summary. `node_differs`: they ran on
    different nodes of one device model (`node_detail` names them): the ratio is kept, and marked.

    FASTEST_COLUMNS: which of the denominator's variants was fastest at the comparison (PyTorch eager, compiled or
    compiled with CUDA graphs, in the memory format its cell recorded; `fastest_variant`) and the numerator's ratio
    against it, with its own interval, beside the ratio in the configured pairing, which they leave as it is.
    Columns in SPEEDUP_COLUMNS' order."""
    cells = _ok_cells_by_comparison(results)
    present = {framework for variants in cells.values() for framework, _ in variants}
    numerators = [numerator] if numerator is not None else [f for f in ordered_frameworks(present) if f != denominator]
    config = {"ratio_modes": dict(ratio_modes or {})}
    rows = [
        (_speedup_row(key, framework, denominator, variants, config), _suite(variants))
        for key, variants in sorted(cells.items())
        for framework in numerators
    ]
    kept = [(row, suite) for row, suite in rows if row is not None]
    frame = pd.DataFrame([row for row, _ in kept], columns=[c for c in SPEEDUP_COLUMNS if c not in VERDICT_COLUMNS])
    frame = _launch_variances(frame, launch_variance)
    families = [_family(suite, row["numerator"], row["denominator"]) for row, suite in kept]
    return adjust_verdicts(frame, families, multiplicity)[SPEEDUP_COLUMNS]


MODE_GAIN_COLUMNS = [
    *COMPARISON_COLUMNS,
    "framework",
    "mode",
    "baseline_mode",
    *INTERVAL_COLUMNS,
    *VERDICT_COLUMNS,
    *MARK_COLUMNS,
]


def _gain_rows(key: tuple, framework: str, variants: Variants) -> list[dict[str, Any]]:
    """Each compiled mode of `framework` over its eager mode at one comparison (none without both)."""
    modes = _modes_present(variants, framework)
    eager = next((mode for mode in modes if not execution_modes.is_compiled(mode)), None)
    if eager is None:
        return []
    return [
        {"framework": framework, "mode": mode, "baseline_mode": eager}
        | _ratio_row(key, variants[(framework, mode)], variants[(framework, eager)])
        for mode in modes
        if execution_modes.is_compiled(mode)
    ]


def _launch_variances(frame: pd.DataFrame, launch_variance: str) -> pd.DataFrame:
    """The table's paired intervals from moderated launch variances ("moderated") or each ratio's own ("own")."""
    if launch_variance not in LAUNCH_VARIANCES:
        choices = ", ".join(LAUNCH_VARIANCES)
        raise ValueError(f"analysis.launch_variance must be one of {choices}, not {launch_variance!r}")
    return moderate(frame, PAIRED) if launch_variance == "moderated" and len(frame) else frame


def mode_gains(
    results: Iterable[dict[str, Any]],
    multiplicity: str = DEFAULT_MULTIPLICITY,
    launch_variance: str = DEFAULT_LAUNCH_VARIANCE,
) -> pd.DataFrame:
    """The gain of compiling within one framework: for every comparison (model, precision, batch) and every framework
    with successful cells in an eager and a compiled mode, the compiled cell's throughput over the eager one's, with
    the same interval (`ratio_interval`: the two cells are trials of one group, interleaved round by round), marks
    and refusals as the ratios between frameworks, and the adjusted verdicts of `adjust_verdicts` (one family per
    framework: "inference torch compiled/eager"). Rows by comparison, then framework in the paper's order; columns
    in MODE_GAIN_COLUMNS' order (an empty table, with them, when no framework ran in two modes)."""
    rows = [
        (row, _suite(variants))
        for key, variants in sorted(_ok_cells_by_comparison(results).items())
        for framework in ordered_frameworks(f for f, _ in variants)
        for row in _gain_rows(key, framework, variants)
    ]
    frame = pd.DataFrame([row for row, _ in rows], columns=[c for c in MODE_GAIN_COLUMNS if c not in VERDICT_COLUMNS])
    frame = _launch_variances(frame, launch_variance)
    families = [f"{suite} {row['framework']} compiled/eager" for row, suite in rows]
    return adjust_verdicts(frame, families, multiplicity)[MODE_GAIN_COLUMNS]


def write_ratio_tables(
    paths: Iterable[str | Path],
    speedups_csv: str | Path,
    mode_gains_csv: str | Path,
    ratio_modes: Mapping[str, str] | None = None,
    analysis: Mapping[str, Any] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ratios between frameworks (`speedups`, in the config's `ratio_modes`) and the gains of compiling within
    one (`mode_gains`), from one read of the cells; `analysis`: the config's (its `multiplicity`, holm by default,
    adjusts the verdicts of each family)."""
    results = load_cells(paths)
    multiplicity, variance = multiplicity_setting(analysis), launch_variance_setting(analysis)
    ratios = speedups(results, ratio_modes=ratio_modes, multiplicity=multiplicity, launch_variance=variance)
    gains = mode_gains(results, multiplicity=multiplicity, launch_variance=variance)
    atomic_write_text(speedups_csv, ratios.to_csv(index=False))
    atomic_write_text(mode_gains_csv, gains.to_csv(index=False))
    return ratios, gains


def write_speedups(
    paths: Iterable[str | Path],
    out_csv: str | Path,
    ratio_modes: Mapping[str, str] | None = None,
    analysis: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """`ratio_modes`: the config's (`speedups`); left out, each framework's compiled mode. `analysis`: the config's
    (`write_ratio_tables`)."""
    frame = speedups(
        load_cells(paths),
        ratio_modes=ratio_modes,
        multiplicity=multiplicity_setting(analysis),
        launch_variance=launch_variance_setting(analysis),
    )
    atomic_write_text(out_csv, frame.to_csv(index=False))
    return frame
