"""Run a cell's steps under its framework's own profiler and reduce what it wrote (`profile_steps`).

Each framework is profiled with the tool its users would reach for, so the names in the record are the ones its
documentation uses: `torch.profiler` (CPU activity, and CUDA on a GPU) exported as a Chrome trace, JAX's and
TensorFlow's profilers writing an XSpace. The trace goes through the same reducer the recorded traces in the tests
do (torch_trace, xspace). The wall time per step while profiling is kept beside the ops' time, so the profiler's
own cost (and the framework's overhead between ops) stays visible against the timed median.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fwbench.trackers.op_profile import torch_trace, xspace


def _timed(step: Callable[[], Any], steps: int) -> float:
    """Milliseconds per step of `steps` calls of `step` (each synchronised by the caller's step)."""
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) * 1000.0 / steps


def hlo_text(backend: Any, inputs: Any = None) -> str | None:
    """The backend's compiled program for `inputs` (None: the last it compiled) as HLO text, or None where it has
    none or cannot say (the reducer then maps instructions by their names). A warm worker compiled one program per
    batch size, so the profiled one is named by its inputs."""
    method = getattr(backend, "compiled_hlo_text", None)
    if method is None:
        return None
    try:
        return method(inputs)
    except Exception:  # an optional aid: the profile is still made from the instruction names
        return None


def _profile_torch(step: Callable[[], Any], steps: int, platform: str, workdir: Path) -> dict[str, Any]:
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    if platform == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        step_ms = _timed(step, steps)
    trace = workdir / "trace.json"
    prof.export_chrome_trace(str(trace))
    return torch_trace.reduce_trace(trace, steps=steps, profiled_step_ms=step_ms, platform=platform)


def _xplane(workdir: Path) -> Path:
    found = sorted(workdir.rglob("*.xplane.pb"))
    if not found:
        raise RuntimeError(f"the profiler wrote no *.xplane.pb under {workdir}")
    return found[-1]


def _trace_jax(step: Callable[[], Any], steps: int, workdir: Path) -> float:
    import jax

    with jax.profiler.trace(str(workdir)):
        return _timed(step, steps)


def _trace_tensorflow(step: Callable[[], Any], steps: int, workdir: Path) -> float:
    import tensorflow as tf

    tf.profiler.experimental.start(str(workdir))
    try:
        return _timed(step, steps)
    finally:
        tf.profiler.experimental.stop()


# The frameworks whose profiler writes an XSpace into a directory; each returns the wall ms per step while tracing.
XSPACE_TRACERS: dict[str, Callable[[Callable[[], Any], int, Path], float]] = {
    "jax": _trace_jax,
    "tensorflow": _trace_tensorflow,
}


def profile_steps(backend: Any, step: Callable[[], Any], steps: int, inputs: Any = None) -> dict[str, Any]:
    """Run `steps` calls of `step` (one synchronised forward step, returning nothing) under `backend`'s framework
    profiler and return the reduced record (categories, top ops, unmapped names; see docs/op-profile.md).

    The caller has built, compiled and warmed the model with the profiled shape (`inputs`, which names the compiled
    program whose HLO maps the ops): compilation inside the profiled window would be counted as the step's time."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    platform = str(backend.device_info().get("platform", "cpu"))
    with tempfile.TemporaryDirectory(prefix="fwbench-op-profile-") as directory:
        workdir = Path(directory)
        if backend.name == "torch":
            return _profile_torch(step, steps, platform, workdir)
        tracer = XSPACE_TRACERS.get(backend.name)
        if tracer is None:
            raise ValueError(f"no profiler for framework {backend.name!r}")
        step_ms = tracer(step, steps, workdir)
        return xspace.reduce_xspace(
            _xplane(workdir),
            framework=backend.name,
            steps=steps,
            hlo_text=hlo_text(backend, inputs),
            profiled_step_ms=step_ms,
            platform=platform,
        )
