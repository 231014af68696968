"""The one compile-time measure of a training cell, defined once for every framework.

compile/first-call time = the wall time of everything a framework does before its first timed step that a
steady-state call would not do, summed over every function the cell runs: the train step (and its masked variant
when an epoch ends with a padded partial batch), evaluation with the running and with the batch's own statistics,
BatchNorm recalibration (models with BatchNorm) and the step-0 probe. For each function, in that order and before
any of them has run:

    preparation (JAX: trace + lower, then compile, ahead of time; nothing in eager PyTorch)
    + its first call − a steady-state call (the faster of the next STEADY_CALLS calls), clipped at 0

Every call runs on throwaway copies of the state (or restores it), so nothing the cell then trains or evaluates
changes. The breakdown is keyed `{function}_{part}_s` with part `trace_lower`, `compile` or `first_call_extra`;
the cell's `compile_s` is its sum. PyTorch's first call carries what an eager framework does once (kernel and
primitive selection, allocator growth, CUDA module loading, the optimizer's state); JAX's carries what an AOT
executable still does on its first run. The PyTorch probe's float64 rerun, a yardstick JAX has no counterpart
for, is not part of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

STEADY_CALLS = 2
FUNCTIONS = ("train", "train_masked", "eval", "eval_batch_statistics", "recalibration", "probe")


def first_call_extra(call: Callable[[], Any], finish: Callable[[Any], Any], calls: int = STEADY_CALLS) -> float:
    """Seconds the first `finish(call())` takes beyond the faster of the next `calls` (at least 0). `finish` blocks
    until the result is ready (a synchronise, or reading the loss as the timed loop does)."""
    times = []
    for _ in range(1 + calls):
        start = time.perf_counter()
        finish(call())
        times.append(time.perf_counter() - start)
    return max(0.0, times[0] - min(times[1:]))
