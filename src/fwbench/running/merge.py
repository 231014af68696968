"""Merging a cell's trials into one result: the launch (process) is the unit of the headline interval.

Each trial is one fresh process (a round's child, fwbench.running.rounds, or a launch's warm worker,
fwbench.running.launches); its own samples judge its noise, and the cell's throughput and 95% CI are taken over the
trials, so that they include the variation between processes. Blocks of bursts (fwbench.scenarios.blocks) and micro
variants are gathered over the launches here too, so that the analysis can resample them per launch. A cell whose
cold compile ran in a compile launch of its own (fwbench.running.compile_launch) takes its compile and first-call times
from it; nothing that launch timed joins the trials.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fwbench.trackers.latency import timing_metrics
from fwbench.trackers.stats import WITHIN_PROCESS_ONLY, geometric_mean_interval, is_noisy


def trial_noisy(part: Mapping[str, Any]) -> bool:
    """One trial's noise flag: the child's own (IQR above 10% of the median of that process's samples), or, where a
    part lacks it, the same rule applied to its samples."""
    recorded = (part["metrics"].get("flags") or {}).get("noisy")
    return bool(recorded) if recorded is not None else is_noisy(part["samples_ms"])


def _trial_summary(part: dict[str, Any], schedule: Mapping[str, Any] | None = None) -> dict[str, Any]:
    m = part["metrics"]
    return {
        **(schedule or {}),
        "noisy": trial_noisy(part),
        "n_iters": m["n_iters"],
        "throughput_img_s": m["throughput_img_s"],
        "throughput_ci95_within": (m.get("ci95") or {}).get("throughput_img_s"),
        "latency_p50_ms": m["latency_ms"]["p50"],
        "compile_s": m["compile_s"],
        "first_call_s": m["first_call_s"],
        "timed_s": m.get("timed_s"),
        "stop_reason": m["stop_reason"],
        "stop_checks": m.get("stop_checks"),
        "stop_check_s": m.get("stop_check_s"),
        "phases_s": m.get("phases_s"),
        "compilation_cache": ((part.get("framework") or {}).get("settings") or {}).get("compilation_cache"),
        **({"blocks": m["blocks"]} if m.get("blocks") else {}),
    }


def merge_trials(
    parts: list[dict[str, Any]],
    batch_size: int,
    schedule: Sequence[Mapping[str, Any]] | None = None,
    compile_launch: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One result from `trials` fresh-process measurements of a cell.

    The process is the unit: the headline throughput is the geometric mean of the trials' own (median-step)
    throughputs, each trial weighted equally whatever its iteration count, and its 95% CI is a Student-t interval
    on their logs (trials - 1 df), so it includes process-to-process variation. Latency percentiles, n_iters and
    total-time throughput pool every sample and are descriptive only. With one trial the only interval is the
    within-process bootstrap, labelled as such. `schedule[i]` (round, order, round_order, started_s, ...) goes into
    trial i. Noise is judged per trial (each process's own samples, so that differences between processes do not
    count as noise): `flags.noisy` is true when at least one trial is noisy, `noisy_trials` counts them.
    `compile_launch`: the cell's compile launch record, kept as `metrics.compile_launch`, whose (cold) compile_s,
    compile_breakdown_s and first_call_s become the cell's; each trial keeps its own (warm) ones."""
    first = parts[0]
    schedule = list(schedule) if schedule is not None else [{} for _ in parts]
    samples = [s for part in parts for s in part["samples_ms"]]
    metrics = dict(first["metrics"])
    trials = [_trial_summary(part, when) for part, when in zip(parts, schedule, strict=True)]
    if len(parts) > 1:
        # no bootstrap of the pooled samples: it would treat the trials as one process (the interval is over trials)
        timing = timing_metrics(samples, batch_size, within_interval=False)
        timing.pop("noisy")  # the pooled samples' IQR mixes in the differences between trials: judged per trial
        flags = {k: any(p["metrics"]["flags"][k] for p in parts) for k in first["metrics"]["flags"]}
        rates = np.array([t["throughput_img_s"] for t in trials])
        interval = geometric_mean_interval(rates)
        metrics.update(
            timing,
            flags={**flags, "noisy": any(t["noisy"] for t in trials)},
            timed_s=sum(p["metrics"]["timed_s"] for p in parts),
            stop_checks=sum(p["metrics"].get("stop_checks") or 0 for p in parts),
            stop_check_s=sum(p["metrics"].get("stop_check_s") or 0.0 for p in parts),
            throughput_img_s=interval.estimate,
            throughput_img_s_pooled_median=timing["throughput_img_s"],
            ci95={
                "throughput_img_s": [interval.low, interval.high],
                "relative_half_width": interval.relative_half_width(),
                "method": f"Student-t 95% CI of the geometric mean of the {len(parts)} trials' throughputs (on their "
                f"logs, {len(parts) - 1} df): includes process-to-process variation",
                "scope": "between_processes",
                "trials": len(parts),
            },
            pooled=f"latency_ms, n_iters, throughput_img_s_total and throughput_img_s_pooled_median pool the samples "
            f"of all {len(parts)} trials (descriptive); throughput_img_s and ci95 are over the trials",
        )
        metrics["trial_spread"] = {
            "throughput_min": float(rates.min()),
            "throughput_max": float(rates.max()),
            "throughput_median": float(np.median(rates)),
            "throughput_geometric_mean": interval.estimate,
            "throughput_cv": float(rates.std(ddof=1) / rates.mean()),
        }
    else:
        ci95 = dict(metrics.get("ci95") or {})
        if ci95:
            ci95.update(method=f"{ci95['method']}, {WITHIN_PROCESS_ONLY}", scope="within_process", trials=1)
            metrics["ci95"] = ci95
        metrics["trial_spread"] = None
    metrics["trials"] = trials
    metrics["noisy_trials"] = sum(t["noisy"] for t in trials)
    if len(parts) == 1:
        metrics["flags"] = {**(metrics.get("flags") or {}), "noisy": trials[0]["noisy"]}
    if first["metrics"].get("blocks"):  # warm workers in blocks: every launch's bursts, in block order
        metrics["blocks"] = merge_blocks([part["metrics"]["blocks"] for part in parts])
    if compile_launch is not None:
        metrics["compile_launch"] = dict(compile_launch)
        metrics.update(compile_s=compile_launch.get("compile_s"), first_call_s=compile_launch.get("first_call_s"))
        if "compile_breakdown_s" in metrics:
            metrics["compile_breakdown_s"] = compile_launch.get("compile_breakdown_s")
    if "variants" in metrics:  # micro: each variant keeps its samples per trial (the analysis resamples trials)
        metrics["variants"] = _merge_variants([part["metrics"] for part in parts])
        metrics["agreement"] = max((p["metrics"]["agreement"] for p in parts), key=lambda a: a["max_rel_error"])
    return {"metrics": metrics, "samples_ms": samples, "framework": first["framework"]}


def merge_blocks(launches: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A cell's bursts over its launches (each launch's own record stays in its trial): the bursts' rates, blocks
    and positions in the order run, the steal flags counted, the worst steal share and waiting worker's CPU use,
    the CPU use and hardware counters per item averaged over launches (missing if any launch lacks them)."""

    def mean(key: str) -> float | None:
        values = [launch.get(key) for launch in launches]
        return float(np.mean(values)) if all(value is not None for value in values) else None

    idle = [launch["idle_cpu_per_wall"] for launch in launches if launch["idle_cpu_per_wall"] is not None]
    return {
        **launches[0],
        "bursts": sum(launch["bursts"] for launch in launches),
        "iters_per_burst": [launch["iters_per_burst"] for launch in launches],
        "burst_rates": [rate for launch in launches for rate in launch["burst_rates"]],
        "burst_blocks": [block for launch in launches for block in launch["burst_blocks"]],
        "burst_positions": [position for launch in launches for position in launch["burst_positions"]],
        "steal_flagged": sum(launch["steal_flagged"] for launch in launches),
        "steal_share_max": max((launch["steal_share_max"] or 0.0 for launch in launches), default=None),
        "load_flagged": sum(launch.get("load_flagged") or 0 for launch in launches),
        "other_load_share": mean("other_load_share"),
        "cpu_per_wall": mean("cpu_per_wall"),
        "idle_cpu_per_wall": max(idle) if idle else None,
        "idle_wall_s": sum(launch["idle_wall_s"] for launch in launches),
        "instructions_per_item": mean("instructions_per_item"),
        "cycles_per_item": mean("cycles_per_item"),
        "launches": len(launches),
    }


def _merge_variants(trials: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A micro cell's variants over its trials: samples per trial, iterations and timed seconds summed."""
    merged: dict[str, Any] = {}
    for name, first in trials[0]["variants"].items():
        each = [metrics["variants"][name] for metrics in trials]
        merged[name] = {
            **first,
            "trial_samples_ms": [samples for variant in each for samples in variant["trial_samples_ms"]],
            "n_iters": sum(variant["n_iters"] for variant in each),
            "timed_s": sum(variant["timed_s"] for variant in each),
            "stop_reason": [variant["stop_reason"] for variant in each],
        }
    return merged
