from __future__ import annotations

import importlib.metadata
import re
import tomllib

import pytest
import yaml

from tests.conftest import REPO


def _pins(requirements):
    return {re.split(r"[=<>\[]", req, maxsplit=1)[0].lower(): req for req in requirements}


def _conda_pip(name):
    env = yaml.safe_load((REPO / "envs" / name).read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    return [p for p in pip if not p.startswith("-e")]


def test_conda_env_agrees_with_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    cpu = project["dependencies"] + project["optional-dependencies"]["cpu"]
    assert _pins(cpu) == _pins(_conda_pip("fwbench.yaml"))
    assert _conda_pip("fwbench.yaml") == cpu
    assert all("==" in req for req in cpu), "every dependency is pinned"


def test_cuda_conda_env_agrees_with_pyproject_cuda_extra():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    cuda = project["optional-dependencies"]["cuda"]
    assert _pins(project["dependencies"] + cuda) == _pins(_conda_pip("fwbench-cuda.yaml"))
    assert _conda_pip("fwbench-cuda.yaml") == project["dependencies"] + cuda
    assert all("==" in req for req in cuda), "every CUDA requirement is pinned"


def test_cuda_toolkit_pin_is_the_installed_torch_wheels_own():
    """The cuda extra pins the CUDA compiler through torch's cuda-toolkit release: a torch bump must move it too."""
    cuda = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["cuda"]
    [pin] = [req for req in cuda if req.startswith("cuda-toolkit")]
    try:
        torch_requires = importlib.metadata.requires("torch") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("torch is not installed")
    toolkit = [r for r in torch_requires if r.startswith("cuda-toolkit")]
    if not toolkit:
        pytest.skip("the installed torch wheel does not depend on cuda-toolkit (not the default Linux wheel)")
    assert re.search(r"==\s*([\d.]+)", toolkit[0]).group(1) == pin.split("==")[1], (toolkit[0], pin)


def test_results_are_ignored():
    ignored = (REPO / ".gitignore").read_text().split()
    assert "results/" in ignored and ".snakemake/" in ignored
