"""The peak-FLOP probe's estimate and its spread over fresh processes, and what it costs: run the study's probe
(fwbench.trackers.flops.measure_peak) N times, each in a fresh process with the study's thread pinning, and report
each precision's peak (mean, coefficient of variation, range) and the process's wall time.

    python benchmarks/probe_spread.py --runs 5 fp32                  # what the default study probes
    python benchmarks/probe_spread.py --runs 4 fp32 fp32,tf32,bf16   # against every precision, interleaved

With two or more precision sets the runs alternate between them, each in a fresh process: on a noisy machine only
interleaved fresh processes compare fairly.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CHILD = """
import json, sys
from fwbench.running.threads import pin_threads
threads = pin_threads(int(sys.argv[1]))
import torch
torch.set_num_threads(threads["effective"])
from fwbench.trackers.flops import measure_peak
peak = measure_peak(precisions=tuple(sys.argv[2].split(",")))
print(json.dumps({p: peak[p]["peak_flops"] for p in peak["precisions"]} | {"probe_s": peak["probe_s"]}))
"""


def run_once(precisions: tuple[str, ...], threads: int) -> dict[str, float]:
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(threads), ",".join(precisions)],
        capture_output=True,
        text=True,
        check=True,
    )
    record = json.loads(done.stdout.strip().splitlines()[-1])
    record["process_s"] = time.perf_counter() - t0
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+", help="comma-separated precisions per probe, e.g. fp32 or fp32,tf32,bf16")
    parser.add_argument("--runs", type=int, default=5, help="runs per precision set")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    sets = [tuple(s.split(",")) for s in args.sets]
    runs: dict[tuple[str, ...], list[dict[str, float]]] = {s: [] for s in sets}
    for _ in range(args.runs):
        for precisions in sets:
            runs[precisions].append(run_once(precisions, args.threads))
    for precisions, records in runs.items():
        print(f"probe of {','.join(precisions)} ({len(records)} fresh processes):")
        for key in (*precisions, "probe_s", "process_s"):
            values = [r[key] for r in records]
            scale, unit = (1e9, "GFLOP/s") if key in precisions else (1.0, "s")
            mean = statistics.fmean(values) / scale
            cv = statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else float("nan")
            shown = ", ".join(f"{v / scale:.1f}" for v in values)
            print(f"  {key:>10}: mean {mean:.1f} {unit}, cv {100 * cv:.1f}%, runs [{shown}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
