"""Per-step Python overhead of the harness's timed JAX step, against calling the compiled executable directly.

The timed Flax step must be a compiled pure function: no module-tree walk, no re-tracing, no pytree flattening
beyond what XLA's executable call itself needs. This script times, interleaved in blocks, at batch 1:

  bare      compiled(variables, x).block_until_ready()       (the AOT executable, called directly)
  harness   backend.forward(x); backend.synchronize(out)       (what every JAX inference cell times)
  jit       jax.jit(module.apply)(variables, x)               (a plain jitted call, for scale: dispatch + cache lookup)

and reports median step times and the harness's overhead over bare. Target: overhead <= 5% for
mobilenet_v3_small at the default study's resolution.

    .venv/bin/python benchmarks/twin_overhead.py [--model mobilenet_v3_small] [--image-size 32] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v3_small")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--steps", type=int, default=50, help="steps per block")
    args = parser.parse_args()

    from fwbench.running.threads import pin_threads

    pin_threads(args.threads)
    import jax
    import numpy as np
    import torch

    from fwbench.backends import get_backend
    from fwbench.models import torch_model, torch_state_dict_numpy

    torch.manual_seed(0)
    state = torch_state_dict_numpy(torch_model(args.model, num_classes=10, image_size=args.image_size))
    backend = get_backend("jax", threads=args.threads, precision="fp32")
    backend.build(args.model, state, num_classes=10, image_size=args.image_size)
    x = backend.to_device(np.zeros((1, args.image_size, args.image_size, 3), np.float32))
    backend.compile(x)
    compiled, variables, module = backend.executable, backend.variables, backend.module
    jitted = jax.jit(lambda v, inputs: module.apply(v, inputs, train=False))

    def bare():
        compiled(variables, x).block_until_ready()

    def harness():
        backend.synchronize(backend.forward(x))

    def plain_jit():
        jitted(variables, x).block_until_ready()

    variants = {"bare": bare, "harness": harness, "jit": plain_jit}
    for step in variants.values():  # warm up every path with the measured shapes
        for _ in range(20):
            step()
    per_step = {name: [] for name in variants}
    for _ in range(args.blocks):
        for name, step in variants.items():
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step()
            per_step[name].append((time.perf_counter() - t0) / args.steps * 1e6)
    medians = {name: statistics.median(values) for name, values in per_step.items()}
    print(
        f"{args.model}, batch 1, {args.image_size} px, {args.threads} threads, "
        f"{args.blocks} interleaved blocks x {args.steps} steps (median of block means)"
    )
    print(f"{'variant':<10} {'us/step':>10} {'vs bare':>9}")
    for name, value in medians.items():
        print(f"{name:<10} {value:10.1f} {value / medians['bare'] - 1:+9.2%}")
    overhead = medians["harness"] / medians["bare"] - 1
    print(f"harness overhead over the compiled executable: {overhead:+.2%} (target <= 5%)")


if __name__ == "__main__":
    main()
