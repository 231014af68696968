"""Does a cell measured in a worker that serves other cells agree with the same cell measured alone?

A warm worker serving its launch (inference.share_workers: launch, fwbench.scenarios.served) builds, compiles and
warms up every model it serves before the first burst, holds them all, and runs its bursts between the other cells'.
What it holds (other models' weights and programs, the allocator's state, caches, JIT state) could change the speed of
a cell against the same cell in a worker of its own. This measures that, as an A/B over whole groups run by the
study's own runner (fwbench.running.runner.run_group): A, the target model measured in workers that also serve the
other models (built and compiled before it: it comes last); B, the target model alone in its workers (share_workers:
cell). Rounds alternate the order (A B, B A, ...), because a shared VM drifts by tens of percent over minutes and only
interleaving keeps that drift out of the comparison. Each round's ratio A/B per framework is its throughputs' ratio
(each over its launch's blocks), and the rounds give a geometric mean with a Student-t 95% interval on the logs (the
interval the study uses for ratios). 1 inside the interval: no effect the rounds can resolve.

    python benchmarks/served_ab.py                              # the default study's results/, resnet50 at bs 32
    python benchmarks/served_ab.py --rounds 8 --target vit_b_16 --out docs/runs/served-ab.json

It reads the dataset and starting weights a default study run left in results/ (results/data/, results/weights/).
Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run_arm(arm, args, config, results, tmp) -> dict[str, float]:
    """One group of the arm (A: the target beside the other models; B: the target alone); each framework's
    throughput of the target cell in it."""
    from fwbench.running.runner import run_group
    from fwbench.study.grid import Cell
    from fwbench.study.params import comparison_settings

    models = [*args.others, args.target] if arm == "A" else [args.target]
    frameworks = [(f, m) for f, m in args.variants]
    cells = [
        Cell("inference", framework, model, "fp32", args.batch, int(config["dataset"]["image_size"]), mode)
        for model in models
        for framework, mode in frameworks
    ]
    settings = {
        **comparison_settings(config, "inference", args.batch),
        "trials": 1,
        "blocks": args.blocks,
        "profile": {"batch_sizes": [], "steps": 1},
        "share_workers": "launch" if arm == "A" else "cell",
        "repeat_disturbed": 0,
    }
    out = [Path(tmp, f"{arm}-{i}.json") for i in range(len(cells))]
    group = run_group(
        cells,
        settings,
        data_dir=results / "data",
        weights_path={m: results / "weights" / f"{m}.npz" for m in models},
        num_classes=int(config["dataset"]["num_classes"]),
        threads=args.threads,
        out_paths=out,
    )
    rates = {}
    for cell, result in zip(cells, group, strict=True):
        if cell.model != args.target:
            continue
        if result["status"] != "ok":
            raise SystemExit(f"{arm}: {cell.label()} failed: {result['reason']}")
        rates[f"{cell.framework}/{cell.mode}"] = float(result["metrics"]["throughput_img_s"])
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="results", help="a default study's results directory")
    parser.add_argument("--target", default="resnet50")
    parser.add_argument("--others", nargs="*", default=["small_cnn", "mobilenet_v3_small"])
    parser.add_argument("--variants", nargs="*", default=["torch/eager", "jax/jit"], help="framework/mode")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=6, help="pairs of groups, the order alternating")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", help="write the record here (JSON)")
    args = parser.parse_args()
    args.variants = [tuple(v.split("/", 1)) for v in args.variants]

    from fwbench.study.config import validate_config
    from fwbench.study.files import resolve
    from fwbench.trackers.stats import geometric_mean_interval

    config = validate_config(resolve([REPO / "config" / "config.yaml"]).config)
    results = Path(args.results)
    rounds = []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="fwbench-served-ab-") as tmp:
        for number in range(args.rounds):
            order = ("A", "B") if number % 2 == 0 else ("B", "A")
            arms = {arm: run_arm(arm, args, config, results, tmp) for arm in order}
            ratios = {variant: arms["A"][variant] / arms["B"][variant] for variant in arms["A"]}
            rounds.append({"order": list(order), "throughput_img_s": arms, "ratio_a_over_b": ratios})
            print(
                f"round {number + 1}: {order[0]} then {order[1]}: "
                + ", ".join(f"{v} {r:.3f}" for v, r in ratios.items()),
                flush=True,
            )
    summary = {}
    for variant in rounds[0]["ratio_a_over_b"]:
        values = [r["ratio_a_over_b"][variant] for r in rounds]
        interval = geometric_mean_interval(values)
        summary[variant] = {
            "ratio": interval.estimate,
            "ci95": [interval.low, interval.high],
            "resolved": not (interval.low <= 1.0 <= interval.high),
        }
        print(f"{variant}: served/alone {interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]")
    record = {
        "what": __doc__.split("\n\n")[0],
        "target": args.target,
        "beside": args.others,
        "batch_size": args.batch,
        "blocks": args.blocks,
        "rounds": rounds,
        "summary": summary,
        "machine": {"cpu": _cpu(), "platform": platform.platform()},
        "commit": _commit(),
        "date": time.strftime("%Y-%m-%d", time.gmtime(started)),
        "took_s": time.time() - started,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
