"""The TensorFlow backend through the one interface: the same logits as PyTorch for the same weights and bytes,
XLA compilation reported apart, retraces counted, threads/precision/memory growth recorded, and a fake GPU for the
paths this machine cannot run."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fwbench.backends import get_backend
from fwbench.data.inputs import normalize
from fwbench.models import torch_model, torch_state_dict_numpy
from tests.test_backends import _logits

pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def weights():
    torch.manual_seed(1)
    return torch_state_dict_numpy(torch_model("small_cnn", num_classes=6, image_size=16))


def _batch(seed: int, rows: int = 3) -> np.ndarray:
    return normalize(np.random.default_rng(seed).integers(0, 256, (rows, 16, 16, 3), dtype=np.uint8))


def test_tensorflow_agrees_with_torch_through_the_interface(weights):
    batch = _batch(0)
    _, _, torch_logits = _logits("torch", weights, batch)
    backend, compile_times, tf_logits = _logits("tensorflow", weights, batch)
    assert tf_logits.shape == (3, 6) and tf_logits.dtype == np.float32
    assert np.abs(torch_logits - tf_logits).max() / np.abs(torch_logits).max() <= 1e-5
    assert set(compile_times) == {"trace_s", "xla_compile_first_call_extra_s"}
    assert compile_times["trace_s"] > 0 and compile_times["xla_compile_first_call_extra_s"] >= 0
    assert backend.effective_settings["mode"] == "xla"
    assert backend.effective_settings["mode_detail"].startswith("tf.function(jit_compile=True)")


def test_forward_requires_compile_and_a_new_shape_is_a_recompilation(weights):
    backend = get_backend("tensorflow", threads=1, precision="fp32")
    backend.build("small_cnn", weights, num_classes=6, image_size=16)
    inputs = backend.to_device(_batch(1))
    with pytest.raises(RuntimeError, match="before compile"):
        backend.forward(inputs)
    backend.compile(inputs)
    before = backend.compilations
    for _ in range(3):
        backend.synchronize(backend.forward(inputs))
    assert backend.compilations == before, "the same shape reuses the compiled program"
    backend.synchronize(backend.forward(backend.to_device(_batch(2, rows=5))))
    assert backend.compilations == before + 1, "a new shape retraces, which the scenario flags as recompiled"


def test_settings_versions_and_cpu_memory_are_recorded():
    import keras
    import tensorflow as tf

    backend = get_backend("tensorflow", threads=1, precision="fp32")
    settings = backend.effective_settings
    assert settings["tensor_float_32_execution"] is False and settings["tf32_in_effect"] is False
    assert settings["dtype"] == "float32" and settings["bf16_policy"] is None
    assert settings["memory_growth"] == "not applicable (CPU)"
    assert {"intra_op_threads", "inter_op_threads", "xla_flags"} <= set(settings)
    assert backend.versions() == {"tensorflow": tf.__version__, "keras": keras.__version__, "cuda": None, "cudnn": None}
    assert backend.device_info() == {"platform": "cpu", "name": "cpu"}
    assert backend.gpu_index() is None and backend.device_identity() is None and backend.device_cache_bytes() is None
    backend.reset_device_memory_peak()
    assert "no device allocator" in backend.device_memory()["missing"]
    tf32 = get_backend("tensorflow", threads=1, precision="tf32").effective_settings
    assert tf32["tensor_float_32_execution"] is True and tf32["tf32_in_effect"] is False, "no TF32 units on a CPU"
    get_backend("tensorflow", threads=1, precision="fp32")  # fp32 switches it off again for later cells


def test_precisions_are_applied(weights):
    batch = _batch(3)
    _, _, reference = _logits("tensorflow", weights, batch)
    backend, _, bf16 = _logits("tensorflow", weights, batch, precision="bf16")
    assert backend.effective_settings["dtype"] == "bfloat16"
    assert backend.effective_settings["bf16_policy"] == "parameters and activations"
    assert all(v.dtype == "bfloat16" for v in backend.model.variables), "bf16 parameters and statistics"
    error = np.abs(bf16 - reference).max() / np.abs(reference).max()
    assert 0 < error < 0.05, error
    _, _, tf32 = _logits("tensorflow", weights, batch, precision="tf32")
    np.testing.assert_allclose(tf32, reference, rtol=1e-5, atol=1e-5)


def test_micro_primitives_compile_and_agree():
    from fwbench.scenarios.operations import OPERATIONS

    backend = get_backend("tensorflow", threads=1, precision="fp32")
    arrays = backend.arrays()
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32)
    matmul = OPERATIONS["matmul"]
    params = {"w": arrays.put(w)}
    call, timings = arrays.compile(matmul.function, arrays.put(x), params)
    out = call(arrays.put(x), params)
    arrays.synchronize(out)
    np.testing.assert_allclose(arrays.to_numpy(out), x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
    assert set(timings) == {"trace_s", "xla_compile_first_call_extra_s"} and arrays.dtype == "float32"


class FakeTf:
    """The parts of the tensorflow module describe_devices asks: one H100 seen by a CUDA build."""

    def __init__(self, gpus: int):
        gpu = SimpleNamespace(name="/physical_device:GPU:0", device_type="GPU")
        self.config = SimpleNamespace(
            list_physical_devices=lambda kind: [gpu] * gpus if kind == "GPU" else [],
            experimental=SimpleNamespace(
                get_device_details=lambda device: {"device_name": "NVIDIA H100 80GB HBM3", "compute_capability": (9, 0)}
            ),
        )


def test_describe_devices_reports_gpus_like_the_other_frameworks():
    from fwbench.backends.tensorflow import TensorflowBackend

    report = TensorflowBackend.describe_devices(FakeTf(gpus=2))
    assert report["platform"] == "cuda" and report["count"] == 2
    assert report["devices"][1] == {
        "index": 1,
        "name": "NVIDIA H100 80GB HBM3",
        "compute_capability": "9.0",
        "uuid": None,
        "memory_bytes": None,
    }
    cpu = TensorflowBackend.describe_devices(FakeTf(gpus=0))
    assert cpu["platform"] == "cpu" and cpu["cuda_build"] is False and cpu["cuda_runtime"] is None


def test_device_check_names_tensorflows_cpu_build():
    from fwbench.running.devices import DeviceCheckError, decide

    gpu = {"platform": "cuda", "count": 1, "devices": [{"name": "NVIDIA H100 80GB HBM3"}], "cuda_runtime": "13.0"}
    cpu = {"platform": "cpu", "count": 0, "devices": [], "cuda_runtime": None, "cuda_build": False}
    with pytest.raises(DeviceCheckError, match="tensorflow sees only cpu: install TensorFlow's CUDA build"):
        decide({"torch": gpu, "tensorflow": cpu}, "auto")


def test_gpu_memory_is_tensorflows_own_peak_with_a_steady_state_window(monkeypatch):
    import tensorflow as tf

    backend = get_backend("tensorflow", threads=1, precision="fp32")
    backend.on_gpu = True
    info = {"current": 100, "peak": 900}
    resets = []
    monkeypatch.setattr(tf.config.experimental, "get_memory_info", lambda device: dict(info))
    monkeypatch.setattr(tf.config.experimental, "reset_memory_stats", lambda device: resets.append(device))
    assert backend.device_memory()["peak_allocated_bytes"] == 900
    backend.reset_device_memory_peak()
    info.update(peak=300)  # after the reset, the peak of the timed steps
    memory = backend.device_memory()
    assert resets == ["GPU:0"]
    assert memory["steady_state_peak_bytes"] == 300 and memory["peak_allocated_bytes"] == 900
    assert memory["in_use_after_warmup_bytes"] == 100 and memory["steady_state_measured"] is True
