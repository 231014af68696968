"""How long Snakemake takes to plan a large grid: write a study config with about N inference cells (the default
study's settings, every framework and model, three precisions, as many batch sizes as N needs), run
`snakemake -n` on it in a copy of the workflow with an empty results/ (so every cell is planned), several times,
and report the wall time of each run.

    python benchmarks/dry_run.py                      # about 5,000 cells, 3 runs
    python benchmarks/dry_run.py --cells 5000 --runs 5 -- --profile profiles/default

Arguments after `--` are passed to Snakemake (a profile, say). The budget is 15 s for 5,000 cells; the planned
cell count is read back from Snakemake's job stats, so the figure reported is what was really planned.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PRECISIONS = ["fp32", "tf32", "bf16"]
WORKFLOW_PARTS = ("workflow", "config", "profiles", "envs", "reference", "report")


def grid_config(cells: int) -> dict:
    """The default study with inference only and enough batch sizes for about `cells` cells (its execution modes
    included: torch eager and compile for the models in mode_scope)."""
    from fwbench.study.config import validate_config
    from fwbench.study.grid import cells as grid_cells

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config |= {"suites": ["inference"], "precisions": PRECISIONS}
    config["inference"]["batch_sizes"] = [1]
    per_batch = len(grid_cells(validate_config(config)))
    config["inference"]["batch_sizes"] = list(range(1, math.ceil(cells / per_batch) + 1))
    return config


def planned_cells(output: str, config: dict) -> int:
    """Inference cells planned: every comparison group's job (inference_group, and inference_group_primary for the
    models outside mode_scope) holds one cell per framework and mode of its models."""
    from fwbench.study.config import validate_config
    from fwbench.study.grid import comparison_rules, group_variants

    validated = validate_config(config)
    total = 0
    for rule, models in comparison_rules(validated, "inference", "inference_group").items():
        groups = re.search(rf"^{rule}\s+(\d+)$", output, flags=re.M)
        if not groups:
            raise RuntimeError(f"snakemake -n planned no {rule} job:\n" + output[-2000:])
        total += int(groups[1]) * len(group_variants(validated, "inference", models[0]))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("snakemake_args", nargs="*", help="passed to snakemake (after --)")
    args = parser.parse_args()
    config = grid_config(args.cells)
    snakemake = Path(sys.executable).with_name("snakemake")
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for part in WORKFLOW_PARTS:
            shutil.copytree(REPO / part, Path(tmp) / part)
        (Path(tmp) / "grid.yaml").write_text(yaml.safe_dump(config))
        for run in range(args.runs):
            command = [str(snakemake), "-n", "--configfile", "grid.yaml", *args.snakemake_args]
            t0 = time.perf_counter()
            done = subprocess.run(command, cwd=tmp, capture_output=True, text=True)
            seconds = time.perf_counter() - t0
            if done.returncode != 0:
                sys.exit(done.stdout[-2000:] + done.stderr[-2000:])
            cells = planned_cells(done.stdout + done.stderr, config)
            times.append(seconds)
            print(f"run {run + 1}: {cells} cells planned in {seconds:.1f} s")
    print(f"median {statistics.median(times):.1f} s over {len(times)} runs (budget: 15 s for 5,000 cells)")


if __name__ == "__main__":
    main()
