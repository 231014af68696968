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
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fwbench.backends import launch_cache
from fwbench.io import atomic_write_json
from fwbench.running.children import Child, Outcome
from fwbench.running.failures import Failure, Workaround, next_workaround
from fwbench.running.slots import Slot
from fwbench.study.grid import Cell
from fwbench.trackers import nvml


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

    def __post_init__(self) -> None:
        if not self.workers:
            self.workers = [[index] for index in range(len(self.cells))]

    def leader(self, worker: int) -> int:
        """The index of the worker's first cell: its framework, suite and state directory are the worker's."""
        return self.workers[worker][0]

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
        self, index: int, run: CellRun, name: str, *, serve: bool = False, companions: Sequence[int] = ()
    ) -> Child:
        """A child process for worker `index`; `companions`: the pids of its comparison's workers already running,
        which its GPU isolation check must not count as other processes (fwbench.trackers.nvml.COMPANIONS_ENV)."""
        env = dict(run.env)
        if serve and launch_cache.enabled(self.settings):  # the cell's own compile cache across its launches
            env[launch_cache.LAUNCH_CACHE_ENV] = str(self.tmp / f"cache-{index}")
        if companions:
            env[nvml.COMPANIONS_ENV] = ",".join(str(pid) for pid in companions)
        return Child(
            self.worker_cmd,
            self.specs[index],
            self.tmp / f"part-{name}.json",
            self.tmp / f"{name}.log",
            self.settings,
            self.cells[self.leader(index)].suite,
            self.slot,
            env,
            serve=serve,
        )

    def finish(self, run: CellRun, trial: int, trials: int, schedule: dict[str, Any], outcome: Outcome) -> None:
        run.finished_at = now()
        run.schedule.append(schedule)
        if outcome.failure is not None:
            run.failure = cell_failure(outcome.failure, trial, trials, run.applied())
            run.deviations = []  # a failed cell ran with nothing: what was tried is in failure.workarounds_tried
        else:
            run.parts.append(outcome.part)


def write_specs(
    cells, settings, tmp, data_dir, weights_path, num_classes, threads, state_dirs, slot, device_record, workers=None
):
    """One spec file per worker (`workers`: each one's cell indices; default one per cell), what it reads
    (fwbench.running.worker): `cell` for a worker of one cell, `cells` for a worker serving several."""
    specs = []
    for index, members in enumerate(workers or [[i] for i in range(len(cells))]):
        state_dir = state_dirs[members[0]]
        spec = {
            **(
                {"cell": cells[members[0]].as_dict()}
                if len(members) == 1
                else {"cells": [cells[i].as_dict() for i in members]}
            ),
            "settings": dict(settings),
            "data_dir": str(data_dir) if data_dir is not None else None,
            "weights_path": str(weights_path),
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
        atomic_write_json(specs[-1], spec)
    return specs


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
