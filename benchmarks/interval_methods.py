"""The same finished study's ratios under two interval methods: the one fwbench uses now (paired over interleaved
trial rounds) and the one it used before the measurement review (a percentile bootstrap of both cells' pooled raw
samples, as if every sample of every process were an independent draw of one process).

    .venv/bin/python benchmarks/interval_methods.py [--results results]

Prints a Markdown table (one row per comparison) and the resolved counts under each method: where the pooled
bootstrap calls a ratio resolved and the paired interval does not, the earlier method overstated what the data show.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fwbench.analysis.inference.ratios import speedups
from fwbench.results import load_result
from fwbench.trackers.stats import bootstrap_ratio_of_medians


def _resolved(low: float, high: float) -> bool:
    return low > 1 or high < 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--numerator", default="jax")
    parser.add_argument("--denominator", default="torch")
    args = parser.parse_args()
    results = [load_result(p) for p in sorted((args.results / "cells" / "inference").rglob("*.json"))]
    cells = {
        (r["cell"]["model"], r["cell"]["precision"], r["cell"]["batch_size"], r["cell"]["framework"]): r
        for r in results
        if r["status"] == "ok"
    }
    ratios = speedups(results, args.numerator, args.denominator)
    print(
        f"| model | precision | batch | ratio {args.numerator}/{args.denominator} (paired rounds) | 95% CI | "
        "pooled-sample bootstrap (before) | 95% CI |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    counts = {"paired": 0, "pooled": 0, "pooled_only": 0}
    for row in ratios.itertuples():
        num = cells[(row.model, row.precision, row.batch_size, args.numerator)]
        den = cells[(row.model, row.precision, row.batch_size, args.denominator)]
        pooled = bootstrap_ratio_of_medians(den["samples_ms"], num["samples_ms"])
        paired_resolved, pooled_resolved = bool(row.resolved), _resolved(pooled.low, pooled.high)
        counts["paired"] += paired_resolved
        counts["pooled"] += pooled_resolved
        counts["pooled_only"] += pooled_resolved and not paired_resolved
        mark = lambda flag: "**" if flag else ""  # noqa: E731
        print(
            f"| {row.model} | {row.precision} | {row.batch_size} | {mark(paired_resolved)}{row.ratio:.3f}"
            f"{mark(paired_resolved)} | [{row.ci_low:.3f}, {row.ci_high:.3f}] ({row.ci_scope}, {row.pairs} pairs) | "
            f"{mark(pooled_resolved)}{pooled.estimate:.3f}{mark(pooled_resolved)} | [{pooled.low:.3f}, "
            f"{pooled.high:.3f}] |"
        )
    print(
        f"\nresolved (CI excludes 1) of {len(ratios)}: paired rounds {counts['paired']}, pooled-sample bootstrap "
        f"{counts['pooled']}; resolved only by the pooled bootstrap: {counts['pooled_only']}"
    )


if __name__ == "__main__":
    main()
