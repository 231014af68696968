"""The thin NVML boundary (nvidia-ml-py's `pynvml`): everything GPU-side that the trackers read goes through here,
so tests can substitute a fake module and exercise the energy, memory and isolation code on a CPU machine.

The device is looked up by the UUID or PCI bus id of the device the backend computes on, never by CUDA ordinal:
CUDA numbers only the visible devices (CUDA_VISIBLE_DEVICES) in its own order (CUDA_DEVICE_ORDER), NVML numbers
all of them, so "device 0" can be two different GPUs. Every query a driver may refuse (power, energy, processes,
memory: MIG instances, containers, permissions) comes back as None with its reason in `NvmlDevice.missing`, never as
an exception that fails the cell."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38  # CUdevice_attribute in cuda.h
NOT_AVAILABLE = 2**63  # NVML's NVML_VALUE_NOT_AVAILABLE for usedGpuMemory is 2**64 - 1: treated as unknown
# The pids of the workers of the same comparison already running when a worker starts (comma-separated), set by the
# runner (fwbench.running.context): its own companions hold CUDA contexts on the device by design (the warm workers
# of interleaved blocks), and are not "other processes". The first GPU study, on an H200, flagged every cell for them.
COMPANIONS_ENV = "FWBENCH_COMPANION_PIDS"


def companion_pids(environ: Mapping[str, str] = os.environ) -> set[int]:
    """The pids of this worker's companions (COMPANIONS_ENV); a malformed entry is ignored, never a failure."""
    return {int(p) for p in environ.get(COMPANIONS_ENV, "").split(",") if p.strip().isdigit()}


@dataclass
class Unavailable:
    reason: str


def _uuid_text(raw: bytes) -> str:
    """16 UUID bytes in CUDA's 8-4-4-4-12 lowercase hex (NVML prefixes it with GPU- or MIG-)."""
    text = bytes(raw).hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:32]}"


def cuda_driver_identity(ordinal: int, cuda: Any = None) -> dict[str, Any]:
    """UUID, PCI bus id and L2 size of CUDA device `ordinal` (as this process numbers its visible devices) from the
    CUDA driver API, for frameworks that expose none of them (JAX). `cuda` is the loaded libcuda; tests pass a fake.
    Without the driver API: the UUID that CUDA_VISIBLE_DEVICES names at that position, if it names UUIDs; otherwise
    no key and the reason (open_device then says why it cannot find the device, rather than guessing by ordinal)."""
    identity: dict[str, Any] = {"ordinal": ordinal, "uuid": None, "pci_bus_id": None, "l2_cache_bytes": None}
    try:
        import ctypes

        if cuda is None:
            cuda = ctypes.CDLL("libcuda.so.1")

        def check(call: str, status: int) -> None:
            if status != 0:
                raise RuntimeError(f"{call} returned CUresult {status}")

        check("cuInit", cuda.cuInit(0))  # creates no context
        device = ctypes.c_int()
        check("cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(device), ordinal))
        bus_id = ctypes.create_string_buffer(64)
        check("cuDeviceGetPCIBusId", cuda.cuDeviceGetPCIBusId(bus_id, 64, device))
        uuid = (ctypes.c_ubyte * 16)()
        check("cuDeviceGetUuid_v2", cuda.cuDeviceGetUuid_v2(uuid, device))  # _v2: a MIG instance's own UUID
        l2 = ctypes.c_int()
        check(
            "cuDeviceGetAttribute",
            cuda.cuDeviceGetAttribute(ctypes.byref(l2), CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device),
        )
        identity.update(
            uuid=_uuid_text(bytes(uuid)),
            pci_bus_id=bus_id.value.decode().lower(),
            l2_cache_bytes=int(l2.value) or None,
            source="CUDA driver API (cuDeviceGetUuid_v2, cuDeviceGetPCIBusId, L2_CACHE_SIZE attribute)",
        )
        return identity
    except Exception as exc:  # no libcuda, an old driver without the _v2 call, or an error status
        reason = f"CUDA driver API: {type(exc).__name__}: {exc}"
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    entry = visible[ordinal] if 0 <= ordinal < len(visible) else ""
    if entry.startswith(("GPU-", "MIG-")) and "/" not in entry:
        identity.update(uuid=entry, source=f"CUDA_VISIBLE_DEVICES entry {ordinal} ({reason})")
    else:
        identity["reason"] = f"{reason}; CUDA_VISIBLE_DEVICES names no UUID for ordinal {ordinal}"
    return identity


def _uuid_candidates(uuid: str | None) -> list[str]:
    if not uuid:
        return []
    if uuid[:4].upper() in ("GPU-", "MIG-"):
        return [uuid]
    return [f"GPU-{uuid}", f"MIG-{uuid}"]  # CUDA's UUID bytes carry no prefix; a MIG instance's need MIG-


def open_device(identity: Mapping[str, Any] | None, nvml: Any = None) -> NvmlDevice | Unavailable:
    """The NVML handle of the device the backend computes on (`Backend.device_identity()`), found by its UUID (first:
    it also tells MIG instances apart) or its PCI bus id, never by ordinal; or why there is none. The handle records
    which key found it (`NvmlDevice.lookup`)."""
    if identity is None:
        return Unavailable("the cell runs on the CPU")
    keys = [("uuid", value) for value in _uuid_candidates(identity.get("uuid"))]
    if identity.get("pci_bus_id"):
        keys.append(("pci_bus_id", identity["pci_bus_id"]))
    if not keys:
        why = identity.get("reason", "no reason given")
        return Unavailable(
            f"the backend reported neither UUID nor PCI bus id of CUDA device {identity.get('ordinal')} ({why}); "
            "NVML is never opened by ordinal (CUDA's and NVML's numbering can differ)"
        )
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError as exc:
            return Unavailable(f"pynvml not importable: {exc}")
    try:
        nvml.nvmlInit()
    except Exception as exc:  # pynvml raises NVMLError subclasses per condition (no driver, library not found, ...)
        return Unavailable(f"NVML unavailable: {type(exc).__name__}: {exc}")
    tried = []
    for key, value in keys:
        lookup = nvml.nvmlDeviceGetHandleByUUID if key == "uuid" else nvml.nvmlDeviceGetHandleByPciBusId
        try:
            handle = lookup(value)
        except Exception as exc:
            tried.append(f"{key} {value}: {type(exc).__name__}: {exc}")
            continue
        found = {"key": key, "value": value, "ordinal": identity.get("ordinal"), "identity": identity.get("source")}
        return NvmlDevice(nvml, handle, found)
    return Unavailable("NVML found no device by " + "; ".join(tried))


class NvmlDevice:
    def __init__(self, nvml: Any, handle: Any, lookup: Mapping[str, Any] | None = None):
        self.nvml, self.handle = nvml, handle
        self.lookup = dict(lookup or {})
        self.missing: dict[str, str] = {}  # query -> why it returned None (the last failure)

    def _query(self, what: str, call: Callable[..., Any]) -> Any:
        """`call(handle)`, or None with the reason kept in `missing[what]` (NotSupported on a MIG instance or a
        consumer board, NoPermission in a container, ...)."""
        try:
            return call(self.handle)
        except Exception as exc:
            mig = " (the handle is a MIG instance)" if str(self.lookup.get("value", "")).startswith("MIG-") else ""
            self.missing[what] = f"{getattr(call, '__name__', what)}: {type(exc).__name__}: {exc}{mig}"
            return None

    def name(self) -> str | None:
        name = self._query("name", self.nvml.nvmlDeviceGetName)
        return name.decode() if isinstance(name, bytes) else None if name is None else str(name)

    def total_energy_mj(self) -> int | None:
        """Millijoules since driver load (Volta and newer); None where the counter is not supported."""
        value = self._query("energy", self.nvml.nvmlDeviceGetTotalEnergyConsumption)
        return None if value is None else int(value)

    def power_mw(self) -> int | None:
        value = self._query("power", self.nvml.nvmlDeviceGetPowerUsage)
        return None if value is None else int(value)

    def memory_used_bytes(self) -> int | None:
        info = self._query("memory", self.nvml.nvmlDeviceGetMemoryInfo)
        return None if info is None else int(info.used)

    def processes(self) -> list[dict[str, Any]] | None:
        """Compute processes on the device, with their used GPU memory (None where the driver hides it); None, with
        the reason in `missing["processes"]`, where NVML will not list them."""
        procs = self._query("processes", self.nvml.nvmlDeviceGetComputeRunningProcesses)
        if procs is None:
            return None
        out = []
        for proc in procs:
            used = getattr(proc, "usedGpuMemory", None)
            known = used is not None and 0 <= int(used) < NOT_AVAILABLE
            out.append({"pid": int(proc.pid), "used_memory_bytes": int(used) if known else None})
        return out

    def own_memory_bytes(self) -> int | None:
        procs = self.processes()
        if procs is None:
            return None
        mine = [p for p in procs if p["pid"] == os.getpid()]
        if not mine:
            self.missing["own_memory"] = f"pid {os.getpid()} is not in NVML's process list (PID namespace?)"
            return None
        return mine[0]["used_memory_bytes"]

    def isolation(self, when: str, companions: set[int] | None = None) -> dict[str, Any]:
        """Whether other processes compute on this device, decided so that neither our own CUDA context nor our
        companions' (the same comparison's warm workers, `companion_pids()` by default) can ever count as another
        process. Call it while this process holds its context (after the model is on the device), at the same point
        for every framework.

        NVML lists host PIDs: in a container's PID namespace neither our pid nor our companions' are among them.
        Then a list of n processes holds at most 1 + k of ours (k companions), so n >= k + 2 still proves others are
        there (at least n - 1 - k), while fewer cannot tell: `others_present` is None (undetermined), not a flag."""
        companions = companion_pids() if companions is None else set(companions)
        out: dict[str, Any] = {"source": "nvmlDeviceGetComputeRunningProcesses", "when": when, "device": self.lookup}
        if companions:
            out["companions"] = sorted(companions)
        procs = self.processes()
        if procs is None:
            return {**out, "others_present": None, "other_processes": None, "reason": self.missing["processes"]}
        own = os.getpid()
        if any(p["pid"] == own for p in procs):
            others = [p for p in procs if p["pid"] != own and p["pid"] not in companions]
            listed = [p for p in procs if p["pid"] in companions]
            if listed:
                out["companion_processes"] = listed
            return {**out, "others_present": bool(others), "other_processes": others, "own_pid_listed": True}
        out.update(listed=procs, own_pid_listed=False, other_processes=None)
        note = (
            f"this process (pid {own}) holds a CUDA context but is not in NVML's list: NVML reports host PIDs "
            "(PID namespace)"
        )
        ours = 1 + len(companions)
        if len(procs) > ours:
            return {**out, "others_present": True, "others_at_least": len(procs) - ours, "note": note}
        return {**out, "others_present": None, "reason": f"undetermined: {note}; {len(procs)} listed may be ours"}
