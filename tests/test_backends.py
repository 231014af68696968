"""Both backends, through the one interface, give the same logits for the same weights and bytes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fwbench.backends import get_backend
from fwbench.data.inputs import normalize
from fwbench.models import torch_model, torch_state_dict_numpy


@pytest.fixture(scope="module")
def weights():
    torch.manual_seed(1)
    return torch_state_dict_numpy(torch_model("small_cnn", num_classes=6, image_size=16))


def _logits(framework, weights, batch):
    backend = get_backend(framework, threads=1, precision="fp32")
    backend.build("small_cnn", weights, num_classes=6, image_size=16)
    inputs = backend.to_device(batch)
    compile_times = backend.compile(inputs)
    out = backend.forward(inputs)
    backend.synchronize(out)
    return backend, compile_times, backend.to_numpy(out)


def test_backends_agree_through_the_interface(weights):
    batch = normalize(np.random.default_rng(0).integers(0, 256, (3, 16, 16, 3), dtype=np.uint8))
    torch_backend, torch_compile, torch_logits = _logits("torch", weights, batch)
    jax_backend, jax_compile, jax_logits = _logits("jax", weights, batch)
    assert torch_logits.shape == jax_logits.shape == (3, 6)
    assert np.abs(torch_logits - jax_logits).max() / np.abs(torch_logits).max() <= 1e-5
    assert torch_compile is None, "eager torch has no compile step"
    assert set(jax_compile) == {"trace_s", "lower_s", "compile_s"} and all(v > 0 for v in jax_compile.values())


def test_backends_record_precision_and_threads():
    torch_backend = get_backend("torch", threads=1, precision="fp32")
    settings = torch_backend.effective_settings
    assert settings["intra_op_threads"] == 1
    assert settings["float32_matmul_precision"] == "highest"
    assert settings["cudnn_allow_tf32"] is False and settings["cuda_matmul_allow_tf32"] is False
    assert torch_backend.versions()["torch"] == torch.__version__
    jax_backend = get_backend("jax", threads=1, precision="fp32")
    assert jax_backend.effective_settings["default_matmul_precision"] == "highest"
    assert jax_backend.device_info()["platform"] == "cpu"


def test_unknown_framework_and_precision_are_errors():
    with pytest.raises(KeyError, match="mxnet"):
        get_backend("mxnet", threads=1, precision="fp32")
    with pytest.raises(ValueError, match="fp8"):
        get_backend("torch", threads=1, precision="fp8")


def test_jax_forward_requires_compile(weights):
    backend = get_backend("jax", threads=1, precision="fp32")
    backend.build("small_cnn", weights, num_classes=6, image_size=16)
    with pytest.raises(RuntimeError, match="before compile"):
        backend.forward(backend.to_device(np.zeros((1, 16, 16, 3), np.float32)))


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_precision_policies_are_applied_and_recorded(weights, framework):
    batch = normalize(np.random.default_rng(1).integers(0, 256, (2, 16, 16, 3), dtype=np.uint8))
    reference = None
    for precision in ("fp32", "tf32", "bf16"):
        backend = get_backend(framework, threads=1, precision=precision)
        backend.build("small_cnn", weights, num_classes=6, image_size=16)
        inputs = backend.to_device(batch)
        backend.compile(inputs)
        out = backend.forward(inputs)
        backend.synchronize(out)
        logits, settings = backend.to_numpy(out), backend.effective_settings
        assert logits.dtype == np.float32
        if precision == "fp32":
            reference = logits
            assert settings["dtype"] == "float32" and settings["tf32_in_effect"] is False
        elif precision == "tf32":
            assert settings["tf32_in_effect"] is False, "the CPU has no TF32 units: recorded as not in effect"
            np.testing.assert_allclose(logits, reference, rtol=1e-5, atol=1e-5)
        else:
            assert settings["dtype"] == "bfloat16" and settings["bf16_policy"] == "parameters and activations"
            error = np.abs(logits - reference).max() / np.abs(reference).max()
            assert 0 < error < 0.05, error  # bf16 really is in use, and still close
    torch_settings = get_backend("torch", threads=1, precision="tf32").effective_settings
    assert torch_settings["float32_matmul_precision"] == "high" and torch_settings["cudnn_allow_tf32"] is True
    assert get_backend("jax", threads=1, precision="tf32").effective_settings["default_matmul_precision"] == (
        "tensorfloat32"
    )
