from __future__ import annotations

import importlib.metadata
import re
import tomllib

import pytest
import yaml
from packaging.version import Version

from fwbench import installation
from fwbench.installation import FRAMEWORKS, expand_extra, normalise
from tests.conftest import REPO


def _pins(requirements):
    return {normalise(re.split(r"[=<>\[; ]", req, maxsplit=1)[0]): req for req in requirements}


def _conda_pip(name):
    env = yaml.safe_load((REPO / "envs" / name).read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    return [p for p in pip if not p.startswith("-e")]


def _project():
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _tested(project):
    return expand_extra(project["optional-dependencies"], "tested")


def test_conda_env_agrees_with_pyproject():
    project = _project()
    cpu = _tested(project) + project["optional-dependencies"]["cpu"]
    assert _pins(cpu) == _pins(_conda_pip("fwbench.yaml"))
    assert _conda_pip("fwbench.yaml") == cpu
    assert all("==" in req for req in cpu), "every package of the tested set is pinned"


def test_cuda_conda_env_agrees_with_pyproject_cuda_extra():
    project = _project()
    cuda = project["optional-dependencies"]["cuda"]
    assert _pins(_tested(project) + cuda) == _pins(_conda_pip("fwbench-cuda.yaml"))
    assert _conda_pip("fwbench-cuda.yaml") == _tested(project) + cuda
    assert all("==" in req for req in cuda), "every CUDA requirement is pinned"


def test_the_core_dependencies_name_no_framework_and_the_tested_set_pins_each_of_them():
    """`python -m pip install -e .` must leave an environment's frameworks alone: none is a core dependency (nor a
    package that pulls one in), each has an extra of its own at its tested version, and the tested set pins every
    core dependency exactly, so that setup.sh's .venv is the one the figures were made with."""
    project = _project()
    extras = project["optional-dependencies"]
    core = _pins(project["dependencies"])
    framework_packages = {normalise(d) for p in FRAMEWORKS.values() for d in p.modules} | {"tensorflow-cpu"}
    assert not framework_packages & set(core), sorted(framework_packages & set(core))
    assert not any(re.match(r"(jax|tensorflow|torch|datasets)\b", req) for req in project["dependencies"])
    for framework, packages in FRAMEWORKS.items():
        assert packages.extra in extras, framework
        assert {normalise(m) for m in packages.modules} <= set(_pins(extras[packages.extra])), framework
    tested = installation._pins(_tested(project))
    assert set(core) <= set(tested), sorted(set(core) - set(tested))
    for framework in ("torch", "jax"):
        assert installation._pins(extras[framework]).items() <= tested.items(), framework
    assert all("==" in req for req in _tested(project)), "every package of the tested set is pinned"


def test_requires_python_admits_311_to_313_and_setup_sh_looks_for_each_newest_first():
    project = _project()
    assert project["requires-python"] == ">=3.11,<3.14"
    setup = (REPO / "setup.sh").read_text()
    candidates = re.search(r"for candidate in (.*?); do", setup).group(1).split()
    assert candidates[:3] == ["python3.13", "python3.12", "python3.11"], candidates


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


@pytest.mark.parametrize("python", ["3.11", "3.12", "3.13"])
@pytest.mark.parametrize("accelerator", ["cpu", "cuda"])
def test_the_tested_set_resolves_on_each_supported_python(python, accelerator):
    """envs/resolved/ holds pip's resolution of the tested set on each Python (benchmarks/resolve_pins.py, run by hand:
    it reads the index), made from the requirements pyproject.toml pins now: a pin changed without a new resolution
    fails here. Every pinned package resolved at its pin, and no compiled package came from a source distribution."""
    project = _project()
    wanted = _tested(project) + project["optional-dependencies"][accelerator]
    record = (REPO / "envs" / "resolved" / f"py{python}-{accelerator}.txt").read_text()
    header = dict(re.findall(r"^# ([\w-]+): (.*)$", record, flags=re.M))
    assert header["requirements-sha256"] == installation.requirements_digest(wanted), (
        "pyproject.toml's pins changed since envs/resolved/ was made: run benchmarks/resolve_pins.py"
    )
    assert header["python"].startswith(f"{python}.")
    resolved = {normalise(m[0]): m[1] for m in re.findall(r"^([\w.-]+)==(\S+)", record, flags=re.M)}
    for name, version in installation._pins(wanted).items():
        assert name in resolved and Version(resolved[name]) == Version(version), (name, version, resolved.get(name))
    assert header["packages"].split(";")[1].strip() == "from source distributions: connection_pool", (
        "a package without a wheel for this Python: pin it per Python version with an environment marker"
    )
