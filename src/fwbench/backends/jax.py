"""JAX/Flax backend: the timed step is an ahead-of-time compiled executable, so tracing and compilation are
measured once and never fall inside the timed loop."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fwbench.backends.base import Backend
from fwbench.models import flax_variables


def _cache_state() -> dict[str, Any]:
    """Persistent compilation cache: disabled (the default, so compile times are cold), or cold/warm by whether
    the cache directory already held entries when this process started."""
    directory = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if not directory:
        return {"state": "disabled"}
    warm = os.path.isdir(directory) and any(os.scandir(directory))
    return {"state": "warm" if warm else "cold", "dir": directory}


class JaxBackend(Backend):
    name = "jax"

    def _apply_settings(self) -> dict[str, Any]:
        # fp32 means true fp32: no reduced-precision matmul passes on any device; tf32 allows TF32 passes where the
        # device has them; bf16 casts parameters and activations, so the matmul precision setting does not apply.
        matmul = {"fp32": "highest", "tf32": "tensorfloat32", "bf16": "default"}[self.precision]
        jax.config.update("jax_default_matmul_precision", matmul)
        self.device = jax.devices()[0]
        jax.monitoring.register_event_duration_secs_listener(self._on_event)
        self.dtype = jnp.bfloat16 if self.precision == "bf16" else jnp.float32
        return {
            # XLA:CPU sizes its intra-op pool by the schedulable CPUs; the cell runner pins the process's affinity
            # to the cell's thread count before JAX starts, so this is the pool size.
            "intra_op_threads": len(os.sched_getaffinity(0)),
            "default_matmul_precision": str(jax.config.jax_default_matmul_precision),
            "tf32_in_effect": self.precision == "tf32" and self.device.platform == "gpu",
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "mode": "jit (AOT lower+compile)",
            "compilation_cache": _cache_state(),
            "dtype": jnp.dtype(self.dtype).name,
            "bf16_policy": "parameters and activations" if self.precision == "bf16" else None,
        }

    def _on_event(self, name: str, duration: float, **kwargs) -> None:
        if name.endswith("backend_compile_duration"):
            self.compilations += 1

    def versions(self) -> dict[str, str | None]:
        import flax
        import jaxlib

        return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "flax": flax.__version__}

    def device_info(self) -> dict[str, Any]:
        kind = getattr(self.device, "device_kind", self.device.platform)
        return {"platform": self.device.platform, "name": kind}

    def build(self, model: str, state_dict: Mapping[str, np.ndarray], *, num_classes: int, image_size: int) -> None:
        module, variables = flax_variables(model, state_dict, num_classes=num_classes, image_size=image_size)
        self.module = module
        variables = jax.tree_util.tree_map(lambda a: a.astype(self.dtype), variables)
        self.variables = jax.device_put(variables, self.device)
        self._jitted = jax.jit(lambda v, x: module.apply(v, x, train=False))
        self.executable = None

    def to_device(self, batch_nhwc: np.ndarray) -> jax.Array:
        return jax.device_put(jnp.asarray(np.asarray(batch_nhwc, dtype=np.float32), dtype=self.dtype), self.device)

    def compile(self, inputs: jax.Array) -> dict[str, float]:
        t0 = time.perf_counter()
        traced = self._jitted.trace(self.variables, inputs)
        t1 = time.perf_counter()
        lowered = traced.lower()
        t2 = time.perf_counter()
        self.executable = lowered.compile()
        t3 = time.perf_counter()
        return {"trace_s": t1 - t0, "lower_s": t2 - t1, "compile_s": t3 - t2}

    def forward(self, inputs: jax.Array) -> jax.Array:
        if self.executable is None:
            raise RuntimeError("JaxBackend.forward before compile(): the timed step must be the AOT executable")
        return self.executable(self.variables, inputs)

    def synchronize(self, outputs: jax.Array) -> None:
        outputs.block_until_ready()

    def gpu_index(self) -> int | None:
        return int(self.device.id) if self.device.platform == "gpu" else None

    def device_memory(self) -> dict[str, Any]:
        stats = self.device.memory_stats()
        if not stats:
            return {"missing": f"JAX on {self.device.platform} has no memory_stats() (host RSS covers it)"}
        return {
            "peak_allocated_bytes": int(stats["peak_bytes_in_use"]),
            "source": "jax Device.memory_stats()['peak_bytes_in_use']",
            "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true (default)"),
        }

    def to_numpy(self, outputs: jax.Array) -> np.ndarray:
        return np.asarray(outputs, dtype=np.float32)

    def trainer(self, model, state_dict, *, num_classes: int, image_size: int, recipe):
        from fwbench.training.jax_trainer import JaxTrainer

        return JaxTrainer(self, model, state_dict, num_classes=num_classes, image_size=image_size, recipe=recipe)
