"""The cell grid: which benchmark cells a study has, and where each one's result lives.

The workflow asks this module for target paths and parses wildcards back into cells, so the path layout is defined
once, here, and not re-derived in rule bodies.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fwbench.study import modes as execution_modes

SUITES = ("inference", "training", "micro")
# The micro suite's baseline: every framework of the study is timed against plain NumPy (fwbench.scenarios.micro).
# It is a cell framework of that suite only, never in the config's `frameworks` (it has no models).
MICRO_BASELINE = "numpy"

# Wildcard patterns shared by the Snakemake rules (wildcard_constraints) and by parse_cell_path.
WILDCARD_PATTERNS = {
    "suite": "|".join(SUITES),
    "framework": r"[a-z][a-z0-9]*",
    "mode": r"[a-z][a-z0-9]*",
    "model": r"[a-z][a-z0-9_]*",
    "precision": r"[a-z][a-z0-9]*",
    "batch": r"[1-9][0-9]*",
}

# How much one warm worker serves in a launch (a suite's `share_workers`, fwbench.running.runner): one cell, the
# batch sizes of one (model, precision), every model and batch size of one precision, or every cell of the launch
# (every model, precision and batch size its framework and mode has in the group). `true` and `false`, the setting's
# earlier values, mean batch_sizes and cell.
WORKER_SCOPES = ("cell", "batch_sizes", "models", "launch")
DEFAULT_WORKER_SCOPE = "launch"


def worker_scope(settings: Mapping[str, Any]) -> str:
    """The scope a suite's settings give its warm workers (`share_workers`), one of WORKER_SCOPES."""
    value = settings.get("share_workers", DEFAULT_WORKER_SCOPE)
    if isinstance(value, bool):
        return "batch_sizes" if value else "cell"
    if value not in WORKER_SCOPES:
        raise ValueError(f"share_workers: {value!r} is not one of {', '.join(WORKER_SCOPES)} (or true/false)")
    return str(value)


# The execution mode (fwbench.study.modes) follows the framework: torch/eager and torch/compile are two cells.
CELL_PATH = "cells/{suite}/{framework}/{mode}/{model}/{precision}/bs{batch}.json"


@dataclass(frozen=True, order=True)
class Cell:
    """One benchmark cell. In the micro suite `model` names the operation (matmul, mlp) and `image_size` is None:
    the path layout, the runner and the analysis stay one for every suite. `mode` is the execution mode
    (fwbench.study.modes); left out, the framework's primary one."""

    suite: str
    framework: str
    model: str
    precision: str
    batch_size: int
    image_size: int | None
    mode: str = ""

    def __post_init__(self):
        if not self.mode:
            object.__setattr__(self, "mode", execution_modes.primary(self.framework))

    def worker_key(self, scope: str = "batch_sizes") -> tuple:
        """What the cells one warm worker may serve under `scope` (WORKER_SCOPES) have alike: every cell field but
        the batch size (batch_sizes), and the model (models), and the precision (launch); the cell itself (cell).
        They share the worker's process, its imports and its compiler (fwbench.running.runner)."""
        if scope == "cell":
            return (self,)
        common = (self.suite, self.framework, self.mode, self.image_size)
        if scope == "launch":
            return common
        if scope == "models":
            return (*common, self.precision)
        if scope == "batch_sizes":
            return (*common, self.precision, self.model)
        raise ValueError(f"unknown worker scope {scope!r}; known: {', '.join(WORKER_SCOPES)}")

    def comparison(self) -> tuple[str, str, int]:
        """The comparison the cell belongs to within its suite: its model or operation, precision and batch size
        (every framework and mode of it are measured side by side)."""
        return (self.model, self.precision, self.batch_size)

    def relpath(self) -> str:
        return CELL_PATH.format(
            suite=self.suite,
            framework=self.framework,
            mode=self.mode,
            model=self.model,
            precision=self.precision,
            batch=self.batch_size,
        )

    def path(self, results_dir: str | Path = "results") -> Path:
        return Path(results_dir) / self.relpath()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def label(self) -> str:
        return f"{self.suite}/{self.framework}/{self.mode}/{self.model}/{self.precision}/bs{self.batch_size}"


def suite_batch_sizes(config: Mapping[str, Any], suite: str) -> list[int]:
    return list(config[suite]["batch_sizes"])


def suite_frameworks(config: Mapping[str, Any], suite: str) -> list[str]:
    """The frameworks with cells in `suite`: the study's, and NumPy first in the micro suite."""
    return [MICRO_BASELINE, *config["frameworks"]] if suite == "micro" else list(config["frameworks"])


def suite_models(config: Mapping[str, Any], suite: str) -> list[str]:
    """What a suite's cells run: the study's models (training: `training.models` where it names a subset), or the
    micro suite's operations."""
    if suite == "micro":
        return list(config["micro"]["operations"])
    trained = config.get("training", {}).get("models") if suite == "training" else None
    return list(trained or config["models"])


def suite_image_size(config: Mapping[str, Any], suite: str) -> int | None:
    return None if suite == "micro" else int(config["dataset"]["image_size"])


def suite_num_classes(config: Mapping[str, Any], suite: str) -> int:
    """The classes a suite's models predict: the dataset's, or the micro MLP's `micro.classes`."""
    return int(config["micro"]["classes"] if suite == "micro" else config["dataset"]["num_classes"])


def group_variants(config: Mapping[str, Any], suite: str, model: str) -> list[tuple[str, str]]:
    """(framework, mode) of every cell of one comparison of `suite` and `model`, in config order: each framework's
    modes in the order the config lists them."""
    return [
        (framework, mode)
        for framework in suite_frameworks(config, suite)
        for mode in execution_modes.cell_modes(config, suite, framework, model)
    ]


def comparison_rules(config: Mapping[str, Any], suite: str, rule: str) -> dict[str, list[str]]:
    """The rules that measure `suite`'s comparison groups, each with the models it measures. A group rule's outputs
    are every (framework, mode) of its comparison, and Snakemake's outputs cannot depend on a wildcard: models whose
    comparisons hold different modes (mode_scope.models) need rules of their own. `rule` measures the models in
    scope (every configured mode), `{rule}_primary` the others (each framework's first mode); one rule when all
    models' comparisons hold the same modes."""
    models = suite_models(config, suite)
    first = group_variants(config, suite, models[0])
    if all(group_variants(config, suite, m) == first for m in models):
        return {rule: models}
    scoped = [m for m in models if execution_modes.in_scope(config, suite, m)]
    return {rule: scoped, f"{rule}_primary": [m for m in models if m not in scoped]}


def cells(config: Mapping[str, Any]) -> list[Cell]:
    """All cells of a validated config, in a stable order: suite, framework (config order), mode, model, precision,
    batch size; a framework's later modes only for the models in mode_scope."""
    out = []
    for suite in config["suites"]:
        image_size = suite_image_size(config, suite)
        for framework in suite_frameworks(config, suite):
            for mode, model, precision, batch in itertools.product(
                execution_modes.framework_modes(config, framework),
                suite_models(config, suite),
                config["precisions"],
                suite_batch_sizes(config, suite),
            ):
                if mode in execution_modes.cell_modes(config, suite, framework, model):
                    out.append(Cell(suite, framework, model, precision, int(batch), image_size, mode))
    return out


def measuring_processes(config: Mapping[str, Any]) -> dict[str, int]:
    """Per suite, the measuring processes a study starts (before any fallback retry, compile launches apart): each
    inference and micro worker runs `trials` fresh processes, a worker serving what its suite's `share_workers`
    scope gives it (`worker_scope`: by default every cell of its framework and mode in the launch,
    fwbench.running.runner); each training cell one. What a study costs is mostly these processes' start-up and
    compilation, so study files state this count beside their cells."""
    counts = dict.fromkeys(config["suites"], 0)
    workers: set[Any] = set()
    for cell in cells(config):
        if cell.suite == "training":
            counts[cell.suite] += 1
            continue
        worker = cell.worker_key(worker_scope(config[cell.suite]))
        if worker not in workers:
            workers.add(worker)
            counts[cell.suite] += int(config[cell.suite]["trials"])
    return counts


def cells_per_worker(config: Mapping[str, Any], suite: str) -> int:
    """The most cells one warm worker of `suite` serves in a launch under its `share_workers` scope (a worker's ready
    reply may take its timeout once per cell it prepares: fwbench.running.children.Child.until_ready)."""
    scope = worker_scope(config[suite])
    counts: dict[tuple, int] = {}
    for cell in cells(config):
        if cell.suite == suite:
            key = cell.worker_key(scope)
            counts[key] = counts.get(key, 0) + 1
    return max(counts.values(), default=1)


def cell_paths(config: Mapping[str, Any], results_dir: str | Path = "results", suite: str | None = None) -> list[str]:
    """Every cell's result path (strings joined once, not a Path per cell: the workflow lists thousands of them)."""
    root = str(Path(results_dir))
    return [f"{root}/{c.relpath()}" for c in cells(config) if suite is None or c.suite == suite]


_PATH_RE = re.compile(
    r"(?:^|/)cells/(?P<suite>{suite})/(?P<framework>{framework})/(?P<mode>{mode})/(?P<model>{model})/"
    r"(?P<precision>{precision})/bs(?P<batch>{batch})\.json$".format(**WILDCARD_PATTERNS)
)


def parse_cell_path(path: str | Path, image_size: int | None) -> Cell:
    """The cell of a result path; `image_size` is the study's (a micro cell has none)."""
    match = _PATH_RE.search(str(path))
    if not match:
        raise ValueError(f"not a cell result path: {path}")
    g = match.groupdict()
    size = None if g["suite"] == "micro" else image_size
    return Cell(g["suite"], g["framework"], g["model"], g["precision"], int(g["batch"]), size, g["mode"])


def cell_from_wildcards(wildcards: Mapping[str, str], suite: str, image_size: int | None) -> Cell:
    return Cell(
        suite,
        wildcards["framework"],
        wildcards["model"],
        wildcards["precision"],
        int(wildcards["batch"]),
        None if suite == "micro" else image_size,
        wildcards.get("mode", ""),
    )
