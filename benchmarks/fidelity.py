"""Fidelity of the harness: its img/s against established ways of timing the same model, interleaved.

For each model (same weights, batch size, resolution and thread count) and each round, in turn:

  harness torch   a full `fwbench` inference cell (supervised child process, stopping rule), img/s from its samples
  Timer           torch.utils.benchmark.Timer(...).blocked_autorange(), num_threads set   (median of block means)
  bare torch      a timm-style loop: N forward passes under inference_mode, total time     (mean)
  harness jax     a full `fwbench` JAX cell
  bare jax        a jitted apply called N times with block_until_ready, total time          (mean)

Ratios (median over rounds): harness/Timer compares medians (the harness's headline); harness/bare compares means
(the harness's `throughput_img_s_total`) with the bare loops' means. Target: 0.97-1.03.

    .venv/bin/python benchmarks/fidelity.py [--models resnet50 mobilenet_v3_small] [--batch-size 8]
        [--image-size 32] [--threads 2] [--rounds 3] [--seconds 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def bare_torch(model, x, seconds: float) -> float:
    import torch

    with torch.inference_mode():
        for _ in range(5):
            model(x)
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            model(x)
            count += 1
        return count * x.shape[0] / (time.perf_counter() - start)


def timer_torch(model, x, threads: int, seconds: float) -> float:
    import torch
    from torch.utils import benchmark

    with torch.inference_mode():
        measurement = benchmark.Timer(
            stmt="model(x)", globals={"model": model, "x": x}, num_threads=threads
        ).blocked_autorange(min_run_time=seconds)
    return x.shape[0] / measurement.median


def bare_jax(name: str, weights, batch_nhwc, image_size: int, seconds: float) -> float:
    import jax

    from fwbench.models import flax_variables

    module, variables = flax_variables(name, weights, num_classes=10, image_size=image_size)
    with jax.default_matmul_precision("highest"):
        step = jax.jit(lambda v, inputs: module.apply(v, inputs, train=False))
        x = jax.device_put(batch_nhwc)
        for _ in range(5):
            step(variables, x).block_until_ready()
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            step(variables, x).block_until_ready()
            count += 1
    return count * batch_nhwc.shape[0] / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["resnet50", "mobilenet_v3_small"])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()

    from fwbench.threads import pin_threads

    pin_threads(args.threads)
    import numpy as np
    import torch

    from fwbench.config import validate_config
    from fwbench.data.inputs import batch_of, normalize
    from fwbench.data.prepare import prepare
    from fwbench.data.store import load_split
    from fwbench.grid import Cell
    from fwbench.models import torch_model
    from fwbench.models.weights import init_weights
    from fwbench.runner import run_cell
    from fwbench.scenarios.inference import load_weights

    torch.set_num_threads(args.threads)
    torch.set_float32_matmul_precision("highest")
    work = Path(tempfile.mkdtemp(prefix="fwbench-fidelity-"))
    config = validate_config(
        {
            "frameworks": ["torch", "jax"],
            "models": args.models,
            "precisions": ["fp32"],
            "dataset": {"image_size": args.image_size, "num_classes": 10, "train_size": 64, "val_size": 64},
            "inference": {
                "batch_sizes": [args.batch_size],
                "min_iters": 20,
                "min_seconds": args.seconds,
                "ci_target": 0.02,
                "max_seconds": 30,
            },
        }
    )
    prepare(config["dataset"], work / "data")
    settings = {k: v for k, v in config["inference"].items() if k != "batch_sizes"}
    images, _ = load_split(work / "data", "val")
    batch = normalize(batch_of(images, args.batch_size))
    rows = []
    for name in args.models:
        weights_path = work / f"{name}.npz"
        init_weights(name, num_classes=10, image_size=args.image_size, seed=0, out=weights_path)
        weights = load_weights(weights_path)
        model = torch_model(name, num_classes=10, image_size=args.image_size).eval()
        model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
        x = torch.from_numpy(np.ascontiguousarray(batch.transpose(0, 3, 1, 2)))
        ratios: dict[str, list[float]] = {"harness/Timer": [], "harness/bare torch": [], "harness/bare jax": []}
        rates: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            cells = {}
            for framework in ("torch", "jax"):
                cell = Cell("inference", framework, name, "fp32", args.batch_size, args.image_size)
                cells[framework] = run_cell(
                    cell,
                    settings,
                    data_dir=work / "data",
                    weights_path=weights_path,
                    num_classes=10,
                    threads=args.threads,
                    out_path=work / "cell.json",
                )
                if cells[framework]["status"] != "ok":
                    raise SystemExit(f"harness cell failed: {cells[framework]['reason']}")
            measured = {
                "harness torch (median)": cells["torch"]["metrics"]["throughput_img_s"],
                "harness torch (mean)": cells["torch"]["metrics"]["throughput_img_s_total"],
                "Timer": timer_torch(model, x, args.threads, args.seconds),
                "bare torch": bare_torch(model, x, args.seconds),
                "harness jax (mean)": cells["jax"]["metrics"]["throughput_img_s_total"],
                "bare jax": bare_jax(name, weights, batch, args.image_size, args.seconds),
            }
            for key, value in measured.items():
                rates.setdefault(key, []).append(value)
            ratios["harness/Timer"].append(measured["harness torch (median)"] / measured["Timer"])
            ratios["harness/bare torch"].append(measured["harness torch (mean)"] / measured["bare torch"])
            ratios["harness/bare jax"].append(measured["harness jax (mean)"] / measured["bare jax"])
        rows.append(
            (
                name,
                {k: statistics.median(v) for k, v in rates.items()},
                {k: statistics.median(v) for k, v in ratios.items()},
            )
        )
    print(
        f"batch {args.batch_size}, {args.image_size} px, {args.threads} threads, {args.rounds} interleaved rounds "
        "(medians over rounds)"
    )
    print(
        "| model | harness torch img/s | Timer img/s | bare torch img/s | harness jax img/s | bare jax img/s "
        "| harness/Timer | harness/bare torch | harness/bare jax |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, rate, ratio in rows:
        print(
            f"| {name} | {rate['harness torch (median)']:.1f} | {rate['Timer']:.1f} | {rate['bare torch']:.1f} "
            f"| {rate['harness jax (mean)']:.1f} | {rate['bare jax']:.1f} | {ratio['harness/Timer']:.3f} "
            f"| {ratio['harness/bare torch']:.3f} | {ratio['harness/bare jax']:.3f} |"
        )


if __name__ == "__main__":
    main()
