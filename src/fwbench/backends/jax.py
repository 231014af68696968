"""JAX/Flax backend: the timed step is an ahead-of-time compiled executable, so tracing and compilation are
measured once and never fall inside the timed loop."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fwbench.backends import launch_cache
from fwbench.backends.arithmetic import xla_arithmetic
from fwbench.backends.base import TF32_NONE, Arrays, Backend, tf32_scope
from fwbench.backends.driver_identity import DriverIdentity
from fwbench.models import flax_host_variables
from fwbench.study import autotune


def _cache_state() -> dict[str, Any]:
    """Persistent compilation cache: disabled (the default, so compile times are cold), or cold/warm by whether
    the cache directory already held entries when this process started."""
    directory = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if not directory:
        return {"state": "disabled"}
    return launch_cache.describe(directory)


def _cuda_stack() -> dict[str, Any]:
    """The installed JAX CUDA plugin (distribution name and version) and the CUDA runtime/cuDNN/driver versions it
    reports (as torch reports them: "13.0", cuDNN's integer such as 91002; None where there is no plugin or no GPU)."""
    from importlib import metadata

    plugins = sorted(
        f"{dist.metadata['Name']}=={dist.version}"
        for dist in metadata.distributions()
        if (dist.metadata["Name"] or "").lower().replace("_", "-").startswith("jax-cuda")
    )
    stack: dict[str, Any] = {"jax_plugins": plugins, "cuda_runtime": None, "cudnn": None, "cuda_driver": None}
    try:
        from jax._src.lib import cuda_versions
    except ImportError:
        cuda_versions = None
    for key, function in (
        ("cuda_runtime", "cuda_runtime_get_version"),
        ("cudnn", "cudnn_get_version"),
        ("cuda_driver", "cuda_driver_get_version"),
    ):
        try:
            value = int(getattr(cuda_versions, function)())
        except Exception:  # no plugin, or a plugin without a driver to ask: the version stays unknown
            continue
        # CUDA encodes 13.0 as 13000 (torch.version.cuda says "13.0"); cuDNN's integer is what torch reports too.
        stack[key] = str(value) if key == "cudnn" else f"{value // 1000}.{value % 1000 // 10}"
    return stack


class JaxArrays(Arrays):
    """JAX's primitives for the micro suite: the operation is jitted and compiled ahead of time for the measured
    shapes (trace, lower, compile timed apart), so the timed call is the compiled executable, as in inference."""

    put_function = "jax.device_put(host.astype(dtype), device)"

    def __init__(self, device, dtype):
        self.device, self.jax_dtype = device, dtype
        self.dtype = jnp.dtype(dtype).name

    def put(self, host: np.ndarray) -> jax.Array:
        return jax.device_put(np.asarray(host, dtype=np.float32).astype(np.dtype(self.jax_dtype)), self.device)

    def matmul(self, a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.matmul(a, b)

    def relu(self, a: jax.Array) -> jax.Array:
        return jax.nn.relu(a)

    def compile(self, function, *args):
        t0 = time.perf_counter()
        traced = jax.jit(lambda *call_args: function(self, *call_args)).trace(*args)
        t1 = time.perf_counter()
        lowered = traced.lower()
        t2 = time.perf_counter()
        executable = lowered.compile()
        t3 = time.perf_counter()
        return executable, {"trace_s": t1 - t0, "lower_s": t2 - t1, "compile_s": t3 - t2}

    def synchronize(self, outputs: jax.Array) -> None:
        outputs.block_until_ready()

    def to_numpy(self, outputs: jax.Array) -> np.ndarray:
        return np.asarray(outputs).astype(np.float64)


class JaxBackend(DriverIdentity, Backend):
    name = "jax"

    def _apply_settings(self) -> dict[str, Any]:
        # fp32 means true fp32: no reduced-precision matmul passes on any device; tf32 allows TF32 passes where the
        # device has them; bf16 casts parameters and activations, so the matmul precision setting does not apply.
        # default: JAX's own (None: XLA's DEFAULT precision, TF32 for float32 matmuls and convolutions on NVIDIA GPUs
        # since Ampere).
        self.activate()
        self.device = jax.devices()[0]
        jax.monitoring.register_event_duration_secs_listener(self._on_event)
        self.dtype = jnp.bfloat16 if self.precision == "bf16" else jnp.float32
        scope = tf32_scope(self._on_gpu() and self.precision in ("tf32", "default"), True, True)
        return {
            # XLA:CPU sizes its intra-op pool by the schedulable CPUs; the cell runner pins the process's affinity
            # to the cell's thread count before JAX starts, so this is the pool size.
            "intra_op_threads": len(os.sched_getaffinity(0)),
            "default_matmul_precision": str(jax.config.jax_default_matmul_precision),
            "tf32_scope": scope,
            "tf32_in_effect": scope != TF32_NONE,
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            # Set by the worker for every framework's process; only JAX reads it (false: allocate on demand).
            "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true (JAX's default)"),
            "compilation_cache": _cache_state(),
            "autotune": autotune.record(
                self.name,
                self.mode,
                self.autotune,
                on_gpu=self._on_gpu(),
                **autotune.xla_switches(self.autotune, os.environ.get("XLA_FLAGS", "")),
            ),
            "dtype": jnp.dtype(self.dtype).name,
            "bf16_policy": "parameters and activations" if self.precision == "bf16" else None,
        }

    def activate(self) -> None:
        """This cell's matmul precision, which JAX reads when it traces: set at start and again before each of its
        compiles and calls where a worker serves cells of several precisions (an AOT executable keeps what it was
        compiled with). Set for `default` too (to JAX's own None), so that another precision's cell that ran first
        in the process does not leave its setting in force."""
        matmul = {"fp32": "highest", "tf32": "tensorfloat32", "bf16": "default", "default": None}[self.precision]
        jax.config.update("jax_default_matmul_precision", matmul)

    def _on_event(self, name: str, duration: float, **kwargs) -> None:
        if name.endswith("backend_compile_duration"):
            self.compilations += 1

    @classmethod
    def describe_devices(cls, lib: Any = jax) -> dict[str, Any]:
        """`lib` is the jax module; tests pass a fake. JAX calls a CUDA device's platform "gpu": reported as "cuda"
        (or "rocm"), the name every framework's report uses. The CUDA stack is the plugin's, when one is installed."""
        devices = lib.devices()
        platform = devices[0].platform if devices else "none"
        if platform in ("gpu", "cuda"):
            version = str(getattr(getattr(devices[0], "client", None), "platform_version", "")).lower()
            platform = "rocm" if "rocm" in version else "cuda"
        report: dict[str, Any] = {"platform": platform, "count": 0, "devices": [], **_cuda_stack()}
        if platform == "cpu":
            return report
        for device in devices:
            report["devices"].append(
                {
                    "index": int(device.id),
                    "name": getattr(device, "device_kind", platform),
                    "compute_capability": getattr(device, "compute_capability", None),
                    "uuid": None,  # JAX exposes no UUID; the runner binds a cell to a GPU through CUDA_VISIBLE_DEVICES
                    "memory_bytes": ((device.memory_stats() or {}).get("bytes_limit")),
                }
            )
        report["count"] = len(report["devices"])
        return report

    def versions(self) -> dict[str, str | None]:
        import flax
        import jaxlib

        stack = _cuda_stack() if self.device.platform != "cpu" else {}
        return {
            "jax": jax.__version__,
            "jaxlib": jaxlib.__version__,
            "flax": flax.__version__,
            "cuda": stack.get("cuda_runtime"),
            "cudnn": stack.get("cudnn"),
            "cuda_driver": stack.get("cuda_driver"),
            "plugins": ", ".join(stack.get("jax_plugins", [])) or None,
        }

    def device_info(self) -> dict[str, Any]:
        kind = getattr(self.device, "device_kind", self.device.platform)
        info = {"platform": "cuda" if self._on_gpu() else self.device.platform, "name": kind}
        if self._on_gpu():
            info["compute_capability"] = getattr(self.device, "compute_capability", None)
        return info

    def arrays(self) -> JaxArrays:
        return JaxArrays(self.device, self.dtype)

    def build(self, model: str, state_dict: Mapping[str, np.ndarray], *, num_classes: int, image_size: int) -> None:
        # Convert and cast on the host, then move: no float32 copy of the weights is ever alive on the device (bf16).
        try:
            host = jax.default_device(jax.devices("cpu")[0])
        except RuntimeError:  # JAX_PLATFORMS without cpu
            host = contextlib.nullcontext()
        with host:
            module, variables, how = flax_host_variables(
                model, state_dict, num_classes=num_classes, image_size=image_size, template_cache=self.model_cache_dir
            )
        self.effective_settings["flax_template"] = how
        self.module = module
        variables = jax.tree_util.tree_map(lambda a: np.asarray(a).astype(np.dtype(self.dtype)), variables)
        self.variables = jax.device_put(variables, self.device)
        self._jitted = jax.jit(lambda v, x: module.apply(v, x, train=False))
        self.executable = None
        self.executables: dict[tuple[int, ...], Any] = {}  # one AOT executable per input shape compiled

    def to_device(self, batch_nhwc: np.ndarray) -> jax.Array:
        host = np.asarray(batch_nhwc, dtype=np.float32).astype(np.dtype(self.dtype), copy=False)  # cast on the host
        return jax.device_put(host, self.device)

    def fed_nhwc(self, inputs: jax.Array) -> np.ndarray:
        return np.asarray(inputs, dtype=np.float32)

    def compile(self, inputs: jax.Array) -> dict[str, float]:
        t0 = time.perf_counter()
        traced = self._jitted.trace(self.variables, inputs)
        t1 = time.perf_counter()
        lowered = traced.lower()
        t2 = time.perf_counter()
        self.executable = lowered.compile()
        t3 = time.perf_counter()
        # A worker serving several batch sizes compiles each (fwbench.scenarios.inference.run_cells); forward runs
        # the executable of its inputs' shape, as XLA's jit cache would, without tracing anything again.
        self.executables[tuple(inputs.shape)] = self.executable
        self.read_arithmetic(self.executable.as_text())
        return {"trace_s": t1 - t0, "lower_s": t2 - t1, "compile_s": t3 - t2}

    def read_arithmetic(self, hlo_text: str) -> None:
        """The cell's TF32 scope as the compiled program computes it (fwbench.backends.arithmetic), replacing the
        one its setting gave: the record says what ran."""
        read = xla_arithmetic(hlo_text, on_gpu=self._on_gpu(), configured_scope=self.effective_settings["tf32_scope"])
        self.effective_settings["arithmetic"] = {k: read[k] for k in ("source", "precisions")}
        self.effective_settings["tf32_scope"] = read["tf32_scope"]
        self.effective_settings["tf32_in_effect"] = read["tf32_in_effect"]

    def compiled_hlo_text(self, inputs: Any = None) -> str | None:
        """The optimised HLO of the AOT executable the timed step runs on `inputs` (None: the last compiled)."""
        executable = self.executable if inputs is None else self.executables.get(tuple(inputs.shape))
        return None if executable is None else executable.as_text()

    def forward(self, inputs: jax.Array) -> jax.Array:
        executable = self.executables.get(inputs.shape)
        if executable is None:
            raise RuntimeError(
                "JaxBackend.forward before compile() for this shape: the timed step must be the AOT executable"
            )
        return executable(self.variables, inputs)

    def synchronize(self, outputs: jax.Array) -> None:
        outputs.block_until_ready()

    def gpu_index(self) -> int | None:
        return int(self.device.id) if self._on_gpu() else None

    def _on_gpu(self) -> bool:
        """JAX names a CUDA device's platform "gpu" (and "cuda" in some versions); every record says "cuda"."""
        return self.device.platform in ("gpu", "cuda")

    def _cuda_ordinal(self) -> int | None:
        """The device's CUDA ordinal as this process numbers its visible devices (local_hardware_id)."""
        if not self._on_gpu():
            return None
        ordinal = getattr(self.device, "local_hardware_id", None)
        return int(self.device.id if ordinal is None else ordinal)

    _load_peak: dict[str, int] | None = None  # memory_stats at the end of warm-up

    def reset_device_memory_peak(self) -> None:
        # XLA's allocator has no peak reset: remember the peak and what is in use now, and tell them apart later.
        stats = self.device.memory_stats()
        if stats:
            self._load_peak = {"peak": int(stats["peak_bytes_in_use"]), "in_use": int(stats["bytes_in_use"])}

    def _executable_bytes(self) -> dict[str, int] | None:
        """The compiled step's own buffers from XLA's memory_analysis (argument, output, temp, ...), or None."""
        try:
            analysis = self.executable.memory_analysis()
        except Exception:
            return None
        names = ("argument", "output", "alias", "temp", "generated_code")
        sizes = {name: getattr(analysis, f"{name}_size_in_bytes", None) for name in names}
        return {k: int(v) for k, v in sizes.items() if v is not None} or None

    def device_memory(self) -> dict[str, Any]:
        stats = self.device.memory_stats()
        if not stats:
            return {"missing": f"JAX on {self.device.platform} has no memory_stats() (host RSS covers it)"}
        out: dict[str, Any] = {
            "peak_allocated_bytes": int(stats["peak_bytes_in_use"]),
            "source": "jax Device.memory_stats()['peak_bytes_in_use'] over the process (load, compilation and "
            "autotuning scratch included)",
            "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true (default)"),
        }
        if self._load_peak is None:
            return out
        in_use = self._load_peak["in_use"]
        out["in_use_after_warmup_bytes"] = in_use
        executable = self._executable_bytes() if getattr(self, "executable", None) is not None else None
        if executable:
            out["executable_bytes"] = executable
        if int(stats["peak_bytes_in_use"]) > self._load_peak["peak"]:
            out.update(
                steady_state_peak_bytes=int(stats["peak_bytes_in_use"]),
                steady_state_measured=True,
                steady_state_source="measured: peak_bytes_in_use rose after warm-up, so it was reached in the timed "
                "loop",
            )
        elif executable:
            out.update(
                steady_state_peak_bytes=in_use + executable.get("temp", 0) + executable.get("output", 0),
                steady_state_measured=False,
                steady_state_source="estimate: bytes_in_use after warm-up + the compiled step's temp and output "
                "sizes (memory_analysis); XLA has no peak reset and its peak was reached before the timed loop",
            )
        else:
            out.update(
                steady_state_peak_bytes=None,
                steady_state_measured=False,
                steady_state_source="unknown: XLA has no peak reset, the peak was reached before the timed loop "
                "and the step's memory_analysis is unavailable",
            )
        return out

    def to_numpy(self, outputs: jax.Array) -> np.ndarray:
        return np.asarray(outputs, dtype=np.float32)

    def trainer(self, model, state_dict, *, num_classes: int, image_size: int, recipe):
        from fwbench.training.jax_trainer import JaxTrainer

        return JaxTrainer(self, model, state_dict, num_classes=num_classes, image_size=image_size, recipe=recipe)
