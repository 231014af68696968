"""Measuring children under supervision: start one, talk to it (a warm worker, fwbench.scenarios.blocks), end it
classified.

Every way a child can end (a result, an exception, a crash in native code, a hang past the timeout, the memory
limit) becomes an `Outcome`: its result part, or its classified failure (fwbench.running.failures), with everything it
printed. A child runs in a session of its own, so that ending it kills whatever it started too.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fwbench.io import read_json
from fwbench.running.failures import Failure, classify
from fwbench.running.memory_limit import MemoryLimit, die_with_parent, system_oom_kills
from fwbench.running.slots import Slot
from fwbench.running.worker import SPAWNED_AT
from fwbench.scenarios.blocks import BLOCK_FDS_ENV


@dataclass
class Outcome:
    """One child's end: its result part, or its classified failure; and everything it printed."""

    part: dict[str, Any] | None
    failure: Failure | None
    output: str
    memory_limit: dict[str, Any] | None = None  # how the host memory limit was enforced, if there was one


def _child_preexec(memory: MemoryLimit | None):
    """What the forked child does before exec: die with the runner, then enter its memory limit."""
    parent = os.getpid()

    def preexec() -> None:
        die_with_parent()
        if os.getppid() != parent:  # the runner died before the request took effect
            os._exit(1)
        if memory is not None:
            memory.in_child()

    return preexec


class Child:
    """A measuring child: `python -m fwbench.running.worker SPEC PART`, its output in `log_path`. It inherits the slot's
    lock (so the slot stays taken while it lives) and gets the slot's environment (its GPU), `env` on top (a
    workaround), and the suite's host memory limit. With `serve`, it also gets two pipes (BLOCK_FDS_ENV) over which
    `request` sends a command and waits for the reply: a warm worker serving bursts."""

    def __init__(
        self,
        worker_cmd: Sequence[str],
        spec_path: Path,
        part_path: Path,
        log_path: Path,
        settings: Mapping[str, Any],
        suite: str,
        slot: Slot | None = None,
        env: Mapping[str, str] | None = None,
        *,
        serve: bool = False,
    ) -> None:
        self.timeout_s = float(settings["timeout_s"])
        self.suite, self.slot, self.part_path = suite, slot, part_path
        self.limit_mb = settings.get("max_host_mb")
        self.memory = MemoryLimit.create(self.limit_mb) if self.limit_mb else None
        self.system_kills = system_oom_kills()
        self.log = open(log_path, "w+", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed by end())
        self.timed_out = False
        self._buffer = b""
        self._commands = self._replies = -1
        pipes: dict[str, str] = {}
        fds: list[int] = [slot.fd] if slot is not None and slot.fd >= 0 else []
        if serve:
            child_reads, self._commands = os.pipe()
            self._replies, child_writes = os.pipe()
            pipes[BLOCK_FDS_ENV] = f"{child_reads},{child_writes}"
            fds += [child_reads, child_writes]
        try:
            self.process = subprocess.Popen(
                [*worker_cmd, str(spec_path), str(part_path)],
                stdout=self.log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, so a timeout kills everything it started
                env={
                    **os.environ,
                    **(slot.env if slot is not None else {}),
                    **(env or {}),
                    **pipes,
                    SPAWNED_AT: repr(time.time()),
                },
                pass_fds=tuple(fds),
                preexec_fn=_child_preexec(self.memory),
            )
        except BaseException:
            self._close()
            raise
        finally:
            if serve:  # the child's ends are the child's
                os.close(child_reads)
                os.close(child_writes)

    def send(self, message: Mapping[str, Any]) -> bool:
        """Send a command that has no reply; False if the child has gone."""
        try:
            os.write(self._commands, (json.dumps(message) + "\n").encode())
        except BrokenPipeError:
            return False
        return True

    def request(self, message: Mapping[str, Any] | None, timeout_s: float | None = None) -> dict[str, Any] | None:
        """Send `message` (None: only wait) and return the child's next reply; None if the child ended first or no
        reply came within the timeout (then `timed_out` is set)."""
        if message is not None and not self.send(message):
            return None
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.timed_out = True
                return None
            readable, _, _ = select.select([self._replies], [], [], remaining)
            if readable:
                chunk = os.read(self._replies, 65536)
                if not chunk:
                    return None  # the child closed its end: it has exited (or is exiting)
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def wait(self, timeout_s: float | None = None) -> int | None:
        """The child's exit status, None if it is still running after the timeout (then `timed_out` is set)."""
        if self.timed_out:
            return None
        try:
            return self.process.wait(timeout=self.timeout_s if timeout_s is None else timeout_s)
        except subprocess.TimeoutExpired:
            self.timed_out = True
            return None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # whatever it started must not outlive it

    def run(self) -> Outcome:
        """The child from start to end, classified (a training cell, or a trial of a group measured in rounds)."""
        try:
            returncode = self.wait()
        except BaseException:  # the runner is being stopped (a scheduler's SIGTERM, Ctrl-C): so is its child
            self.abandon()
            raise
        return self.end(returncode)

    def abandon(self) -> None:
        """Kill the child and let go of its files without a verdict (the runner itself is being stopped)."""
        self.kill()
        self._close()

    def until_ready(self, ready: dict[str, Any], cells: int = 1) -> Outcome:
        """Wait for a serving worker's first reply: ready (its steps go to `ready` with the child, and the outcome is
        a success so far), or its end, classified. A worker preparing `cells` cells (each built, compiled and warmed
        up before it is ready) has the timeout once per cell. A runner that is being stopped (SIGTERM, Ctrl-C)
        stops it too."""
        try:
            reply = self.request(None, timeout_s=self.timeout_s * max(1, cells))
        except BaseException:
            self.abandon()
            raise
        if reply is not None and "ready" in reply:
            ready.update(child=self, steps=list(reply["ready"]), reply=reply)
            return Outcome(None, None, "")
        return self.end(self.wait(), unready=True)

    def end(self, returncode: int | None, *, unready: bool = False) -> Outcome:
        """Kill what is left of the child's session, and classify how it ended (`returncode` None: it was still
        running at its timeout). `unready`: a warm worker that ended before it said it was ready to measure,
        which is a failure even if it exited 0."""
        self.kill()
        self.process.wait()
        try:
            self.log.seek(0)
            output = self.log.read()
            oom_killed = returncode == -signal.SIGKILL and (
                (self.memory is not None and self.memory.oom_kills() > 0)
                or (self.system_kills is not None and (system_oom_kills() or 0) > self.system_kills)
            )
            memory_limit = self.memory.describe() if self.memory else None
        finally:
            self._close()
        part, result_error = None, None
        if returncode == 0:
            try:
                part = read_json(self.part_path)
                # one cell's part, or {"parts": [...]} from a worker serving several cells
                each = part.get("parts") if isinstance(part, dict) and "parts" in part else [part]
                if not isinstance(each, list) or not each or not all(is_part(p) for p in each):
                    part, result_error = None, "it is not a result part (no metrics or framework)"
            except (OSError, ValueError) as exc:
                result_error = f"{type(exc).__name__}: {exc}"
            if unready and (result_error is None or not self.part_path.exists()):
                # whatever it wrote, a warm worker that never said it was ready measured nothing on command
                part, result_error = None, "the worker exited before it was ready to measure (no ready message)"
        failure = classify(
            returncode=returncode,
            output=output,
            timeout_s=self.timeout_s,
            timeout_key=f"{self.suite}.timeout_s",
            memory_limit_mb=self.limit_mb,
            memory_limit_key=f"{self.suite}.max_host_mb",
            oom_killed=oom_killed,
            on_gpu=self.slot is not None and self.slot.gpu is not None,
            result_error=result_error,
        )
        return Outcome(part if failure is None else None, failure, output, memory_limit)

    def _close(self) -> None:
        for fd in (self._commands, self._replies):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._commands = self._replies = -1
        self.log.close()
        if self.memory is not None:
            self.memory.close()


def is_part(part: Any) -> bool:
    """A result part as a worker writes it: its metrics and its framework, or (a cell whose own preparation failed
    in a worker that went on with its others) `failed` with the error."""
    return isinstance(part, dict) and (
        ("metrics" in part and "framework" in part) or isinstance(part.get("failed"), dict)
    )
