"""What this Python environment holds of the frameworks a study names, read from package metadata without importing
any of them, and the versions fwbench was tested with.

fwbench installs into whatever environment a user already has (`python -m pip install -e .` in a container or a
cluster module with a CUDA build of PyTorch or JAX), so a framework may be missing, or present at another version
than the tested set (the `tested` extra of pyproject.toml, which setup.sh installs). The workflow stops before any
job when a framework it still has to measure with is missing (`missing_line`), `fwbench doctor` lists what is here,
and the paper's setup table and ledger name every version that differs from the tested one (`untested_versions`).
Nothing here imports a framework: it runs while Snakemake parses the workflow.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import fwbench


@dataclass(frozen=True)
class FrameworkPackages:
    """A framework as an installation sees it: the modules its backend imports, the distributions whose versions a
    result records (alternatives in a tuple: TensorFlow comes as `tensorflow` or `tensorflow-cpu`), and the extra of
    pyproject.toml that installs it."""

    name: str
    label: str
    modules: tuple[str, ...]
    distributions: tuple[str | tuple[str, ...], ...]
    extra: str


# The frameworks fwbench measures (NumPy, the micro suite's baseline, is a dependency of fwbench itself).
FRAMEWORKS: dict[str, FrameworkPackages] = {
    "torch": FrameworkPackages("torch", "PyTorch", ("torch", "torchvision"), ("torch", "torchvision"), "torch"),
    "jax": FrameworkPackages(
        "jax", "JAX/Flax", ("jax", "jaxlib", "flax", "optax"), ("jax", "jaxlib", "flax", "optax"), "jax"
    ),
    "tensorflow": FrameworkPackages(
        "tensorflow",
        "TensorFlow/Keras",
        ("tensorflow", "keras"),
        (("tensorflow", "tensorflow-cpu"), "keras"),
        "tensorflow",
    ),
}
# Every distribution of the frameworks (both names of TensorFlow's), as PyPI compares names.
FRAMEWORK_DISTRIBUTIONS = frozenset(
    re.sub(r"[-_.]+", "-", name).lower()
    for packages in FRAMEWORKS.values()
    for distribution in packages.distributions
    for name in ((distribution,) if isinstance(distribution, str) else distribution)
)
# Every model's starting weights come from its PyTorch definition (fwbench.models.weights), whichever frameworks a
# study measures: PyTorch is needed wherever starting weights are still to be written.
WEIGHTS_FRAMEWORK = "torch"
PYPROJECT = Path(fwbench.__file__).resolve().parents[2] / "pyproject.toml"
TESTED_EXTRA = "tested"


def normalise(name: str) -> str:
    """A distribution's name as PyPI compares them (PEP 503): "PyYAML" and "pyyaml", "pdfminer.six" and
    "pdfminer-six" are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_modules(framework: str) -> list[str]:
    """The modules of `framework`'s backend that cannot be imported here (found by the import system, not imported)."""
    missing = []
    for module in FRAMEWORKS[framework].modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(module)
    return missing


def installed_version(distribution: str | tuple[str, ...]) -> tuple[str, str | None]:
    """(the distribution found, its version) — the first of alternatives that is installed, or (the first, None)."""
    names = (distribution,) if isinstance(distribution, str) else distribution
    for name in names:
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return names[0], None


def framework_versions(framework: str) -> dict[str, str | None]:
    """{distribution: installed version or None} for every distribution of `framework`."""
    return dict(installed_version(d) for d in FRAMEWORKS[framework].distributions)


def install_command(framework: str) -> str:
    return f"python -m pip install -e '.[{FRAMEWORKS[framework].extra}]'"


def interpreter() -> dict[str, Any]:
    """The Python that runs this process: implementation, version, executable, and the kind of environment it is
    (a venv, a conda environment, or the system's), so that a result says which interpreter measured it."""
    if os.environ.get("CONDA_PREFIX") == sys.prefix or Path(sys.prefix, "conda-meta").is_dir():
        kind = "conda"
    elif sys.prefix != sys.base_prefix:
        kind = "venv"
    else:
        kind = "system"
    return {
        "implementation": sys.implementation.name,
        "version": sys.version.split()[0],
        "executable": sys.executable,
        "environment": kind,
        "prefix": sys.prefix,
    }


_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*==\s*([^\s;,]+)\s*(;.*)?$")
_SELF = re.compile(r"^\s*fwbench\s*\[([^\]]*)\]")


def _pins(requirements: Iterable[str]) -> dict[str, str]:
    """{normalised name: version} of the `name==version` requirements (markers aside: the tested set pins one version
    per package on every Python it supports)."""
    pins = {}
    for requirement in requirements:
        match = _REQUIREMENT.match(requirement)
        if match:
            pins[normalise(match.group(1))] = match.group(3)
    return pins


def expand_extra(extras: Mapping[str, list[str]], name: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """An extra's requirements with the extras it names of fwbench itself (`fwbench[torch,jax]`) put in their place."""
    requirements = []
    for requirement in extras[name]:
        included = _SELF.match(requirement)
        if not included:
            requirements.append(requirement)
            continue
        for other in (e.strip() for e in included.group(1).split(",")):
            if other and other not in seen | {name}:
                requirements += expand_extra(extras, other, seen | {name})
    return requirements


def requirements_digest(requirements: Iterable[str]) -> str:
    """A digest of a requirement list, order and spelling included: what a resolution record (envs/resolved/) was
    made from, so that a pin changed since shows."""
    import hashlib

    return hashlib.sha256("\n".join(requirements).encode()).hexdigest()


@cache
def tested_pins() -> dict[str, str]:
    """The versions of the tested set ({normalised distribution: version}): the `tested` extra with the extras it
    includes, and the accelerator extras' TensorFlow builds. Read from this checkout's pyproject.toml, which is what
    the results' commit pinned, or from the installed package's metadata where there is no checkout."""
    if PYPROJECT.exists():
        extras = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["optional-dependencies"]
        requirements = expand_extra(extras, TESTED_EXTRA) + extras.get("cpu", []) + extras.get("cuda", [])
        return _pins(requirements)
    try:
        declared = importlib.metadata.requires("fwbench") or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    return _pins(r.split(";")[0] for r in declared if "extra ==" in r)


def base_version(version: str) -> str:
    """A version without its local part: PyTorch's "2.14.1+cu130" is the tested 2.14.1."""
    return version.split("+", 1)[0]


def untested_versions(versions: Mapping[str, str | None], pins: Mapping[str, str] | None = None) -> dict[str, str]:
    """{distribution: tested version} for each of `versions` ({distribution: version found}) that differs from the
    tested set; distributions the tested set does not pin, and versions not recorded, are left out."""
    pins = tested_pins() if pins is None else pins
    differ = {}
    for name, version in versions.items():
        tested = pins.get(normalise(name))
        if version and tested and base_version(str(version)) != tested:
            differ[name] = tested
    return differ


def untested_framework_versions(versions: Mapping[str, str | None]) -> dict[str, str]:
    """`untested_versions` of the frameworks' own distributions only (a cell's `versions` also holds CUDA's,
    cuDNN's and others that the tested set does not pin as packages)."""
    return {
        name: tested
        for name, tested in untested_versions(versions).items()
        if normalise(name) in FRAMEWORK_DISTRIBUTIONS
    }


def missing_line(frameworks: Iterable[str], needs_weights: bool) -> str | None:
    """The one line that stops a study before any job, naming the first framework it still has to compute with that
    is not installed here and the extra that installs it; None when everything is installed. `frameworks`: those
    with cells still to measure; `needs_weights`: starting weights are still to be written (with PyTorch)."""
    wanted = list(dict.fromkeys(frameworks))
    for framework in wanted:
        if framework not in FRAMEWORKS:
            continue
        missing = missing_modules(framework)
        if missing:
            return (
                f"the study measures {framework}, but {', '.join(missing)} cannot be imported in this environment "
                f"({sys.executable}): install it with {install_command(framework)} (or leave {framework} out of the "
                "study's frameworks)"
            )
    if needs_weights and WEIGHTS_FRAMEWORK not in wanted:
        missing = missing_modules(WEIGHTS_FRAMEWORK)
        if missing:
            return (
                f"the study's starting weights are written from each model's PyTorch definition, but "
                f"{', '.join(missing)} cannot be imported in this environment ({sys.executable}): install it with "
                f"{install_command(WEIGHTS_FRAMEWORK)}"
            )
    return None
