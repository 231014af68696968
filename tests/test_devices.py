"""One device per study: the device check over fake framework reports and fake framework modules, its refusal
lines, and a cell that computes somewhere other than the recorded device becoming a recorded failure."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from fwbench.running import devices
from fwbench.running.devices import DeviceCheckError, check, check_slots, decide, forced_environment, verify
from fwbench.running.runner import run_cell
from fwbench.study.grid import Cell

H100 = "NVIDIA H100 80GB HBM3"


def _gpu(index, name=H100, uuid=None):
    return {"index": index, "name": name, "compute_capability": "9.0", "uuid": uuid, "memory_bytes": 80 * 2**30}


def _torch(platform="cuda", count=1, names=None):
    if platform == "cpu":
        return {"platform": "cpu", "count": 0, "devices": [], "cuda_runtime": "13.0", "cudnn": "92400"}
    names = names or [H100] * count
    gpus = [_gpu(i, name, f"GPU-{i:04d}") for i, name in enumerate(names)]
    return {"platform": "cuda", "count": len(gpus), "devices": gpus, "cuda_runtime": "13.0", "cudnn": "92400"}


def _jax(platform="cuda", count=1, plugins=("jax-cuda13-plugin==0.10.2",), names=None):
    if platform == "cpu":
        return {"platform": "cpu", "count": 0, "devices": [], "jax_plugins": [], "cuda_runtime": None}
    names = names or [H100] * count
    gpus = [_gpu(i, name) for i, name in enumerate(names)]
    return {"platform": "cuda", "count": len(gpus), "devices": gpus, "jax_plugins": list(plugins)}


def test_agreement_on_the_gpu_records_torchs_gpus_with_uuids():
    record = decide({"torch": _torch(count=2), "jax": _jax(count=2)}, "auto")
    assert record["platform"] == "cuda" and [g["uuid"] for g in record["gpus"]] == ["GPU-0000", "GPU-0001"]
    assert decide({"torch": _torch(count=2), "jax": _jax(count=2)}, "cuda")["platform"] == "cuda"
    assert decide({"torch": _torch("cpu"), "jax": _jax("cpu")}, "auto")["gpus"] == []


def test_torch_on_the_gpu_and_jax_on_the_cpu_stops_the_study_with_one_line():
    with pytest.raises(DeviceCheckError) as error:
        decide({"torch": _torch(), "jax": _jax("cpu")}, "auto")
    assert str(error.value) == (
        f"torch sees cuda ({H100}) but jax sees only cpu: install the CUDA plugin with "
        "FWBENCH_ACCELERATOR=cuda bash setup.sh"
    )


def test_jax_with_its_plugin_but_no_gpu_says_what_jax_said():
    report = {**_jax("cpu"), "jax_plugins": ["jax-cuda13-plugin==0.10.2"], "warnings": ["CUDA driver too old"]}
    with pytest.raises(DeviceCheckError, match=r"although it is jax-cuda13-plugin==0\.10\.2.*CUDA driver too old"):
        decide({"torch": _torch(), "jax": report}, "auto")


def test_device_cuda_without_a_gpu_stops_with_a_clear_line():
    with pytest.raises(DeviceCheckError, match=r"^device: cuda, but torch sees only cpu: .*device: auto"):
        decide({"torch": _torch("cpu"), "jax": _jax("cpu")}, "cuda")
    with pytest.raises(DeviceCheckError, match=r"^device: cuda, but jax sees only cpu: install the CUDA plugin"):
        decide({"torch": _torch(), "jax": _jax("cpu")}, "cuda")


def _cpu_install_reports():
    """What every framework reports from setup.sh's CPU install (run where nvidia-smi found no GPU, e.g. a login
    node) on a GPU node: torch's CPU wheel (no CUDA runtime), JAX without its CUDA plugin, tensorflow-cpu."""
    from fwbench.backends.jax import JaxBackend
    from fwbench.backends.torch import TorchBackend

    torch_cpu_wheel = SimpleNamespace(
        cuda=SimpleNamespace(is_available=lambda: False),
        version=SimpleNamespace(cuda=None),
        backends=SimpleNamespace(cudnn=SimpleNamespace(is_available=lambda: False)),
    )
    jax_cpu = SimpleNamespace(devices=lambda: [SimpleNamespace(platform="cpu", id=0, device_kind="cpu")])
    jax_report = {**JaxBackend.describe_devices(jax_cpu), "jax_plugins": []}  # whatever this machine has installed
    tensorflow_cpu = {"platform": "cpu", "count": 0, "devices": [], "cuda_runtime": None, "cudnn": None}
    return {
        "torch": TorchBackend.describe_devices(torch_cpu_wheel),
        "jax": jax_report,
        "tensorflow": {**tensorflow_cpu, "cuda_build": False},
    }


def test_a_gpu_node_that_finds_the_cpu_install_says_to_install_the_cuda_set():
    """device: cuda on a GPU node, with the .venv that setup.sh made on a GPU-less login node: one line that names
    the command that fixes it."""
    reports = _cpu_install_reports()
    assert reports["torch"] == {**reports["torch"], "platform": "cpu", "cuda_runtime": None}
    with pytest.raises(DeviceCheckError) as error:
        decide(reports, "cuda")
    message = str(error.value)
    assert message == (
        "device: cuda, but torch, jax and tensorflow are CPU builds that see only cpu: setup.sh made this .venv "
        "where nvidia-smi found no GPU (a login node?); reinstall with FWBENCH_ACCELERATOR=cuda bash setup.sh "
        "(or set device: auto to measure on the CPU)"
    )
    assert "\n" not in message
    # One framework only, through the check as the device_check rule runs it (fake probes), nothing written.
    with pytest.raises(
        DeviceCheckError,
        match=r"^device: cuda, but torch is a CPU build that sees only cpu: .*"
        r"FWBENCH_ACCELERATOR=cuda bash setup\.sh",
    ):
        check(["torch"], "cuda", 1, "/nonexistent/device.json", probe_fn=lambda f, env: _cpu_install_reports()[f])


def test_a_cuda_build_that_finds_no_gpu_is_not_told_to_reinstall():
    """A CUDA build that sees no GPU (no driver, CUDA_VISIBLE_DEVICES empty) needs no reinstall: the line says to
    check the GPU's visibility instead, and a CPU build beside CUDA builds is named alone."""
    reports = {"torch": _torch("cpu"), "jax": {**_jax("cpu"), "jax_plugins": ["jax-cuda13-plugin==0.10.2"]}}
    with pytest.raises(DeviceCheckError) as error:
        decide(reports, "cuda")
    assert "setup.sh" not in str(error.value) and "check nvidia-smi and CUDA_VISIBLE_DEVICES" in str(error.value)
    with pytest.raises(
        DeviceCheckError,
        match=r"^device: cuda, but jax sees only cpu: install the CUDA plugin with "
        r"FWBENCH_ACCELERATOR=cuda bash setup\.sh",
    ):
        decide({"torch": _torch(), "jax": _jax("cpu")}, "cuda")


def test_different_gpus_or_a_failed_probe_stop_the_study():
    with pytest.raises(DeviceCheckError, match="different GPUs: torch: 2 .*; jax: 1"):
        decide({"torch": _torch(count=2), "jax": _jax(count=1)}, "auto")
    with pytest.raises(DeviceCheckError, match="jax could not report its devices: ImportError: no jaxlib"):
        decide({"torch": _torch(), "jax": {"platform": "failed", "error": "ImportError: no jaxlib"}}, "auto")


def test_more_slots_than_gpus_is_refused_but_any_count_works_on_the_cpu():
    with pytest.raises(DeviceCheckError, match=r"--resources gpu=3, but the frameworks see 2 GPU\(s\)"):
        check_slots(decide({"torch": _torch(count=2), "jax": _jax(count=2)}, "auto"), 3)
    check_slots(decide({"torch": _torch("cpu"), "jax": _jax("cpu")}, "auto"), 3)


def test_check_writes_no_record_when_the_frameworks_disagree(tmp_path):
    out = tmp_path / "device.json"
    seen_env = []

    def fake_probe(framework, env):
        seen_env.append(env)
        return {"torch": _torch(), "jax": _jax("cpu")}[framework]

    with pytest.raises(DeviceCheckError):
        check(["torch", "jax"], "auto", 1, out, probe_fn=fake_probe)
    assert not out.exists() and seen_env == [{}, {}]
    check(["torch", "jax"], "cpu", 1, out, probe_fn=lambda f, env: {"torch": _torch("cpu"), "jax": _jax("cpu")}[f])
    assert json.loads(out.read_text())["environment"] == {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}
    assert forced_environment("auto") == forced_environment("cuda") == {}


def test_real_probes_agree_on_this_machine(tmp_path):
    """Each framework in its own fresh process, exactly as the device_check rule asks them (CPU in CI)."""
    record = check(["torch", "jax"], "auto", 1, tmp_path / "device.json")
    assert record["platform"] in ("cpu", "cuda")
    assert set(record["frameworks"]) == {"torch", "jax"}
    assert record["frameworks"]["torch"]["platform"] == record["frameworks"]["jax"]["platform"]


class _FakeProps(SimpleNamespace):
    pass


def test_torch_describes_cuda_devices_through_its_module():
    from fwbench.backends.torch import TorchBackend

    props = [
        _FakeProps(name=H100, major=9, minor=0, total_memory=80 * 2**30, uuid="abcd-1"),
        _FakeProps(name=H100, major=9, minor=0, total_memory=80 * 2**30, uuid="abcd-2"),
    ]
    fake = SimpleNamespace(
        cuda=SimpleNamespace(
            is_available=lambda: True, device_count=lambda: 2, get_device_properties=props.__getitem__
        ),
        version=SimpleNamespace(cuda="13.0"),
        backends=SimpleNamespace(cudnn=SimpleNamespace(is_available=lambda: True, version=lambda: 91002)),
    )
    report = TorchBackend.describe_devices(fake)
    assert report["platform"] == "cuda" and report["count"] == 2 and report["cudnn"] == "91002"
    assert [d["uuid"] for d in report["devices"]] == ["GPU-abcd-1", "GPU-abcd-2"]
    assert report["devices"][1] == {**report["devices"][1], "index": 1, "compute_capability": "9.0"}


def test_jax_calls_its_gpu_platform_cuda():
    from fwbench.backends.jax import JaxBackend

    device = SimpleNamespace(
        platform="gpu",
        id=0,
        device_kind=H100,
        compute_capability="9.0",
        client=SimpleNamespace(platform_version="cuda 13000"),
        memory_stats=lambda: {"bytes_limit": 79 * 2**30},
    )
    report = JaxBackend.describe_devices(SimpleNamespace(devices=lambda: [device]))
    assert report["platform"] == "cuda" and report["devices"][0]["name"] == H100 and report["count"] == 1
    assert "jax_plugins" in report


def test_verify_accepts_the_recorded_device_and_refuses_another():
    record = {"platform": "cuda", "gpus": [_gpu(0)]}
    verify(record, {"platform": "gpu", "name": H100}, H100)  # JAX's name for CUDA
    with pytest.raises(RuntimeError, match="device mismatch: this cell runs on cpu"):
        verify(record, {"platform": "cpu", "name": "cpu"}, H100)
    with pytest.raises(RuntimeError, match="but its GPU slot holds"):
        verify(record, {"platform": "cuda", "name": "NVIDIA A100"}, H100)


def test_a_cell_on_another_device_than_the_record_is_a_recorded_failure(tmp_path):
    """A real measuring child on this CPU machine, held to a record that says the study runs on a GPU."""
    record = {**decide({"torch": _torch(), "jax": _jax()}, "auto"), "gpus": [_gpu(0, uuid="GPU-0000")]}
    result = run_cell(
        Cell("inference", "torch", "small_cnn", "fp32", 1, 16),
        {"timeout_s": 120, "warmup_iters": 1, "trials": 1, "blocks": 1, "burst_s": 0.01, "burst_discard": 0},
        data_dir=tmp_path / "data",
        weights_path=tmp_path / "w.npz",
        num_classes=4,
        threads=1,
        out_path=tmp_path / "cell.json",
        device_record=record,
        slot_dir=tmp_path / "slots",
    )
    assert result["status"] == "failed"
    assert "device mismatch: this cell runs on cpu" in result["reason"] and "found cuda" in result["reason"]
    assert result["provenance"]["placement"]["gpu_uuid"] == "GPU-0000"
    assert json.loads((tmp_path / "cell.json").read_text())["status"] == "failed"


def test_software_fingerprint_names_the_installed_frameworks():
    assert {"torch", "jax", "jaxlib"} <= set(devices.software_fingerprint())


def test_the_gpu_page_quotes_the_cpu_install_line_as_the_check_prints_it():
    """docs/gpus.md shows the line a GPU node prints when it finds the CPU set: it must be the one the code makes."""
    from tests.conftest import REPO

    with pytest.raises(DeviceCheckError) as error:
        decide(_cpu_install_reports(), "cuda")
    assert f"fwbench: {error.value}" in (REPO / "docs" / "gpus.md").read_text()
