"""Reduce an XSpace (the `*.xplane.pb` JAX's and TensorFlow's profilers write) to the op-profile record.

Both frameworks run their step as one XLA program, and the profiler records each HLO instruction's execution as an
event carrying an `hlo_op` stat (its instruction name) and `hlo_module`. On the CPU those events lie on the host
plane, on the thread lines that run XLA's thunks (JAX: `tf_XLAPjRtCpuClient/...`; TensorFlow, checked on 2.21:
its calling thread, under the cluster's function call); an event's time is its self time on its line. On a GPU
they are the kernels on the `/device:GPU:N` plane's stream lines, each with the `hlo_op` that launched it; the
host's events are then not counted. Each instruction is mapped through the compiled module's HLO text when the
capture kept it, else by its name (fwbench.trackers.op_profile.xla_ops; TensorFlow's names through tf_ops too).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fwbench.trackers.op_profile import tf_ops, xla_ops
from fwbench.trackers.op_profile.categories import Totals, summarise

PROFILERS = {"jax": "jax.profiler", "tensorflow": "tf.profiler"}
CPU_BASIS = "host time of each XLA:CPU instruction's execution (self time per thread line)"
GPU_BASIS = "device kernel time (CUPTI) per HLO instruction that launched it"
# Lines the profiler's post-processing may add to a device plane: summaries of the stream lines, not more time.
DERIVED_LINES = frozenset(
    {
        "XLA Modules",
        "XLA Ops",
        "XLA TraceMe",
        "Steps",
        "Framework Ops",
        "Framework Name Scope",
        "Source code",
        "Launch Stats",
        "TensorFlow Ops",
        "TensorFlow Name Scope",
    }
)


def load(xspace: Any) -> Any:
    """A `jax.profiler.ProfileData` from one, from serialized bytes, or from a `.xplane.pb` (optionally `.gz`)."""
    from jax.profiler import ProfileData

    if isinstance(xspace, (bytes, bytearray)):
        return ProfileData.from_serialized_xspace(bytes(xspace))
    if isinstance(xspace, (str, Path)):
        path = Path(xspace)
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        return ProfileData.from_serialized_xspace(data)
    return xspace


def _stats(event: Any) -> dict[str, Any]:
    try:
        return dict(event.stats)
    except Exception:  # a stat whose value the binding cannot convert: ignore the event's stats, keep its time
        return {}


COMMAND_BUFFER = "command_buffer"


def device_kernels(profile: Any) -> list[tuple[str, str | None, float]]:
    """(kernel name, hlo_op or None, duration in us) of every kernel on the GPU planes' stream lines."""
    out = []
    for plane in profile.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        for line in plane.lines:
            if line.name in DERIVED_LINES:
                continue
            for event in line.events:
                hlo_op = _stats(event).get("hlo_op")
                out.append((event.name, None if hlo_op is None else str(hlo_op), event.duration_ns / 1000.0))
    return out


def host_instructions(profile: Any) -> list[tuple[str, float]]:
    """(hlo_op, self time in us) of every host event that carries an `hlo_op` stat: the instructions XLA:CPU ran.
    Per line, such events nest by their intervals, and an instruction's self time excludes the ones inside it."""
    out: list[tuple[str, float]] = []
    for plane in profile.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        for line in plane.lines:
            events = []
            for event in line.events:
                hlo_op = _stats(event).get("hlo_op")
                if hlo_op is not None:
                    events.append((float(event.start_ns), float(event.duration_ns), str(hlo_op)))
            events.sort(key=lambda e: (e[0], -e[1]))
            stack: list[list[Any]] = []  # [end, name, self]
            for start, dur, name in events:
                while stack and start >= stack[-1][0]:
                    _, done, own = stack.pop()
                    out.append((done, own / 1000.0))
                if stack:
                    stack[-1][2] -= min(dur, stack[-1][0] - start)
                stack.append([start + dur, name, dur])
            out.extend((name, own / 1000.0) for _, name, own in stack)
    return out


def instruction_category(name: str, framework: str, index: xla_ops.HloIndex | None) -> str | None:
    """An HLO instruction's category: the HLO text, the name's opcode words, then (TensorFlow) its TF op type."""
    found = xla_ops.category(name, index)
    if found is None and framework == "tensorflow":
        found = tf_ops.op_category(name)
    return found


def hlo_index(texts: str | Iterable[str] | None) -> xla_ops.HloIndex | None:
    if not texts:
        return None
    index = xla_ops.HloIndex()
    for text in [texts] if isinstance(texts, str) else texts:
        if text:
            index.add(text)
    return index if len(index) else None


def reduce_xspace(
    xspace: Any,
    *,
    framework: str,
    steps: int,
    hlo_text: str | Iterable[str] | None = None,
    profiled_step_ms: float | None = None,
    platform: str | None = None,
) -> dict[str, Any]:
    """The op-profile record of an XSpace over `steps` steps. `platform` None: "cuda" when a GPU plane holds
    kernels, else "cpu". `hlo_text`: the compiled module(s) the trace ran, to map fusions by what they fuse."""
    profile = load(xspace)
    index = hlo_index(hlo_text)
    kernels = device_kernels(profile)
    if platform is None:
        platform = "cuda" if kernels else "cpu"
    totals = Totals()
    if platform == "cuda":
        for kernel, hlo_op, dur in kernels:
            if hlo_op is None:  # a kernel no instruction claims (a copy, a library's helper): read its own name
                totals.add(kernel, xla_ops.target_category(kernel), dur)
            elif hlo_op.startswith(COMMAND_BUFFER):
                # XLA:GPU replays several instructions as one CUDA graph under one name (command_buffer_N): each
                # kernel in it is read by its own name, a fusion's (loop_add_fusion) or a library's (cuDNN, cuBLAS)
                # (library kernel names first: cuDNN's sm90_xmma_fprop_implicit_gemm is a convolution, not a GEMM)
                category = xla_ops.target_category(kernel) or instruction_category(kernel, framework, index)
                totals.add(kernel, category, dur)
            else:
                category = instruction_category(hlo_op, framework, index) or xla_ops.target_category(kernel)
                totals.add(hlo_op, category, dur)
    else:
        for name, own in host_instructions(profile):
            totals.add(name, instruction_category(name, framework, index), own)
    return summarise(
        totals,
        steps=steps,
        profiler=PROFILERS.get(framework, framework),
        platform=platform,
        time_basis=GPU_BASIS if platform == "cuda" else CPU_BASIS,
        profiled_step_ms=profiled_step_ms,
        extra={"hlo_text": index is not None},
    )
