"""Provenance: enough about the machine and software to tell two results apart, collected without a framework."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import fwbench
from fwbench.installation import interpreter
from fwbench.trackers.hardware import blas_identity, cpu_identity

ENV_PREFIXES = ("OMP_", "MKL_", "OPENBLAS_", "XLA_", "JAX_", "TF_", "CUDA_", "NVIDIA_", "TORCH_", "PYTORCH_")
ENV_EXACT = (
    "NUMEXPR_NUM_THREADS",
    "HF_DATASETS_OFFLINE",
    "SLURM_JOB_ID",
    "SLURM_CPUS_PER_TASK",
    "DNNL_MAX_CPU_ISA",
    "ONEDNN_MAX_CPU_ISA",
    "ATEN_CPU_CAPABILITY",
)
LIBRARIES = ("numpy", "snakemake", "pandas", "scipy", "psutil", "nvidia-ml-py")


def cpu_model() -> str | None:
    """cpuinfo's "model name" alone, kept for results and readers from before `hardware` (cpu_identity): on a cloud
    VM it may not tell two CPU generations apart."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def relevant_env() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES) or k in ENV_EXACT}


def git_state(repo: Path | None = None) -> dict[str, Any]:
    """Commit of the fwbench checkout that produced a result; missing with a reason outside a git checkout."""
    repo = repo or Path(fwbench.__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        return {"commit": commit, "dirty": bool(dirty)}
    except (OSError, subprocess.SubprocessError) as exc:
        return {"commit": None, "dirty": None, "missing_reason": f"no git commit for {repo}: {type(exc).__name__}"}


def library_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def host_provenance() -> dict[str, Any]:
    """What every result records about the machine and software; `hardware` and `blas` name the CPU generation, its
    instruction sets and NumPy's BLAS kernels, which `cpu_model` alone may not."""
    hardware = cpu_identity()
    return {
        "fwbench": fwbench.__version__,
        "harness_version": fwbench.HARNESS_VERSION,
        "python": sys.version.split()[0],
        # which Python ran the cell: the implementation, its executable and the kind of environment (venv, conda or
        # the system's), since fwbench now runs in environments it did not make
        "interpreter": interpreter(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "hardware": hardware,
        "blas": blas_identity(cpu=hardware),
        "libraries": library_versions(),
        "env": relevant_env(),
        "git": git_state(),
    }
