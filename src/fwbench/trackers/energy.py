"""Energy over the timed window: the GPU's own energy counter where it has one, CPU package energy from RAPL,
and otherwise an explicit `unavailable` with the reason (never 0).

The meters are started and stopped at synchronised edges (the caller synchronises the device before start and
after the last step), so the window contains exactly the timed work.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from fwbench.trackers.nvml import NvmlDevice

POWERCAP = Path("/sys/class/powercap")
POWER_SAMPLE_S = 0.02


class NvmlEnergy:
    """Delta of nvmlDeviceGetTotalEnergyConsumption; falls back to integrating sampled power where unsupported."""

    def __init__(self, device: NvmlDevice, idle_watts: float | None = None):
        self.device, self.idle_watts = device, idle_watts
        self._start_mj = None
        self._samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._samples.append((time.perf_counter(), self.device.power_mw() / 1000.0))
            self._stop.wait(POWER_SAMPLE_S)

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self._start_mj = self.device.total_energy_mj()
        if self._start_mj is None:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()

    def stop(self) -> dict[str, Any]:
        elapsed = time.perf_counter() - self._t0
        result: dict[str, Any] = {"window_s": elapsed, "idle_watts": self.idle_watts}
        if self._start_mj is not None:
            end = self.device.total_energy_mj()
            joules = (end - self._start_mj) / 1000.0
            result.update(joules=joules, source="nvml total energy counter", samples=None)
        else:
            self._stop.set()
            self._thread.join()
            samples = self._samples + [(time.perf_counter(), self.device.power_mw() / 1000.0)]
            joules = sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(samples, samples[1:], strict=False))
            result.update(joules=joules, source="nvml power sampling (trapezoid)", samples=len(samples))
        if self.idle_watts is not None:
            result["joules_above_idle"] = max(0.0, joules - self.idle_watts * elapsed)
        return result


def rapl_domains(root: Path = POWERCAP) -> list[Path]:
    """Top-level RAPL package domains (intel-rapl:N), whose energy_uj counters this process can read."""
    domains = []
    for path in sorted(root.glob("intel-rapl:*")):
        if path.name.count(":") == 1 and (path / "energy_uj").exists():
            domains.append(path)
    return domains


class RaplEnergy:
    """Sum over package domains of energy_uj deltas, corrected for counter wraparound (max_energy_range_uj)."""

    def __init__(self, domains: list[Path]):
        self.domains = domains

    @staticmethod
    def _read(path: Path) -> int:
        return int((path / "energy_uj").read_text().strip())

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self._start = [self._read(d) for d in self.domains]

    def stop(self) -> dict[str, Any]:
        total_uj = 0
        for domain, begin in zip(self.domains, self._start, strict=True):
            end = self._read(domain)
            if end < begin:  # wrapped around
                end += int((domain / "max_energy_range_uj").read_text().strip())
            total_uj += end - begin
        return {
            "joules": total_uj / 1e6,
            "source": f"RAPL energy_uj ({', '.join(d.name for d in self.domains)})",
            "window_s": time.perf_counter() - self._t0,
            "samples": None,
            "idle_watts": None,
        }


def cpu_meter(root: Path = POWERCAP) -> RaplEnergy | str:
    """A RAPL meter, or the reason there is none."""
    if not root.exists():
        return f"{root} does not exist (no RAPL powercap interface on this machine)"
    try:
        domains = rapl_domains(root)
        if not domains:
            return f"no intel-rapl package domain under {root}"
        for domain in domains:
            RaplEnergy._read(domain)
    except PermissionError as exc:
        return f"RAPL counters not readable: {exc}"
    except OSError as exc:
        return f"RAPL counters not readable: {exc}"
    return RaplEnergy(domains)


def idle_watts(device: NvmlDevice, seconds: float = 0.5) -> float:
    """Mean sampled board power while nothing of ours runs on the device (the idle baseline)."""
    readings, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        readings.append(device.power_mw() / 1000.0)
        time.sleep(POWER_SAMPLE_S)
    return sum(readings) / len(readings)


def energy_meter(gpu, idle: float | None):
    """The meter of a timed window: NVML's energy counter on a GPU, else RAPL, else the reason there is none."""
    if isinstance(gpu, NvmlDevice):
        return NvmlEnergy(gpu, idle)
    return cpu_meter()
