"""Do cells that run at once on disjoint slots bias each other? The CPU analogue of `--resources gpu=N` on one node.

With `--resources gpu=N` (fwbench.running.slots) each of N concurrent cells gets 1/N of the cores, disjoint, and (on a
GPU node) a GPU of its own; what the cells still share is the rest of the machine: memory bandwidth, the last-level
cache, the package's power and clock budget (and on a GPU node, PCIe and the host cores that launch kernels). This
measures that residue on a CPU: one inference cell ("victim": a framework, model and batch size, one thread, pinned
to one core) timed alone and timed while a second cell ("neighbour", one thread, pinned to another core) computes
beside it, in short alternating blocks (alone, neighbour, alone, ...), because a shared VM drifts by tens of percent
over minutes and only interleaving keeps that drift out of the comparison.

    python benchmarks/slot_interference.py                                  # torch small_cnn bs 8 beside the same
    python benchmarks/slot_interference.py --neighbour-model resnet50 --neighbour-batch 32

Both cells are long-lived processes built once through the same backend code a cell uses (fwbench.backends): the
victim runs the timed forward passes of one block on request; the neighbour computes without pause and is stopped
(SIGSTOP) in the "alone" blocks and continued (SIGCONT) in the others, so no block pays for start-up. Each
neighbour block's throughput is divided by the mean of the two alone blocks around it (which cancels a linear
drift), and the ratio is reported as the geometric mean of those with a Student-t 95% interval on the logs (the
interval the study uses for ratios). Below 1: the neighbour slows the victim down.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMAGE_SIZE = 32  # the default study's resolution
NUM_CLASSES = 10


def worker(args: argparse.Namespace) -> None:
    """One cell in a process of its own, pinned to one core before any framework starts its thread pools."""
    os.sched_setaffinity(0, {args.cpu})
    import numpy as np
    import torch  # the weights are torch-layout, as init_weights writes them

    from fwbench.backends import get_backend
    from fwbench.data.inputs import normalize
    from fwbench.models import torch_model, torch_state_dict_numpy

    torch.manual_seed(0)
    state = torch_state_dict_numpy(torch_model(args.model, num_classes=NUM_CLASSES, image_size=IMAGE_SIZE))
    backend = get_backend(args.framework, threads=1, precision="fp32")
    backend.build(args.model, state, num_classes=NUM_CLASSES, image_size=IMAGE_SIZE)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(args.batch, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    inputs = backend.to_device(normalize(images))
    backend.compile(inputs)
    for _ in range(20):
        backend.synchronize(backend.forward(inputs))
    print(json.dumps({"ready": True, "cpus": sorted(os.sched_getaffinity(0))}), flush=True)
    if args.role == "neighbour":
        while True:  # the controller stops and continues this process
            backend.synchronize(backend.forward(inputs))
    for line in sys.stdin:  # victim: one block per request
        seconds = float(line)
        samples = []
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            t0 = time.perf_counter()
            backend.synchronize(backend.forward(inputs))
            samples.append(time.perf_counter() - t0)
        wall = time.perf_counter() - start
        print(
            json.dumps({"img_s": len(samples) * args.batch / wall, "p50_ms": 1000 * statistics.median(samples)}),
            flush=True,
        )


def _spawn(role: str, cpu: int, framework: str, model: str, batch: int) -> subprocess.Popen:
    command = [sys.executable, __file__, "--worker", role, "--cpu", str(cpu)]
    command += ["--framework", framework, "--model", model, "--batch", str(batch)]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    ready = json.loads(proc.stdout.readline())
    if not ready.get("ready"):
        raise RuntimeError(f"{role} did not start")
    return proc


def _busy_ticks() -> int:
    """CPU time (clock ticks) the whole machine spent busy so far, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4]  # all but idle and iowait


def _process_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def t_interval(logs: list[float]) -> tuple[float, float, float]:
    from scipy import stats

    mean = statistics.fmean(logs)
    half = stats.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=["victim", "neighbour"], help=argparse.SUPPRESS)
    parser.add_argument("--cpu", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--framework", default="torch", help="the victim's framework (worker: its own)")
    parser.add_argument("--model", default="small_cnn", help="the victim's model (worker: its own)")
    parser.add_argument("--batch", type=int, default=8, help="the victim's batch size (worker: its own)")
    parser.add_argument("--neighbour-framework", default=None, help="default: the victim's")
    parser.add_argument("--neighbour-model", default=None, help="default: the victim's")
    parser.add_argument("--neighbour-batch", type=int, default=None, help="default: the victim's")
    parser.add_argument("--blocks", type=int, default=8, help="blocks of each kind (alone and beside a neighbour)")
    parser.add_argument("--block-s", type=float, default=6.0, help="seconds of timed forward passes per block")
    parser.add_argument("--settle-s", type=float, default=0.5, help="pause after stopping or continuing the neighbour")
    parser.add_argument(
        "--max-other", type=float, default=0.1, help="redo a block other processes took more cores from"
    )
    parser.add_argument("--max-redo", type=int, default=40, help="give up after this many redone blocks")
    parser.add_argument("--wait-s", type=float, default=5.0, help="pause before redoing a block")
    parser.add_argument("--victim-cpu", type=int, default=0)
    parser.add_argument("--neighbour-cpu", type=int, default=1)
    args = parser.parse_args()
    if args.worker:
        args.role = args.worker
        worker(args)
        return 0

    neighbour_spec = (
        args.neighbour_framework or args.framework,
        args.neighbour_model or args.model,
        args.neighbour_batch or args.batch,
    )
    victim = _spawn("victim", args.victim_cpu, args.framework, args.model, args.batch)
    neighbour = _spawn("neighbour", args.neighbour_cpu, *neighbour_spec)
    os.kill(neighbour.pid, signal.SIGSTOP)
    blocks: list[tuple[str, float, float, float]] = []
    started = time.time()
    tick = os.sysconf("SC_CLK_TCK")
    redone = 0
    try:
        for i in range(2 * args.blocks + 1):  # A B A B ... A: every neighbour block has an alone block on each side
            beside = i % 2 == 1
            kind = "neighbour" if beside else "alone"
            os.kill(neighbour.pid, signal.SIGCONT if beside else signal.SIGSTOP)
            time.sleep(args.settle_s)
            while True:
                # Other processes on the machine (a shared VM): CPU time neither cell used during the block. A block
                # they took more than --max-other cores from is measured again (the comparison is of the two cells).
                ours0 = _process_ticks(victim.pid) + _process_ticks(neighbour.pid)
                busy0, t0 = _busy_ticks(), time.time()
                victim.stdin.write(f"{args.block_s}\n")
                victim.stdin.flush()
                block = json.loads(victim.stdout.readline())
                ours = _process_ticks(victim.pid) + _process_ticks(neighbour.pid) - ours0
                foreign = max(0.0, (_busy_ticks() - busy0 - ours) / tick / (time.time() - t0))
                print(
                    f"block {i + 1:2d} {kind:9s} {block['img_s']:9.1f} img/s  p50 {block['p50_ms']:.3f} ms  "
                    f"other processes {foreign:.2f} cores" + ("  (redone)" if foreign > args.max_other else ""),
                    flush=True,
                )
                if foreign <= args.max_other:
                    break
                redone += 1
                if redone > args.max_redo:
                    raise SystemExit(f"other processes kept more than {args.max_other} cores busy: no quiet blocks")
                time.sleep(args.wait_s)
            blocks.append((kind, block["img_s"], block["p50_ms"], foreign))
    finally:
        os.kill(neighbour.pid, signal.SIGCONT)
        neighbour.kill()
        victim.kill()
    ratios = [blocks[i][1] / ((blocks[i - 1][1] + blocks[i + 1][1]) / 2) for i in range(1, len(blocks) - 1, 2)]
    ratio, low, high = t_interval([math.log(r) for r in ratios])
    alone = [b[1] for b in blocks if b[0] == "alone"]
    beside = [b[1] for b in blocks if b[0] == "neighbour"]
    print(
        json.dumps(
            {
                "victim": {
                    "framework": args.framework,
                    "model": args.model,
                    "batch": args.batch,
                    "threads": 1,
                    "cpu": args.victim_cpu,
                },
                "neighbour": dict(zip(("framework", "model", "batch"), neighbour_spec, strict=True))
                | {"threads": 1, "cpu": args.neighbour_cpu},
                "blocks_each": args.blocks,
                "block_s": args.block_s,
                "alone_img_s_median": statistics.median(alone),
                "alone_img_s_range": [min(alone), max(alone)],
                "beside_img_s_median": statistics.median(beside),
                "ratio_beside_over_alone": ratio,
                "ci95": [low, high],
                "ratios": ratios,
                "other_processes_cores_max": max(b[3] for b in blocks),
                "blocks_redone": redone,
                "wall_s": time.time() - started,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
