"""Where a study's wall time went: timed work against everything around it, from the jobs' times
(fwbench.workflow.jobtime) and the measuring processes' own phases (metrics.phases_s, written by fwbench.running.worker
and the scenarios).

Every second of the study's span falls in exactly one row: the measuring processes' phases (timed work, warm-up,
compile and first calls, training's evaluation, start-up and imports, loading, the rest of the process), the runner
around those processes, the other jobs by kind, jobs that ran at the same time (a negative row, so the rows add up to
the span), and the time between jobs (Snakemake scheduling, idle). Per-process overhead is a process's wall time
minus its timed work and its compile and first calls, as the time-to-report targets define it (README). Each process
row names its cell with the execution mode (PyTorch eager and compiled are two cells), and the compile time is also
given per framework and mode, since torch.compile's share differs from eager PyTorch's first calls.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fwbench.analysis.common.cells import load_cells
from fwbench.analysis.common.latex import (
    FRAMEWORK_LABELS,
    define_macros,
    escape,
    macro_name,
    number,
    table_float,
)
from fwbench.analysis.common.partners import cell_mode, variant_names
from fwbench.workflow.jobtime import JobTime, read_jobs

CATEGORIES = {  # key: the table's label (the README and docs/time-to-report.md say what each holds)
    "timed": "Timed work (inference loops, training epochs)",
    "warmup": "Warm-up, calibrating and discarded iterations",
    "compile": "Compile and first calls",
    "evaluation": "Training evaluation, recalibration, step-0 probe, checkpoints",
    "startup": "Process start-up and imports",
    "load": "Loading model, weights, data and inputs",
    "process_other": "Rest of the measuring processes (summaries, write, exit)",
    "profiling": "Profiling passes (after the timed launches)",
    "runner": "Runner around the measuring processes",
    "preparation": "Preparation and probe jobs",
    "report": "Report jobs (aggregation, figures, tables)",
    "latex": "LaTeX",
    "overlap": "Jobs run at the same time (counted twice above)",
    "scheduler": "Between jobs (scheduling, idle)",
}
MEASURING_RULES = ("inference_group", "inference_group_primary", "training_cell", "micro_group")
REPORT_RULES = ("aggregate_inference", "aggregate_training", "inference_figure", "loader_figure", "training_figure")
REPORT_RULES += ("mode_gain_figure",)
REPORT_RULES += ("paper_tables", "micro_analysis", "parity", "fairness_ledger", "published_comparison", "conclusions")
REPORT_RULES += ("op_profile", "headline_figure")
LATEX_RULES = ("paper",)
# The breakdown's own job, which runs after everything it reports, and the check of the finished PDF, which runs after
# the PDF it times (the table reports the time to the PDF).
NOT_COUNTED = ("study_time", "paper_check")
RUN_GAP_S = 300.0  # an idle gap longer than this between jobs separates two runs of the study (a rerun)


def _kind(rule: str) -> str:
    if rule in MEASURING_RULES:
        return "measuring"
    if rule in REPORT_RULES:
        return "report"
    if rule in LATEX_RULES:
        return "latex"
    return "preparation"


def _value(mapping: Mapping[str, Any] | None, key: str) -> float:
    value = (mapping or {}).get(key)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0


def _process(cell: Mapping[str, Any], wall: float, phases: Mapping[str, Any] | None, trial: int) -> dict[str, Any]:
    """One measuring process: its wall time split into the categories (what its phases do not cover is
    process_other; a process without phases, e.g. a failed one, is all process_other). `cell` names it as the grid
    does, its mode included."""
    mode = cell_mode(cell)
    # A warm worker (fwbench.scenarios.blocks) lives through its launch beside the other workers, and waits while they
    # run their bursts: that time is theirs, so a process's own wall time leaves it out and the processes add up.
    wall -= _value(phases, "waiting_s")
    row = {
        "cell": "/".join([cell["suite"], cell["framework"], mode, cell["model"], cell["precision"]])
        + f"/bs{cell['batch_size']}",
        "suite": cell["suite"],
        "framework": cell["framework"],
        "mode": mode,
        "model": cell["model"],
        "precision": cell["precision"],
        "batch_size": cell["batch_size"],
        "trial": trial,
        "wall_s": wall,
        "has_phases": bool(phases),
    }
    parts = {
        "timed": _value(phases, "timed_s"),
        # warm-up iterations, and a warm worker's calibrating and discarded iterations (fwbench.scenarios.blocks)
        "warmup": sum(_value(phases, k) for k in ("warmup_s", "calibration_s", "discard_s")),
        "compile": _value(phases, "compile_s") + _value(phases, "first_call_s"),
        "evaluation": sum(_value(phases, k) for k in ("step0_s", "evaluation_s", "checkpoint_s")),
        "startup": sum(_value(phases, k) for k in ("process_start_s", "harness_imports_s", "framework_import_s")),
        "load": _value(phases, "load_s"),
        # a profiling pass its worker ran after the blocks of the group's last launch (fwbench.scenarios.profiled)
        "profiling_in_worker": _value(phases, "profiling_s"),
    }
    row.update(parts, framework_import=_value(phases, "framework_import_s") if phases else math.nan)
    row["process_other"] = max(0.0, wall - sum(parts.values()))
    row["overhead"] = _overhead(row) if phases else math.nan
    return row


def _overhead(row: Mapping[str, Any]) -> float:
    """Per-process overhead as the targets define it: wall time less the timed loop, compile and first calls, and
    (not a cost of measuring) a profiling pass the process ran after its blocks."""
    return row["wall_s"] - row["timed"] - row["compile"] - row["profiling_in_worker"]


def process_rows(cells: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per measuring process (inference trial, training run, and a cell's compile launch as trial 0) of these
    cell results; a cell's profiling process is kept apart in the `profiling_s` column of its first row (it measures
    nothing that is timed)."""
    rows = []
    for result in cells:
        cell, metrics = result["cell"], result.get("metrics") or {}
        profiling = (metrics.get("op_profile") or {}).get("process_s")
        first = len(rows)
        trials = metrics.get("trials")
        group = (((result.get("provenance") or {}).get("group")) or {}).get("id")
        if trials:
            for number_, trial in enumerate(trials, start=1):
                rows.append(_process(cell, float(trial["duration_s"]), trial.get("phases_s"), number_))
                process = trial.get("process")  # a worker that served several cells (fwbench.running.launches)
                if process:
                    rows[-1]["process_key"] = (group, process["id"], bool(process["first"]))
            launch = metrics.get("compile_launch")  # its cold compile's own launch (fwbench.running.compile_launch)
            if launch and launch.get("duration_s") is not None:
                rows.append(_process(cell, float(launch["duration_s"]), launch.get("phases_s"), 0))
                if launch.get("process"):
                    process = launch["process"]
                    rows[-1]["process_key"] = (group, process["id"], bool(process["first"]))
        else:
            wall = (result.get("provenance") or {}).get("duration_s")
            if wall is not None:
                rows.append(_process(cell, float(wall), metrics.get("phases_s"), 1))
        if profiling is not None and len(rows) > first:
            rows[first]["profiling_s"] = float(profiling)
    _count_shared_processes_once(rows)
    return pd.DataFrame(rows)


PHASE_PARTS = ("timed", "warmup", "compile", "evaluation", "startup", "load", "profiling_in_worker")


def _count_shared_processes_once(rows: list[dict[str, Any]]) -> None:
    """A worker serving several cells is one process with one wall time: its first cell's row keeps it and gathers
    the other cells' phases, whose rows keep their cell (and a profiling pass, if any) with nothing else."""
    first = {row["process_key"][:2]: row for row in rows if row.get("process_key") and row["process_key"][2]}
    for row in rows:
        key = row.pop("process_key", None)
        # a row whose first cell is not among these results keeps its own process
        row["shared_process"] = bool(key) and not key[2] and key[:2] in first
        if not row["shared_process"]:
            continue
        lead = first[key[:2]]
        for part in PHASE_PARTS:
            lead[part] += row[part]
            row[part] = 0.0
        row.update(wall_s=0.0, process_other=0.0, overhead=math.nan, framework_import=math.nan, has_phases=False)
    for lead in first.values():
        lead["process_other"] = max(0.0, lead["wall_s"] - sum(lead[part] for part in PHASE_PARTS))
        lead["overhead"] = _overhead(lead)


def profiling_seconds(processes: pd.DataFrame) -> float:
    """The profiling processes' wall time (process_rows' `profiling_s`; none in a study that profiles nothing)."""
    if processes.empty or "profiling_s" not in processes:
        return 0.0
    return float(processes["profiling_s"].fillna(0.0).sum())


def profiling_in_workers_seconds(processes: pd.DataFrame) -> float:
    """The profiling passes warm workers ran after their blocks (inside their processes' wall time)."""
    if processes.empty or "profiling_in_worker" not in processes:
        return 0.0
    return float(processes["profiling_in_worker"].fillna(0.0).sum())


def _union_and_runs(jobs: Sequence[JobTime]) -> tuple[float, float, int]:
    """(time covered by at least one job, idle time between jobs within a run, number of runs)."""
    covered, idle, runs, end = 0.0, 0.0, 0, None
    for job in sorted(jobs, key=lambda j: j.started_at):
        if end is None or job.started_at - end > RUN_GAP_S:
            runs += 1
        elif job.started_at > end:
            idle += job.started_at - end
        if end is None or job.started_at > end:
            covered += job.finished_at - job.started_at
        elif job.finished_at > end:
            covered += job.finished_at - end
        end = job.finished_at if end is None else max(end, job.finished_at)
    return covered, idle, runs


def breakdown(jobs: Sequence[JobTime], processes: pd.DataFrame, *, latex_s: float | None = None) -> dict[str, Any]:
    """Seconds per category (CATEGORIES), adding up to the study's wall time, and the summary figures the README and
    the paper quote. `latex_s` is the LaTeX build when it ran after these records (the paper rule's own pass)."""
    jobs = [j for j in jobs if j.rule not in NOT_COUNTED]
    if not jobs:
        raise ValueError("no job times recorded: run the workflow (results/benchmarks/ is empty)")
    seconds = dict.fromkeys(CATEGORIES, 0.0)
    phase_columns = ["timed", "warmup", "compile", "evaluation", "startup", "load", "process_other"]
    if not processes.empty:
        for column in phase_columns:
            seconds[column] = float(processes[column].sum())
    measuring_wall = sum(j.wall_s for j in jobs if _kind(j.rule) == "measuring")
    process_wall = float(processes["wall_s"].sum()) if not processes.empty else 0.0
    # A cell's profiling process (fwbench.running.profiling) runs inside its group's job, after the timed launches;
    # a pass run by a warm worker after its blocks is inside that worker's process.
    profiling_processes = profiling_seconds(processes)
    seconds["profiling"] = profiling_processes + profiling_in_workers_seconds(processes)
    seconds["runner"] = measuring_wall - process_wall - profiling_processes
    for job in jobs:
        if _kind(job.rule) in ("preparation", "report", "latex"):
            seconds[_kind(job.rule)] += job.wall_s
    covered, idle, runs = _union_and_runs(jobs)
    seconds["overlap"] = covered - sum(j.wall_s for j in jobs)
    seconds["scheduler"] = idle
    wall = covered + idle
    if latex_s is not None:
        seconds["latex"] += latex_s
        wall += latex_s
    inference = processes[processes["suite"] == "inference"] if not processes.empty else processes
    overhead = inference["overhead"].dropna() if not inference.empty else pd.Series(dtype=float)
    imports = (
        processes.dropna(subset=["framework_import"]).groupby("framework")["framework_import"].median().to_dict()
        if not processes.empty
        else {}
    )
    compile_by_variant = (
        processes.groupby(["framework", "mode"])["compile"].sum().to_dict() if not processes.empty else {}
    )
    probe = [j.wall_s for j in jobs if j.rule == "device_peak"]
    return {
        "seconds": seconds,
        "wall_s": wall,
        "runs": runs,
        "jobs": len(jobs),
        "processes": int(len(processes) - processes["shared_process"].sum()) if not processes.empty else 0,
        "timed_share": seconds["timed"] / wall if wall else math.nan,
        "overhead_median_s": float(overhead.median()) if len(overhead) else math.nan,
        "overhead_max_s": float(overhead.max()) if len(overhead) else math.nan,
        "overhead_processes": int(len(overhead)),
        "framework_import_median_s": {k: float(v) for k, v in imports.items()},
        # "framework/mode" -> compile and first calls (s) of its processes
        "compile_by_variant_s": {f"{f}/{m}": float(v) for (f, m), v in compile_by_variant.items()},
        "probe_job_s": probe[-1] if probe else math.nan,
        "started_at": min(j.started_at for j in jobs),
        "latex_measured": latex_s is not None or any(_kind(j.rule) == "latex" for j in jobs),
    }


def table_rows(summary: Mapping[str, Any]) -> pd.DataFrame:
    wall = summary["wall_s"]
    return pd.DataFrame(
        [
            {"category": key, "label": label, "seconds": seconds, "share": seconds / wall}
            for key, label in CATEGORIES.items()
            for seconds in [summary["seconds"][key]]
        ]
    )


def jobs_frame(jobs: Sequence[JobTime]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "rule": j.rule,
                "job": j.name,
                "kind": _kind(j.rule),
                "wall_s": j.wall_s,
                "started_at": j.started_at,
                "finished_at": j.finished_at,
                "cpu_s": j.cpu_s,
                "source": j.source,
            }
            for j in sorted(jobs, key=lambda j: j.started_at)
        ]
    )


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(round(seconds % 60)):02d} s" if seconds >= 60 else f"{seconds:.0f} s"


def latex_table(summary: Mapping[str, Any], *, latex_pending: bool = False) -> str:
    """The paper's time-to-report table: one row per category, seconds and share of the study's wall time. With
    `latex_pending` (the table is part of the PDF whose build it reports) the LaTeX row and the total are the
    macros the paper rule defines after its first pass (\\fwbLatexSeconds, \\fwbStudyWallToPdfSeconds), and the
    shares are of the time before the LaTeX build."""
    lines = [
        # the label column leaves the numbers room for "12345.6" and "-110.5\%": shares pass 100% where jobs
        # overlapped (a SLURM study's local report jobs beside its cluster jobs), and at 0.66 that row overflowed
        r"\begin{tabular}{@{}p{0.6\columnwidth}rr@{}}",
        r"\toprule",
        r"Part & Seconds & Share \\",
        r"\midrule",
    ]
    for _, row in table_rows(summary).iterrows():
        if row["category"] == "latex" and latex_pending:
            lines.append(rf"{escape(row['label'])} & \fwbLatexSeconds & --- \\")
            continue
        lines.append(rf"{escape(row['label'])} & {row['seconds']:.1f} & {100 * row['share']:.1f}\% \\")
    total = (
        r"Study wall time to the PDF & \fwbStudyWallToPdfSeconds & --- \\"
        if latex_pending
        else rf"Study wall time & {summary['wall_s']:.0f} & 100\% \\"
    )
    lines += [r"\midrule", total, r"\bottomrule", r"\end{tabular}"]
    note = "From the jobs' times and each measuring process's own phases" + (
        "; shares of the time before the LaTeX build." if latex_pending else "."
    )
    lines = table_float(
        "Where the study's wall time went: the seconds and share of each part.",
        "tab:study-time",
        "\n".join(lines),
        [note],
        wide=False,
        placement="t",
        size=r"\small",
    )
    return "\n".join(lines) + "\n"


def latex_time_macros(latex_s: float | None, wall_to_pdf_s: float | None) -> str:
    """The paper rule's own measurements (None: not yet measured, during its first LaTeX pass)."""
    values = {
        "fwbLatexSeconds": "\\dots" if latex_s is None else f"{latex_s:.1f}",
        "fwbStudyWallToPdfSeconds": "\\dots" if wall_to_pdf_s is None else f"{wall_to_pdf_s:.0f}",
        "fwbStudyWallToPdf": "\\dots" if wall_to_pdf_s is None else _minutes(wall_to_pdf_s),
    }
    return define_macros(values)


def macros(summary: Mapping[str, Any]) -> dict[str, str]:
    values = {
        macro_name("study", "wall"): _minutes(summary["wall_s"]),
        macro_name("study", "wall", "seconds"): f"{summary['wall_s']:.0f}",
        macro_name("study", "runs"): str(summary["runs"]),
        macro_name("timed", "share"): f"{100 * summary['timed_share']:.0f}",
        macro_name("timed", "seconds"): f"{summary['seconds']['timed']:.0f}",
        macro_name("compile", "seconds"): f"{summary['seconds']['compile']:.0f}",
        macro_name("process", "overhead", "median"): number(summary["overhead_median_s"], 2),
        macro_name("process", "overhead", "max"): number(summary["overhead_max_s"], 2),
        macro_name("process", "overhead", "count"): str(summary["overhead_processes"]),
        macro_name("probe", "seconds"): number(summary["probe_job_s"], 2),
        macro_name("measuring", "processes"): str(summary["processes"]),
        macro_name("study", "jobs"): str(summary["jobs"]),
    }
    imports = summary["framework_import_median_s"]
    values[macro_name("framework", "imports")] = (
        ", ".join(f"{FRAMEWORK_LABELS.get(k, k)} {number(v, 2)}~s" for k, v in sorted(imports.items())) or "none"
    )
    values[macro_name("compile", "by", "mode")] = _compile_by_mode(summary.get("compile_by_variant_s") or {})
    return values


def _compile_by_mode(seconds: Mapping[str, float]) -> str:
    """fwbCompileByMode: compile and first calls per framework and mode ("PyTorch (eager) 2.1~s, PyTorch (compiled)
    31~s, JAX/Flax 4.0~s"), the mode named where a framework ran in several; "none" without a process."""
    by_variant = {tuple(key.split("/", 1)): value for key, value in seconds.items()}
    names = variant_names(by_variant)
    return ", ".join(f"{escape(name)} {number(by_variant[v], 2)}~s" for v, name in names.items()) or "none"


def latex_macros(summary: Mapping[str, Any]) -> str:
    return define_macros(macros(summary))


def summary_json(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The summary as plain JSON (NaN as null)."""

    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, float | np.floating) and not math.isfinite(value):
            return None
        return value

    return clean(dict(summary))


def text_report(summary: Mapping[str, Any]) -> str:
    """Plain-text breakdown (benchmarks/study_time.py, fwbench study-time)."""
    lines = [f"{'part':<94}{'seconds':>9}{'share':>8}"]
    for _, row in table_rows(summary).iterrows():
        lines.append(f"{row['label']:<94}{row['seconds']:>9.1f}{100 * row['share']:>7.1f}%")
    lines.append(f"{'study wall time':<94}{summary['wall_s']:>9.1f}{100.0:>7.1f}%")
    lines.append(
        f"runs: {summary['runs']}  jobs: {summary['jobs']}  measuring processes: {summary['processes']}  "
        f"timed share: {100 * summary['timed_share']:.1f}%"
    )
    lines.append(
        f"per-process overhead (inference; wall - timed - compile/first call): median "
        f"{summary['overhead_median_s']:.2f} s, max {summary['overhead_max_s']:.2f} s over "
        f"{summary['overhead_processes']} processes"
    )
    imports = ", ".join(f"{k} {v:.2f} s" for k, v in sorted(summary["framework_import_median_s"].items()))
    lines.append(f"framework import + set-up (median per process): {imports or 'none'}")
    compiled = ", ".join(f"{k} {v:.1f} s" for k, v in sorted((summary.get("compile_by_variant_s") or {}).items()))
    lines.append(f"compile and first calls by framework/mode: {compiled or 'none'}")
    lines.append(f"peak-FLOP probe job: {summary['probe_job_s']:.1f} s")
    return "\n".join(lines)


def from_results(results_dir) -> dict[str, Any]:
    """The breakdown of a finished study from its results folder alone (benchmarks/study_time.py): every job's time
    under benchmarks/, every cell under cells/, the LaTeX build included from the paper job's benchmark file."""
    root = Path(results_dir)
    if not (root / "benchmarks").is_dir():
        raise FileNotFoundError(f"{root / 'benchmarks'}: no job times (run the study with this version of fwbench)")
    cells = sorted((root / "cells").rglob("*.json")) if (root / "cells").is_dir() else []
    return breakdown(read_jobs(root / "benchmarks"), process_rows(load_cells(cells)))
