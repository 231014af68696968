"""Reading cell result files for analysis: every file checked before any is used, and a bad one named.

A cell file that is not JSON (truncated, overwritten), breaks the result schema (written by another harness
version, or not a cell result at all) or holds another cell's result (copied over) stops the analysis with one
error that names the file and the command that regenerates it: Snakemake's own checks cannot see inside a file, so
without this the study would stop in a traceback deep in pandas, or worse, aggregate a wrong cell.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema

from fwbench.results import load_result
from fwbench.study.grid import Cell, parse_cell_path

# The README's command; --forcerun reruns the file's job (its whole comparison group) and everything downstream.
RUN_COMMAND = ".venv/bin/snakemake --cores all --resources gpu=1"
CELL_KEYS = ("suite", "framework", "mode", "model", "precision", "batch_size")


class CellFileError(ValueError):
    """One or more cell files cannot be analysed; the message names them and the command that regenerates them.

    A workflow script ends with `terminal_message` on the terminal (see `fwbench.workflow.logs.redirect_to`), not with a
    traceback in the rule's log."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        files = [path for path, _ in problems]
        command = f"{RUN_COMMAND} --forcerun {' '.join(files)}"
        if len(problems) == 1:
            (path, why), *_ = problems
            message = f"{path} is not a valid cell result ({why}): regenerate it with: {command}"
        else:
            listed = "; ".join(f"{path} ({why})" for path, why in problems)
            message = f"{len(problems)} files are not valid cell results: {listed}: regenerate them with: {command}"
        super().__init__(message)
        self.terminal_message = f"fwbench: {message}"


def _shown(path: str | os.PathLike) -> str:
    """The path as the user would type it in the workflow's directory."""
    path = Path(path)
    if path.is_absolute():
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return str(path)
    return str(path)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _problem(path: Path, result: dict[str, Any] | None, error: Exception | None) -> str | None:
    if isinstance(error, json.JSONDecodeError):
        return f"not valid JSON: {_one_line(error)}"
    if isinstance(error, UnicodeDecodeError):
        return "not valid JSON: not UTF-8 text"
    if isinstance(error, jsonschema.ValidationError):
        return _one_line(error.message)
    if isinstance(error, OSError):
        return f"cannot be read: {_one_line(error.strerror or error)}"
    if error is not None:
        return _one_line(f"{type(error).__name__}: {error}")
    try:
        expected = parse_cell_path(path, result["cell"]["image_size"])
    except ValueError:
        return None  # not at a cell path (a test's or a user's file): nothing to compare the contents with
    # A result written before cells had a mode holds its framework's primary one (fwbench.study.grid.Cell).
    held = Cell(**result["cell"]).as_dict()
    holds, wanted = (tuple(cell[k] for k in CELL_KEYS) for cell in (held, expected.as_dict()))
    if holds != wanted:
        label = "{}/{}/{}/{}/{}/bs{}".format(*holds)
        return f"it holds the result of cell {label}"
    return None


def cells_by_path(paths: Iterable[str | os.PathLike]) -> list[tuple[str | os.PathLike, dict[str, Any]]]:
    """(path, result) of every file, each validated against the result schema and its own path; raises
    CellFileError naming every file that is not a valid result of the cell its path names."""
    loaded, problems = [], []
    for path in paths:
        result, error = None, None
        try:
            result = load_result(path)
        except (OSError, ValueError, jsonschema.ValidationError) as exc:  # JSONDecodeError is a ValueError
            error = exc
        why = _problem(Path(path), result, error)
        if why is not None:
            problems.append((_shown(path), why))
        else:
            loaded.append((path, result))
    if problems:
        raise CellFileError(problems)
    return loaded


def load_cells(paths: Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    """The results of `paths`, in order (see `cells_by_path`)."""
    return [result for _, result in cells_by_path(paths)]
