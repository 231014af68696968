"""The compile launch: a group's cold compiles in a launch of their own, before its measured launches.

Where a cell's launches share its compile cache (compile.launch_cache, fwbench.backends.launch_cache), the launch that
fills the cache compiles cold and every later one loads it. Were the first measured launch the one that filled it,
the cache state would be confounded with the launch order: on an H200 compiled ResNet-50 ran 13,980 img/s in its cold
launch 1 and 13,358 in its warm launch 2, and the ratios' intervals are over launches. So the cold compile runs first,
in a launch of its own: each worker of the group whose variant keeps a cache (caches_programs: not eager PyTorch
nor NumPy, which compile nothing) in turn starts, builds, compiles and makes its first call for each of
its cells (filling the cell's cache), warms up and calibrates as in any launch, runs one iteration of each of its
steps (a burst of one iteration, so that it writes a complete result; kept here, never pooled), finishes and exits
before the next starts. Then every measured launch starts warm. The cells' compile and first-call times are this
launch's (cold); the measured launches' own (warm) stay in their trials, each with the cache state it found.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from fwbench.running import order as trial_order
from fwbench.running.children import Child, Outcome
from fwbench.running.context import CellRun, Context, cell_failure, keep_baseline, now
from fwbench.study.modes import caches_programs

ITERATIONS = 1  # per step, once the worker is ready: its result is complete, and nothing it times is pooled
ROLE = (
    "the cell's cold compile and first calls (metrics.compile_s, first_call_s), in a launch of its own before the "
    f"measured launches, so that each of those starts from the filled cache; {ITERATIONS} iteration per step after "
    "the warm-up, never pooled into the cell's samples or throughput"
)


def run_compile_launch(context: Context, plan: trial_order.Design, runs: list[CellRun]) -> dict[str, Any]:
    """The group's compile launch (see the module): its workers one after the other in the order of `plan`'s first
    row, each started through the workaround ladder as in any launch. Each cell's record goes to its run's
    `compile_launch`: its compile and first-call times, the cache state its process found, its phases and wall time.
    A worker that fails fails its cells (`failure.trial` null, the reason "compile launch (before trial 1 of T):
    ..."), which then leave the measured launches; the others go on. Returns the group's record."""
    names, trials = list(plan.variants), len(plan.rows)
    # only the workers whose variant keeps a launch cache: an eager worker has nothing to compile ahead
    order = [
        w
        for w in plan.rows[0]
        if caches_programs(context.cells[context.leader(w)].framework, context.cells[context.leader(w)].mode)
    ]
    launch_order = [names[w] for w in order]
    began = time.perf_counter()
    launch_env: dict[str, str] = {}  # the idle baseline its first worker on a GPU took, for the others (unused here)
    for position, worker in enumerate(order):
        cell, run = context.starting(worker, runs)
        started = time.perf_counter()
        label = f"{cell.framework}/{cell.mode}: compile launch, before launch 1 of {trials} (#{position + 1})"
        ready: dict[str, Any] = {}

        def start(attempts: int, worker=worker, run=run, ready=ready) -> Outcome:
            child = context.child(worker, run, f"{worker}-compile-{attempts}", serve=True, launch_env=launch_env)
            return child.until_ready(ready, cells=len(context.alive(worker)))

        outcome, attempts = context.attempt(worker, run, None, label, start)
        if outcome.failure is None:
            keep_baseline(launch_env, ready)
            outcome = _serve(ready["child"], ready["steps"])
            context.record(run, label + (f", attempt {attempts}" if attempts > 1 else ""), outcome)
        when = {
            "order": position + 1,
            "round_order": launch_order,
            "started_s": started - context.t0,
            "duration_s": time.perf_counter() - started,
            "attempts": attempts,
        }
        _finish(context, runs, worker, trials, when, outcome)
    skipped = [names[w] for w in plan.rows[0] if names[w] not in launch_order]
    return {
        "order": launch_order,
        "duration_s": time.perf_counter() - began,
        "iterations_per_step": ITERATIONS,
        **({"without_a_cache": skipped} if skipped else {}),
    }


def _serve(child: Child, steps: list[str]) -> Outcome:
    """A ready worker of the compile launch: one iteration of each step, then finish; its end, classified."""
    try:
        for position, step in enumerate(steps):
            if child.request({"burst": step, "block": 0, "position": position, "iters": ITERATIONS}) is None:
                return child.end(None if child.timed_out else child.wait())
        returncode = child.wait() if child.send({"finish": True}) else None
        if returncode is None and not child.timed_out:
            returncode = child.wait()
        return child.end(returncode)
    except BaseException:  # the runner is being stopped: so is the worker
        child.abandon()
        raise


def _finish(context: Context, runs: list[CellRun], worker: int, trials: int, when: dict, outcome: Outcome) -> None:
    """The compile launch of one worker into each of its cells' records: its part's compile record, or the worker's
    failure. The cells of a shared worker share its process (named, so that the study's time counts it once) and
    its workarounds."""
    members = context.alive(worker)
    lead = runs[members[0]]
    each = context.outcomes(members, outcome)
    deviations, env, output = list(lead.deviations), dict(lead.env), lead.outputs[-1] if lead.outputs else ""
    for number, (index, one) in enumerate(zip(members, each, strict=True)):
        run = runs[index]
        if number > 0:
            run.deviations, run.env, run.memory_limit = list(deviations), dict(env), lead.memory_limit
            run.outputs.append(output or outcome.output)
        record: dict[str, Any] = {"role": ROLE, **when}
        if len(members) > 1:
            cells = [context.cells[i].label() for i in members]
            record["process"] = {"id": f"compile-worker{worker}", "cells": cells, "first": number == 0}
        run.finished_at = now()
        if one.failure is not None:
            run.failure = cell_failure(one.failure, None, trials, run.applied())
            run.deviations = []  # a failed cell ran with nothing: what was tried is in failure.workarounds_tried
            record["failure"] = one.failure.reason
        else:
            record.update(compile_record(one.part))
        run.compile_launch = record


def compile_record(part: Mapping[str, Any]) -> dict[str, Any]:
    """What a compile launch keeps of a cell's part: its compile and first-call times, the compile cache state its
    process found (cold where the launch cache was empty), and its phases (the study's time counts them)."""
    metrics = part["metrics"]
    settings = (part.get("framework") or {}).get("settings") or {}
    return {
        "compile_s": metrics.get("compile_s"),
        "compile_breakdown_s": metrics.get("compile_breakdown_s"),
        "first_call_s": metrics.get("first_call_s"),
        "compilation_cache": settings.get("compilation_cache"),
        "phases_s": metrics.get("phases_s"),
    }
