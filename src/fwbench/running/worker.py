"""The measuring child process: `python -m fwbench.running.worker SPEC.json OUT.json`.

It pins threads before importing any framework, imports only the framework it measures, runs the scenario and
writes its part of the result atomically. Any exception propagates (non-zero exit, traceback on stderr): turning it
into a recorded failure is the supervising runner's job, so a crash in native code is handled the same way.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from fwbench.io import atomic_write_json, read_json
from fwbench.running.threads import pin_threads

SPAWNED_AT = "FWBENCH_SPAWNED_AT"  # the runner's wall clock when it started this process (fwbench.running.runner)


def _since_spawn(now: float) -> float | None:
    spawned = os.environ.get(SPAWNED_AT)
    return now - float(spawned) if spawned else None


def main(spec_path: str, out_path: str) -> None:
    """Phases of the process's own time go into metrics.phases_s (start-up, imports, the scenario's phases), so the
    study's time report can say where a cell's wall time went beside its timed work
    (fwbench.analysis.time.study_time)."""
    phases: dict[str, float | None] = {"process_start_s": _since_spawn(time.time())}
    faulthandler.enable()  # a crash in native code leaves the Python stack in the output the runner keeps
    spec = read_json(spec_path)
    threads = pin_threads(int(spec["threads"]), spec.get("cpus"))
    # JAX would otherwise grab 75% of GPU memory up front, making its memory figures incomparable with PyTorch's.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    cache = spec["settings"].get("jax_compilation_cache")
    if cache:  # read by JAX at import; every compilation is cached so warm runs skip them all
        os.environ["JAX_COMPILATION_CACHE_DIR"] = str(cache)
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"

    from fwbench.running.faults import inject
    from fwbench.study.grid import Cell

    # A warm worker may serve several cells: every cell of its framework and mode its launch measures (its suite's
    # `share_workers` scope, fwbench.scenarios.served), which share its imports and its blocks; a profiling pass or a
    # training cell is one cell.
    cells = [Cell(**fields) for fields in spec["cells"]] if "cells" in spec else [Cell(**spec["cell"])]
    cell = cells[0]
    options, scratch_cache = compiler_environment(cell, spec["settings"])
    on_gpu = ((spec.get("device") or {}).get("record") or {}).get("platform") == "cuda"
    if spec.get("profile") and torch_compiled(cell) and not on_gpu:
        # Inductor's C++ kernels are invisible to torch.profiler unless they record themselves: without this their
        # time is one opaque compiled-graph span (docs/op-profile.md). It changes the generated code, so this
        # process compiles cold rather than from the cell's cache. On a GPU its Triton kernels are CUDA kernels,
        # which the profiler sees anyway.
        os.environ["TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"] = "1"
    labels = ", ".join(c.label() for c in cells)
    print(f"[fwbench.running.worker] {labels} threads={threads['effective']}", file=sys.stderr, flush=True)
    for each in cells:  # test-only; does nothing unless FWBENCH_INJECT_FAULT is set
        inject(each.label(), spec["settings"], out_path)

    t0 = time.perf_counter()
    from fwbench.backends import get_backend
    from fwbench.scenarios import inference, micro, profile, training

    t1 = time.perf_counter()
    backend = get_backend(cell.framework, threads=threads["effective"], precision=cell.precision, **options)
    import_and_setup_s = time.perf_counter() - t1
    backend.model_cache_dir = Path(spec["weights_path"]).parent
    phases.update(harness_imports_s=t1 - t0, framework_import_s=import_and_setup_s)
    if spec.get("device") and not backend.host_only:  # the study's device check said where every cell computes
        from fwbench.running.devices import verify

        verify(spec["device"]["record"], backend.device_info(), spec["device"]["expected_name"])
    # One backend instance per unit a cell belongs to (a model at a precision; an operation's cells share their
    # precision's): each holds its model, its compiled programs and its precision (fwbench.scenarios.served).
    instances: dict[tuple, object] = {unit_key(cell): backend}

    def backend_for(one: Cell):
        key = unit_key(one)
        if key not in instances:
            made = get_backend(one.framework, threads=threads["effective"], precision=one.precision, **options)
            made.model_cache_dir = backend.model_cache_dir
            instances[key] = made
        return instances[key]

    common = {
        "data_dir": spec["data_dir"],
        "weights_path": spec.get("weights_paths") or spec["weights_path"],
        "num_classes": int(spec["num_classes"]),
    }
    frameworks: dict[tuple, dict] = {}

    def framework_of(one: Cell) -> dict:
        """The framework record of the backend instance that ran `one` (its precision's settings, its model's)."""
        key = unit_key(one)
        instance = instances.get(key, backend)
        if key not in frameworks:
            frameworks[key] = {
                "name": instance.name,
                "versions": instance.versions(),
                "device": instance.device_info(),
                "settings": instance.effective_settings,
                "threads": threads,
                "setup_s": import_and_setup_s,
            }
        return frameworks[key]

    def write(parts: list[dict]) -> None:
        """The process's result, atomically; a worker that profiles after its blocks writes it twice (the timed
        result first, fwbench.scenarios.profiled)."""
        for one, part in zip(cells, parts, strict=True):
            if "metrics" in part:
                part["framework"] = framework_of(one)
        # The process's own phases (start-up, imports, writing) belong to its first measured cell, so that a
        # process's phases add up once over the cells it served (fwbench.analysis.time.study_time).
        first = next((part for part in parts if "metrics" in part), None)
        if first is not None:
            phases.update(first["metrics"].get("phases_s") or {})
            phases["until_result_s"] = _since_spawn(time.time())  # the rest of the process's wall time
            first["metrics"]["phases_s"] = phases
        atomic_write_json(out_path, {"parts": parts} if "cells" in spec else parts[0])

    single = {**common, "weights_path": spec["weights_path"]}
    if spec.get("profile"):  # the cell's profiling pass in a process of its own (fwbench.running.profiling)
        parts = [profile.run(backend, cell, spec["settings"], **single)]
    elif cell.suite == "micro":
        parts = micro.run_cells(backend_for, cells, spec["settings"], operands_path=spec["weights_path"])
    elif cell.suite == "inference":
        parts = inference.run_cells(backend_for, cells, spec["settings"], **common, keep=write)
    elif cell.suite == "training":
        parts = [training.run(backend, cell, spec["settings"], state_dir=spec["state_dir"], **single)]
    else:
        raise ValueError(f"suite {cell.suite!r} has no scenario")
    write(parts)
    if scratch_cache:
        shutil.rmtree(scratch_cache, ignore_errors=True)


def unit_key(cell) -> tuple:
    """The backend instance a cell runs on in a worker serving several: one per model and precision (inference, each
    holding its model), one per precision (micro operations share their framework's primitives)."""
    return (cell.precision,) if cell.suite == "micro" else (cell.model, cell.precision)


def torch_compiled(cell) -> bool:
    """Whether the cell runs torch.compile (modes compile and cudagraphs), so Inductor compiles in its process."""
    from fwbench.study.modes import TORCH_COMPILED_MODES

    return cell.framework == "torch" and cell.mode in TORCH_COMPILED_MODES


def compiler_environment(cell, settings: dict) -> tuple[dict, str | None]:
    """Set what the frameworks read from the environment at import for the study's compile and autotune settings,
    and return the backend's options (mode, autotune, compile, memory format) and the scratch cache directory to
    remove once the result is written, if any. XLA_FLAGS carries the autotune level for JAX and TensorFlow
    (fwbench.study.autotune). A compiled PyTorch cell (`torch_compiled`) gets the study's Inductor cache, or, with
    none, a fresh empty directory of its own: every compilation cold, as JAX's without its cache, and never the warm
    default directory another study (or an earlier run) left in /tmp. Where the runner gives the cell a launch cache
    (fwbench.backends.launch_cache), every framework's persistent cache points at it instead: cold in the cell's first
    launch, warm in its later ones."""
    from fwbench.backends import launch_cache
    from fwbench.backends.torch_compile import FRESH_CACHE_ENV, INDUCTOR_CACHE_ENV  # no framework import
    from fwbench.study.autotune import xla_flags
    from fwbench.study.modes import autotune_setting

    setting = autotune_setting(settings.get("autotune", "on"))
    compile_options = dict(settings.get("compile") or {})
    flags = xla_flags(os.environ.get("XLA_FLAGS", ""), setting)
    if flags:
        os.environ["XLA_FLAGS"] = flags
    else:
        os.environ.pop("XLA_FLAGS", None)
    options = {
        "mode": cell.mode,
        "autotune": setting,
        "compile_options": compile_options,
        "memory_format": dict(settings.get("memory_format") or {}),
    }
    if launch_cache.apply(cell.framework, cell.mode, settings):  # this cell's own cache across its launches
        return options, None
    if not torch_compiled(cell):  # an eager process compiles nothing
        return options, None
    directory = compile_options.get("inductor_cache")
    if directory:
        os.environ[INDUCTOR_CACHE_ENV] = str(directory)
        os.environ.pop(FRESH_CACHE_ENV, None)
        return options, None
    fresh = tempfile.mkdtemp(prefix="fwbench-inductor-")
    os.environ[INDUCTOR_CACHE_ENV] = os.environ[FRESH_CACHE_ENV] = fresh
    return options, fresh


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m fwbench.running.worker SPEC.json OUT.json")
    main(sys.argv[1], sys.argv[2])
    # The result is written (atomically): skip the interpreter's teardown, which spends ~0.7 s of every torch or JAX
    # process's wall time in destructors and module cleanup (measured; docs/time-to-report.md).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
