"""The thin NVML boundary (nvidia-ml-py's `pynvml`): everything GPU-side that the trackers read goes through here,
so tests can substitute a fake module and exercise the energy, memory and isolation code on a CPU machine."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass
class Unavailable:
    reason: str


def open_device(index: int = 0, nvml: Any = None) -> NvmlDevice | Unavailable:
    """An NVML handle for GPU `index`, or why there is none (no driver, no GPU, not an NVIDIA device)."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError as exc:
            return Unavailable(f"pynvml not importable: {exc}")
    try:
        nvml.nvmlInit()
        count = nvml.nvmlDeviceGetCount()
        if index >= count:
            return Unavailable(f"NVML sees {count} GPU(s), none with index {index}")
        return NvmlDevice(nvml, nvml.nvmlDeviceGetHandleByIndex(index))
    except Exception as exc:  # pynvml raises NVMLError subclasses per condition (no driver, library not found, ...)
        return Unavailable(f"NVML unavailable: {type(exc).__name__}: {exc}")


class NvmlDevice:
    def __init__(self, nvml: Any, handle: Any):
        self.nvml, self.handle = nvml, handle

    def name(self) -> str:
        name = self.nvml.nvmlDeviceGetName(self.handle)
        return name.decode() if isinstance(name, bytes) else str(name)

    def total_energy_mj(self) -> int | None:
        """Millijoules since driver load (Volta and newer); None where the counter is not supported."""
        try:
            return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception:
            return None

    def power_mw(self) -> int:
        return int(self.nvml.nvmlDeviceGetPowerUsage(self.handle))

    def memory_used_bytes(self) -> int:
        return int(self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used)

    def processes(self) -> list[dict[str, int]]:
        """Compute processes on the device, with their used GPU memory (None where the driver hides it)."""
        out = []
        for proc in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
            used = getattr(proc, "usedGpuMemory", None)
            out.append({"pid": int(proc.pid), "used_memory_bytes": None if used is None else int(used)})
        return out

    def own_memory_bytes(self) -> int | None:
        mine = [p for p in self.processes() if p["pid"] == os.getpid()]
        return mine[0]["used_memory_bytes"] if mine else None

    def other_processes(self) -> list[dict[str, int]]:
        return [p for p in self.processes() if p["pid"] != os.getpid()]
