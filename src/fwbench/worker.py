"""The measuring child process: `python -m fwbench.worker SPEC.json OUT.json`.

It pins threads before importing any framework, imports only the framework it measures, runs the scenario and
writes its part of the result atomically. Any exception propagates (non-zero exit, traceback on stderr): turning it
into a recorded failure is the supervising runner's job, so a crash in native code is handled the same way.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import time

from fwbench.io import atomic_write_json, read_json
from fwbench.threads import pin_threads


def main(spec_path: str, out_path: str) -> None:
    faulthandler.enable()  # a crash in native code leaves the Python stack in the output the runner keeps
    spec = read_json(spec_path)
    threads = pin_threads(int(spec["threads"]), spec.get("cpus"))
    # JAX would otherwise grab 75% of GPU memory up front, making its memory figures incomparable with PyTorch's.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    cache = spec["settings"].get("jax_compilation_cache")
    if cache:  # read by JAX at import; every compilation is cached so warm runs skip them all
        os.environ["JAX_COMPILATION_CACHE_DIR"] = str(cache)
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"

    from fwbench.faults import inject
    from fwbench.grid import Cell

    cell = Cell(**spec["cell"])
    print(f"[fwbench.worker] {cell.label()} threads={threads['effective']}", file=sys.stderr, flush=True)
    inject(cell.label(), spec["settings"], out_path)  # test-only; does nothing unless FWBENCH_INJECT_FAULT is set

    from fwbench.backends import get_backend
    from fwbench.scenarios import inference, training

    t0 = time.perf_counter()
    backend = get_backend(cell.framework, threads=threads["effective"], precision=cell.precision)
    import_and_setup_s = time.perf_counter() - t0
    if spec.get("device"):  # the study's device check said where every cell computes: fail rather than drift
        from fwbench.devices import verify

        verify(spec["device"]["record"], backend.device_info(), spec["device"]["expected_name"])
    common = {
        "data_dir": spec["data_dir"],
        "weights_path": spec["weights_path"],
        "num_classes": int(spec["num_classes"]),
    }
    if cell.suite == "inference":
        part = inference.run(backend, cell, spec["settings"], **common)
    elif cell.suite == "training":
        part = training.run(backend, cell, spec["settings"], state_dir=spec["state_dir"], **common)
    else:
        raise ValueError(f"suite {cell.suite!r} has no scenario")
    part["framework"] = {
        "name": backend.name,
        "versions": backend.versions(),
        "device": backend.device_info(),
        "settings": backend.effective_settings,
        "threads": threads,
        "setup_s": import_and_setup_s,
    }
    atomic_write_json(out_path, part)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m fwbench.worker SPEC.json OUT.json")
    main(sys.argv[1], sys.argv[2])
