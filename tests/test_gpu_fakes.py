"""GPU-side measurement (NVML energy, power fallback, device memory, isolation) and RAPL, exercised with fakes at
the library boundary: a fake `pynvml` module, a fake powercap tree and a fake CUDA-like backend."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from fwbench.backends.base import Backend, Trainer
from fwbench.config import validate_config
from fwbench.data.prepare import prepare
from fwbench.grid import Cell
from fwbench.models.weights import init_weights
from fwbench.scenarios import inference
from fwbench.trackers.energy import NvmlEnergy, RaplEnergy, cpu_meter
from fwbench.trackers.nvml import NvmlDevice, Unavailable, open_device
from tests.conftest import TINY_CONFIG

WATTS = 250.0


class FakeNVMLError(Exception):
    pass


class FakePynvml:
    """The subset of pynvml the trackers call; energy grows at WATTS while the clock runs."""

    def __init__(self, *, energy_supported=True, others=(4242,), count=1):
        self.energy_supported, self.others, self.count = energy_supported, others, count
        self.t0 = time.perf_counter()

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index):
        return f"handle{index}"

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H100 80GB HBM3 (fake)"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.energy_supported:
            raise FakeNVMLError("Not Supported")
        return int((time.perf_counter() - self.t0) * WATTS * 1000) + 10_000_000  # mJ since "driver load"

    def nvmlDeviceGetPowerUsage(self, handle):
        return int(WATTS * 1000)  # mW

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=3 * 2**30, total=80 * 2**30)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        procs = [SimpleNamespace(pid=os.getpid(), usedGpuMemory=2**30)]
        return procs + [SimpleNamespace(pid=pid, usedGpuMemory=512 * 2**20) for pid in self.others]


class FailingPynvml(FakePynvml):
    def nvmlInit(self):
        raise FakeNVMLError("Driver Not Loaded")


def test_open_device_reports_why_not():
    assert isinstance(open_device(0, FakePynvml()), NvmlDevice)
    failed = open_device(0, FailingPynvml())
    assert isinstance(failed, Unavailable) and "Driver Not Loaded" in failed.reason
    assert "none with index 3" in open_device(3, FakePynvml(count=2)).reason


def test_isolation_and_memory_from_nvml():
    device = open_device(0, FakePynvml(others=(11, 12)))
    assert device.name() == "NVIDIA H100 80GB HBM3 (fake)"
    assert [p["pid"] for p in device.other_processes()] == [11, 12]
    assert device.own_memory_bytes() == 2**30 and device.memory_used_bytes() == 3 * 2**30


@pytest.mark.parametrize("supported", [True, False])
def test_nvml_energy_counter_and_power_fallback(supported):
    meter = NvmlEnergy(open_device(0, FakePynvml(energy_supported=supported)), idle_watts=50.0)
    meter.start()
    time.sleep(0.2)
    result = meter.stop()
    assert result["joules"] == pytest.approx(WATTS * result["window_s"], rel=0.15)
    assert result["joules_above_idle"] == pytest.approx((WATTS - 50.0) * result["window_s"], rel=0.2)
    if supported:
        assert result["source"] == "nvml total energy counter" and result["samples"] is None
    else:
        assert result["source"].startswith("nvml power sampling") and result["samples"] >= 3


def _rapl(root, energy, wrap=2**32):
    domain = root / "intel-rapl:0"
    domain.mkdir(parents=True, exist_ok=True)
    (domain / "energy_uj").write_text(f"{energy}\n")
    (domain / "max_energy_range_uj").write_text(f"{wrap}\n")
    (root / "intel-rapl:0:0").mkdir(exist_ok=True)  # a subdomain (core): must not be double counted
    (root / "intel-rapl:0:0" / "energy_uj").write_text("5\n")
    return domain


def test_rapl_energy_with_wraparound(tmp_path):
    domain = _rapl(tmp_path, 2**32 - 1_000_000)
    meter = cpu_meter(tmp_path)
    assert isinstance(meter, RaplEnergy) and [d.name for d in meter.domains] == ["intel-rapl:0"]
    meter.start()
    (domain / "energy_uj").write_text("2000000\n")  # wrapped: 1 J before the wrap + 2 J after
    assert meter.stop()["joules"] == pytest.approx(3.0)


def test_rapl_absence_and_permissions_give_reasons(tmp_path):
    assert "does not exist" in cpu_meter(tmp_path / "absent")
    assert "no intel-rapl package domain" in cpu_meter(tmp_path)
    domain = _rapl(tmp_path, 100)
    os.chmod(domain / "energy_uj", 0)
    if os.geteuid() != 0:  # root reads anything; the permission path is only observable as a normal user
        assert "not readable" in cpu_meter(tmp_path)


class FakeEventTimer:
    """Stands in for a pair of CUDA events: 1.5 ms of 'device time' per step, and checks the call order."""

    def __init__(self):
        self.state = "idle"

    def start(self):
        assert self.state == "idle"
        self.state = "started"

    def stop(self):
        assert self.state == "started"
        self.state = "stopped"

    def elapsed_ms(self):
        assert self.state == "stopped"
        self.state = "idle"
        return 1.5


class FakeCudaBackend(Backend):
    """A CUDA-shaped backend computing with NumPy: device index 0, allocator statistics like torch.cuda's."""

    name = "fakecuda"

    def _apply_settings(self) -> dict[str, Any]:
        return {"intra_op_threads": self.threads}

    def versions(self):
        return {"fakecuda": "1.0"}

    def device_info(self):
        return {"platform": "cuda", "name": "fake"}

    seen: set

    def trainer(self, model, state_dict, *, num_classes, image_size, recipe):
        return FakeTrainer(image_size * image_size * 3, num_classes)

    def build(self, model, state_dict, *, num_classes, image_size):
        self.seen = set()
        self.weight = np.random.default_rng(0).standard_normal((image_size * image_size * 3, num_classes))

    def to_device(self, batch_nhwc):
        return np.asarray(batch_nhwc).reshape(len(batch_nhwc), -1)

    def compile(self, inputs):
        return None

    def forward(self, inputs):
        self.seen.add(id(inputs))
        time.sleep(0.002)
        return inputs @ self.weight

    def synchronize(self, outputs):
        pass

    def to_numpy(self, outputs):
        return np.asarray(outputs, np.float32)

    def gpu_index(self):
        return 0

    def device_timer(self):
        return FakeEventTimer()

    def device_memory(self):
        return {"peak_allocated_bytes": 123, "peak_reserved_bytes": 456, "source": "fake allocator"}


class FakeTrainer(Trainer):
    """Softmax regression in NumPy with plain gradient steps: enough to drive the training loop on a 'GPU'."""

    def __init__(self, features, classes):
        self.weight = np.zeros((features, classes))

    def to_device(self, images_nhwc, labels):
        return np.asarray(images_nhwc).reshape(len(images_nhwc), -1), np.asarray(labels)

    def synchronize(self, handle):
        pass

    def compile(self, images, labels):
        return {"fake_compile_s": 0.01}

    def _grad(self, x, y):
        logits = x @ self.weight
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        loss = -np.log(p[np.arange(len(y)), y] + 1e-12).mean()
        p[np.arange(len(y)), y] -= 1
        return loss, x.T @ p / len(y), logits

    def step(self, images, labels, lr, step_index):
        loss, grad, _ = self._grad(images, labels)
        self.weight -= 100 * lr * grad
        time.sleep(0.002)
        return loss

    def value(self, loss):
        return float(loss)

    def evaluate(self, images, labels, valid, *, statistics="running"):
        loss, _, logits = self._grad(images[:valid], labels[:valid])
        top = np.argsort(-logits, axis=1)[:, :5]
        return (
            float(loss) * valid,
            int((top[:, 0] == labels[:valid]).sum()),
            int((top == labels[:valid, None]).any(1).sum()),
        )

    def probe(self, images, labels, lr):
        loss, grad, _ = self._grad(images, labels)
        return {"loss": float(loss), "grad_norm": float(np.linalg.norm(grad)), "loss_after_step": float(loss)}

    def save(self, path):
        with open(path, "wb") as handle:
            np.save(handle, self.weight)

    def load(self, path):
        with open(path, "rb") as handle:
            self.weight = np.load(handle)


def test_training_scenario_records_gpu_energy_and_memory(tmp_path, monkeypatch):
    from fwbench.scenarios import training

    config = validate_config({**TINY_CONFIG, "training": {"batch_sizes": [8], "epochs": 2, "lr": 0.01}})
    prepare(config["dataset"], tmp_path / "data")
    init_weights("small_cnn", num_classes=4, image_size=16, seed=0, out=tmp_path / "w.npz")
    monkeypatch.setattr(training, "open_device", lambda index: open_device(index, FakePynvml()))
    monkeypatch.setattr(training, "idle_watts", lambda device: 40.0)
    settings = {k: v for k, v in config["training"].items() if k != "batch_sizes"}
    settings.update(loader=config["loader"], seed=config["seed"])
    part = training.run(
        FakeCudaBackend(threads=1, precision="fp32"),
        Cell("training", "fakecuda", "small_cnn", "fp32", 8, 16),
        settings,
        data_dir=tmp_path / "data",
        weights_path=tmp_path / "w.npz",
        num_classes=4,
        state_dir=tmp_path / "state",
    )
    metrics = part["metrics"]
    for epoch in metrics["epochs"]:
        assert epoch["energy"]["source"] == "nvml total energy counter" and epoch["energy"]["joules"] > 0
    assert metrics["device_memory"]["max"]["peak_allocated_bytes"] == 123
    assert metrics["device_memory"]["initial"]["source"] == "fake allocator"
    assert "energy" not in metrics["missing"] and "device_memory" not in metrics["missing"]
    assert metrics["epochs"][0]["compile_s"] == pytest.approx(0.01)


def test_scenario_records_gpu_energy_memory_and_isolation(tmp_path, monkeypatch):
    config = validate_config(TINY_CONFIG)
    prepare(config["dataset"], tmp_path / "data")
    init_weights("small_cnn", num_classes=4, image_size=16, seed=0, out=tmp_path / "w.npz")
    monkeypatch.setattr(inference, "open_device", lambda index: open_device(index, FakePynvml(others=(99,))))
    monkeypatch.setattr(inference, "idle_watts", lambda device: 40.0)
    settings = {k: v for k, v in config["inference"].items() if k != "batch_sizes"}
    part = inference.run(
        FakeCudaBackend(threads=1, precision="fp32"),
        Cell("inference", "fakecuda", "small_cnn", "fp32", 2, 16),
        settings,
        data_dir=tmp_path / "data",
        weights_path=tmp_path / "w.npz",
        num_classes=4,
    )
    metrics = part["metrics"]
    assert metrics["energy"]["source"] == "nvml total energy counter"
    assert metrics["energy"]["joules_per_image"] == pytest.approx(
        metrics["energy"]["joules"] / (metrics["n_iters"] * 2)
    )
    assert metrics["isolation"]["other_processes"] == [{"pid": 99, "used_memory_bytes": 512 * 2**20}]
    assert metrics["flags"]["other_gpu_processes"] is True
    assert metrics["device_memory"]["peak_allocated_bytes"] == 123
    assert metrics["device_memory"]["nvml_process_used_bytes"] == 2**30
    assert "energy" not in metrics["missing"] and "device_memory" not in metrics["missing"]
    assert metrics["device_latency_ms"]["p50"] == 1.5 and "CUDA events" in metrics["device_latency_ms"]["source"]
    assert len(metrics["device_samples_ms"]) == metrics["n_iters"]
    assert metrics["cold_inputs"] is None


def test_cold_inputs_rotate_through_distinct_buffers(tmp_path, monkeypatch):
    config = validate_config({**TINY_CONFIG, "inference": {**TINY_CONFIG["inference"], "cold_inputs": True}})
    prepare(config["dataset"], tmp_path / "data")
    init_weights("small_cnn", num_classes=4, image_size=16, seed=0, out=tmp_path / "w.npz")
    monkeypatch.setattr(inference, "last_level_cache_bytes", lambda: (64 * 1024, "test cache"))
    settings = {k: v for k, v in config["inference"].items() if k != "batch_sizes"}
    backend = FakeCudaBackend(threads=1, precision="fp32")
    monkeypatch.setattr(inference, "open_device", lambda index: Unavailable("no NVML in this test"))
    part = inference.run(
        backend,
        Cell("inference", "fakecuda", "small_cnn", "fp32", 2, 16),
        settings,
        data_dir=tmp_path / "data",
        weights_path=tmp_path / "w.npz",
        num_classes=4,
    )
    cold = part["metrics"]["cold_inputs"]
    # 2 x 64 KiB of cache / (2 images x 16 x 16 x 3 x 4 bytes) = 22 buffers, each touched in warm-up and timing
    assert cold == {"buffers": 22, "bytes_each": 6144, "cache_bytes": 65536, "cache_source": "test cache"}
    assert len(backend.seen) == 22
