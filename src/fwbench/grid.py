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

SUITES = ("inference", "training")

# Wildcard patterns shared by the Snakemake rules (wildcard_constraints) and by parse_cell_path.
WILDCARD_PATTERNS = {
    "suite": "|".join(SUITES),
    "framework": r"[a-z][a-z0-9]*",
    "model": r"[a-z][a-z0-9_]*",
    "precision": r"[a-z][a-z0-9]*",
    "batch": r"[1-9][0-9]*",
}

CELL_PATH = "cells/{suite}/{framework}/{model}/{precision}/bs{batch}.json"


@dataclass(frozen=True, order=True)
class Cell:
    suite: str
    framework: str
    model: str
    precision: str
    batch_size: int
    image_size: int

    def relpath(self) -> str:
        return CELL_PATH.format(
            suite=self.suite,
            framework=self.framework,
            model=self.model,
            precision=self.precision,
            batch=self.batch_size,
        )

    def path(self, results_dir: str | Path = "results") -> Path:
        return Path(results_dir) / self.relpath()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def label(self) -> str:
        return f"{self.suite}/{self.framework}/{self.model}/{self.precision}/bs{self.batch_size}"


def suite_batch_sizes(config: Mapping[str, Any], suite: str) -> list[int]:
    return list(config[suite]["batch_sizes"])


def cells(config: Mapping[str, Any]) -> list[Cell]:
    """All cells of a validated config, in a stable order."""
    out = []
    for suite in config["suites"]:
        for framework, model, precision, batch in itertools.product(
            config["frameworks"], config["models"], config["precisions"], suite_batch_sizes(config, suite)
        ):
            out.append(Cell(suite, framework, model, precision, int(batch), int(config["dataset"]["image_size"])))
    return out


def cell_paths(config: Mapping[str, Any], results_dir: str | Path = "results", suite: str | None = None) -> list[str]:
    return [str(c.path(results_dir)) for c in cells(config) if suite is None or c.suite == suite]


_PATH_RE = re.compile(
    r"(?:^|/)cells/(?P<suite>{suite})/(?P<framework>{framework})/(?P<model>{model})/"
    r"(?P<precision>{precision})/bs(?P<batch>{batch})\.json$".format(**WILDCARD_PATTERNS)
)


def parse_cell_path(path: str | Path, image_size: int) -> Cell:
    match = _PATH_RE.search(str(path))
    if not match:
        raise ValueError(f"not a cell result path: {path}")
    g = match.groupdict()
    return Cell(g["suite"], g["framework"], g["model"], g["precision"], int(g["batch"]), image_size)


def cell_from_wildcards(wildcards: Mapping[str, str], suite: str, image_size: int) -> Cell:
    return Cell(
        suite,
        wildcards["framework"],
        wildcards["model"],
        wildcards["precision"],
        int(wildcards["batch"]),
        image_size,
    )
