"""The profiling pass of an inference cell in a process of its own: where its forward step spends its time.

Most profiled cells are profiled by their own warm worker after its blocks (fwbench.scenarios.profiled). This is the
pass for the others (a `torch.compile` cell on the CPU): the runner starts it as one more process of the cell
(fwbench.running.profiling) after the cell's timed launches, with the cell's own compile cache. Everything else is
the timed cell's: the model and its weights, the first warm input batch (the same bytes, at the timed shape), the
compile, a warm-up of `warmup_iters` steps at that shape. Then `inference.profile.steps` steps run under the
framework's own profiler and fwbench.trackers.op_profile reduces the trace to time per step by operation category
(docs/op-profile.md). The profiled step time is kept beside the timed median by the analysis, so the profiler's own
overhead is visible.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fwbench.backends.base import Backend
from fwbench.scenarios.inference import build_cell, input_buffers
from fwbench.scenarios.profiled import profiled, warm_and_profile
from fwbench.study.grid import Cell

__all__ = ["profiled", "run"]


def run(
    backend: Backend,
    cell: Cell,
    settings: Mapping[str, Any],
    *,
    data_dir: str | Path,
    weights_path: str | Path,
    num_classes: int,
) -> dict[str, Any]:
    """Profile one inference cell; returns the `metrics` part the runner keeps as the cell's `metrics.op_profile`."""
    started = time.perf_counter()
    images = build_cell(backend, cell, data_dir=data_dir, weights_path=weights_path, num_classes=num_classes)
    (inputs,), _ = input_buffers(backend, images, cell.batch_size, cold=False)  # the timed cell's first warm batch
    built = time.perf_counter()
    backend.compile(inputs)
    compiled = time.perf_counter()
    record, phases = warm_and_profile(backend, inputs, settings)
    phases = {"preparation_s": built - started, "compile_s": compiled - built, **phases}
    return {"metrics": {"op_profile": record, "phases_s": phases}}
