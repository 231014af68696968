"""What a warm worker serving many cells shares between them, and what it keeps apart.

A worker serves every cell of its framework and mode that its launch measures (a suite's `share_workers` scope,
fwbench.study.grid.worker_scope): several models, precisions and batch sizes in one process, so that a launch pays
one start-up and one import per variant instead of one per cell. The scenarios (fwbench.scenarios.inference, micro)
prepare the cells unit by unit (a unit: one model or operation at one precision, built once, then each batch size
compiled on its own shapes) and then time every cell's bursts in the same blocks.

Kept apart: each unit has a backend instance of its own (`Backends`), holding its model, its compiled programs and
its precision, which the framework keeps process-wide (TF32 switches, JAX's matmul precision): an instance is
activated before its cells' compiles and calls where the worker serves more than one precision. An error in one
cell's build, compile or first call fails that cell only (`failed_part`): the worker goes on with its others, and the
runner records the failure as the cell's (fwbench.running.context.cell_outcome). What the cells share (the process's
memory, allocator, caches and the other models it holds) is recorded in each cell's `metrics.worker`
(`worker_record`), so that a reader can see what a cell was measured beside.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fwbench.backends.base import Framework
from fwbench.study.grid import Cell

# A unit's backend: the one instance a test passes, or one per (model, precision) the worker makes on demand.
BackendFor = Callable[[Cell], Framework]


def backend_of(backend: Framework | BackendFor) -> BackendFor:
    """`backend` as a function of the cell: a single instance serves every cell (one model and precision)."""
    if isinstance(backend, Framework):
        return lambda cell: backend
    return backend


def weights_of(weights_path: str | Path | Mapping[str, str | Path]) -> Callable[[str], str | Path]:
    """Each model's weights: one file for every cell (a micro worker's operands), or a mapping by model."""
    if isinstance(weights_path, Mapping):
        return lambda model: weights_path[model]
    return lambda model: weights_path


def units(cells: Sequence[Cell], key: Callable[[Cell], tuple]) -> list[list[Cell]]:
    """The cells grouped by `key` (a model or operation at one precision), in the order each unit first appears."""
    grouped: dict[tuple, list[Cell]] = {}
    for cell in cells:
        grouped.setdefault(key(cell), []).append(cell)
    return list(grouped.values())


def check_served(cells: Sequence[Cell]) -> None:
    """One worker serves one suite, framework, mode and image size (whatever its scope)."""
    if not cells or len({cell.worker_key("launch") for cell in cells}) != 1:
        raise ValueError("a worker serves cells of one suite, framework, mode and image size")


def failed_part(cell: Cell, exc: BaseException, where: str) -> dict[str, Any]:
    """A cell whose own preparation raised: the error and its traceback, which the runner classifies as a failed
    process's (fwbench.running.context.cell_outcome), while the worker goes on with its other cells."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    print(f"[fwbench.scenarios.served] {cell.label()} failed in its {where}:\n{text}", flush=True)
    return {"failed": {"error": f"{type(exc).__name__}: {exc}", "where": where, "traceback": text}}


def worker_record(cell: Cell, cells: Sequence[Cell], failed: Sequence[Cell], position: int) -> dict[str, Any]:
    """What the cell's worker held while it was measured: every cell the process served (the models and
    precisions it built beside this one), which of them failed in their preparation, and where this cell came in
    the preparation order (its compile ran after the earlier ones')."""
    others = [other for other in cells if other != cell]
    return {
        "cells": len(cells),
        "position": position,
        "models": sorted({other.model for other in cells}),
        "precisions": sorted({other.precision for other in cells}),
        "batch_sizes": sorted({other.batch_size for other in cells}),
        "beside": [other.label() for other in others],
        "failed_beside": [other.label() for other in failed if other != cell],
        "alone": not others,
    }


def activation(cells: Sequence[Cell]) -> Callable[[Framework], None]:
    """A function that activates a unit's backend before its work, where the worker serves more than one precision
    (their switches are process-wide); a no-op where all its cells share one."""
    if len({cell.precision for cell in cells}) <= 1:
        return lambda backend: None
    return lambda backend: backend.activate()
