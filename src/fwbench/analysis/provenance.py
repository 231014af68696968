"""What the study ran on, summarised across its cells (and flagged where cells disagree)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fwbench.results import load_result


def _one(values: set[Any]) -> Any:
    values.discard(None)
    if not values:
        return None
    return next(iter(values)) if len(values) == 1 else " / ".join(sorted(map(str, values))) + " (differs by cell)"


def study_environment(paths: Iterable[str | Path]) -> dict[str, Any]:
    fields: dict[str, set[Any]] = {
        k: set()
        for k in (
            "CPU",
            "Device",
            "Python",
            "PyTorch",
            "torchvision",
            "JAX",
            "jaxlib",
            "Flax",
            "NumPy",
            "Threads per cell",
            "Harness version",
            "fwbench commit",
        )
    }
    for path in paths:
        result = load_result(path)
        prov = result["provenance"]
        fields["CPU"].add(prov.get("cpu_model"))
        fields["Python"].add(prov.get("python"))
        fields["NumPy"].add((prov.get("libraries") or {}).get("numpy"))
        fields["Harness version"].add(prov.get("harness_version"))
        git = prov.get("git") or {}
        commit = git.get("commit")
        fields["fwbench commit"].add(f"{commit[:12]}{' (dirty)' if git.get('dirty') else ''}" if commit else None)
        framework = prov.get("framework")
        if framework:
            versions = framework.get("versions", {})
            for label, key in (
                ("PyTorch", "torch"),
                ("torchvision", "torchvision"),
                ("JAX", "jax"),
                ("jaxlib", "jaxlib"),
                ("Flax", "flax"),
            ):
                fields[label].add(versions.get(key))
            fields["Device"].add((framework.get("device") or {}).get("name"))
            fields["Threads per cell"].add((framework.get("settings") or {}).get("intra_op_threads"))
    return {key: _one(values) for key, values in fields.items()}
