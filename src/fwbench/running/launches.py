"""Launches of warm workers in blocks: the trials of an inference or micro group (fwbench.scenarios.blocks).

In each launch every worker still in the group starts one process (fwbench.running.worker), which then times short
bursts on request, each block in the order of the next row of a Williams design over the workers, so that the
machine's drift cancels within a block and a ratio can be taken launch by launch. A worker serves one cell, or the
batch sizes of one (framework, mode, model, precision) (fwbench.running.runner): in each block it runs one burst of
each of its cells, and what it measured goes to each cell's record. Where the cells' launches share a compile cache
(compile.launch_cache), a compile launch fills it first (fwbench.running.compile_launch), so that every measured
launch starts warm.
"""

from __future__ import annotations

import time
from typing import Any

from fwbench.backends import launch_cache
from fwbench.io import read_json
from fwbench.running import order as trial_order
from fwbench.running.children import Child, Outcome, is_part
from fwbench.running.compile_launch import run_compile_launch
from fwbench.running.context import CellRun, Context, keep_baseline
from fwbench.scenarios.blocks import OTHER_LOAD_FLAG, comparison_of
from fwbench.scenarios.profiled import WHERE_IN_WORKER, profiled

# A launch is disturbed when more than this share of its bursts were flagged (fwbench.scenarios.blocks).
DISTURBED_SHARE = 0.25


def run_launches(
    context: Context, plan: trial_order.Design, blocks_plan: trial_order.Design, runs: list[CellRun]
) -> dict[str, Any]:
    """The group's launches (fwbench.scenarios.blocks): in launch k every worker still in the group starts, in the
    order of `plan`'s row k (a worker that fails to start gets the workaround ladder, as a trial would), and once
    all are ready, `blocks` blocks run: in each, every ready worker runs a burst of each of its steps, in the order
    of `blocks_plan`'s next row. Then each worker finishes (writes its parts) and exits. A worker that fails or hangs
    fails its cells; the others go on. `plan` and `blocks_plan` are over the workers (Context.workers); `runs` are
    the cells'. A launch that other processes or the hypervisor disturbed (`_disturbed`) is run again, all its
    workers, up to `repeat_disturbed` times per group (a bound fixed before the run); what it measured moves to each
    cell's `disturbed` record. With the launch cache in effect (launch_cache.enabled: more than one launch), the
    compile launch runs first and the measured launches all find their cells' caches warm. Returns the order in
    which each block ran (`ran`), the launches run again (`repeated`), the bound, and the compile launch's record
    (`compile_launch`) where one ran."""
    trials = len(plan.rows)
    bound = int(context.settings.get("repeat_disturbed", 0))
    ran: list[list[str]] = []
    repeated: list[dict[str, Any]] = []
    compiled = run_compile_launch(context, plan, runs) if launch_cache.enabled(context.settings) else None
    for launch in range(trials):
        while True:
            marks = [(len(run.parts), len(run.schedule), run.failure) for run in runs]
            ran_mark = len(ran)
            _one_launch(context, plan, blocks_plan, runs, launch, ran)
            disturbed = _disturbed(runs, marks)
            if disturbed is None or len(repeated) >= bound:
                break
            # run the launch again, every worker of it (the comparison stays paired launch by launch); what the
            # disturbed one measured is kept in the group's record, not in its cells' results
            for run, (parts, schedule, _) in zip(runs, marks, strict=True):
                run.disturbed += [_kept(launch, part) for part in run.parts[parts:]]
                del run.parts[parts:], run.schedule[schedule:]
            repeated.append({"launch": launch + 1, **disturbed, "blocks_ran": ran[ran_mark:]})
            del ran[ran_mark:]
            context.log.append(
                f"[fwbench] launch {launch + 1} of {trials} run again: {disturbed['reason']} "
                f"({len(repeated)} of at most {bound})"
            )
    return {
        "ran": ran,
        "repeated": repeated,
        "repeat_bound": bound,
        **({"compile_launch": compiled} if compiled is not None else {}),
    }


def _one_launch(context, plan, blocks_plan, runs, launch, ran) -> None:
    """Launch `launch` of the group: its workers start, serve their blocks and finish (see `run_launches`)."""
    trials, names = len(plan.rows), list(plan.variants)
    per_launch = int(context.settings["blocks"])
    order = [w for w in plan.rows[launch] if context.alive(w)]
    launch_order = [names[w] for w in order]
    workers: dict[int, tuple[Child, list[str], float, int, int]] = {}
    launch_env: dict[str, str] = {}  # the launch's idle baseline, once its first worker on a GPU took it
    try:
        for position, worker in enumerate(order):
            cell, run = context.starting(worker, runs)
            started = time.perf_counter()
            label = f"{cell.framework}/{cell.mode}: launch {launch + 1} of {trials} (#{position + 1})"
            ready: dict[str, Any] = {}

            def start(attempts: int, worker=worker, run=run, ready=ready, launch=launch) -> Outcome:
                companions = [w[0].process.pid for w in workers.values()]  # already ready, holding contexts
                child = context.child(
                    worker,
                    run,
                    f"{worker}-{launch}-{attempts}",
                    serve=True,
                    companions=companions,
                    launch_env=launch_env,
                )
                return child.until_ready(ready, cells=len(context.alive(worker)))

            outcome, attempts = context.attempt(worker, run, launch + 1, label, start)
            if outcome.failure is None:
                workers[worker] = (ready["child"], ready["steps"], started, position, attempts)
                keep_baseline(launch_env, ready)
            else:
                schedule = _launch_schedule(launch, position, launch_order, started, context.t0, attempts)
                _finish(context, runs, worker, launch, trials, schedule, outcome)
        for block in range(per_launch):
            row = blocks_plan.rows[launch * per_launch + block]
            order_run = [w for w in row if w in workers]
            ran.append([names[w] for w in order_run])
            # comparison by comparison, each one's steps of every worker side by side in the row's order, so that a
            # cell's variants stay adjacent in time however many cells a worker serves
            for comparison in _comparisons(workers):
                for position, worker in enumerate(order_run):
                    if worker not in workers:  # it ended earlier in this block
                        continue
                    child, steps = workers[worker][:2]
                    for step in (s for s in steps if comparison_of(s) == comparison):
                        message = {"burst": step, "block": launch * per_launch + block, "position": position}
                        if child.request(message) is None:
                            _end_worker(context, runs, worker, workers.pop(worker), launch, trials, launch_order)
                            break
        for worker in list(workers):  # one at a time: a worker profiling after its blocks computes alone
            returncode, profiling = _ask_to_finish(context, worker, workers[worker][0], last=launch == trials - 1)
            state = workers.pop(worker)
            _end_worker(context, runs, worker, state, launch, trials, launch_order, returncode, profiling)
    finally:
        for child, *_ in workers.values():  # the runner is being stopped: so are its workers
            child.abandon()


def _comparisons(workers: dict[int, tuple]) -> list[str]:
    """The comparisons the ready workers' steps time, in the order the workers (by number) first name them."""
    seen: dict[str, None] = {}
    for worker in sorted(workers):
        for step in workers[worker][1]:
            seen.setdefault(comparison_of(step))
    return list(seen)


def _ask_to_finish(context: Context, worker: int, child: Child, *, last: bool) -> tuple[int | None, list[str]]:
    """Ask a worker to finish and wait for its exit: (exit status, None if it is gone or hung; the cells it said it
    was profiling). In the group's last launch a worker with profiled cells is asked to profile them first, in
    this process after its blocks (fwbench.scenarios.profiled); it says which it will once its timed result is
    written."""
    if last and any(profiled(context.cells[i], context.settings) for i in context.alive(worker)):
        reply = child.request({"finish": True, "profile": True})
        return (child.wait() if reply is not None else None), list((reply or {}).get("profiling") or [])
    return (child.wait() if child.send({"finish": True}) else None), []


def _kept(launch: int, part: dict[str, Any]) -> dict[str, Any]:
    """What a disturbed launch measured of a cell, kept beside its result: its bursts and raw samples."""
    return {"launch": launch + 1, "blocks": part["metrics"].get("blocks"), "samples_ms": part.get("samples_ms")}


def _disturbed(runs, marks) -> dict[str, Any] | None:
    """Whether the launch that added the parts after `marks` was disturbed: more than DISTURBED_SHARE of its bursts
    (every worker's) flagged for other processes' load or the hypervisor's steal, or other processes above
    OTHER_LOAD_FLAG of the machine over a worker's bursts (fwbench.scenarios.blocks); None when it was not, or when a
    cell failed in it (a failure is a finding, not noise)."""
    if any(run.failure is not None and failure is None for run, (_, _, failure) in zip(runs, marks, strict=True)):
        return None
    bursts = flagged = 0
    other = 0.0
    for run, (mark, _, _) in zip(runs, marks, strict=True):
        for part in run.parts[mark:]:
            blocks = (part.get("metrics") or {}).get("blocks") or {}
            count = int(blocks.get("bursts") or 0)
            bursts += count
            flagged += min(count, int(blocks.get("load_flagged") or 0) + int(blocks.get("steal_flagged") or 0))
            other = max(other, float(blocks.get("other_load_share") or 0.0))
    if not bursts:
        return None
    share = flagged / bursts
    if share <= DISTURBED_SHARE and other <= OTHER_LOAD_FLAG:
        return None
    reason = (
        f"{flagged} of {bursts} bursts flagged for other load or steal"
        if share > DISTURBED_SHARE
        else f"other processes used {other:.0%} of the machine over a worker's bursts"
    )
    return {"reason": reason, "flagged_bursts": flagged, "bursts": bursts, "other_load_share_max": other}


def _launch_schedule(launch, position, launch_order, started, t0, attempts) -> dict[str, Any]:
    return {
        "round": launch + 1,
        "order": position + 1,
        "round_order": launch_order,
        "started_s": started - t0,
        "duration_s": time.perf_counter() - started,
        "attempts": attempts,
    }


def _end_worker(context, runs, worker, state, launch, trials, launch_order, returncode=None, profiling=()) -> None:
    """A worker's end: after it was asked to finish (`returncode`), or when it stopped answering (it exited, or
    hung past the timeout and is killed), classified into its cells' records. `profiling`: the cells it said it was
    profiling once it had written its timed result; if it then failed, that result stands and their profiles say
    why."""
    child, _, started, position, attempts = state
    if returncode is None and not child.timed_out:
        returncode = child.wait()
    outcome = child.end(returncode)
    if outcome.failure is not None and profiling:
        labels = [context.cells[i].label() for i in context.alive(worker)]
        outcome = _timed_result_kept(child, outcome, [label in profiling for label in labels])
    lead = context.leader(worker)
    cell = context.cells[lead]
    label = f"{cell.framework}/{cell.mode}: launch {launch + 1} of {trials} (#{position + 1})"
    context.record(runs[lead], label + (f", attempt {attempts}" if attempts > 1 else ""), outcome)
    schedule = _launch_schedule(launch, position, launch_order, started, context.t0, attempts)
    _finish(context, runs, worker, launch, trials, schedule, outcome)


def _timed_result_kept(child: Child, outcome: Outcome, profiling: list[bool]) -> Outcome:
    """A worker that failed while profiling after its blocks: the timed result it wrote before, its parts in its
    cells' order, each cell it was profiling (`profiling`) with a failed pass and the failure's reason; the failure
    itself where that result is unreadable."""
    try:
        part = read_json(child.part_path)
    except (OSError, ValueError):
        return outcome
    each = part.get("parts", [part]) if isinstance(part, dict) else None
    if not isinstance(each, list) or len(each) != len(profiling) or not all(is_part(p) for p in each):
        return outcome
    failure = outcome.failure
    for one, was_profiling in zip(each, profiling, strict=True):
        if was_profiling and "op_profile" not in one["metrics"]:  # the ones it finished have theirs
            one["metrics"]["op_profile"] = {
                "status": "failed",
                "reason": f"the worker ended while profiling, after writing its timed result: {failure.reason}",
                "kind": failure.kind,
                "where": WHERE_IN_WORKER,
            }
    return Outcome(part, None, outcome.output, outcome.memory_limit)


def _finish(context, runs, worker, launch, trials, schedule, outcome) -> None:
    """One launch of a worker into each of its cells' records: its own part of the worker's parts (or its own
    failure, where its preparation failed and the worker went on), or the worker's failure, with the workarounds it
    ran with. The cells of one worker share its process: each schedule names the process, so that the study's time
    counts it once (fwbench.analysis.time.study_time)."""
    members = context.alive(worker)
    lead = runs[members[0]]
    each = context.outcomes(members, outcome)
    if len(members) == 1:
        context.finish(lead, launch + 1, trials, schedule, each[0])
        return
    process = {"id": f"launch{launch + 1}-worker{worker}", "cells": [context.cells[i].label() for i in members]}
    # the worker's workarounds and output are every one of its cells' (taken before the first cell's record changes)
    deviations, env, output = list(lead.deviations), dict(lead.env), lead.outputs[-1] if lead.outputs else ""
    for number, (index, one) in enumerate(zip(members, each, strict=True)):
        run = runs[index]
        if number > 0:
            run.deviations, run.env, run.memory_limit = list(deviations), dict(env), lead.memory_limit
            run.outputs.append(output or outcome.output)
        context.finish(run, launch + 1, trials, {**schedule, "process": {**process, "first": number == 0}}, one)
