"""What every child of a group shares, and the spec each child reads.

A group's cells run in children of their own (fwbench.running.children), in rounds of fresh processes
(fwbench.running.rounds) or launches of warm workers (fwbench.running.launches). Both start their children through the
group's `Context`: its settings, where the children's files go, the group's slot and the workaround ladder
(fwbench.running.failures), which retries a failed child with the next workaround that fits its failure and records
it as a deviation. A child serves one *worker* of the group: one cell, or (a warm worker) the batch sizes of one
(framework, mode, model, precision); `Context.workers` lists each worker's cells, and a worker's spec, compile cache
and workarounds are its own. A cell's `CellRun` gathers its trials, outputs, schedule and the failure that ended
it, which the runner (fwbench.running.runner) writes as the cell's result.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fwbench.backends import launch_cache
from fwbench.io import atomic_write_json, read_json
from fwbench.running.children import Child, Outcome
from fwbench.running.failures import Failure, Workaround, classify, next_workaround
from fwbench.running.slots import Slot
from fwbench.study.grid import Cell
from fwbench.trackers import nvml
from fwbench.trackers.energy import LAUNCH_BASELINE_ENV


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass
class CellRun:
    parts: list[dict[str, Any]] = field(default_factory=list)
    schedule: list[dict[str, Any]] = field(default_factory=list)  # per trial: round, order, started_s, duration_s
    outputs: list[str] = field(default_factory=list)
    failure: dict[str, Any] | None = None  # the failure that ended the cell (schema: failure)
    deviations: list[dict[str, Any]] = field(default_factory=list)  # workarounds it runs with (schema: deviations)
    env: dict[str, str] = field(default_factory=dict)  # the workarounds' environment, for every later child
    memory_limit: dict[str, Any] | None = None
    started_at: str | None = None
    finished_at: str | None = None
    profile: dict[str, Any] | None = None  # its profiling pass (fwbench.running.profiling), when the study asks for one
    # launches run again because other processes or steal disturbed them (fwbench.running.launches): their data
    disturbed: list[dict[str, Any]] = field(default_factory=list)
    # its compile launch, where one ran before the measured launches (fwbench.running.compile_launch): its record
    compile_launch: dict[str, Any] | None = None

    @property
    def reason(self) -> str | None:
        return None if self.failure is None else self.failure["reason"]

    def applied(self) -> list[str]:
        return [deviation["name"] for deviation in self.deviations]


@dataclass
class Context:
    """What every child of a group shares: the settings, where its files go, its slot and the workaround ladder."""

    cells: list[Cell]
    settings: Mapping[str, Any]
    tmp: Path
    specs: list[Path]  # one per worker
    state_dirs: list[str | Path | None]
    worker_cmd: Sequence[str]
    slot: Slot | None
    t0: float
    ladder: Sequence[Workaround]
    log: list[str] = field(default_factory=list)
    headers: bool = True
    workers: list[list[int]] = field(default_factory=list)  # each worker's cell indices; empty: one per cell
    runs: list[CellRun] = field(default_factory=list)  # each cell's run (set by the runner): who has failed

    def __post_init__(self) -> None:
        if not self.workers:
            self.workers = [[index] for index in range(len(self.cells))]

    def alive(self, worker: int) -> list[int]:
        """The worker's cells that have not failed: what its next process serves. A cell that failed in a worker
        serving several (an error in its own build or compile) leaves the later launches; the others go on."""
        members = self.workers[worker]
        if not self.runs:
            return list(members)
        return [index for index in members if self.runs[index].failure is None]

    def leader(self, worker: int) -> int:
        """The index of the worker's first cell still measured (its first cell once all failed): its framework,
        suite, state directory, workarounds and environment are the worker's."""
        alive = self.alive(worker)
        return alive[0] if alive else self.workers[worker][0]

    def starting(self, worker: int, runs: list[CellRun]) -> tuple[Cell, CellRun]:
        """The worker's lead cell and run, as a launch starts it: each of its cells' runs marked started (once)."""
        for index in self.workers[worker]:
            runs[index].started_at = runs[index].started_at or now()
        lead = self.leader(worker)
        return self.cells[lead], runs[lead]

    def attempt(
        self, index: int, run: CellRun, trial: int | None, label: str, start: Callable[[int], Outcome]
    ) -> tuple[Outcome, int]:
        """`start(attempts)` (one child, ended or ready) until it does not fail, or the ladder has no workaround
        for its failure: each failure that has one is recorded as the deviation the next attempt runs with.
        Returns the last outcome and the number of attempts. `index` is the worker's; `run` its first cell's;
        `trial` None: a compile launch, before the measured ones (fwbench.running.compile_launch)."""
        cell, attempts = self.cells[self.leader(index)], 0
        while True:
            attempts += 1
            outcome = start(attempts)
            if outcome.failure is None:
                return outcome, attempts
            self.record(run, f"{label}, attempt {attempts}" if attempts > 1 else label, outcome)
            rung = next_workaround(self.ladder, run.applied(), outcome.failure, outcome.output, cell.framework)
            if rung is None:
                return outcome, attempts
            workaround, because = rung
            # Recorded before the retry, so that a cell whose workaround fails too still names what was tried.
            run.deviations.append(
                {
                    "name": workaround.name,
                    "applied_because": because,
                    "first_failure": outcome.failure.as_dict(trial=trial),
                    "changes": workaround.changes(),
                }
            )
            run.env = workaround.apply(run.env)
            # Programs compiled before the workaround were compiled without it: the next launch compiles cold.
            shutil.rmtree(self.tmp / f"cache-{index}", ignore_errors=True)
            state_dir = self.state_dirs[self.leader(index)]
            if cell.suite == "training" and state_dir is not None:
                # The whole run under one setting: no resuming from epochs trained without the workaround.
                shutil.rmtree(state_dir, ignore_errors=True)

    def record(self, run: CellRun, header: str, outcome: Outcome) -> None:
        """A child's end in the cell's record and the group's log."""
        run.outputs.append(outcome.output)
        run.memory_limit = outcome.memory_limit
        header += f" with {'+'.join(run.applied())} ===" if run.applied() else " ==="
        self.log.append(f"=== {header}\n{outcome.output}" if self.headers else outcome.output)

    def child(
        self,
        index: int,
        run: CellRun,
        name: str,
        *,
        serve: bool = False,
        companions: Sequence[int] = (),
        launch_env: Mapping[str, str] | None = None,
    ) -> Child:
        """A child process for worker `index`; `companions`: the pids of its comparison's workers already running,
        which its GPU isolation check must not count as other processes (fwbench.trackers.nvml.COMPANIONS_ENV);
        `launch_env`: what its launch's earlier workers found for it (the idle baseline)."""
        env = {**dict(run.env), **dict(launch_env or {})}
        spec = self.specs[index]
        alive = self.alive(index)
        if alive and len(alive) < len(self.workers[index]):  # its cells that failed leave its later processes
            spec = self.tmp / f"spec{index}-{len(alive)}.json"
            atomic_write_json(spec, served_spec(read_json(self.specs[index]), [self.cells[i] for i in alive]))
        if serve and launch_cache.enabled(self.settings):  # the cell's own compile cache across its launches
            env[launch_cache.LAUNCH_CACHE_ENV] = str(self.tmp / f"cache-{index}")
        if companions:
            env[nvml.COMPANIONS_ENV] = ",".join(str(pid) for pid in companions)
        return Child(
            self.worker_cmd,
            spec,
            self.tmp / f"part-{name}.json",
            self.tmp / f"{name}.log",
            self.settings,
            self.cells[self.leader(index)].suite,
            self.slot,
            env,
            serve=serve,
        )

    def outcomes(self, members: Sequence[int], outcome: Outcome) -> list[Outcome]:
        """One worker process's end as each of its cells' (`members`, the cells it served): the worker's failure
        for every one, or each one's own part, where a cell that failed in its own build or compile (a part that
        says `failed`) becomes that cell's failure while the others keep their results."""
        if outcome.failure is not None:
            return [outcome] * len(members)
        parts = outcome.part["parts"] if len(members) > 1 else [outcome.part]
        if len(parts) != len(members):
            raise ValueError(f"a worker serving {len(members)} cells returned {len(parts)} parts")
        return [cell_outcome(part, outcome) for part in parts]

    def finish(self, run: CellRun, trial: int, trials: int, schedule: dict[str, Any], outcome: Outcome) -> None:
        run.finished_at = now()
        run.schedule.append(schedule)
        if outcome.failure is not None:
            run.failure = cell_failure(outcome.failure, trial, trials, run.applied())
            run.deviations = []  # a failed cell ran with nothing: what was tried is in failure.workarounds_tried
        else:
            run.parts.append(outcome.part)


def keep_baseline(launch_env: dict[str, str], ready: Mapping[str, Any]) -> None:
    """The idle baseline a ready worker took (its ready reply), kept for its launch's later workers: NVML's baseline
    once per launch, not once per process (fwbench.trackers.energy.launch_idle_baseline)."""
    baseline = (ready.get("reply") or {}).get("idle_baseline")
    if baseline is not None and LAUNCH_BASELINE_ENV not in launch_env:
        launch_env[LAUNCH_BASELINE_ENV] = json.dumps(baseline)


def served_spec(spec: Mapping[str, Any], cells: Sequence[Cell]) -> dict[str, Any]:
    """`spec` serving `cells`: `cell` for one, `cells` for several (fwbench.running.worker), `weights_path` the
    first cell's model's."""
    out = {key: value for key, value in spec.items() if key not in ("cell", "cells")}
    if len(cells) == 1:
        out["cell"] = cells[0].as_dict()
    else:
        out["cells"] = [cell.as_dict() for cell in cells]
    weights = out.get("weights_paths") or {}
    if cells[0].model in weights:
        out["weights_path"] = weights[cells[0].model]
    return out


def write_specs(
    cells, settings, tmp, data_dir, weights_path, num_classes, threads, state_dirs, slot, device_record, workers=None
):
    """One spec file per worker (`workers`: each one's cell indices; default one per cell), what it reads
    (fwbench.running.worker): `cell` for a worker of one cell, `cells` for a worker serving several.
    `weights_path`: the weights every cell reads, or a mapping from each cell's model to its weights (a worker
    serving several models reads each one's; `weights_paths` in its spec)."""
    specs = []
    by_model = dict(weights_path) if isinstance(weights_path, Mapping) else None
    for index, members in enumerate(workers or [[i] for i in range(len(cells))]):
        state_dir = state_dirs[members[0]]
        served = [cells[i] for i in members]
        spec = {
            "settings": dict(settings),
            "data_dir": str(data_dir) if data_dir is not None else None,
            "weights_path": str(by_model[served[0].model] if by_model else weights_path),
            **({"weights_paths": {c.model: str(by_model[c.model]) for c in served}} if by_model else {}),
            "num_classes": num_classes,
            "threads": threads,
            "state_dir": str(state_dir) if state_dir is not None else None,
        }
        if slot is not None:
            spec["cpus"] = slot.cpus
            spec["device"] = {
                "record": device_record,
                "expected_name": None if slot.gpu is None else slot.gpu.get("name"),
            }
        specs.append(Path(tmp, f"spec{index}.json"))
        atomic_write_json(specs[-1], served_spec(spec, served))
    return specs


def cell_outcome(part: Mapping[str, Any], outcome: Outcome) -> Outcome:
    """One cell's part of a worker's result as its outcome: a result, or (a part that says `failed`: an error in
    the cell's own build, compile or first call, which its worker caught to go on with its other cells) a failure
    classified from the error's traceback as a child's would be."""
    failed = part.get("failed")
    if failed is None:
        return Outcome(dict(part), None, outcome.output, outcome.memory_limit)
    text = str(failed.get("traceback") or failed.get("error") or "")
    found = classify(returncode=1, output=text) or Failure("exception", str(failed.get("error")))
    reason = found.reason.replace(" (exit code 1)", " in this cell's own preparation (its worker went on)")
    return Outcome(None, Failure(found.kind, reason), f"{outcome.output}\n{text}", outcome.memory_limit)


def cell_failure(failure: Failure, trial: int | None, trials: int, tried: list[str]) -> dict[str, Any]:
    """A cell's failure record: the child's, with the trial it failed in (None: its compile launch, before the
    measured ones) and the workarounds tried."""
    if trial is None:
        reason = f"compile launch (before trial 1 of {trials}): {failure.reason}"
    else:
        reason = failure.reason if trials == 1 else f"trial {trial} of {trials}: {failure.reason}"
    if tried:
        reason += f" (also with workaround{'s' if len(tried) > 1 else ''} {', '.join(tried)})"
    return {**failure.as_dict(trial=trial), "reason": reason, "workarounds_tried": list(tried)}
