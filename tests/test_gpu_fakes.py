"""GPU-side measurement (NVML energy, power fallback, device memory, isolation) and RAPL, exercised with fakes at
the library boundary: a fake `pynvml` module, a fake powercap tree and a fake CUDA-like backend."""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from fwbench.backends.base import Backend
from fwbench.data.prepare import prepare
from fwbench.models.weights import init_weights
from fwbench.scenarios import inference
from fwbench.study.config import validate_config
from fwbench.study.grid import Cell
from fwbench.trackers import energy
from fwbench.trackers.energy import NvmlEnergy, RaplEnergy, cpu_meter, energy_meter, idle_baseline
from fwbench.trackers.nvml import NvmlDevice, Unavailable, cuda_driver_identity, open_device
from fwbench.training.trainer import Trainer
from tests.conftest import TINY_CONFIG

WATTS = 250.0
FAKE_UUID = "GPU-11111111-2222-3333-4444-555555555555"
OTHER_UUID = "GPU-99999999-8888-7777-6666-555555555555"
# What a CUDA-shaped backend reports of the device it computes on: CUDA's UUID bytes carry no GPU- prefix.
IDENTITY = {"ordinal": 0, "uuid": FAKE_UUID.removeprefix("GPU-"), "pci_bus_id": "0000:3b:00.0", "source": "fake"}


class FakeNVMLError(Exception):
    pass


def _pci(text):
    """'0000:3B:00.0', '00000000:3b:00.0' and '3b:00.0' name the same device (NVML accepts all three)."""
    parts = [int(part, 16) for part in text.replace(".", ":").split(":")]
    return tuple([0] * (4 - len(parts)) + parts)


class FakePynvml:
    """The subset of pynvml the trackers call; energy grows at WATTS while the clock runs. `gpus` lists NVML's view
    of the machine in NVML's order, (uuid, pci bus id) each; `own_pid` is how NVML sees this process (a host pid
    in a container's PID namespace); each *_supported=False makes that query raise like NotSupported/NoPermission."""

    def __init__(
        self,
        *,
        energy_supported=True,
        others=(4242,),
        gpus=((FAKE_UUID, "00000000:3B:00.0"),),
        own_pid=None,
        power_supported=True,
        processes_supported=True,
        memory_supported=True,
    ):
        self.energy_supported, self.others, self.gpus = energy_supported, others, list(gpus)
        self.own_pid = os.getpid() if own_pid is None else own_pid
        self.power_supported, self.processes_supported = power_supported, processes_supported
        self.memory_supported = memory_supported
        self.t0 = time.perf_counter()

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        raise AssertionError("NVML must never be opened by CUDA ordinal")

    def nvmlDeviceGetHandleByUUID(self, uuid):
        for index, (known, _) in enumerate(self.gpus):
            if known == uuid:
                return f"handle{index}"
        raise FakeNVMLError("Not Found")

    def nvmlDeviceGetHandleByPciBusId(self, bus_id):
        for index, (_, known) in enumerate(self.gpus):
            if known and _pci(known) == _pci(bus_id):
                return f"handle{index}"
        raise FakeNVMLError("Not Found")

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H100 80GB HBM3 (fake)"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.energy_supported:
            raise FakeNVMLError("Not Supported")
        return int((time.perf_counter() - self.t0) * WATTS * 1000) + 10_000_000  # mJ since "driver load"

    def nvmlDeviceGetPowerUsage(self, handle):
        if not self.power_supported:
            raise FakeNVMLError("Not Supported")
        return int(WATTS * 1000)  # mW

    def nvmlDeviceGetMemoryInfo(self, handle):
        if not self.memory_supported:
            raise FakeNVMLError("No Permission")
        return SimpleNamespace(used=3 * 2**30, total=80 * 2**30)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        if not self.processes_supported:
            raise FakeNVMLError("Not Supported")
        procs = [SimpleNamespace(pid=self.own_pid, usedGpuMemory=2**30)]
        return procs + [SimpleNamespace(pid=pid, usedGpuMemory=512 * 2**20) for pid in self.others]


class FailingPynvml(FakePynvml):
    def nvmlInit(self):
        raise FakeNVMLError("Driver Not Loaded")


def test_open_device_reports_why_not():
    assert isinstance(open_device(IDENTITY, FakePynvml()), NvmlDevice)
    failed = open_device(IDENTITY, FailingPynvml())
    assert isinstance(failed, Unavailable) and "Driver Not Loaded" in failed.reason
    absent = open_device({"ordinal": 3, "uuid": OTHER_UUID, "pci_bus_id": "0000:99:00.0"}, FakePynvml())
    assert "Not Found" in absent.reason and OTHER_UUID in absent.reason
    assert open_device(None, FakePynvml()).reason == "the cell runs on the CPU"


def test_nvml_device_is_found_by_uuid_or_pci_bus_id_never_by_ordinal():
    # CUDA_VISIBLE_DEVICES=1: the process's CUDA device 0 is NVML's device 1. Opening NVML by ordinal (the fake
    # refuses to) would measure the other GPU.
    gpus = [(OTHER_UUID, "0000:18:00.0"), (FAKE_UUID, "0000:3b:00.0")]
    by_uuid = open_device(IDENTITY, FakePynvml(gpus=gpus))
    assert by_uuid.handle == "handle1" and by_uuid.lookup["key"] == "uuid" and by_uuid.lookup["value"] == FAKE_UUID
    by_pci = open_device({**IDENTITY, "uuid": None}, FakePynvml(gpus=gpus))
    assert by_pci.handle == "handle1" and by_pci.lookup == {
        "key": "pci_bus_id",
        "value": "0000:3b:00.0",
        "ordinal": 0,
        "identity": "fake",
    }
    mig = "MIG-abcdef01-2222-3333-4444-555555555555"
    on_mig = open_device({"ordinal": 0, "uuid": mig.removeprefix("MIG-")}, FakePynvml(gpus=gpus + [(mig, None)]))
    assert on_mig.handle == "handle2" and on_mig.lookup["value"] == mig
    blind = open_device({"ordinal": 0, "uuid": None, "pci_bus_id": None, "reason": "no driver API"}, FakePynvml())
    assert (
        isinstance(blind, Unavailable) and "never opened by ordinal" in blind.reason and "no driver API" in blind.reason
    )


class FakeLibcuda:
    """The CUDA driver calls cuda_driver_identity makes, answering for a device on PCI 0000:3b:00.0."""

    def __init__(self, status=0):
        self.status = status

    def cuInit(self, flags):
        return self.status

    def cuDeviceGet(self, ref, ordinal):
        ref._obj.value = ordinal
        return 0

    def cuDeviceGetPCIBusId(self, buffer, length, device):
        buffer.value = b"0000:3B:00.0"
        return 0

    def cuDeviceGetUuid_v2(self, uuid, device):
        for i, byte in enumerate(bytes.fromhex(FAKE_UUID.removeprefix("GPU-").replace("-", ""))):
            uuid[i] = byte
        return 0

    def cuDeviceGetAttribute(self, ref, attribute, device):
        assert attribute == 38  # CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
        ref._obj.value = 50 * 2**20
        return 0


def test_cuda_driver_identity_and_its_fallback(monkeypatch):
    identity = cuda_driver_identity(0, FakeLibcuda())
    assert identity["uuid"] == IDENTITY["uuid"] and identity["pci_bus_id"] == "0000:3b:00.0"
    assert identity["l2_cache_bytes"] == 50 * 2**20 and "driver API" in identity["source"]
    assert open_device(identity, FakePynvml()).lookup["key"] == "uuid"
    # No driver API (an error status here): the UUID CUDA_VISIBLE_DEVICES names at that position, else a reason.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{OTHER_UUID},{FAKE_UUID}")
    fallback = cuda_driver_identity(1, FakeLibcuda(status=100))
    assert fallback["uuid"] == FAKE_UUID and "CUDA_VISIBLE_DEVICES" in fallback["source"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    unknown = cuda_driver_identity(0, FakeLibcuda(status=100))
    assert unknown["uuid"] is None and "CUresult 100" in unknown["reason"]


def test_isolation_and_memory_from_nvml():
    device = open_device(IDENTITY, FakePynvml(others=(11, 12)))
    assert device.name() == "NVIDIA H100 80GB HBM3 (fake)"
    isolation = device.isolation("test")
    assert isolation["others_present"] is True and [p["pid"] for p in isolation["other_processes"]] == [11, 12]
    assert device.own_memory_bytes() == 2**30 and device.memory_used_bytes() == 3 * 2**30
    alone = open_device(IDENTITY, FakePynvml(others=())).isolation("test")
    assert alone["others_present"] is False and alone["other_processes"] == []


def test_isolation_in_a_pid_namespace_never_counts_our_own_context():
    # In a container NVML lists our context under its host pid: alone on the GPU, that one entry is ours.
    alone = open_device(IDENTITY, FakePynvml(own_pid=777001, others=())).isolation("test")
    assert alone["others_present"] is None and alone["own_pid_listed"] is False
    assert "undetermined" in alone["reason"] and "PID namespace" in alone["reason"]
    # Two listed processes: at most one is ours, so another one is there.
    shared = open_device(IDENTITY, FakePynvml(own_pid=777001, others=(777002,))).isolation("test")
    assert shared["others_present"] is True and shared["others_at_least"] == 1


def test_refused_nvml_queries_become_reasons_not_exceptions():
    device = open_device(
        IDENTITY,
        FakePynvml(energy_supported=False, power_supported=False, processes_supported=False, memory_supported=False),
    )
    assert device.memory_used_bytes() is None and device.own_memory_bytes() is None
    isolation = device.isolation("test")
    assert isolation["others_present"] is None and "Not Supported" in isolation["reason"]
    assert idle_baseline(device)["watts"] is None
    reason = energy_meter(device, None)
    assert isinstance(reason, str) and "neither energy nor power" in reason
    assert set(device.missing) >= {"memory", "processes", "energy", "power"}


class DecayingPower:
    """A device whose NVML power reading still averages in the previous work for the first second (400 W), then
    reads idle (60 W); the clock is fake and advances only when the code sleeps."""

    def __init__(self):
        self.now, self.missing = 0.0, {}

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def power_mw(self):
        return 400_000 if self.now < 1.0 else 60_000


def test_a_launch_takes_its_idle_baseline_once_and_its_later_workers_reuse_it():
    """NVML's idle baseline (2.2 s at least) once per launch: the first worker takes it and reports it with its ready
    reply; the controller hands it to the launch's later workers, which use it only for the same device."""
    from fwbench.running.context import keep_baseline

    device = open_device(IDENTITY, FakePynvml())
    taken = []

    def measure(device):
        taken.append(device)
        return {"watts": 41.0, "method": "fake"}

    first = energy.launch_idle_baseline(device, {}, measure)
    assert first["watts"] == 41.0 and first["reused"] is False and taken == [device]
    launch_env: dict[str, str] = {}
    keep_baseline(launch_env, {"reply": {"ready": [], "idle_baseline": first}})
    keep_baseline(launch_env, {"reply": {"ready": [], "idle_baseline": {**first, "watts": 99.0}}})  # the first stays
    later = energy.launch_idle_baseline(device, launch_env, measure)
    assert later["watts"] == 41.0 and later["reused"] is True and len(taken) == 1
    # negative controls: another device's baseline, or one without watts, is not used
    other = {energy.LAUNCH_BASELINE_ENV: json.dumps({**first, "device": "GPU-other"})}
    assert energy.launch_idle_baseline(device, other, measure)["reused"] is False and len(taken) == 2
    empty = {energy.LAUNCH_BASELINE_ENV: json.dumps({**first, "watts": None})}
    assert energy.launch_idle_baseline(device, empty, measure)["reused"] is False and len(taken) == 3
    broken = {energy.LAUNCH_BASELINE_ENV: "{not json"}
    assert energy.launch_idle_baseline(device, broken, measure)["reused"] is False


def test_idle_baseline_waits_out_the_power_average():
    device = DecayingPower()
    idle = idle_baseline(device, clock=device.clock, sleep=device.sleep)
    assert idle["watts"] == pytest.approx(60.0) and idle["settled"] is True and idle["waited_s"] >= 1.0
    assert "NVML averages" in idle["method"] and len(idle["windows_w"]) >= 2


@pytest.mark.parametrize("supported", [True, False])
def test_nvml_energy_counter_and_power_fallback(supported):
    meter = NvmlEnergy(open_device(IDENTITY, FakePynvml(energy_supported=supported)), 50.0)
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


class FakeCudaBackend(Backend):
    """A CUDA-shaped backend computing with NumPy: device index 0, allocator statistics like torch.cuda's."""

    name = "fakecuda"

    def _apply_settings(self) -> dict[str, Any]:
        return {"intra_op_threads": self.threads}

    def versions(self):
        return {"fakecuda": "1.0"}

    def device_info(self):
        return {"platform": "cuda", "name": "fake"}

    def arrays(self):
        from fwbench.backends.numpy import NumpyArrays

        return NumpyArrays()

    seen: set

    def trainer(self, model, state_dict, *, num_classes, image_size, recipe):
        return FakeTrainer(image_size * image_size * 3, num_classes)

    def build(self, model, state_dict, *, num_classes, image_size):
        self.seen, self.calls, self.size = set(), [], image_size
        self.weight = np.random.default_rng(0).standard_normal((image_size * image_size * 3, num_classes))

    def to_device(self, batch_nhwc):
        return np.asarray(batch_nhwc).reshape(len(batch_nhwc), -1)

    def fed_nhwc(self, inputs):
        return np.asarray(inputs, dtype=np.float32).reshape(len(inputs), self.size, self.size, 3)

    def compile(self, inputs):
        return None

    def forward(self, inputs):
        self.seen.add(id(inputs))
        self.calls.append("forward")
        time.sleep(0.002)
        return inputs @ self.weight

    def synchronize(self, outputs):
        pass

    def to_numpy(self, outputs):
        return np.asarray(outputs, np.float32)

    def gpu_index(self):
        return 0

    def device_identity(self):
        return dict(IDENTITY)

    l2_bytes = 64 * 1024

    def device_cache_bytes(self):
        return self.l2_bytes, "fake L2"

    forwards_at_reset = None

    def reset_device_memory_peak(self):
        self.forwards_at_reset = len(getattr(self, "calls", []))  # a training cell builds no inference model

    def device_memory(self):
        # Like torch.cuda's allocator: the peak over the process includes loading; after the reset, the steady one.
        out = {"peak_allocated_bytes": 456, "source": "fake allocator"}
        if self.forwards_at_reset is not None:
            out.update(
                steady_state_peak_bytes=123, steady_state_source="fake, since reset", in_use_after_warmup_bytes=100
            )
        return out


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
    monkeypatch.setattr(training, "open_device", lambda identity: open_device(identity, FakePynvml()))
    backend = FakeCudaBackend(threads=1, precision="fp32")
    idle_taken = []
    monkeypatch.setattr(training, "idle_baseline", lambda device: idle_taken.append(device) or {"watts": 40.0})
    settings = {k: v for k, v in config["training"].items() if k != "batch_sizes"}
    settings.update(loader=config["loader"], seed=config["seed"])
    part = training.run(
        backend,
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
        assert epoch["energy"]["idle_watts"] == 40.0 and epoch["energy"]["idle_baseline"] == {"watts": 40.0}
    assert len(idle_taken) == 1 and idle_taken[0].lookup["key"] == "uuid"
    assert metrics["device_memory"]["max"]["peak_allocated_bytes"] == 456
    # the epochs' own peak: the scenario reset it after compilation and before the first epoch
    assert backend.forwards_at_reset is not None and metrics["device_memory"]["max"]["steady_state_peak_bytes"] == 123
    assert metrics["device_memory"]["initial"]["source"] == "fake allocator"
    assert "energy" not in metrics["missing"] and "device_memory" not in metrics["missing"]
    assert metrics["epochs"][0]["compile_s"] == pytest.approx(0.01)


def test_scenario_records_gpu_energy_memory_and_isolation(tmp_path, monkeypatch):
    config = validate_config(TINY_CONFIG)
    prepare(config["dataset"], tmp_path / "data")
    init_weights("small_cnn", num_classes=4, image_size=16, seed=0, out=tmp_path / "w.npz")
    monkeypatch.setattr(inference, "open_device", lambda identity: open_device(identity, FakePynvml(others=(99,))))
    backend = FakeCudaBackend(threads=1, precision="fp32")
    idle_taken = []

    def idle(device):  # when: the model is built (every framework holds its context) and nothing has run yet
        idle_taken.append((hasattr(backend, "weight"), len(backend.calls)))
        return {"watts": 40.0, "method": "fake"}

    monkeypatch.setattr(energy, "idle_baseline", idle)
    monkeypatch.delenv(energy.LAUNCH_BASELINE_ENV, raising=False)
    settings = {k: v for k, v in config["inference"].items() if k != "batch_sizes"}
    part = inference.run(
        backend,
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
    assert (
        metrics["isolation"]["when"].startswith("after the model build")
        and metrics["isolation"]["device"]["key"] == "uuid"
    )
    assert metrics["flags"]["other_gpu_processes"] is True
    assert idle_taken == [(True, 0)] and metrics["energy"]["idle_baseline"]["method"] == "fake"
    # Steady-state peak: reset after warm-up (warmup_iters forward calls), before any timed step.
    assert backend.forwards_at_reset == settings["warmup_iters"]
    assert metrics["device_memory"]["peak_allocated_bytes"] == 456
    assert metrics["device_memory"]["steady_state_peak_bytes"] == 123
    assert metrics["device_memory"]["nvml_process_used_bytes"] == 2**30
    assert "energy" not in metrics["missing"] and "device_memory" not in metrics["missing"]
    assert "device_latency_ms" not in metrics, "one timer for every framework: the host clock"
    assert metrics["cold_inputs"] is None


class TracedCudaBackend(FakeCudaBackend):
    """Records every framework call in `trace`."""

    def __init__(self, trace, **kwargs):
        super().__init__(**kwargs)
        self.trace = trace

    def forward(self, inputs):
        self.trace.append("step")
        return super().forward(inputs)

    def synchronize(self, outputs):
        self.trace.append("sync")


def test_host_timed_steps_contain_only_the_step_and_the_synchronise(tmp_path, monkeypatch):
    from fwbench.scenarios import blocks

    config = validate_config(TINY_CONFIG)
    prepare(config["dataset"], tmp_path / "data")
    init_weights("small_cnn", num_classes=4, image_size=16, seed=0, out=tmp_path / "w.npz")
    monkeypatch.setattr(inference, "open_device", lambda *a, **k: Unavailable("no NVML in this test"))
    trace: list[str] = []

    def clock():  # only the bursts' clock reads are traced: they bracket each host-timed step
        trace.append("clock")
        return time.perf_counter()

    monkeypatch.setattr(blocks, "burst_clock", clock)
    # no untimed iterations before a burst, so that every step between the first and last clock read is timed
    settings = {k: v for k, v in config["inference"].items() if k != "batch_sizes"} | {"burst_discard": 0}
    backend = TracedCudaBackend(trace, threads=1, precision="fp32")
    metrics = inference.run(
        backend,
        Cell("inference", "fakecuda", "small_cnn", "fp32", 2, 16),
        settings,
        data_dir=tmp_path / "data",
        weights_path=tmp_path / "w.npz",
        num_classes=4,
    )["metrics"]
    first, last = trace.index("clock"), len(trace) - 1 - trace[::-1].index("clock")
    brackets, segment = [], []
    for event in trace[first + 1 : last + 1]:
        if event == "clock":
            brackets.append(tuple(segment))
            segment = []
        else:
            segment.append(event)
    timed = [b for b in brackets if b]
    assert set(timed) == {("step", "sync")}, "between the clock reads: the step and its synchronise, nothing else"
    assert len(timed) == metrics["n_iters"]
    # one timer, the same for every framework: no device-timer pass after the bursts
    assert trace[last + 1 :] == [] and "device_latency_ms" not in metrics
    assert metrics["blocks"]["bursts"] == settings["blocks"] and metrics["timed_s"] > 0


def test_cold_inputs_rotate_through_distinct_buffers(tmp_path, monkeypatch):
    config = validate_config({**TINY_CONFIG, "inference": {**TINY_CONFIG["inference"], "cold_inputs": True}})
    prepare(config["dataset"], tmp_path / "data")
    init_weights("small_cnn", num_classes=4, image_size=16, seed=0, out=tmp_path / "w.npz")
    # A GPU cell sizes its buffers from the device's L2 (the fake's 64 KiB), never from the host's cache.
    monkeypatch.setattr(inference, "last_level_cache_bytes", lambda: (32 * 2**20, "host LLC"))
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
    assert cold == {"buffers": 22, "bytes_each": 6144, "cache_bytes": 65536, "cache_source": "fake L2"}
    assert len(backend.seen) == 22


def test_cpu_cells_size_cold_inputs_from_the_host_cache(monkeypatch):
    monkeypatch.setattr(inference, "last_level_cache_bytes", lambda: (12 * 1024, "host LLC"))
    cpu = SimpleNamespace(device_cache_bytes=lambda: None, to_device=lambda batch: batch)
    images = np.zeros((8, 16, 16, 3), np.uint8)
    buffers, cold = inference.input_buffers(cpu, images, 2, cold=True)
    assert cold["cache_source"] == "host LLC" and cold["buffers"] == len(buffers) == 4  # 2 x 12 KiB / 6 KiB


def test_refused_nvml_queries_leave_the_cell_measured(tmp_path, monkeypatch):
    # MIG instance / container: no power, no energy, no process list, no memory info. The cell still completes and
    # every refused figure is missing with its reason.
    config = validate_config(TINY_CONFIG)
    prepare(config["dataset"], tmp_path / "data")
    init_weights("small_cnn", num_classes=4, image_size=16, seed=0, out=tmp_path / "w.npz")
    refusing = FakePynvml(
        energy_supported=False, power_supported=False, processes_supported=False, memory_supported=False
    )
    monkeypatch.setattr(inference, "open_device", lambda identity: open_device(identity, refusing))
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
    assert metrics["energy"] is None and "neither energy nor power" in metrics["missing"]["energy"]
    assert "Not Supported" in metrics["missing"]["idle_power"]
    assert metrics["flags"]["other_gpu_processes"] is None and "Not Supported" in metrics["isolation"]["reason"]
    assert metrics["device_memory"]["nvml_device_used_bytes"] is None
    assert "No Permission" in metrics["missing"]["nvml"]


def test_isolation_leaves_out_the_comparisons_own_workers(monkeypatch):
    """The warm workers of one comparison each hold a CUDA context: the runner names them (COMPANIONS_ENV) and they
    are recorded apart, never as other processes; a process beyond them still is one."""
    from fwbench.trackers.nvml import COMPANIONS_ENV

    device = open_device(IDENTITY, FakePynvml(others=(11, 12)))
    monkeypatch.setenv(COMPANIONS_ENV, "11,12")
    alone = device.isolation("test")
    assert alone["others_present"] is False and alone["other_processes"] == []
    assert [p["pid"] for p in alone["companion_processes"]] == [11, 12] and alone["companions"] == [11, 12]
    monkeypatch.setenv(COMPANIONS_ENV, "11")
    shared = device.isolation("test")
    assert shared["others_present"] is True and [p["pid"] for p in shared["other_processes"]] == [12]
    # in a PID namespace only the count tells: 3 listed, ours and 2 companions' may be all of them
    namespaced = open_device(IDENTITY, FakePynvml(own_pid=777001, others=(777002, 777003)))
    assert namespaced.isolation("test", companions={5, 6})["others_present"] is None
    crowded = namespaced.isolation("test", companions={5})
    assert crowded["others_present"] is True and crowded["others_at_least"] == 1
