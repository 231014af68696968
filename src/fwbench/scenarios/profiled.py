"""Which inference cells a study profiles, and the profiling pass a warm worker runs after its blocks.

A profiler slows what it watches, so it never shares a window with timed work. Where it can, the pass runs in the
warm worker of the cell's last launch once every block of that launch has ended (`after_blocks`): the controller asks
each worker in turn, with its finish command (fwbench.running.launches), so no other worker computes meanwhile, and
the worker writes its timed result before the profiler starts, so a profiler that crashes costs the profile, never
what was measured. That worker already holds the model, its weights and its compiled programs: the pass costs its
steps, not another process's start-up, imports, load and compile (230 s of the default study on the Zen 3 VM were
such processes). A `torch.compile` cell on the CPU is the exception (`in_worker`): its profile needs Inductor's C++
kernels compiled to record themselves, a different program, so the runner starts one more process for it
(fwbench.scenarios.profile.run, fwbench.running.profiling).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from fwbench.backends.base import Backend
from fwbench.study.grid import Cell
from fwbench.study.modes import TORCH_COMPILED_MODES
from fwbench.trackers.op_profile import profile_steps


def profiled(cell: Cell, settings: Mapping[str, Any]) -> bool:
    """Whether the study profiles this cell: an inference cell at one of `inference.profile.batch_sizes`."""
    profile = settings.get("profile") or {}
    return cell.suite == "inference" and cell.batch_size in (profile.get("batch_sizes") or [])


def in_worker(cell: Cell, settings: Mapping[str, Any], *, on_gpu: bool) -> bool:
    """Whether this profiled cell is profiled in its last launch's worker: every one but a torch.compile cell (modes
    compile and cudagraphs) on the CPU, whose kernel-level profile needs a compile of its own
    (TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE)."""
    torch_compiled = cell.framework == "torch" and cell.mode in TORCH_COMPILED_MODES
    return profiled(cell, settings) and (on_gpu or not torch_compiled)


WHERE_IN_WORKER = "in the worker of the cell's last launch, after its timed blocks"


def warm_and_profile(backend: Backend, inputs: Any, settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict]:
    """The pass itself, wherever it runs, on a compiled program: `warmup_iters` steps on `inputs`, then
    `inference.profile.steps` steps under the framework's profiler. Returns (the reduced record, its phases)."""
    started = time.perf_counter()
    for _ in range(int(settings["warmup_iters"])):
        backend.synchronize(backend.forward(inputs))
    warm = time.perf_counter()

    def step() -> None:
        backend.synchronize(backend.forward(inputs))

    record = profile_steps(backend, step, int(settings["profile"]["steps"]), inputs=inputs)
    return record, {"warmup_s": warm - started, "profile_s": time.perf_counter() - warm}


def after_blocks(backend: Backend, inputs: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Profile a cell in the warm worker that just timed it (`in_worker`), on the timed cell's first warm batch,
    warmed up again (the other workers' bursts ran since its own last one). Returns the cell's `metrics.op_profile`
    record; a profiler that raises is recorded as a failed pass."""
    started = time.perf_counter()
    try:
        record, phases = warm_and_profile(backend, inputs, settings)
    except Exception as exc:  # the timed result stands; the pass says why it has no profile
        return {
            "status": "failed",
            "reason": f"{type(exc).__name__}: {exc}",
            "kind": "profiler",
            "where": WHERE_IN_WORKER,
            "profiling_s": time.perf_counter() - started,
        }
    return {
        "status": "ok",
        **record,
        "where": WHERE_IN_WORKER,
        "phases_s": phases,
        "profiling_s": time.perf_counter() - started,
    }
