"""A host memory limit for one measuring child, and the evidence that the kernel's OOM killer ended it.

A runaway cell (a model too large for the host, a leak) must fail as `host_oom` and leave the machine to the rest of
the study instead of taking it down. Three mechanisms, in order of preference:

- a memory cgroup of its own (v2 `memory.max` with swap off, or v1 `memory.limit_in_bytes` and `memsw`): the
  kernel counts what the child and its threads really use (resident pages, page cache it dirties) and kills it at the
  limit; the cgroup's `oom_kill` counter says that is what happened. Needs a writable cgroup hierarchy (root, or a
  delegated subtree);
- otherwise `RLIMIT_AS` set in the child before it executes: allocations past the limit fail (Python raises
  `MemoryError`, C++ `std::bad_alloc`), which the runner classifies as `host_oom`. Caveat: it limits *virtual*
  address space, not resident memory. Frameworks reserve address space they never touch (CUDA maps a large unified
  range, XLA and the allocators reserve arenas), so on a GPU or with a tight limit a healthy cell can fail; set the
  limit well above the cell's expected resident peak, and prefer a machine where a cgroup can be made.

Without any limit, a child killed by SIGKILL while the system-wide `oom_kill` counter (/proc/vmstat) rose is taken to
be the kernel OOM killer's victim; another process killed at the same moment could be mistaken for it (recorded as
such in the reason's wording: "killed by the kernel's OOM killer").
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import uuid
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PR_SET_PDEATHSIG = 1
_PREFIX = "fwbench-cell-"


def system_oom_kills(vmstat: Path = Path("/proc/vmstat")) -> int | None:
    """The kernel's count of OOM kills since boot (Linux >= 4.13), or None where it cannot be read."""
    try:
        for line in vmstat.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def _own_cgroup(controller: str | None, proc_cgroup: Path) -> str | None:
    """This process's cgroup path in the v2 hierarchy (controller None) or the v1 hierarchy of `controller`."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller is None and controllers == "":
            return path
        if controller is not None and controller in controllers.split(","):
            return path
    return None


@dataclass
class MemoryLimit:
    """The limit of one child: create it, call `in_child()` from the child before exec (via `preexec`), read
    `oom_killed()` after it exited, then `close()`."""

    limit_mb: int
    mechanism: str  # "cgroup_v2", "cgroup_v1" or "rlimit_as"
    cgroup: Path | None = None

    @property
    def limit_bytes(self) -> int:
        return int(self.limit_mb) * 1024 * 1024

    @classmethod
    def create(cls, limit_mb: int, root: Path | None = None, proc_cgroup: Path | None = None) -> MemoryLimit:
        """A cgroup under this process's own when one can be made and limited, else RLIMIT_AS."""
        root = root if root is not None else CGROUP_ROOT
        proc_cgroup = proc_cgroup if proc_cgroup is not None else Path("/proc/self/cgroup")
        limit = cls(int(limit_mb), "rlimit_as")
        for mechanism, base, own in (
            ("cgroup_v2", root, _own_cgroup(None, proc_cgroup)),
            ("cgroup_v1", root / "memory", _own_cgroup("memory", proc_cgroup)),
        ):
            if own is None or not (base / "cgroup.procs").exists():
                continue
            if mechanism == "cgroup_v2" and not (base / "cgroup.controllers").exists():
                continue
            path = base / own.lstrip("/") / f"{_PREFIX}{uuid.uuid4().hex[:12]}"
            try:
                path.mkdir()
            except OSError:
                continue
            try:
                if mechanism == "cgroup_v2":
                    (path / "memory.max").write_text(str(limit.limit_bytes))
                    if (path / "memory.swap.max").exists():
                        (path / "memory.swap.max").write_text("0")
                else:
                    (path / "memory.limit_in_bytes").write_text(str(limit.limit_bytes))
                    if (path / "memory.memsw.limit_in_bytes").exists():
                        (path / "memory.memsw.limit_in_bytes").write_text(str(limit.limit_bytes))
            except OSError:
                _remove(path)
                continue
            return cls(int(limit_mb), mechanism, path)
        return limit

    def in_child(self) -> None:
        """Runs in the forked child before exec: join the cgroup, or cap the address space."""
        if self.cgroup is not None:
            (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))
        else:
            resource.setrlimit(resource.RLIMIT_AS, (self.limit_bytes, self.limit_bytes))

    def oom_kills(self) -> int:
        """OOM kills inside this limit's cgroup so far (0 for RLIMIT_AS, which refuses allocations instead)."""
        if self.cgroup is None:
            return 0
        name = "memory.events" if self.mechanism == "cgroup_v2" else "memory.oom_control"
        try:
            for line in (self.cgroup / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            return 0
        return 0

    def describe(self) -> dict[str, object]:
        return {"limit_mb": self.limit_mb, "mechanism": self.mechanism}

    def close(self) -> None:
        if self.cgroup is not None:
            _remove(self.cgroup)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this (child) process when its parent dies: a runner killed by the scheduler or by
    a user must not leave a measuring child running on, holding the GPU slot and skewing the next cell."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
