"""Whole-workflow studies built in the background while other tests run.

A test module whose tests only read one study's results (the workflow study, the two-fault study, the killed and
resumed study, the SLURM study) registers how to build it with `@background.study("fixture")`, and its module
fixture of that name takes the result from the session's `background_studies` (tests/conftest.py). When the test
run is collected, every registered study one of the selected tests needs is started, one after another on one
thread, in the order their tests come. The studies are Snakemake runs in other processes, and the in-process tests
before them use about one of the machine's two cores: this overlap is what took the full suite under 15 minutes
(docs/development.md). A study that no selected test needs is not built; one asked for that was not started (a
test selected by other means) is built then, in the foreground. `FWBENCH_TESTS_BACKGROUND=0` builds every study that
way, when its first test asks for it: to compare, or to read a failing build's traceback in its own test.

A builder runs on another thread while tests change the process's environment (monkeypatch) and working
directory, so it gets its own copy of the environment, taken before the first test, and passes it to every process
it starts; it must not read os.environ or rely on the working directory.
"""

from __future__ import annotations

import inspect
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# build(root, venv_bin, env) -> what the fixture returns; root is an empty directory of its own, venv_bin the
# test environment's bin/ (snakemake), env the environment for every process the build starts
Build = Callable[[Path, Path, dict[str, str]], Any]


@dataclass(frozen=True)
class _Builder:
    build: Build
    stop: Callable[[Path], None] | None  # what to stop afterwards (a cluster's daemons), given the study's root


SWITCH = "FWBENCH_TESTS_BACKGROUND"  # "0": no study is built in the background

# (the test module's file, the fixture's name) -> how to build the study
_BUILDERS: dict[tuple[Path, str], _Builder] = {}


def study(fixture: str, *, stop: Callable[[Path], None] | None = None) -> Callable[[Build], Build]:
    """Register the decorated `build(root, venv_bin, env)` as the study that module fixture `fixture` of the decorated
    function's module returns (`Studies.result`). `stop(root)`, if given, runs once after the study's tests
    (`Studies.stop`) or at the end of the session, whichever comes first, even when the build failed."""

    def register(build: Build) -> Build:
        key = (Path(inspect.getfile(build)).resolve(), fixture)
        _BUILDERS[key] = _Builder(build, stop)
        build.background_key = key  # type: ignore[attr-defined]
        return build

    return register


@dataclass
class _Run:
    root: Path
    future: Future
    queued: float
    in_background: bool
    started: float | None = None
    finished: float | None = None
    waited_s: float = 0.0
    stopped: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class Studies:
    """The session's background studies (see the module docstring)."""

    def __init__(self, items: Sequence[Any], mktemp: Callable[[str], Path], venv_bin: Path) -> None:
        self._mktemp = mktemp
        self.venv_bin = venv_bin
        # the environment every study's processes get: the test process's before any test changed it
        self.env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
        self._runs: dict[tuple[Path, str], _Run] = {}
        self._session_start = time.monotonic()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="background-study")
        if os.environ.get(SWITCH, "1") != "0":
            for key in _needed(items):
                self._start(key, self._executor.submit)

    def _start(self, key: tuple[Path, str], submit: Callable[..., Future]) -> _Run:
        run = _Run(self._mktemp(f"{key[1]}-"), Future(), time.monotonic(), submit is not _run_now)

        def build() -> Any:
            run.started = time.monotonic()
            try:
                return _BUILDERS[key].build(run.root, self.venv_bin, dict(self.env))
            finally:
                run.finished = time.monotonic()

        run.future = submit(build)
        self._runs[key] = run
        return run

    def result(self, build: Build) -> Any:
        """What `build` returned (its exception, re-raised, if it failed), waiting for it if it is still running;
        built now, in the foreground, if it was not started."""
        key = build.background_key  # type: ignore[attr-defined]
        run = self._runs.get(key) or self._start(key, _run_now)
        waiting = time.monotonic()
        try:
            return run.future.result()
        finally:
            run.waited_s += time.monotonic() - waiting

    def stop(self, build: Build) -> None:
        """Run the study's `stop` now (once), after waiting for its build to end."""
        key = build.background_key  # type: ignore[attr-defined]
        run = self._runs.get(key)
        stop = _BUILDERS[key].stop
        if run is None or stop is None:
            return
        with run.lock:
            if run.stopped:
                return
            run.stopped = True
        try:
            run.future.exception()  # wait; a failed build may have started what stop ends
        finally:
            stop(run.root)

    def close(self) -> None:
        """At the end of the session: drop the studies not started, wait for the one running, stop every study
        whose `stop` has not run."""
        self._executor.shutdown(wait=True, cancel_futures=True)
        for key, run in self._runs.items():
            if not run.future.cancelled():
                self.stop(_BUILDERS[key].build)

    def summary(self) -> list[str]:
        """One line per study: how long it took to build, and how long its tests waited for it."""
        lines = []
        for (path, fixture), run in self._runs.items():
            if run.started is None or run.finished is None:
                state = "not built" if run.future.cancelled() else "unfinished"
                lines.append(f"{path.name}::{fixture}: {state}")
                continue
            where = "in the background" if run.in_background else "in the foreground"
            lines.append(
                f"{path.name}::{fixture}: built {where} from {run.started - self._session_start:.0f} s to "
                f"{run.finished - self._session_start:.0f} s after the first test; its tests waited "
                f"{run.waited_s:.0f} s for it"
            )
        return lines


def _needed(items: Sequence[Any]) -> list[tuple[Path, str]]:
    """The registered studies that `items` (the selected tests, in order) use, in the order of their first test."""
    first: dict[tuple[Path, str], int] = {}
    for index, item in enumerate(items):
        path = Path(str(item.path)).resolve()
        for key in _BUILDERS:
            if key[0] == path and key[1] in getattr(item, "fixturenames", ()):
                first.setdefault(key, index)
    return sorted(first, key=first.__getitem__)


def _run_now(function: Callable[[], Any]) -> Future:
    """A finished Future of `function()`, run on this thread."""
    future: Future = Future()
    try:
        future.set_result(function())
    except BaseException as error:  # noqa: BLE001 - handed to the test that asked, as a background build's would be
        future.set_exception(error)
    return future
