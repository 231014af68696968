"""Warm workers measured in balanced blocks: the worker's side (what one burst is, and who asks for it).

A VM's speed drifts by tens of percent over minutes, so one process timing a loop, then the next process timing
its own, compares two frameworks at two different speeds of the machine. Instead every variant of a comparison
group runs in a process of its own that imports, builds, compiles and warms up once (a *launch*), and then times
short *bursts* of a fixed number of iterations, calibrated to about `burst_s` seconds, when the controller asks
(fwbench.running.launches). One *block* runs one burst of every variant, in the order of a Williams design; drift slower
than a block cancels from the ratio within the block. Each launch serves `blocks` blocks; `trials` launches per
variant keep the variation between processes estimable (the interval is over launches, fwbench.running.merge).

Per burst the worker records, beside the wall time of every iteration: the process's CPU time (all threads), the
machine's steal time (/proc/stat: time the hypervisor gave to other guests, which a burst cannot tell from its own
slowness), the CPU time other processes of the machine used over the burst (/proc/stat's busy time less the
worker's own: another job or a test run on the same machine), instructions and cycles from perf_event_open where the
kernel and hypervisor expose them (missing, with the reason, where they do not), and the CPU time the process used
while it waited for the command (a waiting worker must use next to none, or it slows the variant that runs).

`LocalBlocks` measures one process on its own (a scenario called in-process, e.g. in tests); `PipeBlocks` serves
the controller over two pipes (JSON lines), which the controller hands the worker as FWBENCH_BLOCK_FDS.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from fwbench.trackers.stats import geometric_mean_interval

BLOCK_FDS_ENV = "FWBENCH_BLOCK_FDS"  # "COMMANDS,REPLIES": the pipe ends a serving worker reads and writes
CALIBRATION_ITERS = 3  # timed iterations (after the warm-up) whose median sets the iterations per burst
STEAL_FLAG = 0.05  # a burst is flagged when the hypervisor stole more than this share of the machine's CPU time
# A burst is flagged when other processes (anything but this worker: another job, a test run, a daemon; the waiting
# workers use next to nothing) used more than this share of the machine's CPU time. /proc/stat counts in clock
# ticks (10 ms), so only bursts spanning LOAD_MIN_TICKS ticks over all CPUs are judged one by one; a cell's share
# over all its bursts is recorded either way.
OTHER_LOAD_FLAG = 0.25
LOAD_MIN_TICKS = 20

Step = tuple[Callable[[int], Any], Callable[[Any], None]]  # (one iteration, the synchronise after it)
# A step's name is its cell's comparison (model or operation, precision, batch size), then, where a cell has several
# steps (the micro suite's resident and transfer variants), ":" and the variant. The controller runs a block
# comparison by comparison, each comparison's steps of every worker side by side (fwbench.running.launches).
VARIANT_SEPARATOR = ":"


def step_name(model: str, precision: str, batch_size: int, variant: str | None = None) -> str:
    """The burst step of one cell (and one of its variants) in a worker that may serve many."""
    comparison = f"{model}/{precision}/bs{batch_size}"
    return comparison if variant is None else f"{comparison}{VARIANT_SEPARATOR}{variant}"


def comparison_of(step: str) -> str:
    """The comparison a step times (the part of its name before the variant)."""
    return step.split(VARIANT_SEPARATOR, 1)[0]


burst_clock = time.perf_counter  # the clock of the timed iterations (a test traces its reads)


@dataclass(frozen=True)
class BurstPlan:
    """How a launch is measured: `blocks` blocks, each one burst of about `burst_s` seconds per variant after
    `discard` iterations that are run and not timed (at most `max_iters` timed iterations per burst)."""

    blocks: int
    burst_s: float
    discard: int
    max_iters: int

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> BurstPlan:
        return cls(
            blocks=int(settings["blocks"]),
            burst_s=float(settings["burst_s"]),
            discard=int(settings["burst_discard"]),
            max_iters=int(settings.get("max_iters", 100_000)),
        )


def calibrate(step_seconds: list[float], plan: BurstPlan) -> int:
    """Iterations per burst: `burst_s` over the median of the calibration steps, at least 1, at most max_iters."""
    median = float(np.median(step_seconds))
    return int(min(plan.max_iters, max(1, round(plan.burst_s / median)))) if median > 0 else plan.max_iters


def read_cpu_ticks(path: str = "/proc/stat") -> tuple[int, int, int] | None:
    """(steal, idle, total) clock ticks of the machine's aggregate "cpu" line (idle counts iowait too); None where
    there is none (not Linux)."""
    try:
        with open(path, encoding="ascii") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(value) for value in fields[1:9]]  # user nice system idle iowait irq softirq steal
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (ticks[7] if len(ticks) > 7 else 0), idle, sum(ticks)


def other_load(before: tuple[int, int, int] | None, after: tuple[int, int, int] | None, own_cpu_s: float):
    """(CPU seconds other processes used over an interval, the machine's CPU seconds in it) from two
    `read_cpu_ticks` readings and this process's own CPU time over it; None without readings or ticks."""
    if before is None or after is None or after[2] <= before[2]:
        return None
    hertz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    ticks = after[2] - before[2]
    busy = ticks - (after[1] - before[1]) - (after[0] - before[0])
    return max(0.0, busy / hertz - own_cpu_s), ticks / hertz


# perf_event_open(2): the syscall's number per architecture, the attribute layout (PERF_ATTR_SIZE_VER0 plus what
# follows, zeroed), hardware events 0 (cycles) and 1 (instructions), counting user space only.
_PERF_SYSCALL = {"x86_64": 298, "aarch64": 241}
_EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 5, 1 << 6
_EVENTS = {"cycles": 0, "instructions": 1}


class _PerfAttr(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("rest", ctypes.c_uint8 * 96),
    ]


class HardwareCounters:
    """Instructions and cycles of every thread of this process (one counter per thread and event, opened once the
    framework's thread pools exist, read around each burst). `missing` holds why there are none: no such syscall,
    a hypervisor without a PMU (ENOENT), perf_event_paranoid (EACCES)."""

    def __init__(self, syscall: Callable[..., int] | None = None) -> None:
        self.fds: dict[str, list[int]] = {}
        self.missing: str | None = None
        self.threads = 0
        number = _PERF_SYSCALL.get(platform.machine())
        if number is None:
            self.missing = f"perf_event_open: no syscall number known for {platform.machine()}"
            return
        libc = ctypes.CDLL(None, use_errno=True)
        self._syscall = syscall or (lambda *args: libc.syscall(number, *args))
        self._open()

    def _open(self) -> None:
        try:
            tids = sorted(int(name) for name in os.listdir("/proc/self/task"))
        except OSError as exc:
            self.missing = f"perf_event_open: cannot list this process's threads ({exc.strerror})"
            return
        for event, config in _EVENTS.items():
            for tid in tids:
                attr = _PerfAttr(type=0, size=ctypes.sizeof(_PerfAttr), config=config)
                attr.flags = _EXCLUDE_KERNEL | _EXCLUDE_HV
                fd = self._syscall(ctypes.byref(attr), tid, -1, -1, 0)
                if fd < 0:
                    errno = ctypes.get_errno()
                    self.close()
                    self.missing = f"perf_event_open({event}): {os.strerror(errno) if errno else 'failed'}" + (
                        " (the hypervisor exposes no hardware counters)" if errno == 2 else ""
                    )
                    return
                self.fds.setdefault(event, []).append(fd)
        self.threads = len(tids)

    def read(self) -> dict[str, int] | None:
        if self.missing is not None:
            return None
        return {event: sum(struct.unpack("q", os.read(fd, 8))[0] for fd in fds) for event, fds in self.fds.items()}

    def close(self) -> None:
        for fd in (fd for fds in self.fds.values() for fd in fds):
            os.close(fd)
        self.fds = {}


def run_burst(
    step: Step, iters: int, discard: int, counters: HardwareCounters | None, window: Any = None
) -> dict[str, Any]:
    """`discard` untimed iterations, then `iters` timed ones, each bracketed by the synchronise; with the burst's
    CPU time, the machine's steal share and the hardware counters around the timed iterations only. `window`
    (start()/stop(), e.g. an energy meter) is opened and closed at the synchronised edges of the timed iterations."""
    call, sync = step
    discard_from = time.perf_counter()
    for i in range(discard):
        sync(call(i))
    discard_s = time.perf_counter() - discard_from
    clock = burst_clock
    stat0, cpu0, hw0 = read_cpu_ticks(), time.process_time(), counters.read() if counters else None
    if window is not None:
        window.start()
    samples = []
    start = clock()
    for i in range(iters):
        t0 = clock()
        sync(call(i))
        samples.append(clock() - t0)
    wall = clock() - start
    if window is not None:
        window.stop()
    stat1, cpu1, hw1 = read_cpu_ticks(), time.process_time(), counters.read() if counters else None
    steal = (stat1[0] - stat0[0]) / (stat1[2] - stat0[2]) if stat0 and stat1 and stat1[2] > stat0[2] else None
    others = other_load(stat0, stat1, cpu1 - cpu0)
    judged = others is not None and stat1[2] - stat0[2] >= LOAD_MIN_TICKS
    return {
        "iters": iters,
        "samples_ms": [s * 1000.0 for s in samples],
        "wall_s": wall,
        "discard_s": discard_s,
        "cpu_s": cpu1 - cpu0,
        "steal_share": steal,
        "steal_flag": steal is not None and steal > STEAL_FLAG,
        "other_cpu_s": None if others is None else others[0],
        "machine_cpu_s": None if others is None else others[1],
        "load_flag": judged and others[0] > OTHER_LOAD_FLAG * others[1],
        **({event: hw1[event] - hw0[event] for event in hw1} if hw0 and hw1 else {}),
    }


def burst_rate(burst: Mapping[str, Any], batch_size: int) -> float:
    """Items per second over one burst's timed iterations."""
    return batch_size * burst["iters"] * 1000.0 / float(sum(burst["samples_ms"]))


class _Blocks:
    """What both sessions share: calibration, the bursts of each step, the waiting worker's CPU time."""

    def __init__(self, plan: BurstPlan) -> None:
        self.plan = plan
        # per step, opened around each of its bursts' timed iterations (an energy meter), where set
        self.windows: dict[str, Any] = {}
        # per step, called before each of its bursts and its calibration, untimed: a worker serving several
        # precisions sets the step's process-wide switches (fwbench.scenarios.served.activation)
        self.before: dict[str, Callable[[], None]] = {}
        # what the worker tells the controller with its ready reply (the launch's idle baseline, where it took one)
        self.announce: dict[str, Any] = {}
        self.counters: HardwareCounters | None = None
        self.iters: dict[str, int] = {}
        self.bursts: dict[str, list[dict[str, Any]]] = {}
        self._idle_from: tuple[float, float] | None = None
        self.calibration_s: dict[str, float] = {}  # per step
        # what the controller asked for after the blocks, with its finish command: {"profile": True} asks a worker
        # of a group's last launch to profile its cells in this process (fwbench.scenarios.profiled.after_blocks)
        self.after: dict[str, Any] = {}

    def reply(self, message: Mapping[str, Any]) -> None:
        """Tell the controller something after the blocks (only a served worker has a controller to tell)."""

    def _calibrate(self, steps: Mapping[str, Step]) -> None:
        for name, (call, sync) in steps.items():
            if name in self.before:
                self.before[name]()
            start, times = time.perf_counter(), []
            for i in range(CALIBRATION_ITERS):
                t0 = time.perf_counter()
                sync(call(i))
                times.append(time.perf_counter() - t0)
            self.iters[name] = calibrate(times, self.plan)
            self.bursts[name] = []
            self.calibration_s[name] = time.perf_counter() - start
        self.counters = HardwareCounters()
        self._idle_from = (time.perf_counter(), time.process_time())

    def _burst(
        self, steps: Mapping[str, Step], name: str, block: int, position: int, iters: int | None = None
    ) -> dict[str, Any]:
        """One burst of step `name`: its calibrated iterations after the plan's discarded ones, or (`iters`) that
        many with none discarded (a compile launch's one iteration per step, fwbench.running.compile_launch)."""
        wall0, cpu0 = self._idle_from or (time.perf_counter(), time.process_time())
        idle_wall, idle_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        count, discard = (self.iters[name], self.plan.discard) if iters is None else (int(iters), 0)
        if name in self.before:
            self.before[name]()
        burst = run_burst(steps[name], count, discard, self.counters, self.windows.get(name))
        burst.update(block=block, position=position, idle_wall_s=idle_wall, idle_cpu_s=idle_cpu)
        self.bursts[name].append(burst)
        self._idle_from = (time.perf_counter(), time.process_time())
        return burst

    def result(self) -> dict[str, Any]:
        """What the scenario records of the session: bursts per step and how the counters fared."""
        if self.counters is not None:
            self.counters.close()
        counters = self.counters
        return {
            "plan": {"blocks": self.plan.blocks, "burst_s": self.plan.burst_s, "discard": self.plan.discard},
            "iters_per_burst": dict(self.iters),
            "calibration_s": dict(self.calibration_s),
            "bursts": self.bursts,
            "hardware_counters": (
                {"threads": counters.threads, "events": sorted(_EVENTS)}
                if counters is not None and counters.missing is None
                else None
            ),
            "missing": {"hardware_counters": counters.missing} if counters and counters.missing else {},
        }


class LocalBlocks(_Blocks):
    """One process measuring itself: `blocks` blocks of one burst per step, the steps in turn."""

    def measure(self, steps: Mapping[str, Step]) -> dict[str, Any]:
        self._calibrate(steps)
        for block in range(self.plan.blocks):
            for position, name in enumerate(steps):
                self._burst(steps, name, block, position)
        return self.result()


class PipeBlocks(_Blocks):
    """A worker serving the controller: after calibration it replies {"ready": ..., "iters": ...}, then runs
    {"burst": STEP, "block": B, "position": P} commands (with "iters": N, a burst of N iterations and no discarded
    ones instead of the calibrated burst) until {"finish": true} (which may ask for more after the blocks:
    `after`). It waits in a blocking read, so a waiting worker uses no CPU of its own (its framework's thread pools
    are another matter, recorded per burst as idle_cpu_s)."""

    def __init__(self, plan: BurstPlan, commands: BinaryIO, replies: BinaryIO) -> None:
        super().__init__(plan)
        self.commands, self.replies = commands, replies

    @classmethod
    def from_env(cls, plan: BurstPlan) -> PipeBlocks:
        read_fd, write_fd = (int(fd) for fd in os.environ[BLOCK_FDS_ENV].split(","))
        return cls(plan, os.fdopen(read_fd, "rb", buffering=0), os.fdopen(write_fd, "wb", buffering=0))

    def reply(self, message: Mapping[str, Any]) -> None:
        self.replies.write((json.dumps(message) + "\n").encode())

    def measure(self, steps: Mapping[str, Step]) -> dict[str, Any]:
        self._calibrate(steps)
        self.reply({**self.announce, "ready": list(steps), "iters": self.iters})
        for line in iter(self.commands.readline, b""):
            command = json.loads(line)
            if command.get("finish"):
                self.after = {key: value for key, value in command.items() if key != "finish"}
                return self.result()
            where = int(command["block"]), int(command["position"])
            burst = self._burst(steps, command["burst"], *where, command.get("iters"))
            self.reply({"done": command["burst"], "wall_s": burst["wall_s"]})
        raise EOFError("the controller closed the command pipe before asking the worker to finish")


def session(plan: BurstPlan) -> _Blocks:
    """The controller's pipes where a controller started this worker, else the process measures itself."""
    return PipeBlocks.from_env(plan) if os.environ.get(BLOCK_FDS_ENV) else LocalBlocks(plan)


def summarise(session: Mapping[str, Any], name: str, batch_size: int) -> dict[str, Any]:
    """One step's bursts as a cell's timing: every iteration's latency (in the order run), the throughput as the
    geometric mean of the bursts' own rates (each burst weighted alike, so that a ratio of two variants' values
    over the same blocks is the mean of the ratios within the blocks), a Student-t interval over the bursts' log
    rates (within this process: it cannot show the variation between launches), and the burst checks: steal,
    CPU time per wall second in the bursts and while waiting, hardware counters per item."""
    bursts = session["bursts"][name]
    rates = np.array([burst_rate(burst, batch_size) for burst in bursts])
    samples_ms = [sample for burst in bursts for sample in burst["samples_ms"]]
    timed_s = float(sum(burst["wall_s"] for burst in bursts))
    interval = geometric_mean_interval(rates) if len(rates) > 1 else None
    idle_wall = sum(burst["idle_wall_s"] for burst in bursts[1:])
    idle_cpu = sum(burst["idle_cpu_s"] for burst in bursts[1:])
    items = batch_size * sum(burst["iters"] for burst in bursts)
    counted = [burst for burst in bursts if "instructions" in burst]
    return {
        "samples_ms": samples_ms,
        "throughput_img_s": float(np.exp(np.log(rates).mean())),
        "ci95": None
        if interval is None
        else {
            "throughput_img_s": [interval.low, interval.high],
            "relative_half_width": interval.relative_half_width(),
            "method": f"Student-t 95% CI of the geometric mean of {len(rates)} bursts' rates ({len(rates) - 1} df, "
            "within one process)",
        },
        "timed_s": timed_s,
        "discard_s": float(sum(burst.get("discard_s", 0.0) for burst in bursts)),
        "blocks": {
            "bursts": len(bursts),
            "iters_per_burst": session["iters_per_burst"][name],
            "burst_rates": rates.tolist(),
            "burst_blocks": [burst["block"] for burst in bursts],
            "burst_positions": [burst["position"] for burst in bursts],
            "steal_flagged": sum(bool(burst["steal_flag"]) for burst in bursts),
            "steal_share_max": max((burst["steal_share"] or 0.0 for burst in bursts), default=None),
            "cpu_per_wall": float(sum(burst["cpu_s"] for burst in bursts) / timed_s) if timed_s > 0 else None,
            "idle_cpu_per_wall": float(idle_cpu / idle_wall) if idle_wall > 0 else None,
            "idle_wall_s": idle_wall,
            "instructions_per_item": (
                float(sum(burst["instructions"] for burst in counted) / items) if len(counted) == len(bursts) else None
            ),
            "cycles_per_item": (
                float(sum(burst["cycles"] for burst in counted) / items) if len(counted) == len(bursts) else None
            ),
            "hardware_counters": session["hardware_counters"],
            "plan": session["plan"],
            "steal_flag_share": STEAL_FLAG,
            "load_flagged": sum(bool(burst.get("load_flag")) for burst in bursts),
            "other_load_share": _other_load_share(bursts),
            "load_flag_share": OTHER_LOAD_FLAG,
        },
        "missing": dict(session["missing"]),
    }


def _other_load_share(bursts: list[Mapping[str, Any]]) -> float | None:
    """Other processes' share of the machine's CPU time over all of a step's bursts (None where unreadable)."""
    if not bursts or any(burst.get("other_cpu_s") is None for burst in bursts):
        return None
    machine = sum(burst["machine_cpu_s"] for burst in bursts)
    return float(sum(burst["other_cpu_s"] for burst in bursts) / machine) if machine > 0 else None
