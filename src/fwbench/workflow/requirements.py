"""What a study still needs of this environment, decided while Snakemake parses the workflow, before any job.

A study names frameworks; the environment may lack one (an existing environment with PyTorch and JAX but no
TensorFlow), or may hold none at all (a laptop that builds the paper from results measured on a GPU node and
restored with `fwbench restore`). Only what is still to be measured needs a framework: a framework is required when
one of its cells has no result yet, and PyTorch when starting weights are still to be written. A results directory
restored from an archive is measured elsewhere: it is never completed here, where another machine's cells would be
mixed with its own, and its device check keeps the software of the machine that measured it (so that the check, and
with it every cell, is not rerun because this environment's frameworks differ).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fwbench import installation
from fwbench.study.grid import cells

RESTORE_RECORD = "restored-from.json"


def unmeasured_frameworks(config: Mapping[str, Any], results: str | Path) -> list[str]:
    """The frameworks of the study (in its order) with at least one cell that has no result file yet."""
    frameworks: dict[str, None] = {}
    for cell in cells(config):
        if cell.framework not in frameworks and not os.path.exists(cell.path(results)):
            frameworks[cell.framework] = None
    return list(frameworks)


def missing_cells(config: Mapping[str, Any], results: str | Path) -> list[str]:
    return [str(p) for c in cells(config) if not (p := c.path(results)).exists()]


def weights_to_write(config: Mapping[str, Any], results: str | Path) -> bool:
    """Whether a model of the study has no starting weights yet (init_weights writes them with PyTorch)."""
    models = {cell.model for cell in cells(config) if cell.suite != "micro"}
    return any(not Path(results, "weights", f"{model}.npz").exists() for model in models)


def restore_record(results: str | Path) -> dict[str, Any] | None:
    """The record `fwbench restore` left in `results`, or None where the results were measured here."""
    from fwbench.io import read_json

    path = Path(results, RESTORE_RECORD)
    if not path.exists():
        return None
    try:
        record = read_json(path)
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a restore record ({type(error).__name__}: {error})") from None
    if not isinstance(record, dict) or "manifest" not in record:
        raise ValueError(f"{path}: not a restore record written by fwbench restore")
    return record


def refusal(config: Mapping[str, Any], results: str | Path, restored: Mapping[str, Any] | None) -> str | None:
    """The one line that stops the study before any job, or None: a restored study with cells it does not hold, or
    a framework (or PyTorch for the weights) that cells still to be measured need and this environment lacks."""
    if restored is not None:
        missing = missing_cells(config, results)
        if missing:
            machine = restored["manifest"].get("machine", {}).get("summary", "another machine")
            return (
                f"{results}/ holds results restored from {restored.get('archive', 'an archive')} (measured on "
                f"{machine}), which lack {len(missing)} cell(s) of this study, e.g. {missing[0]}: measure them where "
                f"the archive was made, or in a results/ of their own here ({results}/{RESTORE_RECORD} says so)"
            )
        return None
    frameworks = unmeasured_frameworks(config, results)
    return installation.missing_line(frameworks, needs_weights=bool(frameworks) and weights_to_write(config, results))


def software_fingerprint(restored: Mapping[str, Any] | None, installed: Mapping[str, str]) -> dict[str, str]:
    """The device check's software param: the measuring machine's, where the results were restored, else this
    environment's (`installed`, fwbench.running.devices.software_fingerprint)."""
    if restored is not None and restored["manifest"].get("software") is not None:
        return dict(restored["manifest"]["software"])
    return dict(installed)


def _framework_of(distribution: str) -> str | None:
    """The framework a distribution of the software fingerprint belongs to (installation.FRAMEWORKS), JAX's CUDA
    plugins (jax-cuda13-plugin, ...) included."""
    name = installation.normalise(distribution)
    for framework, packages in installation.FRAMEWORKS.items():
        names = {n for d in packages.distributions for n in ((d,) if isinstance(d, str) else d)}
        if name in {installation.normalise(n) for n in names} or name.startswith(f"{framework}-cuda"):
            return framework
    return None


def framework_software(fingerprint: Mapping[str, str], frameworks: Iterable[str]) -> dict[str, str]:
    """The part of a software fingerprint (`software_fingerprint`) that belongs to `frameworks`: a measuring job's
    param, so that reinstalling a framework reruns the cells measured with it and no other."""
    wanted = set(frameworks)
    return {name: version for name, version in sorted(fingerprint.items()) if _framework_of(name) in wanted}


def stop_if_refused(config: Mapping[str, Any], results: str | Path) -> dict[str, Any] | None:
    """At parse time: exit with the one line of `refusal`, else return the restore record (None if measured here)."""
    try:
        restored = restore_record(results)
    except ValueError as error:
        sys.exit(f"fwbench: {error}")
    line = refusal(config, results, restored)
    if line:
        sys.exit(f"fwbench: {line}")
    return restored
