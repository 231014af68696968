"""Fidelity of the harness: its img/s against established ways of timing the same model, interleaved.

For each model (same weights, batch size, resolution and thread count) and each round, in turn, every measurement in
a fresh process that imports only the framework it times (as the harness's cells do):

  harness torch     a full `fwbench` inference cell (supervised child process, stopping rule), img/s from its samples
  Timer             torch.utils.benchmark.Timer(...).blocked_autorange(), num_threads set   (median of block means)
  bare torch        a timm-style loop: N forward passes under inference_mode, total time     (mean)
  harness jax       a full `fwbench` JAX cell
  bare jax          a jitted apply called N times with block_until_ready, total time          (mean)
  in-worker         in each harness cell's own worker, after the cell has written its result (the cell untouched),
                    pairs of the bare loop of its framework and a loop over the cell's own program and weights:
                    the user's loop in the harness's process, which tells the harness's timing and its program
                    from what its process does to the model's speed
  paired            in one process per framework, a bare loop alternated with the harness's measuring code
                    (a burst, with and without the RSS sampler thread) and with a bare loop over the model as a
                    cell builds and compiles it (its backend), which isolates the harness's own cost and its
                    program from the drift between processes

Ratios: harness/Timer compares medians (the harness's headline); harness/bare compares means (the harness's
`throughput_img_s_total`) with the bare loops' means; harness/in-worker bare pairs the cell with the user's loop in one
process, in-worker cell's program/bare the two programs in one process, and in-worker/fresh bare the two processes'
loops. Target: 0.97-1.03. Each ratio is paired within its round, and the rounds alternate their order (even rounds the
harness cells first, odd rounds the references first), so a drift of the machine within a round cancels over two. The
summary gives each ratio's geometric mean over the rounds with its 95% interval (Student's t on the log ratios) and what
the interval says against the target: "within 3%" (the interval inside 0.97-1.03), "biased" (the interval outside 1), or
"cannot tell". On the 2-core Zen 3 VM a fresh process's rate varies by 8-20%: a +-3% interval needs 90-270 rounds; on
the Zen 4 VM, 60 rounds gave +-2.5-3.4% (docs/harness-performance.md). --out records the CPU, commit and date with every
rate.

    .venv/bin/python benchmarks/fidelity.py [--models resnet50 mobilenet_v3_small] [--batch-size 8]
        [--image-size 32] [--threads 2] [--rounds 3] [--seconds 2] [--out rounds.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REFERENCES = ("timer", "bare torch", "bare jax")
IN_WORKER = "--in-worker"  # argv[1] of the harness's worker with loops after its cell (`in_worker`)
TARGET = 0.03  # the harness within 3% of each reference
PAIRED = ("paired torch", "paired jax")
PAIRS, PAIR_SECONDS = 8, 1.0
IN_WORKER_PAIRS = 4  # per harness cell and round: in one process the loops' spread is a few %, not a process's
IN_WORKER_RATIOS = (  # (ratio, over, under), each filled with a framework: the timing, the program, the process
    ("harness/in-worker bare {}", "harness {} (mean)", "in-worker bare {}"),
    ("in-worker cell's program/bare {}", "in-worker cell's program {}", "in-worker bare {}"),
    ("in-worker/fresh bare {}", "in-worker bare {}", "bare {}"),
)


def _loop(step, sync, batch_size: int, seconds: float) -> float:
    for _ in range(5):
        sync(step())
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        sync(step())
        count += 1
    return count * batch_size / (time.perf_counter() - start)


def paired(step, sync, batch_size: int, pairs: int = PAIRS, harness_step=None) -> dict[str, list[float]]:
    """In one process, alternate a bare loop with the harness's own measuring code over the same step, `pairs`
    times: a burst (fwbench.scenarios.blocks.run_burst, with its per-burst CPU, steal and counter readings) of about the
    same length alone, and with the RSS sampler thread running at its measuring interval and at its ten times finer load
    interval; and, given `harness_step` ((call, sync) of the model as a cell builds and compiles it: its backend's
    program, weights and inputs), the bare loop over that step, which tells the harness's program from the user's.
    Returns each variant's ratios to the bare loop of its pair; pairing cancels the machine's drift, which
    dominates comparisons across processes. The variants take turns at going first (`in_turns`)."""
    from fwbench.scenarios.blocks import HardwareCounters, burst_rate, run_burst
    from fwbench.trackers.memory import LOAD_INTERVAL_S, TIMED_INTERVAL_S, RssSampler

    counters = HardwareCounters()
    calibrated = _loop(step, sync, batch_size, PAIR_SECONDS)
    iters = max(1, round(calibrated * PAIR_SECONDS / batch_size))

    def harness(interval: float | None) -> float:
        with RssSampler(interval) if interval is not None else contextlib.nullcontext():
            return burst_rate(run_burst((lambda _: step(), sync), iters, 0, counters), batch_size)

    variants = {
        "bare": lambda: _loop(step, sync, batch_size, PAIR_SECONDS),
        "burst": lambda: harness(None),
        **{f"burst + sampler {s * 1000:g} ms": (lambda s=s: harness(s)) for s in (TIMED_INTERVAL_S, LOAD_INTERVAL_S)},
    }
    if harness_step is not None:
        variants["harness's step"] = lambda: _loop(*harness_step, batch_size, PAIR_SECONDS)
    turns = in_turns(variants, pairs)
    return {name: [rates[name] / rates["bare"] for rates in turns] for name in list(variants)[1:]}


def in_turns(variants: dict, pairs: int) -> list[dict[str, float]]:
    """Each variant's rate (a call of it), `pairs` times; the variants take turns at going first (pair i starts at
    the i-th of them), so that a drift within a pair, or a cost of coming after another, falls on each alike."""
    names = list(variants)
    return [
        {name: variants[name]() for name in names[index % len(names) :] + names[: index % len(names)]}
        for index in range(pairs)
    ]


def harness_step(framework: str, name: str, weights, batch, image_size: int, threads: int):
    """(call, sync) of `name` as an fp32 inference cell runs it (fwbench.backends: built, placed and compiled as the
    cell does, on the same weights and batch), for the in-process pairs."""
    from fwbench.backends import get_backend

    backend = get_backend(framework, threads=threads, precision="fp32")
    backend.build(name, weights, num_classes=10, image_size=image_size)
    backend.compile(backend.to_device(batch))
    return backend_step(backend, batch)


def backend_step(backend, batch):
    """(call, sync) of a cell's backend as it is (built, its program compiled) on `batch`, placed by it."""
    inputs = backend.to_device(batch)
    return (lambda: backend.forward(inputs)), backend.synchronize


def alternated(bare, cell, batch_size: int, pairs: int) -> dict[str, list[float]]:
    """`pairs` pairs of a bare loop and a loop over the cell's own step, PAIR_SECONDS each, taking turns at going
    first: each side's rates, in order."""
    sides = {"bare": bare, "cell's program": cell}
    turns = in_turns(
        {side: (lambda s=step: _loop(*s, batch_size, PAIR_SECONDS)) for side, step in sides.items()}, pairs
    )
    return {side: [rates[side] for rates in turns] for side in sides}


def reference(
    kind: str,
    name: str,
    work: Path,
    batch_size: int,
    image_size: int,
    threads: int,
    seconds: float,
    pairs: int,
    cell_backend=None,
):
    """One reference measurement, run in its own process (`--reference`), or (kind "in-worker FRAMEWORK") in a
    harness cell's worker after its cell, alternating the bare loop with the cell's own backend (`cell_backend`)."""
    from fwbench.running.threads import pin_threads

    pin_threads(threads)

    import numpy as np

    from fwbench.data.inputs import batch_of, normalize
    from fwbench.data.store import load_split
    from fwbench.scenarios.inference import load_weights

    images, _ = load_split(work / "data", "val")
    batch = normalize(batch_of(images, batch_size))
    weights = load_weights(work / f"{name}.npz")
    if kind in ("bare jax", "paired jax", "in-worker jax"):
        import jax

        from fwbench.models import flax_variables

        jax.config.update("jax_default_matmul_precision", "highest")
        module, variables = flax_variables(name, weights, num_classes=10, image_size=image_size)
        apply = jax.jit(lambda v, inputs: module.apply(v, inputs, train=False))
        x = jax.device_put(batch)
        bare = (lambda: apply(variables, x)), (lambda out: out.block_until_ready())
        if kind == "paired jax":
            own = harness_step("jax", name, weights, batch, image_size, threads)  # fp32: "highest" too
            return paired(*bare, batch_size, pairs, own)
        if kind == "in-worker jax":
            return alternated(bare, backend_step(cell_backend, batch), batch_size, pairs)
        return _loop(*bare, batch_size, seconds)
    import torch

    from fwbench.models import torch_model

    torch.set_num_threads(threads)
    torch.set_float32_matmul_precision("highest")
    model = torch_model(name, num_classes=10, image_size=image_size).eval()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    x = torch.from_numpy(np.ascontiguousarray(batch.transpose(0, 3, 1, 2)))
    with torch.inference_mode():
        if kind == "paired torch":
            own = harness_step("torch", name, weights, batch, image_size, threads)
            return paired(lambda: model(x), lambda out: None, batch_size, pairs, own)
        if kind == "in-worker torch":
            return alternated(
                ((lambda: model(x)), lambda out: None), backend_step(cell_backend, batch), batch_size, pairs
            )
        if kind == "timer":
            from torch.utils import benchmark

            timer = benchmark.Timer(stmt="model(x)", globals={"model": model, "x": x}, num_threads=threads)
            return batch_size / timer.blocked_autorange(min_run_time=seconds).median
        return _loop(lambda: model(x), lambda out: None, batch_size, seconds)


def in_worker(request: str, spec_path: str, part_path: str) -> None:
    """The harness's worker for one cell (fwbench.running.worker, as the runner starts it), then, once the cell's
    result is written, in the same process, IN_WORKER_PAIRS pairs of the user's bare loop of its framework and a loop
    over the cell's own backend (the program and weights the cell measured, kept from fwbench.backends.get_backend),
    their rates written to the request's `out`. The cell runs exactly as in a study; the loops come after it, so they
    cannot change what it measured. Between a fresh process's bare loop and the harness cell lie the harness's
    timing, its program and its process (launched by the runner, its environment, its imports, its cell before):
    harness/in-worker bare is the timing, the cell's program/bare in one process the program, and in-worker/fresh
    bare the process. The threads are pinned first, as the worker pins them before anything loads NumPy (and with it
    OpenBLAS, which reads its thread settings once): fwbench.backends, which this wraps, imports NumPy."""
    from fwbench.io import read_json
    from fwbench.running.threads import pin_threads

    spec = read_json(spec_path)
    pin_threads(int(spec["threads"]), spec.get("cpus"))  # the worker's own call then finds them pinned
    import fwbench.backends
    from fwbench.running import worker

    asked = json.loads(request)
    built, get_backend = [], fwbench.backends.get_backend

    def kept(*args, **kwargs):
        built.append(get_backend(*args, **kwargs))
        return built[-1]

    fwbench.backends.get_backend = kept  # the worker imports it when it starts its cell
    try:
        worker.main(spec_path, part_path)
    finally:
        fwbench.backends.get_backend = get_backend
    rates = reference(
        f"in-worker {asked['framework']}",
        asked["model"],
        Path(asked["work"]),
        asked["batch_size"],
        asked["image_size"],
        asked["threads"],
        PAIR_SECONDS,  # each loop of the pairs
        IN_WORKER_PAIRS,
        cell_backend=built[0],
    )
    Path(asked["out"]).write_text(json.dumps(rates))


def in_worker_command(framework: str, name: str, work: Path, args) -> tuple[str, ...]:
    """The worker command of a harness cell followed by the in-worker loops in its process (`in_worker`)."""
    asked = {
        "framework": framework,
        "model": name,
        "work": str(work),
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "threads": args.threads,
        "out": str(work / f"in-worker {framework}.json"),
    }
    return (sys.executable, __file__, IN_WORKER, json.dumps(asked))


def fresh_reference(kind: str, name: str, work: Path, args):
    command = [sys.executable, __file__, "--reference", kind, "--models", name, "--work", str(work)]
    command += ["--batch-size", str(args.batch_size), "--image-size", str(args.image_size)]
    command += ["--threads", str(args.threads), "--seconds", str(args.seconds), "--pairs", str(args.pairs)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"reference {kind!r} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def interval(ratios: list[float]) -> tuple[float, float, float, str]:
    """(geometric mean, 95% low, 95% high, verdict against TARGET) of per-round ratios (Student's t on their logs)."""
    import math

    from fwbench.analysis.common.verdicts import interval as t_interval

    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan, "cannot tell"
    low, high = t_interval(mean, statistics.stdev(logs) / math.sqrt(len(logs)), len(logs) - 1)
    if low >= 1 - TARGET and high <= 1 + TARGET:
        verdict = f"within {TARGET:.0%}"
    elif low > 1 or high < 1:
        verdict = "biased"
    else:
        verdict = "cannot tell"
    return math.exp(mean), low, high, verdict


def machine() -> dict:
    """What the record's numbers were measured on and with: the CPU as every cell records it (its ISA level tells
    the VM kinds apart, which share a model name), the commit and the date."""
    from fwbench.trackers.environment import git_state
    from fwbench.trackers.hardware import cpu_identity

    return {"cpu": cpu_identity(), "git": git_state(), "date": time.strftime("%Y-%m-%d", time.gmtime())}


def _record(args, name: str, **parts) -> None:
    """Add `parts` to `name`'s entry in --out (every round's rates and ratios, every pair's ratios), if given."""
    if args.out:
        record = json.loads(args.out.read_text()) if args.out.exists() else {}
        if name not in record:  # the settings and the machine once, with the model's first part
            record[name] = {"settings": {k: str(v) for k, v in vars(args).items()}, **machine()}
        record[name].update(parts)
        args.out.write_text(json.dumps(record, indent=1))


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == IN_WORKER:  # started by the runner as a cell's worker
        in_worker(*sys.argv[2:])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # as the worker ends: its result and the loop's rate are written
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["resnet50", "mobilenet_v3_small"])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--reference", choices=REFERENCES + PAIRED, help=argparse.SUPPRESS)
    parser.add_argument("--paired-only", action="store_true", help="only the in-process paired harness/bare check")
    parser.add_argument("--pairs", type=int, default=PAIRS, help="in-process pairs per framework")
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help="every round's rates and ratios as JSON, for the record")
    args = parser.parse_args()
    if args.reference:
        rate = reference(
            args.reference,
            args.models[0],
            args.work,
            args.batch_size,
            args.image_size,
            args.threads,
            args.seconds,
            args.pairs,
        )
        print(json.dumps(rate))
        return

    from fwbench.data.prepare import prepare
    from fwbench.models.weights import init_weights
    from fwbench.running.runner import run_cell
    from fwbench.study.config import validate_config
    from fwbench.study.grid import Cell

    work = Path(tempfile.mkdtemp(prefix="fwbench-fidelity-"))
    config = validate_config(
        {
            "frameworks": ["torch", "jax"],
            "models": args.models,
            "precisions": ["fp32"],
            "dataset": {"image_size": args.image_size, "num_classes": 10, "train_size": 64, "val_size": 64},
            "inference": {"batch_sizes": [args.batch_size], "trials": 1, "blocks": 10, "burst_s": args.seconds / 10},
        }
    )
    prepare(config["dataset"], work / "data")
    settings = {k: v for k, v in config["inference"].items() if k != "batch_sizes"}
    rows, pairs = [], []
    for name in args.models:
        weights_path = work / f"{name}.npz"
        init_weights(name, num_classes=10, image_size=args.image_size, seed=0, out=weights_path)
        for framework in ("torch", "jax"):
            pairs.append((name, framework, fresh_reference(f"paired {framework}", name, work, args)))
            print(f"{name} {framework} paired: {pairs[-1][2]}", flush=True)
            _record(args, name, **{f"paired {framework}": pairs[-1][2]})
        if args.paired_only:
            continue
        rates: dict[str, list[float]] = {}
        ratios: dict[str, list[float]] = {}
        for round_ in range(args.rounds):
            measured = {}

            def harness_cells(measured=measured, name=name, weights_path=weights_path):
                for framework in ("torch", "jax"):
                    cell = Cell("inference", framework, name, "fp32", args.batch_size, args.image_size)
                    result = run_cell(
                        cell,
                        settings,
                        data_dir=work / "data",
                        weights_path=weights_path,
                        num_classes=10,
                        threads=args.threads,
                        out_path=work / "cell.json",
                        worker_cmd=in_worker_command(framework, name, work, args),
                    )
                    if result["status"] != "ok":
                        raise SystemExit(f"harness cell failed: {result['reason']}")
                    measured[f"harness {framework} (median)"] = result["metrics"]["throughput_img_s"]
                    measured[f"harness {framework} (mean)"] = result["metrics"]["throughput_img_s_total"]
                    loops = work / f"in-worker {framework}.json"
                    for side, rates in json.loads(loops.read_text()).items():
                        measured[f"in-worker {side} {framework}"] = statistics.geometric_mean(rates)
                    loops.unlink()

            def references(measured=measured, name=name):
                for kind in REFERENCES:
                    measured[kind] = fresh_reference(kind, name, work, args)

            order = (harness_cells, references) if round_ % 2 == 0 else (references, harness_cells)
            for part in order:
                part()
            print(f"{name} round {round_ + 1}: " + ", ".join(f"{k} {v:.1f}" for k, v in measured.items()), flush=True)
            for key, value in measured.items():
                rates.setdefault(key, []).append(value)
            for key, value in {
                "harness/Timer": measured["harness torch (median)"] / measured["timer"],
                "harness/bare torch": measured["harness torch (mean)"] / measured["bare torch"],
                "harness/bare jax": measured["harness jax (mean)"] / measured["bare jax"],
                **{
                    ratio.format(fw): measured[over.format(fw)] / measured[under.format(fw)]
                    for ratio, over, under in IN_WORKER_RATIOS
                    for fw in ("torch", "jax")
                },
            }.items():
                ratios.setdefault(key, []).append(value)
        rows.append(
            (
                name,
                {k: statistics.median(v) for k, v in rates.items()},
                {k: statistics.median(v) for k, v in ratios.items()},
                {k: interval(v) for k, v in ratios.items()},
            )
        )
        _record(args, name, rates=rates, ratios=ratios)
    print(f"\nIn-process pairs ({args.pairs} x {PAIR_SECONDS:g} s each): harness measuring code / bare loop, same step")
    print("| model | framework and variant | median | min | max | geometric mean | 95% interval | verdict |")
    print("| --- | --- | --- | --- | --- | ---: | --- | --- |")
    for name, framework, measured in pairs:
        for variant, values in measured.items():
            mean, low, high, verdict = interval(values)
            print(
                f"| {name} | {framework} {variant} | {statistics.median(values):.3f} | {min(values):.3f} "
                f"| {max(values):.3f} | {mean:.3f} | [{low:.3f}, {high:.3f}] | {verdict} |"
            )
    if args.paired_only:
        return
    print(
        f"\nbatch {args.batch_size}, {args.image_size} px, {args.threads} threads, {args.rounds} interleaved rounds, "
        "every measurement in a fresh process but the in-worker loops (medians over rounds)"
    )
    print(
        "| model | harness torch img/s | Timer img/s | bare torch img/s | in-worker bare torch img/s "
        "| harness jax img/s | bare jax img/s | in-worker bare jax img/s "
        "| harness/Timer | harness/bare torch | harness/bare jax |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, rate, ratio, _ in rows:
        print(
            f"| {name} | {rate['harness torch (median)']:.1f} | {rate['timer']:.1f} | {rate['bare torch']:.1f} "
            f"| {rate['in-worker bare torch']:.1f} | {rate['harness jax (mean)']:.1f} | {rate['bare jax']:.1f} "
            f"| {rate['in-worker bare jax']:.1f} | {ratio['harness/Timer']:.3f} "
            f"| {ratio['harness/bare torch']:.3f} | {ratio['harness/bare jax']:.3f} |"
        )

    print(f"\nPaired within rounds, geometric mean over {args.rounds} rounds, 95% interval, target 1 +- {TARGET:g}")
    print("| model | ratio | geometric mean | 95% interval | verdict |")
    print("| --- | --- | ---: | --- | --- |")
    for name, _, _, intervals in rows:
        for key, (mean, low, high, verdict) in intervals.items():
            print(f"| {name} | {key} | {mean:.3f} | [{low:.3f}, {high:.3f}] | {verdict} |")


if __name__ == "__main__":
    main()
