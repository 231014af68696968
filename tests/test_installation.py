"""fwbench in an environment it did not make: the frameworks found without importing them, the tested versions,
the one line that stops a study whose framework is missing (fwbench.installation, fwbench.workflow.requirements),
and `fwbench doctor` (fwbench.workflow.doctor). A process without a framework is made with
tests/hidden_frameworks (a sitecustomize that hides the modules named in FWBENCH_TESTS_HIDE)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fwbench import installation
from fwbench.backends import FRAMEWORKS as BACKENDS
from fwbench.cli import main
from fwbench.installation import FRAMEWORKS, missing_line, untested_versions
from fwbench.study.config import validate_config
from fwbench.study.grid import cells
from fwbench.workflow import doctor, requirements
from tests.conftest import REPO, STUDY_ARGS, TINY_CONFIG, copy_workflow, write_study

HIDER = REPO / "tests" / "hidden_frameworks"


def hidden_env(*modules: str) -> dict[str, str]:
    """This environment with `modules` impossible to import in the processes it starts."""
    path = os.pathsep.join(filter(None, [str(HIDER), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "FWBENCH_TESTS_HIDE": ",".join(modules)}


def test_every_backend_framework_has_its_packages_and_extra():
    assert set(FRAMEWORKS) == set(BACKENDS) - {"numpy"}
    for framework in FRAMEWORKS:
        assert installation.missing_modules(framework) == [], "the test environment holds every framework"
        assert all(installation.framework_versions(framework).values()), framework


def test_the_tested_pins_are_the_tested_extra_with_what_it_includes():
    pins = installation.tested_pins()
    assert pins["torch"] == "2.14.1" and pins["jax"] == "0.10.2" and pins["keras"] == "3.15.1"
    assert pins["tensorflow-cpu"] == pins["tensorflow"] == "2.21.0"
    assert pins["pdfminer-six"] and pins["snakemake"] and pins["pytest"]


def test_a_version_other_than_the_tested_one_is_named_and_local_versions_are_the_same_release():
    pins = {"torch": "2.14.1", "jax": "0.10.2", "keras": "3.15.1"}
    found = {"torch": "2.11.0+cu130", "jax": "0.10.2", "Keras": "3.15.1", "flax": "0.12.12", "optax": None}
    assert untested_versions(found, pins) == {"torch": "2.14.1"}
    assert untested_versions({"torch": "2.14.1+cu130"}, pins) == {}


def test_a_missing_framework_is_one_line_naming_its_extra(monkeypatch):
    monkeypatch.setattr(installation, "missing_modules", lambda f: ["tensorflow", "keras"] if f == "tensorflow" else [])
    line = missing_line(["torch", "jax", "tensorflow"], needs_weights=True)
    assert "\n" not in line
    assert line.startswith("the study measures tensorflow, but tensorflow, keras cannot be imported")
    assert "python -m pip install -e '.[tensorflow]'" in line and sys.executable in line
    assert missing_line(["torch", "jax"], needs_weights=True) is None


def test_pytorch_is_needed_for_starting_weights_even_where_the_study_does_not_measure_it(monkeypatch):
    monkeypatch.setattr(installation, "missing_modules", lambda f: ["torch", "torchvision"] if f == "torch" else [])
    assert missing_line(["jax"], needs_weights=False) is None
    line = missing_line(["jax"], needs_weights=True)
    assert "starting weights are written from each model's PyTorch definition" in line and "'.[torch]'" in line


def test_only_frameworks_with_cells_still_to_measure_are_required(tmp_path):
    config = validate_config({**TINY_CONFIG, "suites": ["inference"]})
    assert requirements.unmeasured_frameworks(config, tmp_path) == ["torch", "jax"]
    for cell in cells(config):
        if cell.framework == "torch":
            cell.path(tmp_path).parent.mkdir(parents=True, exist_ok=True)
            cell.path(tmp_path).write_text("{}")
    assert requirements.unmeasured_frameworks(config, tmp_path) == ["jax"]
    assert requirements.weights_to_write(config, tmp_path)
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "small_cnn.npz").write_text("")
    assert not requirements.weights_to_write(config, tmp_path)


def test_restored_results_lacking_cells_are_not_completed_here(tmp_path):
    config = validate_config({**TINY_CONFIG, "suites": ["inference"]})
    restored = {"archive": "/x/study.tar.xz", "manifest": {"machine": {"summary": "gpu-node, 1 x NVIDIA H100"}}}
    line = requirements.refusal(config, tmp_path, restored)
    assert "restored from /x/study.tar.xz (measured on gpu-node, 1 x NVIDIA H100)" in line
    assert "lack 4 cell(s)" in line and "measure them where the archive was made" in line
    assert requirements.software_fingerprint(restored | {"manifest": {"software": {"torch": "2.11"}}}, {}) == {
        "torch": "2.11"
    }
    assert requirements.software_fingerprint(None, {"torch": "2.14.1"}) == {"torch": "2.14.1"}


def test_a_hidden_framework_cannot_be_found_or_imported():
    """The test's stand-in for an environment without TensorFlow does hide it, from find_spec and from import."""
    code = (
        "import importlib.util, sys\n"
        "from fwbench import installation\n"
        "print(installation.missing_modules('tensorflow'), installation.missing_modules('torch'))\n"
        "try:\n    import keras\nexcept ModuleNotFoundError:\n    print('no keras')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=hidden_env("tensorflow", "keras"), capture_output=True, text=True
    )
    assert proc.stdout.split("\n")[:2] == ["['tensorflow', 'keras'] []", "no keras"], proc.stderr


@pytest.mark.slow
def test_a_study_naming_a_missing_framework_stops_with_one_line_before_any_job(tmp_path, venv_bin):
    copy_workflow(tmp_path)
    write_study(tmp_path, {**TINY_CONFIG, "frameworks": ["torch", "jax", "tensorflow"]})
    proc = subprocess.run(
        [str(venv_bin / "snakemake"), *STUDY_ARGS, "--cores", "1"],
        cwd=tmp_path,
        env=hidden_env("tensorflow", "keras"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    fwbench_lines = [line for line in proc.stderr.splitlines() if line.startswith("fwbench:")]
    assert fwbench_lines == [
        f"fwbench: the study measures tensorflow, but tensorflow, keras cannot be imported in this environment "
        f"({venv_bin / 'python'}): install it with python -m pip install -e '.[tensorflow]' (or leave tensorflow "
        "out of the study's frameworks)"
    ]
    assert not (tmp_path / "results").exists(), "no job ran"
    # the same study without TensorFlow plans its jobs in that environment
    write_study(tmp_path, TINY_CONFIG)
    plan = subprocess.run(
        [str(venv_bin / "snakemake"), *STUDY_ARGS, "-n", "--cores", "1"],
        cwd=tmp_path,
        env=hidden_env("tensorflow", "keras"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert plan.returncode == 0 and "inference_group" in plan.stdout, plan.stderr[-2000:]


def _environment(**overrides) -> doctor.Environment:
    frameworks = {
        "torch": doctor.Framework("torch", {"torch": "2.11.0+cu130", "torchvision": "0.26.0"}, [], {"torch": "2.14.1"}),
        "jax": doctor.Framework("jax", {"jax": "0.10.2"}, [], {}),
        "tensorflow": doctor.Framework("tensorflow", {"tensorflow": None, "keras": None}, ["tensorflow", "keras"], {}),
    }
    frameworks["torch"].report = {
        "platform": "cuda",
        "cuda_runtime": "13.0",
        "devices": [{"name": "NVIDIA H100 80GB HBM3"}],
    }
    frameworks["jax"].report = {"platform": "cuda", "jax_plugins": ["jax-cuda13-plugin==0.10.2"], "devices": [{}]}
    tools = {"latexmk": None, "IEEEtran.cls": None, "pdftoppm": None, "chromium": None, "snakemake": "/x/snakemake"}
    values = {"frameworks": frameworks, "gpus": ["NVIDIA H100 80GB HBM3"], "gpu_note": "", "tools": tools}
    return doctor.Environment(**(values | overrides))


def test_doctor_names_versions_builds_devices_and_what_each_study_lacks():
    environment = _environment()
    lines = doctor.report_lines(
        environment,
        {
            "config/two.yaml": validate_config({**TINY_CONFIG, "device": "cuda"}),
            "config/three.yaml": validate_config({**TINY_CONFIG, "frameworks": ["torch", "jax", "tensorflow"]}),
        },
    )
    text = "\n".join(lines)
    assert "PyTorch: torch 2.11.0+cu130 (tested 2.14.1), torchvision 0.26.0; CUDA 13.0 build; computes on cuda" in text
    assert "JAX/Flax: jax 0.10.2; CUDA build (jax-cuda13-plugin==0.10.2)" in text
    assert "TensorFlow/Keras: not installed (tensorflow, keras): python -m pip install -e '.[tensorflow]'" in text
    assert "GPU: NVIDIA H100 80GB HBM3" in text and "no LaTeX" in text
    assert "config/two.yaml: to its tables (measures on cuda; no LaTeX here" in text
    assert "config/three.yaml: no: tensorflow is not installed" in text


def test_doctor_on_a_machine_without_a_gpu_reads_builds_without_importing(monkeypatch):
    monkeypatch.setattr(doctor, "nvidia_gpus", lambda: ([], "no NVIDIA driver (nvidia-smi not found)"))
    probed = []
    environment = doctor.inspect(probe=lambda name: probed.append(name) or {"platform": "cpu"})
    assert probed == []
    assert doctor.build_text("torch", environment.frameworks["torch"].report) in ("CPU build", "CUDA 13.0 build")
    assert environment.frameworks["tensorflow"].report["cuda_runtime"] is None  # tensorflow-cpu
    doctor.inspect(probe_devices=True, probe=lambda name: probed.append(name) or {"platform": "cpu"})
    assert sorted(probed) == ["jax", "tensorflow", "torch"]


def test_doctor_command_prints_every_framework_and_every_shipped_study(capsys):
    assert main(["doctor", "--studies", str(REPO / "config")]) == 0
    out = capsys.readouterr().out
    for label in ("PyTorch: torch ", "JAX/Flax: jax ", "TensorFlow/Keras: "):
        assert label in out
    for study in ("config.yaml", "gpu-smoke.yaml", "paper-h100.yaml"):
        assert study in out


def test_the_setup_table_names_the_interpreter_each_cell_recorded():
    from fwbench.analysis.setup.provenance import _python
    from fwbench.trackers.environment import host_provenance

    recorded = host_provenance()["interpreter"]
    assert recorded["executable"] == sys.executable and recorded["environment"] == "venv"
    assert _python({"python": "3.12.1", "interpreter": {**recorded, "version": "3.12.1"}}) == "3.12.1 (CPython, venv)"
    assert _python({"python": "3.11.7"}) == "3.11.7", "a cell from before the interpreter was recorded"
