"""A study's wall time on one GPU host before it runs: its inference grid and the jobs around it, priced from a
cost table whose every value says whether it was measured on such a GPU or assumed (fwbench.study.estimate).

    python benchmarks/estimate_study.py config/gpu-smoke.yaml
    python benchmarks/estimate_study.py config/gpu-smoke.yaml --set 'precisions=[default,fp32]'
    python benchmarks/estimate_study.py STUDY --costs benchmarks/costs/hopper.yaml
    python benchmarks/estimate_study.py STUDY --spread 0.015 [--half-width 0.03]

With --spread (the launch-to-launch coefficient of variation a run on such a machine measured, pooled over its cells:
fwbench.study.sizing.pooled_cv of their metrics.trial_spread.throughput_cv), it also says how many launches give a
ratio's 95% interval a median half-width of ±--half-width, beside the study's `inference.trials`.

The study file's header quotes the total; tests/test_study_files.py checks that it is this script's figure. Once
the study has run, its own time table (results/tables/study_time.*) replaces the estimate.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from snakemake.cli import parse_config

from fwbench.study.estimate import estimate, read_costs, text
from fwbench.study.files import resolve
from fwbench.study.sizing import launches_for_half_width, ratio_half_width

COSTS = Path(__file__).resolve().parent / "costs" / "hopper.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", nargs="+", help="study file(s), as --configfile takes them")
    parser.add_argument("--costs", default=str(COSTS), help=f"cost table (default: {COSTS.name})")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="as snakemake's --config")
    parser.add_argument("--spread", type=float, help="launch-to-launch coefficient of variation, e.g. 0.015")
    parser.add_argument("--half-width", type=float, default=0.03, help="target median half-width (default 0.03)")
    args = parser.parse_args()
    costs = read_costs(args.costs)
    config = resolve(args.study, parse_config(args.set) if args.set else None).config
    print(text(estimate(config, costs), costs))
    if args.spread is not None:
        trials = int(config["inference"]["trials"])
        needed = launches_for_half_width(args.spread, args.half_width)
        given = f"±{ratio_half_width(args.spread, trials):.1%}" if trials > 1 else "no interval between launches"
        print(
            f"launches for a ±{args.half_width:.1%} median half-width at a {args.spread:.2%} spread between launches: "
            f"{needed}; the study's {trials} give {given}"
        )


if __name__ == "__main__":
    main()
