"""Both backends, through the one interface, give the same logits for the same weights and bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fwbench.backends import get_backend
from fwbench.data.inputs import normalize
from fwbench.models import torch_model, torch_state_dict_numpy
from tests import background


@pytest.fixture(scope="module")
def weights():
    torch.manual_seed(1)
    return torch_state_dict_numpy(torch_model("small_cnn", num_classes=6, image_size=16))


def _logits(framework, weights, batch, precision="fp32"):
    """Build, place, compile and run the small CNN through the backend interface: (backend, compile times, logits)."""
    backend = get_backend(framework, threads=1, precision=precision)
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


def test_precision_default_leaves_each_frameworks_own_switches_alone():
    """`default` touches no switch: in a fresh process (as every cell's), PyTorch keeps TF32 for cuDNN's convolutions
    and not for matmuls, JAX its DEFAULT matmul precision, TensorFlow its TF32 execution; on this CPU none is in
    effect, and each cell says so."""
    code = (
        "import json\n"
        "from fwbench.backends import get_backend\n"
        "out = {}\n"
        "for framework in ('torch', 'jax', 'tensorflow'):\n"
        "    s = get_backend(framework, threads=1, precision='default').effective_settings\n"
        "    out[framework] = {k: s.get(k) for k in ('cudnn_allow_tf32', 'cuda_matmul_allow_tf32',\n"
        "        'float32_matmul_precision', 'default_matmul_precision', 'tensor_float_32_execution',\n"
        "        'tf32_scope', 'tf32_in_effect', 'dtype')}\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    settings = json.loads(proc.stdout.strip().splitlines()[-1])
    assert settings["torch"]["cudnn_allow_tf32"] is True and settings["torch"]["cuda_matmul_allow_tf32"] is False
    assert settings["torch"]["float32_matmul_precision"] == "highest"
    assert settings["jax"]["default_matmul_precision"] == "None"
    assert settings["tensorflow"]["tensor_float_32_execution"] is True, "TensorFlow's default: TF32 execution on"
    for framework, recorded in settings.items():
        assert recorded["tf32_scope"] == "none" and recorded["tf32_in_effect"] is False, framework
        assert recorded["dtype"] == "float32", framework


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


class FakeAllocator:
    """torch.cuda's allocator statistics: loading peaks at 900 bytes, a steady-state step at 300."""

    def __init__(self):
        self.in_use, self.peak = 200, 900

    def step(self):
        self.peak = max(self.peak, 300)

    def reset(self, device=None):
        self.peak = self.in_use


def _fake_cuda_torch(monkeypatch, precision="fp32"):
    backend = get_backend("torch", threads=1, precision=precision)
    backend.device = torch.device("cuda", 0)
    props = SimpleNamespace(
        uuid="11111111-2222-3333-4444-555555555555",
        pci_domain_id=0,
        pci_bus_id=0x3B,
        pci_device_id=0,
        L2_cache_size=50 * 2**20,
    )
    allocator = FakeAllocator()
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: allocator.peak)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device=None: allocator.peak + 1000)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: allocator.in_use)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", allocator.reset)
    return backend, allocator


def test_torch_reports_device_identity_l2_and_a_steady_state_peak(monkeypatch):
    backend, allocator = _fake_cuda_torch(monkeypatch)
    assert backend.device_identity() == {
        "ordinal": 0,
        "uuid": "11111111-2222-3333-4444-555555555555",
        "pci_bus_id": "0000:3b:00.0",
        "source": "torch.cuda.get_device_properties (uuid, pci_domain_id/pci_bus_id/pci_device_id)",
    }
    assert backend.device_cache_bytes() == (50 * 2**20, "torch.cuda.get_device_properties().L2_cache_size (device L2)")
    assert "steady_state_peak_bytes" not in backend.device_memory()
    backend.reset_device_memory_peak()  # after warm-up
    allocator.step()
    memory = backend.device_memory()
    assert memory["peak_allocated_bytes"] == 900, "the peak including loading stays reported"
    assert memory["steady_state_peak_bytes"] == 300 and memory["in_use_after_warmup_bytes"] == 200


class FakeCompiled:
    def memory_analysis(self):
        return SimpleNamespace(
            argument_size_in_bytes=150,
            output_size_in_bytes=20,
            alias_size_in_bytes=0,
            temp_size_in_bytes=80,
            generated_code_size_in_bytes=5,
        )


class FakeJaxGpu:
    platform, id, local_hardware_id = "gpu", 0, 1  # CUDA_VISIBLE_DEVICES=1,... : JAX's device 0 is CUDA device 1

    def __init__(self):
        self.stats = {"peak_bytes_in_use": 5000, "bytes_in_use": 200}  # the peak: compilation and autotuning

    def memory_stats(self):
        return dict(self.stats)


def test_jax_reports_device_identity_l2_and_a_steady_state_peak(monkeypatch):
    import fwbench.trackers.nvml as nvml_module

    backend = get_backend("jax", threads=1, precision="fp32")
    backend.device, backend.executable = FakeJaxGpu(), FakeCompiled()
    asked = []

    def driver(ordinal):
        asked.append(ordinal)
        return {
            "ordinal": ordinal,
            "uuid": "aa",
            "pci_bus_id": "0000:3b:00.0",
            "l2_cache_bytes": 50 * 2**20,
            "source": "x",
        }

    monkeypatch.setattr(nvml_module, "cuda_driver_identity", driver)
    assert backend.device_identity() == {"ordinal": 1, "uuid": "aa", "pci_bus_id": "0000:3b:00.0", "source": "x"}
    assert backend.device_cache_bytes()[0] == 50 * 2**20 and asked == [1]
    backend.reset_device_memory_peak()
    memory = backend.device_memory()
    assert memory["peak_allocated_bytes"] == 5000 and "autotuning" in memory["source"]
    # No reset in XLA and no new peak after warm-up: in use after warm-up + the step's temp and output.
    assert memory["steady_state_peak_bytes"] == 200 + 80 + 20 and memory["steady_state_measured"] is False
    backend.device.stats["peak_bytes_in_use"] = 6000  # a peak reached in the timed loop is a measurement
    memory = backend.device_memory()
    assert memory["steady_state_peak_bytes"] == 6000 and memory["steady_state_measured"] is True


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_cpu_backends_have_no_device_identity_cache_or_allocator(framework):
    backend = get_backend(framework, threads=1, precision="fp32")
    assert backend.device_identity() is None and backend.device_cache_bytes() is None
    backend.reset_device_memory_peak()
    assert "missing" in backend.device_memory()


def test_bf16_weights_and_inputs_are_cast_on_the_host(weights, monkeypatch):
    import jax

    put = []
    real_put = jax.device_put

    def device_put(tree, device=None):
        put.extend(jax.tree_util.tree_leaves(tree))
        return real_put(tree, device)

    monkeypatch.setattr(jax, "device_put", device_put)
    backend = get_backend("jax", threads=1, precision="bf16")
    backend.build("small_cnn", weights, num_classes=6, image_size=16)
    backend.to_device(np.zeros((1, 16, 16, 3), np.float32))
    # Only host (NumPy) bfloat16 arrays go to the device: no float32 copy is created there and cast.
    assert put and all(isinstance(a, np.ndarray) and a.dtype.name == "bfloat16" for a in put)

    moves = []
    real_to = torch.nn.Module.to

    def module_to(self, *args, **kwargs):
        moves.append((args, kwargs))
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "to", module_to)
    get_backend("torch", threads=1, precision="bf16").build("small_cnn", weights, num_classes=6, image_size=16)
    assert moves[0] == ((), {"dtype": torch.bfloat16}), "cast while the module is still on the host"
    assert all("dtype" not in kwargs for _, kwargs in moves[1:])


TOP_MODULES = {"torch": {"torch", "torchvision"}, "jax": {"jax", "flax"}, "tensorflow": {"tensorflow", "keras"}}


@background.study("own_framework_processes")
def _own_framework_processes(root, venv_bin, env) -> dict[str, subprocess.CompletedProcess]:
    """For each framework, a fresh process that builds and runs every model's twin and then fails if it loaded
    another framework's modules; every model's weights are made first, in a process of their own."""
    from fwbench.models.registry import MODELS

    make_weights = (
        "from fwbench.models.weights import init_weights\n"
        f"for name in {sorted(MODELS)!r}:\n"
        f"    init_weights(name, num_classes=4, image_size=32, seed=0, out={str(root)!r} + '/' + name + '.npz')\n"
    )
    subprocess.run([sys.executable, "-c", make_weights], env=env, check=True, capture_output=True, timeout=600)
    processes = {}
    for framework in TOP_MODULES:
        others = sorted(set().union(*(other for name, other in TOP_MODULES.items() if name != framework)))
        script = f"""
import sys
import numpy as np
from fwbench.backends import get_backend
backend = get_backend({framework!r}, threads=1, precision="fp32")
for name in {sorted(MODELS)!r}:
    weights = dict(np.load({str(root)!r} + "/" + name + ".npz"))
    backend.build(name, weights, num_classes=4, image_size=32)
    backend.to_device(np.zeros((1, 32, 32, 3), np.float32))
backend.versions()
others = {others!r}
loaded = sorted(m for m in sys.modules if m.split(".")[0] in others)
assert not loaded, f"{framework} process loaded {{loaded[:5]}}"
"""
        processes[framework] = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env
        )
    return processes


@pytest.fixture(scope="module")
def own_framework_processes(background_studies):
    return background_studies.result(_own_framework_processes)


@pytest.mark.parametrize("framework", ["jax", "torch", "tensorflow"])
def test_a_measuring_process_loads_only_its_own_framework(own_framework_processes, framework):
    """A cell's process imports the framework it measures and none of the others (whose import time and memory
    would count against it): build and run every model's twin, then look at sys.modules (the processes run in the
    background while other tests run, tests/background.py)."""
    from fwbench.backends import FRAMEWORKS

    assert set(FRAMEWORKS) - {"numpy"} == set(TOP_MODULES), "a new framework belongs in this test"
    proc = own_framework_processes[framework]
    assert proc.returncode == 0, proc.stderr[-2000:]
