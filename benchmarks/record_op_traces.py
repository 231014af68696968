"""Record raw profiler traces of fwbench's own model twins, for the op-profile mapping tests (issue 35).

Builds each model through fwbench's backends (the same build, device placement and compile as a cell), runs a
few forward steps under the framework's profiler, and keeps what the profiler wrote in the form the study's
profiling pass reads: PyTorch's Chrome trace (`torch.profiler`, CPU and CUDA activities) and the XSpace protobuf
of JAX and TensorFlow (`*.xplane.pb`), each gzipped, plus a small JSON of what was recorded (device, versions,
steps). Run on a GPU machine, the files are the recorded CUDA traces `tests/data/op_traces/` keeps; on a CPU,
the CPU ones.

    python benchmarks/record_op_traces.py --out DIR --models small_cnn resnet50 --frameworks torch jax
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def _state_dict(model: str, num_classes: int, image_size: int) -> dict:
    from fwbench.models import torch_model, torch_state_dict_numpy

    return torch_state_dict_numpy(torch_model(model, num_classes=num_classes, image_size=image_size))


def _record(framework: str, mode: str, model: str, batch: int, image_size: int, steps: int, out: Path) -> dict:
    from fwbench.backends import get_backend

    backend = get_backend(framework, threads=os.cpu_count() or 1, precision="fp32", mode=mode)
    backend.build(model, _state_dict(model, 10, image_size), num_classes=10, image_size=image_size)
    rng = np.random.default_rng(0)
    inputs = backend.to_device(rng.standard_normal((batch, image_size, image_size, 3), dtype=np.float32))
    started = time.perf_counter()
    backend.compile(inputs)
    compile_s = time.perf_counter() - started
    for _ in range(3):  # warm-up with the profiled shape
        backend.synchronize(backend.forward(inputs))
    stem = f"{framework}-{mode}-{model}-bs{batch}-{image_size}px"
    hlo_file, profiled_s = None, None
    started = time.perf_counter()
    if framework == "torch":
        import torch

        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(steps):
                backend.synchronize(backend.forward(inputs))
        raw = Path(tempfile.mkdtemp()) / "trace.json"
        prof.export_chrome_trace(str(raw))
        target = out / f"{stem}.trace.json.gz"
    else:
        logdir = Path(tempfile.mkdtemp())
        if framework == "jax":
            import jax

            with jax.profiler.trace(str(logdir)):
                for _ in range(steps):
                    backend.synchronize(backend.forward(inputs))
        else:
            import tensorflow as tf

            tf.profiler.experimental.start(str(logdir))
            for _ in range(steps):
                backend.synchronize(backend.forward(inputs))
            tf.profiler.experimental.stop()
        profiled_s = time.perf_counter() - started
        raw = next(logdir.rglob("*.xplane.pb"))
        target = out / f"{stem}.xplane.pb.gz"
        hlo = backend.compiled_hlo_text()  # what each fusion fuses, for the reducer (xla_ops.HloIndex)
        if hlo:
            hlo_file = f"{stem}.hlo.txt.gz"
            with gzip.open(out / hlo_file, "wt", encoding="utf-8") as dst:
                dst.write(hlo)
    if profiled_s is None:
        profiled_s = time.perf_counter() - started
    with raw.open("rb") as src, gzip.open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return {
        "file": target.name,
        "hlo_file": hlo_file,
        "framework": framework,
        "mode": mode,
        "model": model,
        "batch_size": batch,
        "image_size": image_size,
        "steps": steps,
        "compile_s": round(compile_s, 3),
        "profiled_s": round(profiled_s, 3),
        "device": backend.device_info(),
        "versions": backend.versions(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", nargs="+", default=["small_cnn"])
    parser.add_argument("--runs", nargs="+", default=["torch:eager", "jax:jit"], help="FRAMEWORK:MODE")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    recorded = []
    for model in args.models:
        for run in args.runs:
            framework, _, mode = run.partition(":")
            try:
                recorded.append(_record(framework, mode, model, args.batch, args.image_size, args.steps, out))
                print("recorded", recorded[-1]["file"], recorded[-1]["profiled_s"], flush=True)
            except Exception as exc:  # keep the others: one failure is a finding, not a reason to stop
                recorded.append({"framework": framework, "mode": mode, "model": model, "error": repr(exc)[:2000]})
                print("FAILED", framework, mode, model, repr(exc)[:500], flush=True)
    (out / "recorded.json").write_text(json.dumps(recorded, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
