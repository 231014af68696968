"""TensorFlow/Keras backend: Keras 3 twins compiled with XLA (`tf.function(jit_compile=True)`, as the L4 study
compiled them), so that, as for JAX, the timed step is a compiled program and tracing and compilation are measured
once, apart from the steady state.

TensorFlow has no ahead-of-time compile for a jit_compile function from Python: tracing (`get_concrete_function`)
is timed on its own, and XLA compiles the traced graph on its first execution, which is timed as that call's extra
over a steady-state call (fwbench.training.firstcall), the same measure the training cells use for every framework.
A retrace (a new concrete function, which XLA compiles again) during the timed loop flags the cell `recompiled`.

This module is imported only in TensorFlow's own processes (fwbench.backends.FRAMEWORKS), never beside PyTorch or
JAX in a measuring process.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from fwbench.backends import launch_cache
from fwbench.backends.base import TF32_NONE, Arrays, Backend, tf32_scope
from fwbench.backends.driver_identity import DriverIdentity
from fwbench.models.tensorflow_import import keras, tf
from fwbench.study import autotune
from fwbench.training.firstcall import first_call_extra


def _build_info() -> dict[str, Any]:
    """The CUDA runtime and cuDNN TensorFlow was built for (None for a CPU build), as torch reports them."""
    info = dict(tf.sysconfig.get_build_info())
    if not info.get("is_cuda_build"):
        return {"cuda_runtime": None, "cudnn": None, "cuda_build": False}
    return {"cuda_runtime": info.get("cuda_version"), "cudnn": info.get("cudnn_version"), "cuda_build": True}


def _cache_state() -> dict[str, Any]:
    """XLA's persistent cache (a directory in TF_XLA_FLAGS): disabled (every compile cold), or cold/warm by whether
    it held entries when this process started."""
    directory = launch_cache.tf_cache_directory(os.environ.get("TF_XLA_FLAGS", ""))
    return launch_cache.describe(directory) if directory else {"state": "disabled"}


def _gpus(lib: Any = tf) -> list[Any]:
    return list(lib.config.list_physical_devices("GPU"))


class TracedFunctions:
    """Counts the traces of the tf.functions a backend or trainer runs: each trace is a new concrete function that
    XLA compiles on its first call, so a count that grows inside a timed loop is a recompilation."""

    def __init__(self):
        self.functions: list[Any] = []

    def track(self, function):
        self.functions.append(function)
        return function

    def count(self) -> int:
        return sum(int(f.experimental_get_tracing_count()) for f in self.functions)


def sync_device(on_gpu: bool) -> None:
    """Block until every queued op has finished. TensorFlow's eager ops (and an XLA cluster's launch) are
    asynchronous on a GPU; on the CPU an eager call returns with its result computed."""
    if on_gpu:
        tf.test.experimental.sync_devices()


class TfArrays(Arrays):
    """TensorFlow's primitives for the micro suite: the operation is a jit_compile tf.function, traced for the
    measured shapes (trace timed apart) and compiled by XLA on its first call (timed as that call's extra)."""

    put_function = "tf.identity(tf.constant(host.astype(dtype))) under tf.device(device)"

    def __init__(self, device: str, dtype: Any, on_gpu: bool, traces: TracedFunctions):
        self.device, self.tf_dtype, self.on_gpu, self.traces = device, dtype, on_gpu, traces
        self.dtype = dtype.name

    def put(self, host: np.ndarray) -> tf.Tensor:
        cast = np.asarray(host, dtype=np.float32).astype(self.tf_dtype.as_numpy_dtype)  # cast on the host
        with tf.device(self.device):
            return tf.identity(tf.constant(cast))

    def matmul(self, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.linalg.matmul(a, b)

    def relu(self, a: tf.Tensor) -> tf.Tensor:
        return tf.nn.relu(a)

    def compile(self, function, *args):
        compiled = self.traces.track(tf.function(lambda *call_args: function(self, *call_args), jit_compile=True))
        with tf.device(self.device):
            t0 = time.perf_counter()
            compiled.get_concrete_function(*args)
            trace_s = time.perf_counter() - t0
            xla_s = first_call_extra(lambda: compiled(*args), self.synchronize)
        return compiled, {"trace_s": trace_s, "xla_compile_first_call_extra_s": xla_s}

    def synchronize(self, outputs: tf.Tensor) -> None:
        sync_device(self.on_gpu)

    def to_numpy(self, outputs: tf.Tensor) -> np.ndarray:
        return np.asarray(outputs.numpy()).astype(np.float64)


class TensorflowBackend(DriverIdentity, Backend):
    name = "tensorflow"

    def _apply_settings(self) -> dict[str, Any]:
        self.traces = TracedFunctions()
        # Both pools must be set before TensorFlow's runtime starts (a fresh cell process has not started it; a
        # test process that made an earlier backend keeps the first values, which are recorded as they are).
        with contextlib.suppress(RuntimeError):
            tf.config.threading.set_intra_op_parallelism_threads(self.threads)
            tf.config.threading.set_inter_op_parallelism_threads(self.threads)
        gpus = _gpus()
        growth = []
        for gpu in gpus:  # allocate on demand (no whole-GPU preallocation), as JAX's preallocation is off
            with contextlib.suppress(RuntimeError):
                tf.config.experimental.set_memory_growth(gpu, True)
            growth.append(bool(tf.config.experimental.get_memory_growth(gpu)))
        # fp32 is true fp32 (TF32 execution off, TensorFlow's default is on); tf32 allows it; bf16 computes in
        # bfloat16, where the setting does not apply.
        self.activate()
        self.on_gpu = bool(gpus)
        self.device = "/GPU:0" if gpus else "/CPU:0"
        self.dtype = tf.bfloat16 if self.precision == "bf16" else tf.float32
        self.policy = "bfloat16" if self.precision == "bf16" else "float32"
        tf32 = bool(tf.config.experimental.tensor_float_32_execution_enabled())
        scope = tf32_scope(self.on_gpu and self.precision != "bf16", tf32, tf32)
        return {
            "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
            "tensor_float_32_execution": bool(tf.config.experimental.tensor_float_32_execution_enabled()),
            "tf32_scope": scope,
            "tf32_in_effect": scope != TF32_NONE,
            "memory_growth": growth if gpus else "not applicable (CPU)",
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "tf_xla_flags": launch_cache.recorded_tf_flags(os.environ.get("TF_XLA_FLAGS", "")),
            "compilation_cache": _cache_state(),
            "autotune": autotune.record(
                self.name,
                self.mode,
                self.autotune,
                on_gpu=self.on_gpu,
                **autotune.xla_switches(self.autotune, os.environ.get("XLA_FLAGS", "")),
            ),
            "dtype": self.dtype.name,
            "keras_dtype_policy": self.policy,
            "bf16_policy": "parameters and activations" if self.precision == "bf16" else None,
        }

    @property
    def compilations(self) -> int:  # type: ignore[override]
        return self.traces.count()

    @classmethod
    def describe_devices(cls, lib: Any = tf) -> dict[str, Any]:
        """`lib` is the tensorflow module; tests pass a fake. TensorFlow exposes neither UUIDs nor memory sizes."""
        report: dict[str, Any] = {"platform": "cpu", "count": 0, "devices": [], **_build_info()}
        gpus = _gpus(lib)
        if not gpus:
            return report
        report["platform"] = "cuda"
        for index, gpu in enumerate(gpus):
            details = lib.config.experimental.get_device_details(gpu)
            capability = details.get("compute_capability")
            report["devices"].append(
                {
                    "index": index,
                    "name": details.get("device_name", gpu.name),
                    "compute_capability": ".".join(map(str, capability)) if capability else None,
                    "uuid": None,
                    "memory_bytes": None,
                }
            )
        report["count"] = len(report["devices"])
        return report

    def versions(self) -> dict[str, str | None]:
        stack = _build_info()
        return {
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
            "cuda": stack["cuda_runtime"],
            "cudnn": stack["cudnn"],
        }

    def device_info(self) -> dict[str, Any]:
        if not self.on_gpu:
            return {"platform": "cpu", "name": "cpu"}
        details = tf.config.experimental.get_device_details(_gpus()[0])
        capability = details.get("compute_capability")
        return {
            "platform": "cuda",
            "name": details.get("device_name"),
            "compute_capability": ".".join(map(str, capability)) if capability else None,
        }

    def arrays(self) -> TfArrays:
        return TfArrays(self.device, self.dtype, self.on_gpu, self.traces)

    def activate(self) -> None:
        """This cell's TF32 switch, which TensorFlow keeps per process: set at start and again before each of its
        compiles and calls where a worker serves cells of several precisions. fp32 is true fp32 (TensorFlow's
        default is TF32 on); default is TensorFlow's own (on), restored where another precision's cell turned it
        off; bf16 computes in bfloat16, where the switch does not apply."""
        tf.config.experimental.enable_tensor_float_32_execution(self.precision in ("tf32", "default"))

    def build(self, model: str, state_dict: Mapping[str, np.ndarray], *, num_classes: int, image_size: int) -> None:
        from fwbench.models import keras_model, load_torch_weights

        with tf.device(self.device):
            self.model = keras_model(model, num_classes=num_classes, image_size=image_size, dtype=self.policy)
            load_torch_weights(self.model, state_dict)
        net = self.model
        self._forward = self.traces.track(tf.function(lambda x: net(x, training=False), jit_compile=True))
        self.compiled = False

    def to_device(self, batch_nhwc: np.ndarray) -> tf.Tensor:
        host = np.asarray(batch_nhwc, dtype=np.float32).astype(self.dtype.as_numpy_dtype, copy=False)
        with tf.device(self.device):
            return tf.identity(tf.constant(host))

    def fed_nhwc(self, inputs: tf.Tensor) -> np.ndarray:
        return np.asarray(tf.cast(inputs, tf.float32).numpy())

    def compile(self, inputs: tf.Tensor) -> dict[str, float]:
        with tf.device(self.device):
            t0 = time.perf_counter()
            self._forward.get_concrete_function(inputs)
            trace_s = time.perf_counter() - t0
            xla_s = first_call_extra(lambda: self._forward(inputs), self.synchronize)
        self.compiled = True
        self._compiled_spec = tf.TensorSpec.from_tensor(inputs)
        return {"trace_s": trace_s, "xla_compile_first_call_extra_s": xla_s}

    def compiled_hlo_text(self, inputs: Any = None) -> str | None:
        """XLA's optimised HLO of the compiled step for `inputs` (None: the spec `compile` saw)."""
        spec = inputs if inputs is not None else getattr(self, "_compiled_spec", None)
        if spec is None:
            return None
        with tf.device(self.device):
            return self._forward.experimental_get_compiler_ir(spec)(stage="optimized_hlo")

    def forward(self, inputs: tf.Tensor) -> tf.Tensor:
        if not getattr(self, "compiled", False):
            raise RuntimeError("TensorflowBackend.forward before compile(): the timed step must be the XLA program")
        return self._forward(inputs)

    def synchronize(self, outputs: Any) -> None:
        sync_device(self.on_gpu)

    def to_numpy(self, outputs: tf.Tensor) -> np.ndarray:
        return np.asarray(outputs.numpy(), dtype=np.float32)

    def gpu_index(self) -> int | None:
        return 0 if self.on_gpu else None

    def _cuda_ordinal(self) -> int | None:
        return 0 if self.on_gpu else None

    _steady_window = False

    def reset_device_memory_peak(self) -> None:
        if not self.on_gpu:
            return
        info = tf.config.experimental.get_memory_info("GPU:0")
        self._load_peak = {"peak": int(info["peak"]), "in_use": int(info["current"])}
        tf.config.experimental.reset_memory_stats("GPU:0")
        self._steady_window = True

    def device_memory(self) -> dict[str, Any]:
        if not self.on_gpu:
            return {"missing": "TensorFlow on the CPU has no device allocator statistics (host RSS covers it)"}
        info = tf.config.experimental.get_memory_info("GPU:0")
        source = "tf.config.experimental.get_memory_info('GPU:0')['peak'] (memory growth on)"
        if not self._steady_window:
            return {"peak_allocated_bytes": int(info["peak"]), "source": source + ", load and compilation included"}
        return {
            "peak_allocated_bytes": max(self._load_peak["peak"], int(info["peak"])),
            "source": source + ", load and compilation included",
            "in_use_after_warmup_bytes": self._load_peak["in_use"],
            "steady_state_peak_bytes": int(info["peak"]),
            "steady_state_measured": True,
            "steady_state_source": "measured: get_memory_info peak since reset_memory_stats after warm-up",
        }

    def trainer(self, model, state_dict, *, num_classes: int, image_size: int, recipe):
        from fwbench.training.tf_trainer import TfTrainer

        return TfTrainer(self, model, state_dict, num_classes=num_classes, image_size=image_size, recipe=recipe)
