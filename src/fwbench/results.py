"""Cell results: the one schema every producer is checked against and every consumer can rely on."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema


@cache
def result_schema() -> dict:
    text = (resources.files("fwbench") / "schemas" / "cell_result.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def validate_result(result: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError naming the offending field if `result` breaks the contract."""
    validator = jsonschema.Draft202012Validator(result_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(result))
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "<top level>"
        raise jsonschema.ValidationError(f"cell result invalid at {where}: {error.message}")


def load_result(path: str | Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        result = json.load(handle)
    validate_result(result)
    return result


# A suite's cells as one file (workflow/rules/aggregate.smk: cell_index). The analyses that read a whole suite's cells
# take it as their input instead of the cells themselves: Snakemake resolves each input file of each job while it
# builds the DAG, and six rules naming every cell of a 5,040-cell grid cost seconds of every dry run.
CELL_INDEX_KIND = "fwbench cell index"


def write_cell_index(path: str | Path, suite: str, cell_paths: list[str]) -> None:
    from fwbench.io import atomic_write_json

    atomic_write_json(path, {"kind": CELL_INDEX_KIND, "suite": suite, "cells": [str(p) for p in cell_paths]})


def read_cell_index(paths: str | Path | list[str | Path]) -> list[str]:
    """The cell paths of one index file or of several (in their order); a file that is not an index is named."""
    cells: list[str] = []
    for path in [paths] if isinstance(paths, str | Path) else paths:
        with open(path, encoding="utf-8") as handle:
            index = json.load(handle)
        kind, listed = (index.get("kind"), index.get("cells")) if isinstance(index, dict) else (None, None)
        if kind != CELL_INDEX_KIND or not isinstance(listed, list):
            raise ValueError(f"{path}: not a cell index written by the cell_index rule")
        cells.extend(listed)
    return cells
