"""GPU slots: with `--resources gpu=N`, up to N cells run at once, each bound to a GPU no other running cell holds.

Snakemake counts the `gpu` resource but does not say which GPU a job got, so the cell runner takes a slot itself: an
exclusive `flock` on one of N lock files. The lock is shared with the measuring child (its file descriptor is
inherited), so it is held exactly while the runner or its child lives and is freed by the kernel when both are gone,
however they end (a timeout kill, a crash, a killed Snakemake). A slot is a GPU (through `CUDA_VISIBLE_DEVICES`,
by UUID where the device check recorded one) and a disjoint share of the runner's CPUs, so concurrent cells do not
share cores either. With one slot nothing about the child's environment changes; on a CPU study a slot is only a
share of the cores.

Under a batch scheduler (a SLURM job: `SLURM_JOB_ID` in the environment) the scheduler has already given the job its
GPU and cores exclusively (`--gpus=1`, its CPUs), so there is no lock to take and nothing to choose: the slot is the
allocation as it is (`from_allocation`), and the cell records the job id and node beside it. The device record's
GPU list describes the node that ran the device check, not necessarily this one, so it names no GPU here; the cell's
own provenance records the GPU it computed on (model, UUID, driver).
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fwbench.running.devices import check_slots
from fwbench.running.threads import available_cpus

WAIT_S = 600.0  # Snakemake never starts more cells than slots: a wait this long means another study holds them
POLL_S = 0.05


class SlotUnavailable(RuntimeError):
    pass


@dataclass
class Slot:
    index: int
    count: int
    cpus: list[int]
    gpu: dict[str, Any] | None
    env: dict[str, str]
    fd: int = field(repr=False)

    scheduler: dict[str, Any] | None = None

    def placement(self) -> dict[str, Any]:
        """What a cell records about where it ran (the GPU's index is its position in the device check's list; under
        a scheduler, the job and node instead: see `scheduler_allocation`)."""
        return {
            "slot": self.index,
            "slots": self.count,
            "cpus": self.cpus,
            "gpu_index": None if self.gpu is None else self.gpu.get("index"),
            "gpu_uuid": None if self.gpu is None else self.gpu.get("uuid"),
            "gpu_name": None if self.gpu is None else self.gpu.get("name"),
            "cuda_visible_devices": self.env.get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES")),
            "host": socket.gethostname(),
            "node": self.scheduler["node"] if self.scheduler else socket.gethostname(),
            "scheduler": self.scheduler,
        }

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # the child's inherited copy (if it still runs) keeps the lock until it exits
            self.fd = -1


def _visible_id(gpu: Mapping[str, Any]) -> str:
    """How to name `gpu` in a child's CUDA_VISIBLE_DEVICES: its UUID, else its entry in this process's list."""
    if gpu.get("uuid"):
        return str(gpu["uuid"])
    parent = [entry.strip() for entry in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    index = int(gpu["index"])
    return parent[index] if index < len(parent) else str(index)


def _cpu_share(index: int, count: int) -> list[int]:
    cpus = available_cpus()
    if count == 1:
        return cpus
    per_slot = len(cpus) // count
    if per_slot < 1:
        raise SlotUnavailable(f"{count} slots but only {len(cpus)} CPUs: each concurrent cell needs at least one")
    return cpus[index * per_slot : (index + 1) * per_slot]


def plan(record: Mapping[str, Any], index: int, count: int) -> tuple[list[int], dict[str, Any] | None, dict[str, str]]:
    """CPUs, GPU and child environment of slot `index` of `count`, on the device of a study's device record."""
    env = dict(record.get("environment") or {})
    gpus = list(record.get("gpus") or [])
    gpu = gpus[index] if record["platform"] != "cpu" and index < len(gpus) else None
    if gpu is not None and count > 1:
        env["CUDA_VISIBLE_DEVICES"] = _visible_id(gpu)
    return _cpu_share(index, count), gpu, env


def scheduler_allocation(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The batch-scheduler job this process runs in, from the variables SLURM sets in every job: {"name": "slurm",
    "job_id", "node", "partition", "cpus_on_node", "gpus", "restart_count"} (a value SLURM did not set is None), or
    None outside a scheduler job. `restart_count` > 0: the scheduler requeued the job (preemption, node failure)."""
    environ = os.environ if environ is None else environ
    if not environ.get("SLURM_JOB_ID"):
        return None

    def value(name: str) -> str | None:
        return environ.get(name) or None

    restarts = value("SLURM_RESTART_COUNT")
    return {
        "name": "slurm",
        "job_id": value("SLURM_JOB_ID"),
        "node": value("SLURMD_NODENAME") or socket.gethostname(),
        "partition": value("SLURM_JOB_PARTITION"),
        "cpus_on_node": value("SLURM_CPUS_ON_NODE"),
        "gpus": value("SLURM_JOB_GPUS") or value("SLURM_STEP_GPUS") or value("CUDA_VISIBLE_DEVICES"),
        "restart_count": int(restarts) if restarts and restarts.isdigit() else 0,
    }


def from_allocation(record: Mapping[str, Any], scheduler: Mapping[str, Any]) -> Slot:
    """The scheduler's allocation as the cell's slot: all of the job's CPUs, its GPU (already made the only visible
    one by the scheduler) on a GPU study, no lock (the scheduler keeps other jobs off them)."""
    gpu = {"index": None, "uuid": None, "name": None} if record["platform"] != "cpu" else None
    return Slot(0, 1, available_cpus(), gpu, {}, -1, dict(scheduler))


def acquire(record: Mapping[str, Any], count: int, root: str | os.PathLike, wait_s: float = WAIT_S) -> Slot:
    """Take the first free one of `count` slots (the `gpu` resource); wait (polling) while all are held. The lock
    files live in `root`/HOSTNAME, named at run time, because slots stand for one machine's GPUs even when results/
    is on a file system that several nodes share. Inside a scheduler job the allocation is the slot."""
    scheduler = scheduler_allocation()
    if scheduler is not None:
        return from_allocation(record, scheduler)
    check_slots(record, count)
    lock_dir = Path(root, socket.gethostname())
    lock_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    while True:
        for index in range(count):
            fd = os.open(lock_dir / f"slot{index}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            os.set_inheritable(fd, True)
            try:
                cpus, gpu, env = plan(record, index, count)
            except Exception:
                os.close(fd)
                raise
            return Slot(index, count, cpus, gpu, env, fd)
        if time.monotonic() > deadline:
            raise SlotUnavailable(f"all {count} slots in {lock_dir} stayed held for {wait_s:g} s")
        time.sleep(POLL_S)
