"""setup.sh's accelerator choice, through `bash setup.sh --plan` (which installs nothing) with a fake nvidia-smi."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

from fwbench.installation import expand_extra
from tests.conftest import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]
JAX_VERSION = next(req.split("==")[1] for req in EXTRAS["jax"] if re.match(r"jax==", req))
CPU_SET = expand_extra(EXTRAS, "tested") + EXTRAS["cpu"]
CUDA_SET = expand_extra(EXTRAS, "tested") + EXTRAS["cuda"]
# What plan mode reads: setup.sh, pyproject.toml, and the module that expands the `tested` extra.
PLAN_FILES = ("setup.sh", "pyproject.toml", "src/fwbench/__init__.py", "src/fwbench/installation.py")

H100 = 'echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5fd4a5e0-0c7b-2f1e-9d51-4b1a3c7e9f00)"'
NO_DRIVER = (
    "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    'Make sure that the latest NVIDIA driver is installed and running."; exit 9'
)
NO_DEVICE = 'echo "No devices were found"'


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A copy of what plan mode reads, so that anything it created would show."""
    root = tmp_path / "checkout"
    root.mkdir()
    for name in PLAN_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, root / name)
    return root


def _path_without_nvidia_smi(work: Path) -> list[str]:
    """PATH entries as they are, except that a directory holding nvidia-smi (/usr/bin on a GPU machine) is replaced
    by a mirror of its other executables."""
    entries = []
    for i, entry in enumerate(os.environ["PATH"].split(os.pathsep)):
        if not (Path(entry) / "nvidia-smi").exists():
            entries.append(entry)
            continue
        mirror = work / f"path-mirror-{i}"
        mirror.mkdir()
        for item in Path(entry).iterdir():
            if item.name != "nvidia-smi":
                (mirror / item.name).symlink_to(item)
        entries.append(str(mirror))
    return entries


def plan(
    checkout: Path,
    tmp_path: Path,
    nvidia_smi: str | None = None,
    accelerator: str | None = None,
    pythons: dict[str, str] | None = None,
    python: str | None = None,
):
    """`bash setup.sh --plan` with a fake nvidia-smi and fake interpreters (`pythons`: {command: version}, see
    _fake_python), FWBENCH_PYTHON set to `python`."""
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    path = _path_without_nvidia_smi(work)
    for name, version in (pythons or {}).items():
        (work / "fake-python").mkdir(exist_ok=True)
        _fake_python(work / "fake-python" / name, version)
    if pythons:
        path.insert(0, str(work / "fake-python"))
    if nvidia_smi is not None:
        fake = work / "fake-bin"
        fake.mkdir()
        (fake / "nvidia-smi").write_text(f'#!/bin/sh\n[ "$1" = -L ] || exit 2\n{nvidia_smi}\n')
        (fake / "nvidia-smi").chmod(0o755)
        path.insert(0, str(fake))
    env = {k: v for k, v in os.environ.items() if k not in ("FWBENCH_ACCELERATOR", "FWBENCH_PYTHON")}
    env["PATH"] = os.pathsep.join(path)
    if accelerator is not None:
        env["FWBENCH_ACCELERATOR"] = accelerator
    if python is not None:
        env["FWBENCH_PYTHON"] = python
    return subprocess.run(
        ["bash", str(checkout / "setup.sh"), "--plan"], env=env, capture_output=True, text=True, timeout=120
    )


def _fake_python(path: Path, version: str) -> None:
    """An interpreter that says it is Python `version` (to `--version` and to setup.sh's check of the supported
    versions) and runs everything else with this test's Python, so plan mode can expand the extras with it."""
    major, minor = (int(part) for part in version.split(".")[:2])
    supported = (3, 11) <= (major, minor) <= (3, 13)
    path.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = --version ] && {{ echo "Python {version}"; exit 0; }}\n'
        f'[ "$1" = -c ] && case "$2" in *version_info*) exit {0 if supported else 1} ;; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    path.chmod(0o755)


def _chosen_python(result) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return re.search(r"into \.venv with Python (\S+),", result.stdout).group(1)


def _parse(result) -> tuple[str, list[str]]:
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    chosen = next(m.group(1) for line in lines if (m := re.match(r"setup\.sh: accelerator (\w+) ", line)))
    return chosen, [line for line in lines if line and not line.startswith("setup.sh:")]


def test_fake_gpu_chooses_cuda_with_plugin_at_the_pinned_jax_version(checkout, tmp_path):
    result = plan(checkout, tmp_path, nvidia_smi=H100)
    chosen, requirements = _parse(result)
    assert chosen == "cuda"
    assert "nvidia-smi: 1 GPU: NVIDIA H100 80GB HBM3" in result.stdout
    assert requirements == CUDA_SET
    assert f"jax-cuda13-plugin[with-cuda]=={JAX_VERSION}" in requirements
    assert f"jax-cuda13-pjrt=={JAX_VERSION}" in requirements
    assert f"jax=={JAX_VERSION}" in requirements and f"jaxlib=={JAX_VERSION}" in requirements
    assert "-e '.[tested,cuda]'" in result.stdout
    assert "tensorflow[and-cuda]==2.21.0" in requirements and "tensorflow-cpu==2.21.0" not in requirements


@pytest.mark.parametrize(
    "nvidia_smi",
    [None, NO_DRIVER, NO_DEVICE],
    ids=["no-nvidia-smi", "driver-not-loaded", "no-device"],
)
def test_without_a_gpu_the_cpu_set_is_chosen(checkout, tmp_path, nvidia_smi):
    chosen, requirements = _parse(plan(checkout, tmp_path, nvidia_smi=nvidia_smi))
    assert chosen == "cpu"
    assert requirements == CPU_SET
    assert f"jax=={JAX_VERSION}" in requirements
    assert not any("cuda" in req and "plugin" in req for req in requirements)
    assert "tensorflow-cpu==2.21.0" in requirements and not any(r.startswith("tensorflow[") for r in requirements)


def test_override_cpu_wins_over_a_gpu(checkout, tmp_path):
    result = plan(checkout, tmp_path, nvidia_smi=H100, accelerator="cpu")
    chosen, requirements = _parse(result)
    assert chosen == "cpu" and requirements == CPU_SET
    assert "FWBENCH_ACCELERATOR=cpu" in result.stdout


def test_override_cuda_without_a_driver_still_plans_cuda_with_a_note(checkout, tmp_path):
    result = plan(checkout, tmp_path, accelerator="cuda")
    chosen, requirements = _parse(result)
    assert chosen == "cuda" and requirements == CUDA_SET
    assert "note: no NVIDIA driver" in result.stdout


def test_unknown_override_is_a_one_line_error(checkout, tmp_path):
    result = plan(checkout, tmp_path, nvidia_smi=H100, accelerator="rocm")
    assert result.returncode != 0
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "FWBENCH_ACCELERATOR" in line and "rocm" in line


def test_unknown_argument_is_a_one_line_error(checkout, tmp_path):
    result = subprocess.run(["bash", str(checkout / "setup.sh"), "--frobnicate"], capture_output=True, text=True)
    assert result.returncode != 0
    [line] = result.stderr.splitlines()
    assert "--frobnicate" in line


def test_plan_creates_nothing(checkout, tmp_path):
    for nvidia_smi in (None, H100):
        _parse(plan(checkout, tmp_path, nvidia_smi=nvidia_smi))
    assert sorted(str(p.relative_to(checkout)) for p in checkout.rglob("*") if p.is_file()) == sorted(PLAN_FILES)
    assert not (checkout / ".venv").exists()


def test_cuda_extra_is_for_the_cuda_major_of_the_torch_wheel():
    """The plugin's CUDA major and the cuda-toolkit pin (torch 2.14.1's own) agree, so one set of libraries serves."""
    extra = PROJECT["optional-dependencies"]["cuda"]
    [plugin_major] = {m.group(1) for req in extra if (m := re.match(r"jax-cuda(\d+)-(?:plugin|pjrt)\b", req))}
    [toolkit] = [req for req in extra if req.startswith("cuda-toolkit")]
    assert toolkit.split("==")[1].split(".")[0] == plugin_major
    assert all(req.endswith(f"=={JAX_VERSION}") for req in extra if req.startswith("jax"))


def test_the_newest_supported_python_on_the_path_is_chosen(checkout, tmp_path):
    """python3.13 before python3.12 before python3.11, each only when it is a supported version."""
    both = plan(checkout, tmp_path, pythons={"python3.13": "3.13.1", "python3.12": "3.12.3"})
    assert _chosen_python(both) == "3.13.1"
    no_313 = plan(checkout, tmp_path, pythons={"python3.13": "3.14.0", "python3.12": "3.12.3"})
    assert _chosen_python(no_313) == "3.12.3"
    _parse(no_313)  # and the plan's requirements are expanded by that interpreter


def test_fwbench_python_names_the_interpreter_and_an_unsupported_one_is_a_one_line_error(checkout, tmp_path):
    fake = tmp_path / "bin" / "mypython"
    fake.parent.mkdir()
    _fake_python(fake, "3.12.7")
    assert _chosen_python(plan(checkout, tmp_path, pythons={"python3.13": "3.13.1"}, python=str(fake))) == "3.12.7"
    _fake_python(fake, "3.10.14")
    result = plan(checkout, tmp_path, python=str(fake))
    assert result.returncode != 0
    [line] = result.stderr.splitlines()
    assert "FWBENCH_PYTHON" in line and "3.10.14" in line and "3.11, 3.12 or 3.13" in line
