"""A study's wall time on one GPU host before it runs: its inference grid and the jobs around it, priced from a
cost table whose every value says whether it was measured on such a GPU or assumed (fwbench.study.estimate).

    python benchmarks/estimate_study.py config/gpu-smoke.yaml
    python benchmarks/estimate_study.py config/gpu-smoke.yaml --set 'precisions=[default,fp32]'
    python benchmarks/estimate_study.py STUDY --costs benchmarks/costs/hopper.yaml

The study file's header quotes the total; tests/test_study_files.py checks that it is this script's figure. Once
the study has run, its own time table (results/tables/study_time.*) replaces the estimate.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from snakemake.cli import parse_config

from fwbench.study.estimate import estimate, read_costs, text
from fwbench.study.files import resolve

COSTS = Path(__file__).resolve().parent / "costs" / "hopper.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", nargs="+", help="study file(s), as --configfile takes them")
    parser.add_argument("--costs", default=str(COSTS), help=f"cost table (default: {COSTS.name})")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="as snakemake's --config")
    args = parser.parse_args()
    costs = read_costs(args.costs)
    config = resolve(args.study, parse_config(args.set) if args.set else None).config
    print(text(estimate(config, costs), costs))


if __name__ == "__main__":
    main()
