"""Test-only fault injection into measuring children, so that tests can drive every fault the study must survive.

`FWBENCH_INJECT_FAULT="FAULT[@CELL_GLOB][,FAULT[@CELL_GLOB]...]"` in the environment of the runner makes each
measuring child whose cell label (`inference/jax/small_cnn/fp32/bs2`) matches the glob (every cell without one)
misbehave right after it starts, before it imports a framework. The workflow never sets it; unset, this module does
nothing. A result measured while it was set records it (provenance.injected_faults).

Faults: `raise` (a Python exception), `segfault` (SIGSEGV in native code), `host_alloc` (allocate and touch memory
until the cell's max_host_mb limit stops it; refused without a limit), `hang` (sleep past the timeout),
`no_result` (exit 0 without writing a result), `truncated_result` (exit 0 after writing half a result),
`device_oom` (fail as CUDA does when the device is full), `compiler` (fail as an XLA compilation does), and
`autotune_once` (fail with an XLA-autotuner-like error unless XLA_FLAGS turns autotuning off, i.e. succeed under
the `xla_autotune_off` workaround and measure normally), and `wrong_operation` (a micro cell's operation returns
its result scaled by 1.01 in the framework, not in the float64 reference: the agreement check must fail the cell
before anything is timed), and `other_load` (the first process of the group to start with it runs a busy process
beside itself for its whole life: another program's load on the machine during one launch, which
fwbench.running.launches must run again), and `profiler_crash` (a warm worker asked to profile its cells after its
blocks crashes in native code once it has written its timed result: the result must stand, the profile fail).
"""

from __future__ import annotations

import ctypes
import fnmatch
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

INJECT_FAULT_ENV = "FWBENCH_INJECT_FAULT"
FAULTS = (
    "raise",
    "segfault",
    "host_alloc",
    "hang",
    "no_result",
    "truncated_result",
    "device_oom",
    "compiler",
    "autotune_once",
    "wrong_operation",
    "other_load",
    "profiler_crash",
)
AUTOTUNE_OFF = "--xla_gpu_autotune_level=0"
_CHUNK = 32 * 1024 * 1024


def parse(value: str) -> list[tuple[str, str]]:
    """[(fault, cell glob)] from the variable's value; an unknown fault is an error naming it."""
    out = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        fault, _, glob = item.partition("@")
        if fault not in FAULTS:
            raise ValueError(f"{INJECT_FAULT_ENV}: unknown fault {fault!r} (one of {', '.join(FAULTS)})")
        out.append((fault, glob or "*"))
    return out


def fault_for(label: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """The first injected fault whose glob matches this cell, or None (always None when the variable is unset)."""
    value = environ.get(INJECT_FAULT_ENV)
    if not value:
        return None
    for fault, glob in parse(value):
        if fnmatch.fnmatchcase(label, glob):
            return fault
    return None


def inject(label: str, settings: Mapping[str, Any], out_path: str | Path) -> None:
    """Misbehave as told for this cell, or return at once to let it measure normally."""
    fault = fault_for(label)
    if fault is None:
        return
    print(f"[fwbench.running.faults] injecting {fault} into {label}", file=sys.stderr, flush=True)
    if fault == "raise":
        raise RuntimeError(f"injected fault: raise in {label}")
    if fault == "segfault":
        ctypes.string_at(0)  # reads address 0: SIGSEGV in native code
    if fault == "host_alloc":
        _allocate_until_stopped(settings.get("max_host_mb"))
    if fault == "hang":
        time.sleep(10**6)
    if fault == "no_result":
        sys.stderr.flush()
        os._exit(0)
    if fault == "truncated_result":
        Path(out_path).write_text('{"metrics": {"throughput_img_s": 12', encoding="utf-8")
        sys.stderr.flush()
        os._exit(0)
    if fault == "device_oom":
        raise RuntimeError(
            "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB (injected)"
        )
    if fault == "compiler":
        raise RuntimeError("XlaRuntimeError: INTERNAL: ptxas exited with non-zero error code 255 (injected)")
    if fault == "wrong_operation":
        _perturb_operations()
    if fault == "other_load":
        _load_once(Path(out_path).parent)
    if fault == "profiler_crash":
        _crash_in_profiler()
    if fault == "autotune_once" and AUTOTUNE_OFF not in os.environ.get("XLA_FLAGS", ""):
        raise RuntimeError(
            "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to autotune: gemm_algorithm_picker: "
            "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered (injected)"
        )


def _load_once(group_dir: Path) -> None:
    """Spin one core in a process of its own while this process lives, if no process of the group did before (a
    marker in the group's directory): the busy process leaves once its parent is gone."""
    try:
        os.close(os.open(group_dir / "other_load-injected", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    import subprocess

    parent = os.getpid()
    busy = f"import os\nwhile os.getppid() == {parent}:\n    sum(range(10000))\n"
    subprocess.Popen([sys.executable, "-c", busy], start_new_session=True)


def _crash_in_profiler() -> None:
    """The profiling pass after the blocks (fwbench.scenarios.profiled.after_blocks) dies in native code."""
    from fwbench.scenarios import profiled

    def crash(*_args, **_kwargs):
        ctypes.string_at(0)

    profiled.after_blocks = crash


def _perturb_operations() -> None:
    """Every micro operation computes 1.01 times its result from here on, in whichever framework runs it; the
    float64 reference (fwbench.scenarios.operations.reference) still computes the definition."""
    import dataclasses

    from fwbench.scenarios import operations

    def scaled(function):
        def wrong(arrays, x, params):
            out = function(arrays, x, params)
            return out if arrays.dtype == "float64" else out * 1.01

        return wrong

    for name, op in operations.OPERATIONS.items():
        operations.OPERATIONS[name] = dataclasses.replace(op, function=scaled(op.function))


def _allocate_until_stopped(limit_mb: Any) -> None:
    """Touch memory in chunks until the limit stops the process; never run without a limit (it would take the
    machine), and give up at four times the limit so a limit that does not hold cannot either."""
    if not limit_mb:
        raise RuntimeError("injected host_alloc needs the suite's max_host_mb limit; refusing to run without one")
    hoard = []
    while len(hoard) * _CHUNK < 4 * int(limit_mb) * 1024 * 1024:
        hoard.append(b"\x01" * _CHUNK)  # written, so resident, not just reserved
    raise RuntimeError(f"injected host_alloc: {len(hoard) * _CHUNK >> 20} MB allocated and the limit did not hold")
