"""How long a study will take on a machine, estimated from per-process and per-job costs measured there, before a
GPU hour is spent on it.

A study's wall time is mostly not its timed work: each launch of a comparison starts one process per framework and
mode, one after the other, and each imports its framework, loads its model and compiles it for every batch size it
serves before the blocks of bursts run. With the launch cache (compile.launch_cache, more than one launch) the cold
compiles run first in a compile launch of their own (start-up, loading, the cold compiles, first calls and warm-up,
no bursts: fwbench.running.compile_launch), priced apart, and every measured launch loads the cell's cache (warm);
without it every launch compiles cold. The profiling pass adds each profiled cell's warm-up and profiled steps, and the
profiler's own start and trace reduction, to its worker in the last launch (on a GPU no pass needs a process of its
own, fwbench.scenarios.profiled); and the jobs around the cells (device check, peak probe, dataset, weights, model
facts, parity, the report) run one at a time beside nothing (fwbench.running.launches, docs/time-to-report.md).
`estimate` adds those parts up for a study's inference grid, from a cost table (benchmarks/costs/*.yaml) whose every
value says whether it was measured (where, when) or assumed (and why that value). The study's own time table replaces
the estimate once it has run. How many launches a study needs for its intervals: fwbench.study.sizing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fwbench.study.grid import Cell, cells, suite_batch_sizes, worker_scope
from fwbench.study.modes import caches_programs


class CostError(ValueError):
    """A cost table without a value the estimate needs; the message names the file and the key."""


@dataclass
class Costs:
    """A cost table (benchmarks/costs/*.yaml): each entry {value, basis: measured|assumed, source}."""

    path: Path
    table: dict[str, Any]

    def value(self, key: str, *names: str) -> float:
        """The value at `key`, or inside it at the first of `names` it has (a model, a framework/mode, "default"),
        each name followed by the variant the table prices it as (`stand_ins`)."""
        entry = self.table.get(key)
        if entry is None:
            raise CostError(f"{self.path}: no cost {key!r}")
        if "value" in entry:
            return float(entry["value"])
        for name in (*self.stand_ins(names), "default"):
            if name in entry:
                inner = entry[name]
                return float(inner["value"] if isinstance(inner, dict) and "value" in inner else inner)
        raise CostError(f"{self.path}: cost {key!r} has no value for {' or '.join(names)} and no default")

    def stand_ins(self, names: tuple[str, ...]) -> list[str]:
        """`names`, each followed by its name under the variant the table's `priced_as` prices its variant as
        (torch/cudagraphs/resnet50, then torch/compile/resnet50): a mode not measured on the machine yet."""
        priced_as = {k: v for k, v in (self.table.get("priced_as") or {}).items() if k not in ("basis", "source")}
        out = []
        for name in names:
            out.append(name)
            out += [
                other + name[len(variant) :]
                for variant, other in priced_as.items()
                if f"{name}/".startswith(f"{variant}/")
            ]
        return out


def read_costs(path: str | Path) -> Costs:
    path = Path(path)
    table = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(table, dict):
        raise CostError(f"{path}: expected a mapping of cost names")
    return Costs(path, table)


@dataclass
class Estimate:
    """Seconds by part (`parts`) and by comparison group (`groups`), with the counts behind them."""

    parts: dict[str, float] = field(default_factory=dict)
    groups: dict[str, float] = field(default_factory=dict)
    processes: int = 0  # the compile launches' included
    compile_launches: int = 0  # processes of the compile launches
    profiled_in_workers: int = 0

    @property
    def total_s(self) -> float:
        return sum(self.parts.values())

    def add(self, part: str, seconds: float) -> None:
        self.parts[part] = self.parts.get(part, 0.0) + seconds


def _step_s(costs: Costs, framework: str, mode: str, model: str, batch: int) -> float:
    """One forward step at `batch`, from the measured throughput (img/s) of that framework and model."""
    return batch / costs.value("throughput_img_s", f"{framework}/{mode}/{model}", f"{framework}/{model}", model)


def _worker_ready(
    costs: Costs, framework: str, mode: str, served: list[Cell], cold: bool, warmup: int
) -> dict[str, float]:
    """A worker from its start to ready, by part: start-up and imports, loading each model it serves (once per
    model and precision), and per cell a compile (cold in its first launch, from its own cache after) and the
    warm-up iterations."""
    variant = f"{framework}/{mode}"
    compile_key = "compile_cold_s" if cold else "compile_warm_s"
    units = {(cell.model, cell.precision) for cell in served}
    return {
        STARTUP: costs.value("process_start_s", variant, framework)
        + sum(costs.value("load_s", model) for model, _ in units),
        COMPILE: sum(costs.value(compile_key, f"{variant}/{cell.model}", variant) for cell in served)
        + sum(warmup * _step_s(costs, framework, mode, cell.model, cell.batch_size) for cell in served),
    }


def _idle_baseline_s(config: Mapping[str, Any], costs: Costs) -> float:
    """NVML's idle baseline, once per launch of a study on a GPU (none on the CPU: no NVML there)."""
    if config.get("device") != "cuda" or "idle_baseline_s" not in costs.table:
        return 0.0
    return costs.value("idle_baseline_s")


def _group_name(cell: Cell, scope: str) -> str:
    """The comparison group a cell is measured in (one job's launches) under its workers' scope."""
    if scope == "launch":
        return "every model and precision"
    if scope == "models":
        return f"every model at {cell.precision}"
    return f"{cell.model}/{cell.precision}"


STARTUP, COMPILE, TIMED, PROFILING, REST = (
    "start-up, imports and loading",
    "compiles and warm-up",
    "timed bursts (and discarded ones)",
    "profiling passes",
    "rest of the measuring processes and the runner",
)
COMPILE_LAUNCH = "compile launches (start-up, loading, cold compiles, first calls)"


def compile_launch(config: Mapping[str, Any], suite: str = "inference") -> bool:
    """Whether `suite`'s groups run a compile launch before their measured launches: the launch cache is on and
    there is more than one launch (as fwbench.backends.launch_cache.enabled reads a group's settings)."""
    return bool((config.get("compile") or {}).get("launch_cache", False)) and int(config[suite]["trials"]) > 1


def estimate(config: Mapping[str, Any], costs: Costs) -> Estimate:
    """The study's wall time from an empty results/ on the machine the costs are from (inference suite, and the
    jobs around it; a study with other suites is refused: their costs are not in the table)."""
    if set(config["suites"]) - {"inference"}:
        raise CostError(f"{costs.path}: estimates cover the inference suite only, not {config['suites']}")
    settings = config["inference"]
    trials, blocks = int(settings["trials"]), int(settings["blocks"])
    burst, discard = float(settings["burst_s"]), int(settings["burst_discard"])
    profile = settings.get("profile") or {}
    warmup = int(settings["warmup_iters"])
    scope = worker_scope(settings)
    # each group's workers (a framework and mode each, or narrower under a narrower scope), each with its cells
    groups: dict[str, dict[tuple, list[Cell]]] = {}
    for cell in cells(config):
        groups.setdefault(_group_name(cell, scope), {}).setdefault(cell.worker_key(scope), []).append(cell)
    batches = suite_batch_sizes(config, "inference")
    profiled = sorted(set(profile.get("batch_sizes") or []) & set(batches))
    result = Estimate()
    compiling = compile_launch(config)
    for group, workers in groups.items():
        before = result.total_s
        baseline = _idle_baseline_s(config, costs)  # once per launch, by its first worker
        if compiling:  # each worker alone: start, load, cold compiles, first calls and warm-up; one step, exit
            result.add(COMPILE_LAUNCH, baseline)
            for served in (s for s in workers.values() if caches_programs(s[0].framework, s[0].mode)):
                ready = _worker_ready(costs, served[0].framework, served[0].mode, served, True, warmup)
                result.add(COMPILE_LAUNCH, sum(ready.values()) + costs.value("process_rest_s"))
                result.processes += 1
                result.compile_launches += 1
        for _ in range(trials):
            result.add(STARTUP, baseline)
            for served in workers.values():
                # warm after a compile launch; cold in the only launch, or in every one without the launch cache
                # (an eager worker's first calls cost alike in every launch: priced as a later launch's, compile_warm_s)
                ready = _worker_ready(costs, served[0].framework, served[0].mode, served, not compiling, warmup)
                for part, seconds in ready.items():
                    result.add(part, seconds)
                result.add(REST, costs.value("process_rest_s"))
                result.processes += 1
                result.add(TIMED, (blocks + discard) * len(served) * burst)
        for served in workers.values():
            for cell in (c for c in served if c.batch_size in profiled):  # in its warm worker after the last launch
                framework, mode = cell.framework, cell.mode
                steps = (int(profile.get("steps", 5)) + warmup) * _step_s(
                    costs, framework, mode, cell.model, cell.batch_size
                )
                result.add(PROFILING, steps + costs.value("profiler_s", f"{framework}/{mode}", framework))
                result.profiled_in_workers += 1
        result.groups[group] = result.total_s - before
    jobs = _jobs(config)
    side_by_side = {job: jobs.pop(job) for job in SIDE_BY_SIDE}
    host_cores = int(costs.value("host_cores"))
    waves = max(1, -(-sum(len(each) for each in side_by_side.values()) // host_cores))
    longest = max(costs.value("job_s", *names) for each in side_by_side.values() for names in each)
    result.add(f"jobs side by side: {', '.join(SIDE_BY_SIDE)}", waves * longest)
    for job, each in jobs.items():
        result.add(f"job: {job}", sum(costs.value("job_s", *names) for names in each))
    return result


# Jobs that take one core and no GPU slot of their own (the device check asks each framework in turn, one core):
# Snakemake runs them side by side before the first measuring job, as many at once as the host has cores.
SIDE_BY_SIDE = ("device_check", "init_weights", "model_facts")


def _jobs(config: Mapping[str, Any]) -> dict[str, list[tuple[str, ...]]]:
    """The jobs around the cells: for each rule, one entry per job the study runs, naming the costs (job_s) that may
    price it, most specific first."""
    models = list(config["models"])
    once = {job: [(job,)] for job in ("device_check", "device_peak", "prepare_dataset", "loader_throughput", "report")}
    return {
        **once,
        "init_weights": [("init_weights",)] * len(models),
        "model_facts": [("model_facts",)] * len(models),
        # from the frameworks' inference cells (fwbench.scenarios.logits), which the estimate always has: no compile
        "parity_logits": [("parity_logits/cells",) for _ in config["frameworks"]],
    }


def minutes(seconds: float) -> str:
    whole = int(round(seconds))
    return f"{whole // 60} min {whole % 60:02d} s"


def text(estimate: Estimate, costs: Costs) -> str:
    shown = costs.path.resolve()
    with contextlib.suppress(ValueError):
        shown = shown.relative_to(Path.cwd())
    processes = f"{estimate.processes} measuring processes"
    if estimate.compile_launches:
        processes += f" ({estimate.compile_launches} in compile launches)"
    processes += f", {estimate.profiled_in_workers} cells profiled in them"
    lines = [f"estimated from {shown} ({processes}):"]
    lines += [f"  {part:<62}{minutes(s):>14}" for part, s in sorted(estimate.parts.items(), key=lambda p: -p[1])]
    lines.append(f"  {'total':<62}{minutes(estimate.total_s):>14}")
    lines.append("by comparison group: " + ", ".join(f"{g} {minutes(s)}" for g, s in estimate.groups.items()))
    return "\n".join(lines)
