"""A cell's own compile cache across its launches: a compile launch compiles cold, the measured launches reuse it.

A cell of the inference or micro suite runs in `trials` launches (fresh worker processes, fwbench.running.launches), so
that the variation between processes is estimable. Compiling cold in every launch measures nothing new (the programs are
the same) and costs the default study minutes (torch.compile alone took a quarter of it). So, with
`compile.launch_cache` (default true), the runner gives every cell a cache directory of its own, kept for the
cell's launches in the group's scratch directory and removed with it; the worker points each framework's own
persistent cache at it, the same mechanism for all three: TorchInductor's (TORCHINDUCTOR_CACHE_DIR), JAX's
persistent compilation cache (JAX_COMPILATION_CACHE_DIR, every program cached however fast it compiled) and
TensorFlow's XLA cache (--tf_xla_persistent_cache_directory in TF_XLA_FLAGS). Each process records the state it
found (cold: empty; warm: entries from an earlier launch of the same cell). The launch that fills the cache is not
a measured one: where the cache is in effect (`enabled`), the runner first runs a compile launch
(fwbench.running.compile_launch), in which each worker compiles cold, makes its first calls and exits without timed
bursts (one iteration per step, kept apart); its compile times are the cell's, and every measured launch then finds
the cache warm (the fairness ledger checks that each cell's measured launches found one state,
fwbench.analysis.fairness.cache_checks). Otherwise the cache state would be confounded with the launch order, and the
intervals are over launches. A study's own persistent cache (compile.inductor_cache, inference.jax_compilation_cache)
takes precedence: it is shared across cells and runs, and recorded as such.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fwbench.study.modes import TORCH_COMPILED_MODES

LAUNCH_CACHE_ENV = "FWBENCH_LAUNCH_CACHE"  # the cell's cache directory, set by the runner for each launch
SCOPE = "this cell's launches (its compile launch compiles cold, its measured launches reuse its programs)"
TF_CACHE_FLAG = "--tf_xla_persistent_cache_directory"


def enabled(settings: dict[str, Any]) -> bool:
    """Whether a group's launches share their cells' compiled programs (compile.launch_cache, more than one launch):
    then a compile launch fills the caches before the measured launches (fwbench.running.compile_launch)."""
    return bool((settings.get("compile") or {}).get("launch_cache", False)) and int(settings.get("trials", 1)) > 1


def state(directory: str | os.PathLike[str]) -> str:
    """cold (nothing cached yet) or warm (an earlier launch left entries)."""
    path = Path(directory)
    return "warm" if path.is_dir() and any(path.iterdir()) else "cold"


def describe(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """What a process records about the persistent compile cache it uses, as it found it on start: cold or warm,
    where, and whose it is (this cell's launches, or the study's, shared across cells and runs)."""
    if _own(directory):  # a scratch directory of the group's, removed with it: its path says nothing
        return {"state": state(directory), "scope": SCOPE}
    return {"state": state(directory), "dir": str(directory), "scope": "the study's (shared)"}


def _own(directory: str | os.PathLike[str]) -> bool:
    root = os.environ.get(LAUNCH_CACHE_ENV)
    return bool(root) and Path(directory).resolve().is_relative_to(Path(root).resolve())


def recorded_tf_flags(tf_xla_flags: str) -> str:
    """TF_XLA_FLAGS as a cell records them: a launch cache's scratch path (different in every group and run) named
    for what it is, so that two runs' settings compare equal (fwbench compare)."""
    directory = tf_cache_directory(tf_xla_flags)
    if directory is None or not _own(directory):
        return tf_xla_flags
    return tf_xla_flags.replace(f"{TF_CACHE_FLAG}={directory}", f"{TF_CACHE_FLAG}=<this cell's launch cache>")


def tf_cache_directory(tf_xla_flags: str) -> str | None:
    """The persistent XLA cache directory TensorFlow was given in TF_XLA_FLAGS, if any."""
    for flag in tf_xla_flags.split():
        name, _, value = flag.partition("=")
        if name == TF_CACHE_FLAG and value:
            return value
    return None


def apply(framework: str, mode: str, settings: dict[str, Any], environ: Any = os.environ) -> str | None:
    """Point `framework`'s own persistent cache at this cell's launch cache (LAUNCH_CACHE_ENV, set by the runner)
    before the framework is imported, unless the study keeps a persistent cache of its own for it. Returns the
    directory used, or None (no launch cache, an eager mode, or the study's cache)."""
    root = environ.get(LAUNCH_CACHE_ENV)
    if not root:
        return None
    if framework == "torch" and mode in TORCH_COMPILED_MODES:
        if (settings.get("compile") or {}).get("inductor_cache"):
            return None
        directory = os.path.join(root, "inductor")
        environ["TORCHINDUCTOR_CACHE_DIR"] = directory
    elif framework == "jax":
        if settings.get("jax_compilation_cache"):
            return None
        directory = os.path.join(root, "jax")
        environ["JAX_COMPILATION_CACHE_DIR"] = directory
        environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    elif framework == "tensorflow":
        directory = os.path.join(root, "tensorflow")
        flags = [f for f in environ.get("TF_XLA_FLAGS", "").split() if not f.startswith(TF_CACHE_FLAG + "=")]
        environ["TF_XLA_FLAGS"] = " ".join([*flags, f"{TF_CACHE_FLAG}={directory}"])
    else:
        return None
    os.makedirs(directory, exist_ok=True)
    return directory
