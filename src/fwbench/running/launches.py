"""Launches of warm workers in blocks: the trials of an inference or micro group (fwbench.scenarios.blocks).

In each launch every cell still in the group starts one worker process (fwbench.running.worker), which then times short
bursts on request, one per cell per block, each block in the order of the next row of a Williams design over the
blocks, so that the machine's drift cancels within a block and a ratio can be taken launch by launch.
"""

from __future__ import annotations

import time
from typing import Any

from fwbench.running import order as trial_order
from fwbench.running.children import Child, Outcome
from fwbench.running.context import CellRun, Context, now


def run_launches(
    context: Context, plan: trial_order.Design, blocks_plan: trial_order.Design, runs: list[CellRun]
) -> list[list[str]]:
    """The group's launches (fwbench.scenarios.blocks): in launch k every cell still in the group starts a warm worker,
    in the order of `plan`'s row k (a worker that fails to start gets the workaround ladder, as a trial would), and once
    all are ready, `blocks` blocks run: in each, every ready worker runs a burst of each of its steps, in the order
    of `blocks_plan`'s next row. Then each worker finishes (writes its part) and exits. A worker that fails or hangs
    fails its cell; the others go on. Returns the order in which each block ran."""
    trials, names = len(plan.rows), list(plan.variants)
    per_launch = int(context.settings["blocks"])
    ran: list[list[str]] = []
    for launch in range(trials):
        order = [i for i in plan.rows[launch] if runs[i].failure is None]
        launch_order = [names[i] for i in order]
        workers: dict[int, tuple[Child, list[str], float, int, int]] = {}
        try:
            for position, index in enumerate(order):
                cell, run = context.cells[index], runs[index]
                run.started_at = run.started_at or now()
                started = time.perf_counter()
                label = f"{cell.framework}/{cell.mode}: launch {launch + 1} of {trials} (#{position + 1})"
                ready: dict[str, Any] = {}

                def start(attempts: int, index=index, run=run, ready=ready, launch=launch) -> Outcome:
                    child = context.child(index, run, f"{index}-{launch}-{attempts}", serve=True)
                    try:
                        reply = child.request(None)
                    except BaseException:  # the runner is being stopped (SIGTERM, Ctrl-C): so is the worker
                        child.abandon()
                        raise
                    if reply is not None and "ready" in reply:
                        ready.update(child=child, steps=list(reply["ready"]))
                        return Outcome(None, None, "")
                    return child.end(child.wait(), unready=True)

                outcome, attempts = context.attempt(index, run, launch + 1, label, start)
                if outcome.failure is None:
                    workers[index] = (ready["child"], ready["steps"], started, position, attempts)
                else:
                    context.finish(
                        run,
                        launch + 1,
                        trials,
                        _launch_schedule(launch, position, launch_order, started, context.t0, attempts),
                        outcome,
                    )
            for block in range(per_launch):
                row = blocks_plan.rows[launch * per_launch + block]
                order_run = [i for i in row if i in workers]
                ran.append([names[i] for i in order_run])
                for position, index in enumerate(order_run):
                    child, steps = workers[index][:2]
                    for step in steps:
                        message = {"burst": step, "block": launch * per_launch + block, "position": position}
                        if child.request(message) is None:
                            _end_worker(context, runs, index, workers.pop(index), launch, trials, launch_order)
                            break
            for index in list(workers):
                child = workers[index][0]
                returncode = child.wait() if child.send({"finish": True}) else None
                _end_worker(context, runs, index, workers.pop(index), launch, trials, launch_order, returncode)
        finally:
            for child, *_ in workers.values():  # the runner is being stopped: so are its workers
                child.abandon()
    return ran


def _launch_schedule(launch, position, launch_order, started, t0, attempts) -> dict[str, Any]:
    return {
        "round": launch + 1,
        "order": position + 1,
        "round_order": launch_order,
        "started_s": started - t0,
        "duration_s": time.perf_counter() - started,
        "attempts": attempts,
    }


def _end_worker(context, runs, index, worker, launch, trials, launch_order, returncode=None) -> None:
    """A worker's end: after it was asked to finish (`returncode`), or when it stopped answering (it exited, or
    hung past the timeout and is killed), classified into the cell's record."""
    child, _, started, position, attempts = worker
    if returncode is None and not child.timed_out:
        returncode = child.wait()
    outcome = child.end(returncode)
    cell = context.cells[index]
    label = f"{cell.framework}/{cell.mode}: launch {launch + 1} of {trials} (#{position + 1})"
    context.record(runs[index], label + (f", attempt {attempts}" if attempts > 1 else ""), outcome)
    schedule = _launch_schedule(launch, position, launch_order, started, context.t0, attempts)
    context.finish(runs[index], launch + 1, trials, schedule, outcome)
