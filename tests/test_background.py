"""tests/background.py, the harness that builds what tests only read while other tests run: which builds start, in
what order, what a test gets back (a build's exception included), and that a build's `stop` runs once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import background

HERE = Path(__file__).resolve()


def _item(name: str, *fixtures: str) -> SimpleNamespace:
    marks = []
    return SimpleNamespace(
        path=HERE,
        nodeid=f"tests/test_background.py::{name}",
        fixturenames=fixtures,
        marks=marks,
        add_marker=marks.append,
    )


@pytest.fixture
def builds(monkeypatch):
    """Three builds registered for this module only (the session's registry restored after)."""
    monkeypatch.setattr(background, "_BUILDERS", {})
    monkeypatch.delenv(background.SWITCH, raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this test may run in one: a serial run's harness
    calls, stopped = [], []

    @background.study("first")
    def first(root, venv_bin, env):
        calls.append(("first", env["PATH"].split(":")[0]))
        return root

    @background.study("failing", stop=stopped.append)
    def failing(root, venv_bin, env):
        calls.append(("failing", None))
        raise RuntimeError("the study failed")

    @background.study("unused", wanted=lambda item: item.nodeid.endswith("::never"))
    def unused(root, venv_bin, env):
        calls.append(("unused", None))
        return "built on demand"

    return SimpleNamespace(first=first, failing=failing, unused=unused, calls=calls, stopped=stopped)


def test_the_builds_selected_tests_need_start_in_their_order_and_hand_back_results(builds, tmp_path_factory):
    items = [_item("a"), _item("b", "failing"), _item("c", "first"), _item("d", "first", "failing")]
    studies = background.Studies(items, tmp_path_factory.mktemp, Path("/venv/bin"))
    root = studies.result(builds.first)
    assert root.is_dir() and root.name.startswith("first-")
    with pytest.raises(RuntimeError, match="the study failed"):
        studies.result(builds.failing)
    # in the order of their first tests; the builder's environment has the venv first on PATH
    assert builds.calls == [("failing", None), ("first", "/venv/bin")]
    # a build no selected test named is built when a test asks for it, in the foreground
    assert studies.result(builds.unused) == "built on demand"
    studies.stop(builds.failing)
    studies.close()
    assert len(builds.stopped) == 1, "stop runs once, after the build, even a failed one"
    assert any("in the foreground" in line for line in studies.summary())


def test_switched_off_nothing_starts_before_a_test_asks(builds, tmp_path_factory, monkeypatch):
    monkeypatch.setenv(background.SWITCH, "0")
    studies = background.Studies([_item("c", "first")], tmp_path_factory.mktemp, Path("/venv/bin"))
    assert builds.calls == []
    assert studies.result(builds.first).is_dir() and builds.calls == [("first", "/venv/bin")]
    studies.close()


def test_in_an_xdist_worker_builds_wait_for_their_first_test_and_their_readers_share_a_group(
    builds, tmp_path_factory, monkeypatch
):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    items = [_item("a"), _item("b", "failing"), _item("c", "first"), _item("d", "first", "failing"), _item("never")]
    background.group_by_build(items)
    groups = [[mark.args[0] for mark in item.marks if mark.name == "xdist_group"] for item in items]
    # one group per build, the first a test reads; a test that reads none is in none
    assert groups == [
        [],
        ["test_background.failing"],
        ["test_background.first"],
        ["test_background.first"],
        ["test_background.unused"],
    ]
    studies = background.Studies(items, tmp_path_factory.mktemp, Path("/venv/bin"))
    assert builds.calls == [], "the worker is a lane itself: nothing is built beside its tests"
    assert studies.result(builds.first).is_dir() and builds.calls == [("first", "/venv/bin")]
    studies.close()


@background.study("registered_build")
def _registered_build(root, venv_bin, env):
    """A build registered as every other (module scope, a fixture of its name): this run's wiring of the harness."""
    return root


@pytest.fixture(scope="module")
def registered_build(background_studies):
    return background_studies.result(_registered_build)


def test_this_runs_wiring_puts_a_builds_readers_in_its_xdist_group(registered_build, request):
    """In this very run: under `--dist loadgroup` (pyproject.toml's default) a test that reads a build carries the
    build's group in its node id, so one worker runs all its readers; run serially, it carries none."""
    assert registered_build.is_dir()
    grouped = background.grouping(request.config)
    assert request.node.nodeid.endswith("@test_background.registered_build") == grouped, request.node.nodeid


@pytest.mark.xdist_group("test_background.marked")
def test_this_runs_wiring_keeps_a_test_marked_with_an_xdist_group_in_it(request):
    """A test marked `xdist_group` in its file (tests sharing a costly module fixture) carries the group in its node
    id under `--dist loadgroup`, which xdist 3.8.0 alone fails to give it (group_by_mark); run serially, none."""
    grouped = background.grouping(request.config)
    assert request.node.nodeid.endswith("@test_background.marked") == grouped, request.node.nodeid


def test_under_xdist_a_compute_process_gets_its_workers_share_of_the_cpus(monkeypatch):
    monkeypatch.setattr(background.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert background.worker_cpus() is None
    assert background.on_worker_cpus({"PATH": "/bin"}) == {"PATH": "/bin"}, "a serial run's processes use every CPU"
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    assert background.worker_cpus() == [1, 3]
    env = background.on_worker_cpus({"PATH": "/bin", "PYTEST_XDIST_WORKER": "gw1"})
    assert env == {"PATH": "/bin", background.CPUS: "1,3"}, "and is no xdist worker itself"


def test_a_process_importing_the_conftest_with_its_cpus_is_pinned_to_them(tmp_path):
    """What a large model's parity process and the trainer tests' child pytest do first (tests/conftest.py)."""
    script = (
        "import os, json, tests.conftest\n"
        "print(json.dumps([sorted(os.sched_getaffinity(0)), os.environ['OMP_NUM_THREADS']]))"
    )
    cpu = min(os.sched_getaffinity(0))
    env = {**os.environ, background.CPUS: str(cpu)}
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=HERE.parents[1], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout.splitlines()[-1]) == [[cpu], "1"]


def test_a_node_id_loses_only_its_group_suffix():
    assert background._plain_id("tests/t.py::test[a]@t.build") == "tests/t.py::test[a]"
    assert background._plain_id("tests/t.py::test[user@host]") == "tests/t.py::test[user@host]"
    assert background._plain_id("tests/t.py::test@t.build") == "tests/t.py::test"


def test_every_module_keeps_a_fast_test(request):
    """The fast tier checks every test module's logic (issue 57): FULL_SUITE_ONLY, and a slow mark in a file, may move
    a module's expensive tests to the full suite but not its last fast one, except the whole-workflow modules named
    in MODULES_WITHOUT_A_FAST_TEST. Judged on this run's own collection, when it collected every module."""
    from tests.conftest import MODULES_WITHOUT_A_FAST_TEST, tiers

    def marked(nodeid, slow):
        return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: object() if slow else None)

    fake = [marked("tests/test_a.py::x", False), marked("tests/test_a.py::y", True), marked("tests/test_b.py::z", True)]
    assert tiers(fake) == {"tests/test_a.py": (1, 1), "tests/test_b.py": (0, 1)}
    counted = request.config.stash[background.TIERS]
    modules = {f"tests/{path.name}" for path in HERE.parent.glob("test_*.py")}
    if set(counted) != modules:
        pytest.skip(f"this run collected {len(counted)} of the {len(modules)} test modules")
    without = sorted(module for module, (fast, _) in counted.items() if not fast)
    assert without == sorted(MODULES_WITHOUT_A_FAST_TEST), f"modules without a fast test: {without}"


def test_the_worker_count_fits_the_cores_and_the_memory():
    """`-n auto` (pyproject.toml) starts a worker per core while the memory holds WORKER_MEMORY_GIB for each: two on
    this project's 2-core, 24 GB VMs (23.5 GiB to the kernel), one on a single core, not sixteen in 32 GiB."""
    from tests.conftest import WORKER_MEMORY_GIB, xdist_workers

    assert xdist_workers(2, 23.5) == 2
    assert xdist_workers(1, 23.5) == 1
    assert xdist_workers(16, 32) == 3
    assert xdist_workers(16, 125.7) == 12
    assert xdist_workers(8, WORKER_MEMORY_GIB - 1) == 1, "at least one"
