"""Reduce a `torch.profiler` Chrome trace (the JSON `export_chrome_trace` writes) to the op-profile record.

The live capture and the recorded traces in tests go through this one reducer, so what the tests check is what a
cell records. On the CPU an op's time is its self time on the host (its duration minus its direct children's), so
`aten::conv2d` over `aten::convolution` over `aten::mkldnn_convolution` counts each wrapper's dispatch cost once
and the kernel's time once, never nested time twice. On a GPU an op's time is the device time of the kernels it
launched (CUPTI's kernel, memcpy and memset records), each tied to its launching op through the trace's
`External id`; host time is then not counted, and the step's wall time beyond the kernels is overhead.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from fwbench.trackers.op_profile import torch_ops
from fwbench.trackers.op_profile.categories import Totals, summarise

HOST_OP_CATEGORIES = ("cpu_op", "Operator", "operator")
DEVICE_CATEGORIES = ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset")
CPU_BASIS = "host op self time (torch.profiler CPU activity; nested ops counted once)"
GPU_BASIS = "device kernel time (torch.profiler CUDA activity via CUPTI), attributed to the launching op"


def load(trace: str | Path | dict[str, Any]) -> dict[str, Any]:
    """A Chrome trace as a dict, from a dict, a `.json` or a `.json.gz` file."""
    if isinstance(trace, dict):
        return trace
    path = Path(trace)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def _complete(events: list[dict[str, Any]], categories: tuple[str, ...]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in categories and "dur" in e]


def host_self_times(events: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """(name, self time in us) of every host op: per thread, ops nest by their intervals, and an op's self time is
    its duration less its direct children's."""
    threads: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for event in _complete(events, HOST_OP_CATEGORIES):
        threads[(event.get("pid"), event.get("tid"))].append(event)
    out: list[tuple[str, float]] = []
    for ops in threads.values():
        ops.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        stack: list[list[Any]] = []  # [end, name, self]
        for event in ops:
            start, dur = float(event["ts"]), float(event["dur"])
            while stack and start >= stack[-1][0]:
                _, name, own = stack.pop()
                out.append((name, own))
            if stack:
                stack[-1][2] -= min(dur, stack[-1][0] - start)
            stack.append([start + dur, event["name"], dur])
        out.extend((name, own) for _, name, own in stack)
    return out


def _reduce_cpu(events: list[dict[str, Any]]) -> Totals:
    totals = Totals()
    for name, own in host_self_times(events):
        totals.add(name, torch_ops.op_category(name), own)
    return totals


def _reduce_gpu(events: list[dict[str, Any]]) -> Totals:
    ops = {
        e["args"]["External id"]: e["name"]
        for e in _complete(events, HOST_OP_CATEGORIES)
        if "External id" in e.get("args", {})
    }
    totals = Totals()
    for kernel in _complete(events, DEVICE_CATEGORIES):
        name, dur = kernel["name"], float(kernel["dur"])
        op = ops.get(kernel.get("args", {}).get("External id"))
        override = torch_ops.kernel_override(name)
        if op is None:
            category = torch_ops.kernel_category(name)
            totals.add(torch_ops.short_kernel(name) if category else name, category, dur)
        elif override is not None:
            totals.add(f"{op}/{torch_ops.short_kernel(name)}", override, dur)
        else:
            category = torch_ops.op_category(op) or torch_ops.kernel_category(name)
            totals.add(op, category, dur)
    return totals


def reduce_trace(
    trace: str | Path | dict[str, Any],
    *,
    steps: int,
    profiled_step_ms: float | None = None,
    platform: str | None = None,
) -> dict[str, Any]:
    """The op-profile record of a torch.profiler Chrome trace over `steps` steps. `platform` None: "cuda" when the
    trace holds device kernels, else "cpu"."""
    events = load(trace).get("traceEvents", [])
    if platform is None:
        platform = "cuda" if _complete(events, DEVICE_CATEGORIES) else "cpu"
    totals = _reduce_gpu(events) if platform == "cuda" else _reduce_cpu(events)
    return summarise(
        totals,
        steps=steps,
        profiler="torch.profiler",
        platform=platform,
        time_basis=GPU_BASIS if platform == "cuda" else CPU_BASIS,
        profiled_step_ms=profiled_step_ms,
    )
