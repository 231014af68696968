"""Reading the micro cells (`results/cells/micro/<framework>/<mode>/<operation>/<precision>/bs<batch>.json`) into
`MicroCell`s: each cell's key, status and per-variant samples, one array per trial. Every file is checked before any
is used, and the files that cannot be used are named together with the command that regenerates them
(`CellFileError`). Where a cell computed (`platform_device`) is read here too: the tidy table and the speedups both
report it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np

from fwbench.analysis.common.cells import CellFileError
from fwbench.analysis.common.partners import cell_mode
from fwbench.analysis.micro.vocabulary import NUMPY, VARIANTS
from fwbench.results import load_result

SUITE = "micro"


def one_line(text: object) -> str:
    return " ".join(str(text).split())


@dataclass
class MicroCell:
    """One micro cell result as the analysis needs it: its key, status and per-variant samples (one array per
    trial, in ms per call)."""

    path: str
    framework: str
    operation: str
    precision: str
    batch_size: int
    status: str
    reason: str | None
    variants: dict[str, tuple[np.ndarray, ...]] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict, repr=False)
    mode: str = ""  # the execution mode (fwbench.study.modes); left out, the framework's primary one

    def __post_init__(self):
        self.mode = self.mode or cell_mode({"framework": self.framework})

    @property
    def group(self) -> str | None:
        """The id of the comparison group (one job: every framework at this operation, precision and batch size)
        whose rounds measured the cell."""
        return ((self.result.get("provenance") or {}).get("group") or {}).get("id")

    def rounds(self, variant: str) -> tuple[int, ...] | None:
        """The round of the group each of the variant's trials ran in (`metrics.trials[i].round`, trial i of
        `variants[variant]`), or None where the cell does not record one per trial."""
        trials = (self.result.get("metrics") or {}).get("trials") or []
        rounds = [trial.get("round") if isinstance(trial, dict) else None for trial in trials]
        if len(rounds) != len(self.variants.get(variant, ())) or any(r is None for r in rounds):
            return None
        rounds = [int(r) for r in rounds]
        return tuple(rounds) if len(set(rounds)) == len(rounds) else None

    def trial_medians(self, variant: str) -> np.ndarray:
        """Each trial's (process's) median time per call of the variant."""
        return np.array([float(np.median(trial)) for trial in self.variants[variant]])

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def key(self) -> tuple[str, str, int]:
        return self.operation, self.precision, self.batch_size

    def pooled(self, variant: str) -> np.ndarray:
        return np.concatenate(self.variants[variant])


# The mode's folder is optional: paths from before cells had a mode lack it.
_MICRO_PATH = re.compile(
    r"(?:^|/)cells/micro/(?P<framework>[^/]+)/(?:(?P<mode>[^/]+)/)?(?P<operation>[^/]+)/(?P<precision>[^/]+)/"
    r"bs(?P<batch>[0-9]+)\.json$"
)


def _read(path: str | Path) -> tuple[dict[str, Any] | None, str | None]:
    """(result, None), or (None, why the file cannot be used)."""
    try:
        return load_result(path), None
    except UnicodeDecodeError:
        return None, "not valid JSON: not UTF-8 text"
    except json.JSONDecodeError as error:
        return None, f"not valid JSON: {one_line(error)}"
    except jsonschema.ValidationError as error:
        return None, one_line(error.message)
    except OSError as error:
        return None, f"cannot be read: {one_line(error.strerror or error)}"


def _variant_trials(result: dict[str, Any]) -> dict[str, tuple[np.ndarray, ...]]:
    """Variant -> per-trial sample arrays of an ok cell; the resident variant falls back to `samples_ms` (one trial).
    Raises ValueError when a variant's samples are not positive finite numbers."""
    metrics = result.get("metrics") or {}
    found: dict[str, tuple[np.ndarray, ...]] = {}
    for name, variant in (metrics.get("variants") or {}).items():
        trials = [np.asarray(t, dtype=np.float64) for t in (variant or {}).get("trial_samples_ms") or []]
        trials = [t for t in trials if t.size]
        if trials:
            found[name] = tuple(trials)
    if "resident" not in found and result.get("samples_ms"):
        found["resident"] = (np.asarray(result["samples_ms"], dtype=np.float64),)
    if "resident" not in found:
        raise ValueError("an ok cell without resident samples")
    for name, trials in found.items():
        if any(t.ndim != 1 or not (np.isfinite(t).all() and (t > 0).all()) for t in trials):
            raise ValueError(f"variant {name} has samples that are not positive finite numbers")
    order = [v for v in VARIANTS if v in found] + sorted(set(found) - set(VARIANTS))
    return {name: found[name] for name in order}


def _micro_problem(path: str | Path, result: Any) -> str | None:
    """Why a readable JSON file is not a usable micro cell result, or None."""
    cell = result.get("cell") if isinstance(result, dict) else None
    if not isinstance(cell, dict):
        return "not a cell result (no cell)"
    if cell.get("suite") != SUITE:
        return f"it holds a cell of suite {cell.get('suite')!r}, not a micro cell"
    missing = [key for key in ("framework", "model", "precision", "batch_size") if key not in cell]
    if missing:
        return f"its cell lacks {', '.join(missing)}"
    if result.get("status") not in ("ok", "failed"):
        return f"status {result.get('status')!r} is neither ok nor failed"
    match = _MICRO_PATH.search(str(path))
    holds = (cell["framework"], cell_mode(cell), cell["model"], cell["precision"], str(cell["batch_size"]))
    if match:
        mode = match["mode"] or cell_mode({"framework": match["framework"]})
        if holds != (match["framework"], mode, match["operation"], match["precision"], match["batch"]):
            return "it holds the result of cell micro/{}/{}/{}/{}/bs{}".format(*holds)
    if result["status"] == "ok":
        try:
            _variant_trials(result)
        except ValueError as error:
            return str(error)
    return None


def _cell(path: str | Path, result: dict[str, Any]) -> MicroCell:
    cell = result["cell"]
    return MicroCell(
        path=str(path),
        framework=cell["framework"],
        operation=cell["model"],
        precision=cell["precision"],
        batch_size=int(cell["batch_size"]),
        status=result["status"],
        reason=result.get("reason"),
        variants=_variant_trials(result) if result["status"] == "ok" else {},
        result=result,
        mode=cell_mode(cell),
    )


def load_micro_cells(paths: Iterable[str | Path]) -> list[MicroCell]:
    """Every micro cell result of `paths`, each checked before any is used. A file that is not JSON, breaks the
    result schema (`load_result`), is a cell of another suite, holds another cell than its path names, or has
    unusable samples raises `CellFileError` (a ValueError) naming every such file and the command that regenerates
    it."""
    cells, problems = [], []
    for path in paths:
        result, why = _read(path)
        why = why or _micro_problem(path, result)
        if why:
            problems.append((str(path), why))
        else:
            cells.append(_cell(path, result))
    if problems:
        raise CellFileError(problems)
    if not cells:
        raise ValueError("no micro cell results to analyse")
    return sorted(
        cells, key=lambda c: (c.operation, c.precision, c.framework != NUMPY, c.framework, c.mode, c.batch_size)
    )


def as_cells(cells_or_paths: Iterable[MicroCell | str | Path]) -> list[MicroCell]:
    items = list(cells_or_paths)
    if items and all(isinstance(item, MicroCell) for item in items):
        return items  # type: ignore[return-value]
    return load_micro_cells(items)  # type: ignore[arg-type]


def framework_provenance(result: dict[str, Any]) -> dict[str, Any]:
    return (result.get("provenance") or {}).get("framework") or {}


def platform_device(result: dict[str, Any]) -> tuple[str | None, str | None]:
    """(platform, device name): the CPU model for a cell that computed on the host, else the device's name."""
    device = framework_provenance(result).get("device") or {}
    platform = device.get("platform")
    if platform is None:
        return None, None
    if platform == "cpu":
        return platform, (result.get("provenance") or {}).get("cpu_model") or "CPU"
    return platform, device.get("name") or platform
