"""Snakemake's own state in `.snakemake/`, made to survive a killed study.

A Snakemake killed with SIGKILL (an out-of-memory kill, a node failure, a lost terminal with `kill -9`) leaves its
locks in `.snakemake/locks/`, and the next run of the same command stops with "Directory cannot be locked" until
someone runs `snakemake --unlock`. Snakemake cannot tell a dead owner from a live one, because a lock records only
file names. The workflow therefore records its owner: `onstart` writes the Snakemake process's pid, its start time
from `/proc` (a reused pid has another start time), the boot id and the host name to `.snakemake/fwbench-owner.json`;
`onsuccess` and `onerror` remove it. When the workflow is parsed (before Snakemake takes its locks) the locks are
removed only if that record exists, names this host and boot, and its process is gone. Locks without a record, or of
another host (a shared file system), or of a live run are never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fwbench.io import atomic_write_json

OWNER_FILE = "fwbench-owner.json"
LOCKS_DIR = "locks"


def process_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (`/proc/PID/stat` field 22), or None if there is no such
    process (or no /proc to ask)."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return None
    # The command name (field 2) is in parentheses and may itself contain spaces or parentheses.
    fields = stat[stat.rindex(")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 overall; fields here start at field 3
    except (IndexError, ValueError):
        return None


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def owner_record(pid: int | None = None) -> dict[str, Any]:
    """What identifies process `pid` (default: this one) on this machine, across pid reuse and reboots."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "start_time": process_start_time(pid), "boot_id": boot_id(), "host": socket.gethostname()}


def stale_owner(
    record: Mapping[str, Any] | None,
    *,
    host: str,
    current_boot_id: str | None,
    start_time_of: Callable[[int], int | None],
) -> str | None:
    """Why the run `record` describes is certainly dead, or None when it may be alive or cannot be judged here.

    None for: no record, a malformed one, another host, a record without a start time, or a process with this pid
    and the recorded start time."""
    if not isinstance(record, Mapping):
        return None
    pid, start, recorded_host = record.get("pid"), record.get("start_time"), record.get("host")
    if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(start, int) or recorded_host != host:
        return None
    recorded_boot = record.get("boot_id")
    if recorded_boot and current_boot_id and recorded_boot != current_boot_id:
        return f"Snakemake pid {pid} ran before this machine last booted"
    now = start_time_of(pid)
    if now is None:
        return f"Snakemake pid {pid} is no longer running"
    if now != start:
        return f"Snakemake pid {pid} is no longer running (the pid now belongs to another process)"
    return None


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_owner(snakemake_dir: str | os.PathLike = ".snakemake") -> None:
    """`onstart`: this Snakemake process holds the locks now."""
    atomic_write_json(Path(snakemake_dir) / OWNER_FILE, owner_record())


def remove_owner(snakemake_dir: str | os.PathLike = ".snakemake") -> None:
    """`onsuccess` / `onerror`: Snakemake releases its locks right after; remove the record if it is this run's."""
    path = Path(snakemake_dir) / OWNER_FILE
    record = _read(path)
    if isinstance(record, Mapping) and record.get("pid") == os.getpid():
        path.unlink(missing_ok=True)


def clear_stale_locks(snakemake_dir: str | os.PathLike = ".snakemake") -> str | None:
    """At parse time: remove the locks of a dead run of this workflow (see the module's doc); returns the line to
    print when it did, else None."""
    directory = Path(snakemake_dir)
    owner = directory / OWNER_FILE
    if not owner.exists() or process_start_time(os.getpid()) is None:
        return None  # no record, or no /proc here: a live run cannot be told from a dead one
    judge = {"host": socket.gethostname(), "current_boot_id": boot_id(), "start_time_of": process_start_time}
    record = _read(owner)
    reason = stale_owner(record, **judge)
    if reason is None:
        return None
    # Claim the record by renaming it: of two runs started at once, only one goes on to remove the locks.
    claimed = directory / f".{OWNER_FILE}.{os.getpid()}.claimed"
    try:
        os.rename(owner, claimed)
    except OSError:
        return None
    try:
        if stale_owner(_read(claimed), **judge) is None:
            # A live run wrote its record since we read the old one: give it back, touch nothing.
            with contextlib.suppress(OSError):
                os.link(claimed, owner)
            return None
        locks = sorted((directory / LOCKS_DIR).glob("*.lock"))
        for lock in locks:
            lock.unlink(missing_ok=True)
    finally:
        claimed.unlink(missing_ok=True)
    if not locks:
        return None
    return (
        f"fwbench: removed {len(locks)} stale Snakemake lock(s) in {directory / LOCKS_DIR}: {reason} on this host "
        f"(recorded in {owner})"
    )


def fix_params_change_listing() -> None:
    """Make `snakemake --list-changes params` list only outputs whose params changed.

    Snakemake 9.27's ParamsChange iterates over its files even when it holds no change (`NO_PARAMS_CHANGE | change`
    returns `change`, files included), so `--list-changes params` lists the last output of every job that has
    metadata, and the documented `snakemake -R $(snakemake --list-changes params)` would rerun the whole study. Only
    iteration is patched (nothing else in Snakemake iterates a ParamsChange), and only where the bug is present."""
    try:
        from snakemake.persistence import ParamsChange
    except ImportError:
        return
    if not list(ParamsChange(files={"probe"})):
        return  # fixed upstream

    def changed_files(self):
        return iter(self.files if self else ())

    ParamsChange.__iter__ = changed_files
