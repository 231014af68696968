"""Energy over the timed window: the GPU's own energy counter where it has one, CPU package energy from RAPL,
and otherwise an explicit `unavailable` with the reason (never 0).

The meters are started and stopped at synchronised edges (the caller synchronises the device before start and
after the last step), so the window contains exactly the timed work.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fwbench.trackers.nvml import NvmlDevice

POWERCAP = Path("/sys/class/powercap")
POWER_SAMPLE_S = 0.02
# Idle baseline: wait out NVML's ~1 s power averaging, then 0.5 s windows until two agree within 5% (at most 6 s).
IDLE_WAIT_S, IDLE_WINDOW_S, IDLE_TOLERANCE, IDLE_MAX_S = 1.2, 0.5, 0.05, 6.0


class NvmlEnergy:
    """Delta of nvmlDeviceGetTotalEnergyConsumption; falls back to integrating sampled power where unsupported.
    `idle` is the idle baseline (`idle_baseline`'s record, or plain watts)."""

    def __init__(self, device: NvmlDevice, idle: float | dict[str, Any] | None = None):
        self.idle_baseline = idle if isinstance(idle, dict) else None
        self.device, self.idle_watts = device, idle.get("watts") if isinstance(idle, dict) else idle
        self._start_mj = None
        self._samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._append()
            self._stop.wait(POWER_SAMPLE_S)

    def _append(self) -> None:
        milliwatts = self.device.power_mw()
        if milliwatts is not None:  # a refused reading is skipped (the trapezoid spans the gap)
            self._samples.append((time.perf_counter(), milliwatts / 1000.0))

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self._start_mj = self.device.total_energy_mj()
        if self._start_mj is None:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()

    def stop(self) -> dict[str, Any]:
        """The window's energy; {"joules": None, "missing": reason, ...} if NVML refused the readings it needs."""
        elapsed = time.perf_counter() - self._t0
        result: dict[str, Any] = {"window_s": elapsed, "idle_watts": self.idle_watts}
        if self.idle_baseline is not None:
            result["idle_baseline"] = self.idle_baseline
        if self._start_mj is not None:
            end = self.device.total_energy_mj()
            if end is None:
                return {**result, "joules": None, "missing": self.device.missing.get("energy", "no end reading")}
            joules = (end - self._start_mj) / 1000.0
            result.update(joules=joules, source="nvml total energy counter", samples=None)
        else:
            self._stop.set()
            self._thread.join()
            self._append()
            samples = self._samples
            if len(samples) < 2:
                return {**result, "joules": None, "missing": self.device.missing.get("power", "< 2 power readings")}
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


def idle_baseline(
    device: NvmlDevice,
    *,
    wait_s: float = IDLE_WAIT_S,
    window_s: float = IDLE_WINDOW_S,
    tolerance: float = IDLE_TOLERANCE,
    max_s: float = IDLE_MAX_S,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Board power at idle, taken the same way at the same point for every framework: the caller has built the model
    and synchronised (every framework holds its CUDA context, nothing runs). NVML's power reading is a moving average
    over about a second on recent GPUs, so the tail of earlier work (the weight transfer, a previous cell) would
    leak into it: wait `wait_s` first, then average `window_s` windows of readings until two consecutive means agree
    within `tolerance` (settled) or `max_s` has passed (recorded as not settled). Returns the record with how it was
    taken; {"watts": None, "missing": reason} where NVML reports no power."""
    start = clock()
    if device.power_mw() is None:
        return {"watts": None, "missing": device.missing.get("power", "no power reading")}
    sleep(wait_s)
    means: list[float] = []
    samples = 0
    while True:
        readings, end = [], clock() + window_s
        while clock() < end:
            milliwatts = device.power_mw()
            if milliwatts is not None:
                readings.append(milliwatts / 1000.0)
            sleep(POWER_SAMPLE_S)
        samples += len(readings)
        if readings:
            means.append(sum(readings) / len(readings))
        settled = len(means) >= 2 and abs(means[-1] - means[-2]) <= tolerance * max(means[-2], 1e-9)
        if settled or clock() - start >= max_s:
            break
    if not means:
        return {"watts": None, "missing": device.missing.get("power", "no power reading while idle")}
    return {
        "watts": means[-1],
        "settled": settled,
        "waited_s": wait_s,
        "took_s": clock() - start,
        "window_s": window_s,
        "windows_w": means,
        "samples": samples,
        "method": (
            f"nvmlDeviceGetPowerUsage after {wait_s:g} s idle (NVML averages power over ~1 s), then the mean of "
            f"{window_s:g} s windows until two agree within {tolerance:.0%}"
        ),
    }


# The idle baseline a launch's first worker took, as JSON, for the launch's later workers (fwbench.running.launches).
LAUNCH_BASELINE_ENV = "FWBENCH_LAUNCH_IDLE_BASELINE"


def launch_idle_baseline(
    device: NvmlDevice, environ: Mapping[str, str] | None = None, measure: Callable[..., dict] | None = None
) -> dict[str, Any]:
    """The board's idle power once per launch, not once per process: the launch's first worker takes it
    (`idle_baseline`, 2.2 s at least) and the controller hands it to the launch's later workers (LAUNCH_BASELINE_ENV),
    which use it if it is of the same device, so that every variant's energy in a launch is above the same idle
    power. A baseline without watts, of another device or unreadable is not used: the worker takes its own."""
    environ = os.environ if environ is None else environ
    key = str(device.lookup.get("value"))
    try:
        shared = json.loads(environ.get(LAUNCH_BASELINE_ENV) or "null")
    except ValueError:
        shared = None
    if isinstance(shared, dict) and shared.get("device") == key and shared.get("watts") is not None:
        return {**shared, "reused": True, "took_s": 0.0, "taken": "by the launch's first worker"}
    return {**(measure or idle_baseline)(device), "device": key, "reused": False}


def energy_meter(gpu, idle: float | dict[str, Any] | None):
    """The meter of a timed window: NVML's energy counter on a GPU (or sampled power), else RAPL, else the reason
    there is none."""
    if isinstance(gpu, NvmlDevice):
        if gpu.total_energy_mj() is None and gpu.power_mw() is None:
            return f"NVML reports neither energy nor power: {gpu.missing.get('energy')}; {gpu.missing.get('power')}"
        return NvmlEnergy(gpu, idle)
    return cpu_meter()


class BurstWindows:
    """One meter opened around each burst's timed iterations and the windows summed: with warm workers in blocks,
    the time between a variant's bursts belongs to the other variants (whose work the board's and the package's
    counters also see), so only the bursts' own windows are this cell's energy."""

    def __init__(self, meter: NvmlEnergy | RaplEnergy) -> None:
        self.meter = meter
        self.windows: list[dict[str, Any]] = []

    def start(self) -> None:
        self.meter.start()

    def stop(self) -> None:
        self.windows.append(self.meter.stop())

    def total(self) -> dict[str, Any] | None:
        """The summed record (joules, window_s, joules_above_idle where the idle power is known), the first
        window's refusal where NVML refused a reading, None before any window."""
        if not self.windows:
            return None
        refused = next((window for window in self.windows if window.get("joules") is None), None)
        if refused is not None:
            return refused
        first = self.windows[0]
        total = {
            **{key: value for key, value in first.items() if key not in ("joules", "window_s", "samples")},
            "joules": sum(window["joules"] for window in self.windows),
            "window_s": sum(window["window_s"] for window in self.windows),
            "windows": len(self.windows),
            "samples": sum(window.get("samples") or 0 for window in self.windows) or None,
        }
        if "joules_above_idle" in first:
            total["joules_above_idle"] = sum(window["joules_above_idle"] for window in self.windows)
        return total
