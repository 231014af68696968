"""All cell results → one tidy table (one row per cell, failed cells included with their reason)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fwbench.analysis.common import partners, verdicts
from fwbench.analysis.common.cells import cells_by_path, load_cells
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
    device_columns,
    failure_columns,
    flag_deviations,
    flag_partners,
    placement_columns,
    ratio_variant,
    variant_key,
)
from fwbench.analysis.common.verdicts import (
    DEFAULT_MULTIPLICITY,
    VERDICT_COLUMNS,
    adjust_verdicts,
    multiplicity_setting,
)
from fwbench.io import atomic_write_text
from fwbench.study import modes as execution_modes
from fwbench.trackers.flops import peak_for
from fwbench.trackers.stats import (
    WITHIN_PROCESS_ONLY,
    Interval,
    bootstrap_ratio_of_medians,
    paired_ratio_interval,
    welch_ratio_interval,
)

KEY_COLUMNS = ["suite", "model", "precision", "batch_size", "framework", "mode"]
# Every mode of the registry in its order (eager before compile): how rows of one framework in two modes sort.
MODE_ORDER = list(dict.fromkeys(mode for modes in execution_modes.MODES.values() for mode in modes))


def _setting(value: Any, key: str) -> Any:
    """One field of a recorded setting that is a record ({"setting": "on", "in_effect": null, ...}); a setting
    recorded as a bare value is its own first field."""
    if isinstance(value, Mapping):
        return value.get(key)
    return value if key in ("setting", "state") else None


def block_columns(metrics: dict[str, Any]) -> dict[str, Any]:
    """The burst checks of a cell measured by warm workers in blocks (fwbench.scenarios.blocks), empty for older
    results: bursts and those flagged for steal or other processes' load (and that load's share of the machine), CPU
    time per wall second in the bursts and while waiting (the worst launch), hardware counters per image where the
    kernel exposed them."""
    blocks = metrics.get("blocks") or {}
    return {
        "bursts": blocks.get("bursts"),
        "steal_flagged_bursts": blocks.get("steal_flagged"),
        "steal_share_max": blocks.get("steal_share_max"),
        "load_flagged_bursts": blocks.get("load_flagged"),
        "other_load_share": blocks.get("other_load_share"),
        "cpu_per_wall": blocks.get("cpu_per_wall"),
        "idle_cpu_per_wall": blocks.get("idle_cpu_per_wall"),
        "instructions_per_image": blocks.get("instructions_per_item"),
        "cycles_per_image": blocks.get("cycles_per_item"),
    }


def mode_columns(result: dict[str, Any]) -> dict[str, Any]:
    """The tidy columns of the mode axis: `mode` and `compiled`, and how the cell compiled and tuned its kernels
    (torch.compile's `compile_mode`, the `autotune` setting and whether it was in effect, the compilation cache's
    state), so that tables can say what a compiled number includes and a ratio can say what it pairs."""
    settings = (result["provenance"].get("framework") or {}).get("settings") or {}
    mode = cell_mode(result["cell"])
    return {
        "mode": mode,
        "compiled": execution_modes.is_compiled(mode),
        "compile_mode": settings.get("compile_mode"),
        "autotune": _setting(settings.get("autotune"), "setting"),
        "autotune_in_effect": _setting(settings.get("autotune"), "in_effect"),
        "compilation_cache": _setting(settings.get("compilation_cache"), "state"),
    }


def graph_breaks(metrics: dict[str, Any] | None) -> int | None:
    """torch.compile's graph breaks in a cell (its `compile_report`, fwbench.backends.torch_compile.report); None
    where the cell records none (XLA compiles whole programs, eager compiles nothing)."""
    return ((metrics or {}).get("compile_report") or {}).get("graph_breaks")


def _mode_rank(mode: str) -> int:
    return MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER)


def _sort_key(column: pd.Series) -> pd.Series:
    """Modes sort in the registry's order (eager before compile), every other key column as it is."""
    return column.map(_mode_rank) if column.name == "mode" else column


def _row(result: dict[str, Any], path: str) -> dict[str, Any]:
    cell, metrics = result["cell"], result["metrics"] or {}
    framework = result["provenance"].get("framework") or {}
    latency = metrics.get("latency_ms", {})
    rss = metrics.get("rss_mb", {})
    versions = framework.get("versions", {})
    memory = metrics.get("device_memory") or {}
    return {
        **{key: cell[key] for key in ("suite", "framework")},
        **mode_columns(result),
        **{key: cell[key] for key in ("model", "precision", "batch_size", "image_size")},
        "status": result["status"],
        "reason": result["reason"],
        **failure_columns(result),
        "throughput_img_s": metrics.get("throughput_img_s"),
        "throughput_img_s_total": metrics.get("throughput_img_s_total"),
        "latency_p50_ms": latency.get("p50"),
        "latency_p95_ms": latency.get("p95"),
        "latency_p99_ms": latency.get("p99"),
        "latency_mean_ms": latency.get("mean"),
        "latency_iqr_ms": latency.get("iqr"),
        "latency_cv": latency.get("cv"),
        "throughput_ci_low": (metrics.get("ci95") or {}).get("throughput_img_s", [None, None])[0],
        "throughput_ci_high": (metrics.get("ci95") or {}).get("throughput_img_s", [None, None])[1],
        "trials": len(metrics["trials"]) if metrics.get("trials") else (1 if metrics else None),
        "ci_scope": (metrics.get("ci95") or {}).get("scope"),
        # noisy: at least one trial's own IQR above 10% of its median (older results: the pooled samples')
        "noisy": (metrics.get("flags") or {}).get("noisy"),
        "noisy_trials": metrics.get("noisy_trials"),
        "ci_not_reached": (metrics.get("flags") or {}).get("ci_not_reached"),
        **block_columns(metrics),
        "n_iters": metrics.get("n_iters"),
        "stop_reason": metrics.get("stop_reason"),
        "recompiled": (metrics.get("flags") or {}).get("recompiled"),
        "graph_breaks": graph_breaks(metrics),
        "other_gpu_processes": (metrics.get("flags") or {}).get("other_gpu_processes"),
        "energy_j_per_image": (metrics.get("energy") or {}).get("joules_per_image"),
        "energy_source": (metrics.get("energy") or {}).get("source"),
        "energy_missing": (metrics.get("missing") or {}).get("energy"),
        # steady state (after warm-up; load, compilation and autotuning scratch apart) where the framework has it
        "device_peak_bytes": memory.get("steady_state_peak_bytes", memory.get("peak_allocated_bytes")),
        "device_peak_with_load_bytes": memory.get("peak_allocated_bytes"),
        "device_memory_missing": (metrics.get("missing") or {}).get("device_memory"),
        "compile_s": metrics.get("compile_s"),
        "first_call_s": metrics.get("first_call_s"),
        "rss_before_mb": rss.get("before"),
        "rss_peak_mb": rss.get("peak"),
        "threads": (framework.get("settings") or {}).get("intra_op_threads"),
        **device_columns(result),
        "tf32_in_effect": (framework.get("settings") or {}).get("tf32_in_effect"),
        "dtype": (framework.get("settings") or {}).get("dtype"),
        "cuda_major": str(versions.get("cuda")).split(".")[0] if versions.get("cuda") else None,
        "gpu_index": (result["provenance"].get("placement") or {}).get("gpu_index"),
        "framework_version": versions.get(cell["framework"]),
        **placement_columns(result),
        "git_commit": (result["provenance"].get("git") or {}).get("commit"),
        "path": path,
    }


def tidy(paths: Iterable[str | Path]) -> pd.DataFrame:
    rows = [_row(result, str(path)) for path, result in cells_by_path(paths)]
    frame = pd.DataFrame(rows)
    if frame.empty:
        raise ValueError("no cell results to aggregate")
    frame = frame.sort_values(KEY_COLUMNS, kind="stable", key=_sort_key).reset_index(drop=True)
    return flag_deviations(flag_partners(frame))


def add_mfu(frame: pd.DataFrame, facts: Iterable[dict[str, Any]], peak: dict[str, Any]) -> pd.DataFrame:
    """Achieved FLOP/s and MFU per cell: model FLOPs per image (FlopCounterMode, identical for both frameworks) x
    img/s, against the study's measured peak for the cell's precision.

    Only the facts of the study's configuration count: the reference rows (torchvision's 1000 classes at 224 px)
    can share a model and resolution with the study's cells but not their head, hence not their FLOPs."""
    per_image = {
        (row["model"], row["image_size"]): row["flops_torch"] for row in facts if row.get("configuration") == "study"
    }
    flops = [per_image.get((m, s)) for m, s in zip(frame["model"], frame["image_size"], strict=True)]
    frame = frame.assign(flops_per_image=pd.array(flops, dtype="Float64").astype(float))
    frame["achieved_flops"] = frame["flops_per_image"] * frame["throughput_img_s"]
    frame["peak_flops"] = [peak_for(p, peak) for p in frame["precision"]]
    frame["mfu"] = frame["achieved_flops"] / frame["peak_flops"]
    return frame


def write_tidy(
    paths: Iterable[str | Path],
    out_csv: str | Path,
    facts: Iterable[dict[str, Any]] | None = None,
    peak: dict[str, Any] | None = None,
) -> pd.DataFrame:
    frame = tidy(paths)
    if facts is not None and peak is not None:
        frame = add_mfu(frame, facts, peak)
    atomic_write_text(out_csv, frame.to_csv(index=False))
    return frame


def read_tidy(csv_path: str | Path) -> pd.DataFrame:
    return pd.read_csv(csv_path, keep_default_na=True)


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
    return sorted(present, key=_mode_rank)


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
    return row | _ratio_row(key, variants[(numerator, num_mode)], variants[(denominator, den_mode)])


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
    different nodes of one device model (`node_detail` names them): the ratio is kept, and marked. Columns in
    SPEEDUP_COLUMNS' order."""
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


def ratios_for(ratios: pd.DataFrame, framework: str) -> pd.DataFrame:
    """The ratios of one framework against the baseline. A speedups table without a `numerator` column (written
    before there were more than two frameworks) holds JAX's."""
    if "numerator" not in ratios:
        return ratios if framework == "jax" else ratios.iloc[0:0]
    return ratios[ratios["numerator"] == framework]


def _flag(ratios: pd.DataFrame, column: str) -> pd.Series:
    """A boolean column of a speedups table read back from CSV ("True"/"False" or bools), all False when the table
    was written before the column existed."""
    if column not in ratios:
        return pd.Series(False, index=ratios.index)
    return ratios[column].astype(str) == "True"


def refused(ratios: pd.DataFrame) -> pd.Series:
    """Which rows of a speedups table are refused ratios (`speedups`); none in a table from before refusals."""
    if "refused" not in ratios:
        return pd.Series(False, index=ratios.index)
    return ratios["refused"].map(lambda value: isinstance(value, str) and value != "")


def node_differs(ratios: pd.DataFrame) -> pd.Series:
    """Which kept (not refused) ratios compare cells from different nodes of one device model."""
    return _flag(ratios, "node_differs") & ~refused(ratios)


def mixed_modes(ratios: pd.DataFrame) -> pd.Series:
    """Which kept ratios set an eager program against a compiled one (none in a table from before modes)."""
    return _flag(ratios, "mixed_modes") & ~refused(ratios)


def _has_modes(ratios: pd.DataFrame) -> bool:
    return {"numerator", "numerator_mode", "denominator_mode"} <= set(ratios.columns)


def _stands_in(ratios: pd.DataFrame) -> pd.Series:
    if "stand_in" not in ratios:
        return pd.Series(False, index=ratios.index)
    return ratios["stand_in"].map(lambda value: isinstance(value, str) and value != "")


def pairings(ratios: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """Per framework, the (numerator mode, PyTorch mode) its ratio column pairs: the modes of its ratios where both
    sides ran in their ratio modes, or, where a stand-in is all there is (no compiled PyTorch cell in the whole
    study), the pairing most of its ratios have. Empty for a table from before modes."""
    if not _has_modes(ratios) or ratios.empty:
        return {}
    framework = ratios["numerator"]
    pairs = pd.Series(list(zip(ratios["numerator_mode"], ratios["denominator_mode"], strict=True)), ratios.index)
    intended = pairs[~_stands_in(ratios)]
    out = {}
    for name in framework.unique():
        mine = intended[framework[intended.index] == name]
        mine = mine if not mine.empty else pairs[framework == name]
        out[str(name)] = mine.value_counts().index[0]
    return out


def off_pairing(ratios: pd.DataFrame) -> pd.Series:
    """Which ratios pair other modes than their column (`pairings`): a stand-in where the ratio mode's cell is
    missing or failed. Tables mark them and summaries leave them out; none in a table from before modes."""
    columns = pairings(ratios)
    if not columns:
        return pd.Series(False, index=ratios.index)
    framework = ratios["numerator"]
    return pd.Series(
        [
            (num, den) != columns.get(str(f))
            for f, num, den in zip(framework, ratios["numerator_mode"], ratios["denominator_mode"], strict=True)
        ],
        index=ratios.index,
        dtype=bool,
    )


def paired(ratios: pd.DataFrame) -> pd.Series:
    """Which ratios have a paired interval over interleaved rounds: the only ones a test can resolve."""
    if "ci_scope" not in ratios:
        return pd.Series(False, index=ratios.index)
    return ratios["ci_scope"] == PAIRED


def resolved_adjusted(ratios: pd.DataFrame) -> pd.Series:
    """The adjusted verdict of each ratio (`adjust_verdicts`): resolved after the family's adjustment, from a paired
    interval. A table from before the adjusted column has only each ratio's own verdict, which stands in."""
    column = "resolved_adjusted" if "resolved_adjusted" in ratios else "resolved"
    return _flag(ratios, column) & paired(ratios)


def resolved_unadjusted(ratios: pd.DataFrame) -> pd.Series:
    """Each ratio's own verdict: its paired 95% interval excludes 1."""
    return _flag(ratios, "resolved") & paired(ratios)


def multiplicity_of(ratios: pd.DataFrame, default: str = DEFAULT_MULTIPLICITY) -> str:
    """The adjustment a ratio table's verdicts were made with (its `multiplicity` column); "none" for a table from
    before the column, whose only verdicts are each ratio's own; `default` (the config's) for a table without rows."""
    if ratios.empty:
        return default
    if "multiplicity" not in ratios or "resolved_adjusted" not in ratios:
        return "none"
    values = ratios["multiplicity"].dropna().astype(str)
    return values.iloc[0] if len(values) else default


def quoted_interval(row: pd.Series) -> tuple[float, float, bool]:
    """The interval a ratio picked from its family (the largest difference, an extreme) is quoted with: its
    simultaneous interval where it has one, else its own 95% interval; the flag says which (True: simultaneous)."""
    low, high = row.get("ci_low_simultaneous"), row.get("ci_high_simultaneous")
    if low is not None and high is not None and pd.notna(low) and pd.notna(high):
        return float(low), float(high), True
    return float(row["ci_low"]), float(row["ci_high"]), False


@dataclass(frozen=True)
class Summary:
    """The summary of a set of ratios: their geometric mean (the mean of the log ratios, exponentiated: inverting
    every ratio inverts it exactly) with an interval that takes the model as the unit.

    `kind` says what `low` and `high` are: "models", a 95% t interval over models (cluster-robust, CR1, on the log
    ratios with the model as the cluster and models - 1 degrees of freedom: ratios of one model at several batch
    sizes are not independent, and the spread between models carries each ratio's own uncertainty too); "range",
    the smallest and largest ratio of a single model, descriptive, no interval; "one", a single ratio and its own
    95% interval; "none", no ratio."""

    estimate: float
    low: float
    high: float
    kind: str
    pairs: int
    models: int
    df: float


def geometric_summary(ratios: pd.DataFrame, cluster: str = "model") -> Summary:
    """The summary (`Summary`) of the finite positive ratios of `ratios` (a speedups or mode-gains table)."""
    nan = math.nan
    finite = ratios[pd.to_numeric(ratios["ratio"], errors="coerce").gt(0)] if len(ratios) else ratios
    if finite.empty:
        return Summary(nan, nan, nan, "none", 0, 0, nan)
    logs = np.log(finite["ratio"].astype(float).to_numpy())
    groups = finite[cluster].astype(str).to_numpy() if cluster in finite else np.arange(len(finite)).astype(str)
    models = len(set(groups))
    mean = float(logs.mean())
    estimate = math.exp(mean)
    if len(logs) == 1:
        row = finite.iloc[0]
        return Summary(estimate, float(row["ci_low"]), float(row["ci_high"]), "one", 1, 1, nan)
    if models < 2:
        return Summary(estimate, float(np.exp(logs.min())), float(np.exp(logs.max())), "range", len(logs), 1, nan)
    residuals = pd.Series(logs - mean).groupby(groups).sum().to_numpy()
    se = math.sqrt(models / (models - 1) * float((residuals**2).sum())) / len(logs)
    low, high = verdicts.interval(mean, se, models - 1)
    return Summary(estimate, low, high, "models", len(logs), models, float(models - 1))


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
