"""NumPy: the micro suite's baseline, what a user would write without a deep-learning framework.

It computes on the host in float32 at every precision label (NumPy has no bfloat16 BLAS and no TF32), recorded as
such. Its BLAS thread pool is pinned to the cell's threads with threadpoolctl, as the frameworks pin theirs, and the
pools threadpoolctl found are recorded: an unpinned OpenBLAS would use every core of the machine.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fwbench.backends.base import Arrays, Framework
from fwbench.study import autotune


class NumpyArrays(Arrays):
    """NumPy's primitives: plain eager calls on host arrays; `put` only casts (there is no device)."""

    put_function = "numpy.asarray(host, dtype)"

    def __init__(self, dtype: type = np.float32):
        self.numpy_dtype = np.dtype(dtype)
        self.dtype = self.numpy_dtype.name

    def put(self, host: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(host, dtype=self.numpy_dtype)

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.matmul(a, b)

    def relu(self, a: np.ndarray) -> np.ndarray:
        return np.maximum(a, 0)

    def compile(self, function, *args):
        return (lambda *call_args: function(self, *call_args)), None

    def synchronize(self, outputs: np.ndarray) -> None:
        """NumPy returns when the result exists."""

    def to_numpy(self, outputs: np.ndarray) -> np.ndarray:
        return np.asarray(outputs, dtype=np.float64)


class NumpyBackend(Framework):
    name = "numpy"
    host_only = True

    def _apply_settings(self) -> dict[str, Any]:
        from threadpoolctl import __version__ as threadpoolctl_version
        from threadpoolctl import threadpool_info, threadpool_limits

        # Kept for the process's life: the limit holds until the object is garbage-collected or restored.
        self._limits = threadpool_limits(limits=self.threads)
        pools = [
            {key: pool.get(key) for key in ("user_api", "internal_api", "num_threads", "version", "prefix")}
            for pool in threadpool_info()
        ]
        return {
            "intra_op_threads": min((pool["num_threads"] for pool in pools), default=None),
            "blas": pools,
            "threadpoolctl": threadpoolctl_version,
            "dtype": "float32",
            "precision_note": None
            if self.precision in ("fp32", "default")
            else f"NumPy has no {self.precision} arithmetic: the baseline computes in float32",
            "autotune": autotune.record(self.name, self.mode, self.autotune, on_gpu=False),
        }

    @classmethod
    def describe_devices(cls) -> dict[str, Any]:
        return {"platform": "cpu", "count": 0, "devices": [], "note": "NumPy computes on the host"}

    def versions(self) -> dict[str, str | None]:
        return {"numpy": np.__version__}

    def device_info(self) -> dict[str, Any]:
        from fwbench.trackers.environment import cpu_model

        return {"platform": "cpu", "name": cpu_model() or "cpu"}

    def arrays(self) -> NumpyArrays:
        return NumpyArrays(np.float32)

    def gpu_index(self) -> None:
        return None
