"""Where a finished study's wall time went, recomputed from its records (job times under results/benchmarks/, the
measuring processes' phases in the cell results), so that a later change can be compared side by side with an
earlier run.

    python benchmarks/study_time.py results/                 # one study's breakdown
    python benchmarks/study_time.py before/results after/results   # two runs side by side (seconds and change)

The same breakdown is the paper's time-to-report table (fwbench.analysis.time.study_time); the targets it is read
against are in the README ("Time to report").
"""

from __future__ import annotations

import argparse
import math
import sys

from fwbench.analysis.time.study_time import CATEGORIES, from_results, text_report

SUMMARY_LINES = (
    ("timed share (%)", lambda s: 100 * s["timed_share"]),
    ("per-process overhead, median (s)", lambda s: s["overhead_median_s"]),
    ("per-process overhead, max (s)", lambda s: s["overhead_max_s"]),
    ("peak-FLOP probe job (s)", lambda s: s["probe_job_s"]),
)


def side_by_side(before: dict, after: dict) -> str:
    lines = [f"{'part':<64}{'before':>10}{'after':>10}{'change':>10}"]

    def row(label, a, b):
        change = f"{b - a:+.1f}" if not (math.isnan(a) or math.isnan(b)) else "n/a"
        lines.append(f"{label:<64}{a:>10.1f}{b:>10.1f}{change:>10}")

    for key, label in CATEGORIES.items():
        row(label, before["seconds"][key], after["seconds"][key])
    row("study wall time", before["wall_s"], after["wall_s"])
    for label, value in SUMMARY_LINES:
        row(label, value(before), value(after))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="a study's results folder; two to compare")
    args = parser.parse_args(argv)
    if len(args.results) > 2:
        parser.error("one results folder, or two to compare")
    summaries = [from_results(path) for path in args.results]
    print(text_report(summaries[0]) if len(summaries) == 1 else side_by_side(*summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
