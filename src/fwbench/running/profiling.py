"""The profiling pass of a group, after its timed launches (docs/op-profile.md).

Most profiled cells were profiled by their own warm worker at the end of the group's last launch
(fwbench.scenarios.profiled.after_blocks, asked for by fwbench.running.launches): their record comes with the last
launch's part and is taken from it here. The others (a torch.compile cell on the CPU, whose kernel-level profile
needs a compile of its own) get one more process each, started only once every launch of the group has ended, so no
timed window of any cell overlaps it. It gets the cell's spec, its workarounds' environment and its own compile
cache (fwbench.backends.launch_cache), and runs under the same slot, memory limit and timeout as a launch. Either
record becomes the cell's `metrics.op_profile`; a pass that fails leaves the cell's timed result as it is and records
why (`{"status": "failed", "reason": ...}`), never a zero.
"""

from __future__ import annotations

import time
from typing import Any

from fwbench.backends import launch_cache
from fwbench.io import atomic_write_json, read_json
from fwbench.running.children import Child
from fwbench.running.context import CellRun, Context, served_spec
from fwbench.scenarios.profiled import profiled


def run_profiles(context: Context, runs: list[CellRun]) -> None:
    """Profile every cell of the group that the study profiles, whose timed launches all succeeded and whose worker
    did not profile it, one after the other, in the group's cell order; each result goes to its run's `profile`."""
    worker_of = {index: worker for worker, members in enumerate(context.workers) for index in members}
    for index, (cell, run) in enumerate(zip(context.cells, runs, strict=True)):
        if run.reason is not None or not run.parts or not profiled(cell, context.settings):
            continue
        in_worker = run.parts[-1]["metrics"].pop("op_profile", None)  # profiled by its last launch's worker
        if in_worker is not None:
            run.profile = in_worker
            continue
        spec = served_spec(read_json(context.specs[worker_of[index]]), [cell])  # its worker's, for this one cell
        spec.update(profile=True)
        spec_path = context.tmp / f"profile-spec{index}.json"
        atomic_write_json(spec_path, spec)
        env = dict(run.env)
        if launch_cache.enabled(context.settings):  # its worker's compile cache, warm from its launches
            env[launch_cache.LAUNCH_CACHE_ENV] = str(context.tmp / f"cache-{worker_of[index]}")
        child = Child(
            context.worker_cmd,
            spec_path,
            context.tmp / f"part-profile-{index}.json",
            context.tmp / f"profile-{index}.log",
            context.settings,
            cell.suite,
            context.slot,
            env,
        )
        started = time.perf_counter()
        outcome = child.run()
        context.record(run, f"{cell.framework}/{cell.mode}: profiling pass", outcome)
        run.profile = _profile_of(outcome, time.perf_counter() - started)


def _profile_of(outcome: Any, process_s: float) -> dict[str, Any]:
    if outcome.failure is not None:
        return {"status": "failed", "reason": outcome.failure.reason, "kind": outcome.failure.kind}
    metrics = outcome.part["metrics"]
    return {
        "status": "ok",
        **metrics["op_profile"],
        "phases_s": metrics.get("phases_s"),
        "process_s": process_s,
    }
