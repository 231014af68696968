"""What the study ran on, summarised across its cells (and flagged where cells disagree)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fwbench.analysis.cells import load_cells


def _one(values: set[Any]) -> Any:
    values.discard(None)
    if not values:
        return None
    return next(iter(values)) if len(values) == 1 else " / ".join(sorted(map(str, values))) + " (differs by cell)"


# Rows of the setup table that only mean something when cells ran on a GPU: (label, framework, where, key).
GPU_ROWS = (
    ("GPU driver (CUDA API)", "jax", "versions", "cuda_driver"),
    ("CUDA runtime (PyTorch)", "torch", "versions", "cuda"),
    ("cuDNN (PyTorch)", "torch", "versions", "cudnn"),
    ("CUDA runtime (JAX)", "jax", "versions", "cuda"),
    ("cuDNN (JAX)", "jax", "versions", "cudnn"),
    ("JAX CUDA plugin", "jax", "versions", "plugins"),
    ("PyTorch cuDNN benchmark", "torch", "settings", "cudnn_benchmark"),
    ("JAX preallocation", "jax", "settings", "preallocate"),
)


def _gpu_rows(results: list[dict[str, Any]]) -> dict[str, set[Any]]:
    """CUDA stack and GPU knobs, each from the framework it belongs to, plus where cells ran (slots)."""
    rows: dict[str, set[Any]] = {label: set() for label, *_ in GPU_ROWS}
    rows |= {"Compute capability": set(), "TF32 in effect": set(), "XLA_FLAGS": set(), "GPU slots": set()}
    for result in results:
        framework = result["provenance"].get("framework") or {}
        for label, name, where, key in GPU_ROWS:
            if framework.get("name") == name:
                rows[label].add((framework.get(where) or {}).get(key))
        settings = framework.get("settings") or {}
        rows["TF32 in effect"].add(
            f"{result['cell']['precision']}: {'on' if settings.get('tf32_in_effect') else 'off'}"
        )
        if framework.get("name") == "jax":
            rows["XLA_FLAGS"].add(settings.get("xla_flags") or "(none)")
        rows["Compute capability"].add((framework.get("device") or {}).get("compute_capability"))
        placement = result["provenance"].get("placement") or {}
        if placement.get("slots"):
            rows["GPU slots"].add(f"{placement['slots']} (one cell per GPU)")
    rows["TF32 in effect"] = {"; ".join(sorted(rows["TF32 in effect"]))} if rows["TF32 in effect"] else set()
    return rows


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
    results = load_cells(paths)
    for result in results:
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
    env = {key: _one(values) for key, values in fields.items()}
    platforms = {((r["provenance"].get("framework") or {}).get("device") or {}).get("platform") for r in results}
    if platforms & {"cuda", "gpu"}:
        env |= {key: _one(values) for key, values in _gpu_rows(results).items()}
    return env
