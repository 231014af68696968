"""The measurement design's targets, measured on one or two runs of a study (issue 33; the README quotes them).

    .venv/bin/python benchmarks/design_targets.py RUN_A [RUN_B] [--markdown]

For each run: the median and largest 95% interval half-width of the inference ratios (`tables/speedups.csv`, on the
log scale: (log high - log low) / 2, as a percentage), the share of ratios either resolved or shown within ±5% of
parity (the whole interval inside [1/1.05, 1.05]), the study's timed-work share and its wall time
(`tables/study_time.json`). With two runs, from `fwbench compare`: ratios resolved on opposite sides of 1 (flipped),
the share of ratios whose two intervals overlap, and the median absolute change. Each figure is printed beside its
target; `--markdown` prints the README's table instead (the targets, then the inference ratios of both runs).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from fwbench.analysis.compare.change import FLIPPED, finite
from fwbench.analysis.compare.ratios import compare_runs

PARITY = 0.05
TARGETS = {
    "median_half_width_pct": ("median ratio interval half-width", "<= 3%"),
    "resolved_or_parity_share": ("ratios resolved or within 5% of parity", ">= 90%"),
    "timed_share": ("timed work share of the study's wall time", ">= 50%"),
    "wall_min": ("study wall time", "<= 15 min"),
    "flipped": ("ratios resolved in opposite directions in the two runs", "0"),
    "overlap_share": ("ratios whose two runs' intervals overlap", ">= 95%"),
}


def run_figures(run: Path) -> dict[str, float]:
    """One run's figures from its tables."""
    ratios = pd.read_csv(run / "tables" / "speedups.csv")
    ratios = ratios.dropna(subset=["ratio", "ci_low", "ci_high"])
    half = 100 * (np.exp((np.log(ratios["ci_high"]) - np.log(ratios["ci_low"])) / 2) - 1)
    resolved = ratios["resolved"].astype(str).str.lower() == "true"
    parity = (ratios["ci_low"] >= 1 / (1 + PARITY)) & (ratios["ci_high"] <= 1 + PARITY)
    time = json.loads((run / "tables" / "study_time.json").read_text(encoding="utf-8"))
    return {
        "ratios": float(len(ratios)),
        "median_half_width_pct": float(half.median()),
        "max_half_width_pct": float(half.max()),
        "resolved_share": float(resolved.mean()),
        "resolved_adjusted_share": float(
            (ratios["resolved_adjusted"].astype(str).str.lower() == "true").mean()
            if "resolved_adjusted" in ratios
            else math.nan
        ),
        "resolved_or_parity_share": float((resolved | parity).mean()),
        "timed_share": float(time["timed_share"]),
        "wall_min": float(time["wall_s"]) / 60,
    }


def pair_figures(run_a: Path, run_b: Path) -> dict[str, float]:
    """Two runs of the same study compared ratio by ratio (inference speedups only)."""
    rows = compare_runs(run_a, run_b).compared
    rows = rows[rows["table"] == "speedups"] if "table" in rows else rows
    overlap = (rows["ci_low_a"] <= rows["ci_high_b"]) & (rows["ci_low_b"] <= rows["ci_high_a"])
    change = np.abs(np.log(rows["change"].astype(float)))
    return {
        "compared": float(len(rows)),
        "flipped": float((rows["verdict"] == FLIPPED).sum()),
        "changed": float((rows["verdict"] == "changed").sum()),
        "overlap_share": float(overlap.mean()) if len(rows) else math.nan,
        "median_change_pct": float(100 * (np.exp(np.median(change)) - 1)) if len(rows) else math.nan,
        "max_change_pct": float(100 * (np.exp(np.max(change)) - 1)) if len(rows) else math.nan,
    }


def _interval(ratio: float, low: float, high: float) -> str:
    return f"{ratio:.2f} [{low:.2f}, {high:.2f}]"


def markdown(report: dict[str, dict[str, float]], runs: list[Path]) -> list[str]:
    """The README's tables: each target with each run's figure, then (two runs) every inference ratio of both runs
    with its change and verdict from `fwbench compare`."""
    names = [str(run) for run in runs]
    lines = ["| target | " + " | ".join(f"run {chr(65 + i)}" for i in range(len(runs))) + " |"]
    lines.append("| --- |" + " ---: |" * len(runs))
    for key, (what, target) in TARGETS.items():
        source = [report.get("A vs B", {})] if key in ("flipped", "overlap_share") else [report[n] for n in names]
        if not all(key in figures for figures in source):
            continue
        values = [_show(key, figures[key]) for figures in source]
        values = ["—"] * (len(runs) - len(values)) + values  # a figure of the pair sits in run B's column
        lines.append(f"| {what} ({target}) | " + " | ".join(values) + " |")
    if len(runs) == 2:
        rows = compare_runs(*runs).compared
        rows = rows[rows["table"] == "speedups"].sort_values(["model", "batch_size", "numerator"])
        lines += ["", "| ratio | run A [95% CI] | run B [95% CI] | B/A [95% CI] | verdict |"]
        lines.append("| --- | --- | --- | --- | --- |")
        for row in rows.itertuples():
            name = f"{row.model} bs{row.batch_size} {row.numerator}/{row.denominator}"
            change = _interval(row.change, row.change_low, row.change_high) if finite(row.change_low) else "—"
            lines.append(
                f"| {name} | {_interval(row.ratio_a, row.ci_low_a, row.ci_high_a)} | "
                f"{_interval(row.ratio_b, row.ci_low_b, row.ci_high_b)} | {change} | {row.verdict} |"
            )
    return lines


def _show(name: str, value: float) -> str:
    if name.endswith("_share"):
        return f"{100 * value:.1f}%"
    if name.endswith("_pct"):
        return f"{value:.1f}%"
    if name == "wall_min":
        return f"{int(value)} min {round(60 * (value - int(value)))} s"
    return f"{value:g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="one or two results directories")
    parser.add_argument("--markdown", action="store_true", help="print the README's tables")
    args = parser.parse_args(argv)
    if len(args.runs) > 2:
        parser.error("at most two runs")
    report: dict[str, dict[str, float]] = {}
    for run in args.runs:
        report[str(run)] = run_figures(run)
    if len(args.runs) == 2:
        report["A vs B"] = pair_figures(*args.runs)
    if args.markdown:
        print("\n".join(markdown(report, args.runs)))
        return 0
    for name, figures in report.items():
        print(f"{name}:")
        for key, value in figures.items():
            target = TARGETS.get(key)
            suffix = f"  (target {target[1]}: {target[0]})" if target else ""
            print(f"  {key:<28}{_show(key, value):>12}{suffix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
