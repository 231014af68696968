"""Work that tests only read, built once per test run, and the processes that compute it.

Three kinds: whole-workflow studies (the workflow study, the two-fault study, the killed and resumed study, the
SLURM study, the README's one-cell command), fresh processes whose output a test judges (a large model's
training-step parity, the measuring processes' imports), and tests whose in-process work is heavy, run in a child
pytest (`in_a_child_process`: the MobileNetV3-Small trainers). A test module registers how to build one with
`@background.study(name)`, and its tests take the result from the session's `background_studies`
(tests/conftest.py), through a module fixture of that name, typically.

**Under pytest-xdist** (the default: `-n auto --dist loadgroup`, pyproject.toml; two workers on a 2-core VM) the
workers are the lanes.
`group_by_build` puts the tests that read one build into one xdist group, so one worker runs them all and builds it
once, in the foreground, when the first of them asks. A process that computes for a test while its worker waits
(a parity process, the trainer tests' child pytest) runs on that worker's share of the CPUs (`on_worker_cpus`), so
that it never oversubscribes the other worker's core.

**In a serial run** (`-n 0`), every registered build that a selected test needs is started when the run is
collected, one at a time on one thread, in the order their tests come, while the other tests run: the in-process
tests use about one of the machine's two cores. A build that no selected test needs is not started; one asked for
that was not started (a test selected by other means) is built then, in the foreground. `FWBENCH_TESTS_BACKGROUND=0`
builds every one that way, when its first test asks for it: to compare, or to read a failing build's traceback in
its own test. The terminal summary says when each was built and how long its tests waited for it.

A builder may run on another thread while tests change the process's environment (monkeypatch) and working
directory, so it gets its own copy of the environment, taken before the first test, and passes it to every process
it starts; it must not read os.environ or rely on the working directory.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# build(root, venv_bin, env) -> what the fixture returns; root is an empty directory of its own, venv_bin the
# test environment's bin/ (snakemake), env the environment for every process the build starts
Build = Callable[[Path, Path, dict[str, str]], Any]

# Each collected module's fast and slow tests, {module: (fast, slow)}, as the conftest's collection hook counted
# them (tests/conftest.py: tiers); a key here, which every importer of the conftest shares.
TIERS = pytest.StashKey[dict]()


@dataclass(frozen=True)
class _Builder:
    build: Build
    wanted: Callable[[Any], bool]  # whether a selected test needs the study
    stop: Callable[[Path], None] | None  # what to stop afterwards (a cluster's daemons), given the study's root


SWITCH = "FWBENCH_TESTS_BACKGROUND"  # "0": no study is built in the background


def _switched_on() -> bool:
    return os.environ.get(SWITCH, "1") != "0"


def _in_xdist_worker() -> bool:
    return "PYTEST_XDIST_WORKER" in os.environ


# Set in the environment of a process a test starts to compute for it: the CPUs it runs on, with as many threads
# (`pin_to_given_cpus`).
CPUS = "FWBENCH_TESTS_CPUS"


def worker_cpus() -> list[int] | None:
    """Under xdist, this worker's share of the CPUs this process may use (worker i of n gets every n-th, from the
    i-th: one core each with two workers on two); None in a serial run."""
    if not _in_xdist_worker():
        return None
    worker = int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw"))
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[worker % count :: count] or cpus


def on_worker_cpus(env: dict[str, str]) -> dict[str, str]:
    """`env` for a process that computes for a test while its worker waits: under xdist, on the worker's CPUs
    only (CPUS). On all cores, beside the other worker, it oversubscribes them: each large model's training-step
    parity took 2-4 times as long (EfficientNet-B0's 225 s against 70 s pinned), its thread pools waiting for
    threads the other worker had descheduled."""
    cpus = worker_cpus()
    child = {key: value for key, value in env.items() if not key.startswith("PYTEST_XDIST_")}
    return {**child, CPUS: ",".join(map(str, cpus))} if cpus else child


def pin_to_given_cpus() -> None:
    """In a process started with `on_worker_cpus`: run on its CPUs, with as many threads. Called first thing when
    tests/conftest.py is imported, before any framework starts its thread pools."""
    if os.environ.get(CPUS):
        from fwbench.running.threads import pin_threads

        cpus = [int(cpu) for cpu in os.environ[CPUS].split(",")]
        pin_threads(len(cpus), cpus)


def _in_background() -> bool:
    """Whether builds start in the background when the run is collected: neither under xdist, whose workers are
    already the lanes, nor when switched off."""
    return _switched_on() and not _in_xdist_worker()


# (the test module's file, the fixture's name) -> how to build the study
_BUILDERS: dict[tuple[Path, str], _Builder] = {}


def study(
    name: str,
    *,
    wanted: Callable[[Any], bool] | None = None,
    stop: Callable[[Path], None] | None = None,
    module: str | None = None,
) -> Callable[[Build], Build]:
    """Register the decorated `build(root, venv_bin, env)` as a study that the tests of the decorated function's
    module read, through `background_studies.result(build)` (their module fixture `name`, typically). It is started
    in the background if a selected test of the module uses fixture `name`, or if `wanted(item)` says a selected test
    needs it. `stop(root)`, if given, runs once after the study's tests (`Studies.stop`) or at the end of the
    session, whichever comes first, even when the build failed. `module`: the test module's file, where the
    decorated function is not defined in it."""

    def register(build: Build) -> Build:
        path = Path(module or inspect.getfile(build)).resolve()
        key = (path, name)

        def uses(item: Any) -> bool:
            if Path(str(item.path)).resolve() != path:
                return False
            return wanted(item) if wanted is not None else name in getattr(item, "fixturenames", ())

        _BUILDERS[key] = _Builder(build, uses, stop)
        build.background_key = key  # type: ignore[attr-defined]
        return build

    return register


@dataclass
class _Run:
    builder: _Builder  # looked up when started: tests/test_background.py swaps the registry for its own meanwhile
    root: Path
    future: Future
    in_background: bool
    started: float | None = None
    finished: float | None = None
    waited_s: float = 0.0
    stopped: bool = False  # stop runs once (Studies.stop, from the main thread only)


class Studies:
    """The session's background studies (see the module docstring)."""

    def __init__(self, items: Sequence[Any], mktemp: Callable[[str], Path], venv_bin: Path) -> None:
        self._mktemp = mktemp
        self.venv_bin = venv_bin
        # the environment every study's processes get: the test process's before any test changed it
        self.env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
        self._runs: dict[tuple[Path, str], _Run] = {}
        self._session_start = time.monotonic()
        # One build at a time, in the order their tests come. Measured on 2026-11-26 (full suite): so, 14 min 57 s;
        # with the tests that read a build moved to the end 15 min 41 s; with two builds at a time as well 16 min
        # 11 s. The more runs at once, the more CPU time the same work takes on two cores (1,407 s, 1,561 s and
        # 1,666 s): the tests' waits for the builds cost less than the contention.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="background-build")
        if _in_background():
            for key in _needed(items):
                self._start(key, self._executor.submit)

    def _start(self, key: tuple[Path, str], submit: Callable[..., Future]) -> _Run:
        run = _Run(_BUILDERS[key], self._mktemp(f"{key[1]}-"), Future(), submit is not _run_now)

        def build() -> Any:
            run.started = time.monotonic()
            try:
                return run.builder.build(run.root, self.venv_bin, dict(self.env))
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
        run = self._runs.get(build.background_key)  # type: ignore[attr-defined]
        if run is None or run.builder.stop is None or run.stopped:
            return
        run.stopped = True
        try:
            run.future.exception()  # wait; a failed build may have started what stop ends
        finally:
            run.builder.stop(run.root)

    def close(self) -> None:
        """At the end of the session: drop the studies not started, wait for the one running, stop every study
        whose `stop` has not run."""
        self._executor.shutdown(wait=True, cancel_futures=True)
        for run in self._runs.values():
            if not run.future.cancelled():
                self.stop(run.builder.build)

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
    """The registered studies that `items` (the selected tests, in order) need, in the order of their first test."""
    first: dict[tuple[Path, str], int] = {}
    for index, item in enumerate(items):
        for key, builder in _BUILDERS.items():
            if key not in first and builder.wanted(item):
                first[key] = index
    return sorted(first, key=first.__getitem__)


def grouping(config: Any) -> bool:
    """Whether this run schedules by xdist groups (`--dist loadgroup`): the controller's "dist" says so; an xdist
    worker gets dist "no" and loadgroup True."""
    return bool(config.getoption("loadgroup", False)) or config.getoption("dist", "no") == "loadgroup"


def group_by_build(items: Sequence[Any]) -> None:
    """Mark each test that reads a registered build with the xdist group of that build (its first, if several), so
    that under `--dist loadgroup` one worker runs all its readers, and builds it once."""
    for item in items:
        for (path, name), builder in _BUILDERS.items():
            if builder.wanted(item):
                group = f"{path.stem}.{name}"
                item.add_marker(pytest.mark.xdist_group(group))
                _suffix_node_id(item, group)
                break


def group_by_mark(items: Sequence[Any]) -> None:
    """Give each test marked `@pytest.mark.xdist_group(name)` in its file (not by `group_by_build`) the node id by
    which xdist groups it (`_suffix_node_id`): the tests that share a module fixture costing seconds (a real group of
    cells, a torch.compile warm-up) run in one worker, which builds it once, instead of one build in each worker."""
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        if mark is not None and "@" not in item.nodeid:
            _suffix_node_id(item, mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def _suffix_node_id(item: Any, group: str) -> None:
    """Give `item` the node id "<id>@<group>" by which xdist's scheduler groups it. xdist 3.8.0 writes that suffix
    to `item._nodeid`, which pytest 9.2 no longer reads (`Node.nodeid` is `str(item._id)`): every grouped test was
    scheduled alone, and both workers built the SLURM cluster at once (pytest-xdist issue 1386, its fix unreleased).
    So the suffix is set here, as that fix does, unless the item's id already carries it."""
    if not hasattr(item, "_id") or item.nodeid.endswith(f"@{group}"):
        return
    from _pytest.nodeid import coerce_node_id

    item._id = coerce_node_id(f"{item.nodeid}@{group}")


def _run_now(function: Callable[[], Any]) -> Future:
    """A finished Future of `function()`, run on this thread."""
    future: Future = Future()
    try:
        future.set_result(function())
    except BaseException as error:  # noqa: BLE001 - handed to the test that asked, as a background build's would be
        future.set_exception(error)
    return future


# --- tests run in a child pytest process ----------------------------------------------------------------------------

# Set in a child pytest (`in_a_child_process`): the JSON-lines file its conftest writes each test's outcome to. The
# child runs its tests itself.
CHILD_REPORTS = "FWBENCH_TESTS_CHILD_REPORTS"


def in_a_child_process(name: str, nodeids: Sequence[str]) -> Build:
    """Register a background build that runs the tests `nodeids` (in the caller's module) in a child pytest and
    hands back each one's outcome; each of those tests starts with `if ran_in_child(request, build): return`, which
    in this process waits for the child and passes, fails or skips as the test did there. For tests whose work is in
    this process and heavy (compiling a real model's trainers in three frameworks): in a serial run it overlaps the
    other tests; under xdist the worker waits for it, and it runs on the worker's CPUs (`on_worker_cpus`)."""
    wanted_ids = set(nodeids)

    def build(root: Path, venv_bin: Path, env: dict[str, str]) -> dict[str, list[dict]]:
        reports = root / "reports.jsonl"
        # serially (no xdist workers of its own): under xdist it runs on its worker's CPUs, in a serial run beside it
        command = [str(venv_bin / "python"), "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", *nodeids]
        repo = Path(__file__).resolve().parents[1]
        child_env = {**on_worker_cpus(env), CHILD_REPORTS: str(reports), SWITCH: "0"}
        proc = subprocess.run(command, cwd=repo, env=child_env, capture_output=True, text=True, timeout=1800)
        outcomes: dict[str, list[dict]] = {}
        if reports.exists():
            for line in reports.read_text().splitlines():
                report = json.loads(line)
                outcomes.setdefault(report["nodeid"], []).append(report)
        missing = wanted_ids - set(outcomes)
        assert not missing, (
            f"the child pytest (exit {proc.returncode}) reported nothing for {sorted(missing)}:\n"
            + proc.stdout[-3000:]
            + proc.stderr[-3000:]
        )
        return outcomes

    caller = inspect.stack()[1].filename
    return study(name, wanted=lambda item: item.nodeid in wanted_ids, module=caller)(build)


def ran_in_child(request: Any, build: Build) -> bool:
    """Whether the test of `request` ran in the child pytest of `build` (`in_a_child_process`), as its outcome
    there says: True when it passed there; fails or skips with the child's report otherwise. False (run it here)
    in the child itself, and where background builds are switched off."""
    if os.environ.get(CHILD_REPORTS) or not _switched_on():
        return False
    reports = request.getfixturevalue("background_studies").result(build)[_plain_id(request.node.nodeid)]
    for report in reports:
        if report["outcome"] == "failed":
            pytest.fail(f"in the child pytest ({report['when']}):\n{report['text']}", pytrace=False)
        if report["outcome"] == "skipped":
            pytest.skip(f"in the child pytest: {report['text']}")
    return True


def _plain_id(nodeid: str) -> str:
    """A node id without its xdist group suffix ("...::test[a]@group" -> "...::test[a]"), by xdist's rule."""
    return nodeid.rpartition("@")[0] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid


def write_child_report(report: Any) -> None:
    """In a child pytest, append `report`'s outcome to the file the parent reads (conftest's logreport hook)."""
    path = os.environ.get(CHILD_REPORTS)
    if path:
        line = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome, "text": report.longreprtext}
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
