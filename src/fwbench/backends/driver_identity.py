"""Device identity and L2 size from the CUDA driver, for backends whose framework exposes neither (JAX,
TensorFlow): one implementation behind both, so NVML finds the same physical GPU for every framework."""

from __future__ import annotations

from typing import Any

from fwbench.trackers import nvml

ASSUMED_L2_BYTES = 128 * 1024**2  # where the device's L2 size is unknown (H100: 50 MiB)


class DriverIdentity:
    """Mixin for a Backend: `_cuda_ordinal()` says which CUDA device (as this process numbers its visible devices)
    the backend computes on, or None on the CPU."""

    _identity: dict[str, Any] | None = None

    def _cuda_ordinal(self) -> int | None:
        raise NotImplementedError

    def _driver_identity(self) -> dict[str, Any]:
        if self._identity is None:
            self._identity = nvml.cuda_driver_identity(int(self._cuda_ordinal()))
        return self._identity

    def device_identity(self) -> dict[str, Any] | None:
        if self._cuda_ordinal() is None:
            return None
        return {k: v for k, v in self._driver_identity().items() if k != "l2_cache_bytes"}

    def device_cache_bytes(self) -> tuple[int, str] | None:
        if self._cuda_ordinal() is None:
            return None
        identity = self._driver_identity()
        if identity.get("l2_cache_bytes"):
            return int(identity["l2_cache_bytes"]), "CUDA driver cuDeviceGetAttribute(L2_CACHE_SIZE) (device L2)"
        return ASSUMED_L2_BYTES, f"assumed 128 MiB, above any current GPU's L2 ({identity.get('reason')})"
