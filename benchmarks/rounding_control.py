"""How far apart two runs of the *same* framework end when only rounding differs: the yardstick for the study's
JAX-vs-PyTorch final top-1 gap.

The two frameworks start from the same weights and see the same batches, and their first step agrees to fp32
rounding (the step-0 table). From there, fp32 rounding differences are amplified by training itself, so the final
top-1 of two runs can differ even within one framework. This script reruns the default study's training cells
in one framework, each in a fresh process, with one rounding-sized change at a time:

  threads   the same cell with a different thread count (a different reduction order in every convolution)
  ulp       the same cell with every starting weight moved by one float32 ulp in a seeded random direction

and prints each run's final top-1 beside the study's own cells (read from results/cells/training/), so the
framework gap can be compared with the within-framework spread.

    .venv/bin/python benchmarks/rounding_control.py [--models resnet50 efficientnet_b0] [--framework torch]
        [--threads 1] [--config config/config.yaml] [--results results]

Needs a finished default study (its prepared dataset, weights and training cells).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def nudge_by_one_ulp(weights: dict, seed: int) -> dict:
    """Every floating-point array moved to its next float32 neighbour, up or down at random."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = {}
    for key, value in weights.items():
        if np.issubdtype(value.dtype, np.floating):
            direction = np.where(rng.random(value.shape) < 0.5, -np.inf, np.inf).astype(value.dtype)
            value = np.nextafter(value, direction)
        out[key] = value
    return out


def run_one(spec: dict) -> dict:
    """One training cell in this (fresh) process, as the workflow's training rule runs it."""
    from fwbench.running.threads import pin_threads

    pin_threads(spec["threads"])
    import numpy as np

    from fwbench.backends import get_backend
    from fwbench.scenarios import training
    from fwbench.scenarios.inference import load_weights
    from fwbench.study.files import load_config
    from fwbench.study.grid import Cell

    config = load_config(spec["config"])
    settings = {k: v for k, v in config["training"].items() if k != "batch_sizes"}
    settings.update(loader=config["loader"], seed=config["seed"])
    results = Path(spec["results"])
    weights_path = results / "weights" / f"{spec['model']}.npz"
    with tempfile.TemporaryDirectory() as work:
        if spec["ulp"]:
            nudged = nudge_by_one_ulp(load_weights(weights_path), seed=spec["ulp"])
            weights_path = Path(work) / "nudged.npz"
            np.savez(weights_path, **nudged)
        backend = get_backend(spec["framework"], threads=spec["threads"], precision="fp32")
        cell = Cell(
            "training", spec["framework"], spec["model"], "fp32", spec["batch"], config["dataset"]["image_size"]
        )
        metrics = training.run(
            backend,
            cell,
            settings,
            data_dir=results / "data",
            weights_path=weights_path,
            num_classes=config["dataset"]["num_classes"],
            state_dir=Path(work) / "state",
        )["metrics"]
    return {"final_top1": metrics["final_top1"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--models", nargs="+", default=["small_cnn", "resnet50", "vit_b_16", "mobilenet_v3_small", "efficientnet_b0"]
    )
    parser.add_argument("--framework", default="torch", help="the framework whose runs are repeated")
    parser.add_argument("--threads", type=int, default=1, help="thread count of the 'threads' control")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--results", default="results")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(json.loads(args.one))))
        return

    from fwbench.results import load_result

    rows = []
    for model in args.models:
        cells = {
            framework: load_result(
                Path(args.results, "cells", "training", framework, model, "fp32", f"bs{args.batch}.json")
            )
            for framework in ("torch", "jax")
        }
        study = {framework: cell["metrics"]["final_top1"] for framework, cell in cells.items()}
        study_threads = cells[args.framework]["provenance"]["threads_requested"]
        base = {"config": args.config, "results": args.results, "model": model, "batch": args.batch}
        controls = {}
        for name, change in (
            ("threads", {"threads": args.threads, "ulp": 0}),
            ("ulp", {"threads": study_threads, "ulp": 1}),
        ):
            spec = {**base, "framework": args.framework, **change}
            output = subprocess.run(
                [sys.executable, __file__, "--one", json.dumps(spec)], check=True, capture_output=True, text=True
            ).stdout
            controls[name] = json.loads(output.strip().splitlines()[-1])["final_top1"]
        own = study[args.framework]
        row = {
            "model": model,
            "study_torch": study["torch"],
            "study_jax": study["jax"],
            "framework_gap": abs(study["jax"] - study["torch"]),
            **{f"{args.framework}_{k}": v for k, v in controls.items()},
            **{f"gap_{k}": abs(v - own) for k, v in controls.items()},
        }
        rows.append(row)
        print(json.dumps(row), flush=True)

    print(
        f"\n| model | top-1 PyTorch / JAX (study) | framework gap | {args.framework} {args.threads} thread(s) | "
        f"{args.framework} start moved 1 ulp | within-{args.framework} gaps |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['model']} | {100 * r['study_torch']:.1f}% / {100 * r['study_jax']:.1f}% | "
            f"{100 * r['framework_gap']:.1f} | {100 * r[args.framework + '_threads']:.1f}% | "
            f"{100 * r[args.framework + '_ulp']:.1f}% | {100 * r['gap_threads']:.1f} / {100 * r['gap_ulp']:.1f} |"
        )


if __name__ == "__main__":
    main()
