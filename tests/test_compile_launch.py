"""The compile launch (fwbench.running.compile_launch): where a cell's launches share its compile cache, the cold
compile runs in a launch of its own before the measured ones, so that every measured launch starts warm; the cell's
compile time is the cold one, nothing that launch timed is pooled, and with the cache off no such launch runs."""

from __future__ import annotations

import copy
import sys

import pytest

from fwbench.analysis.time.study_time import process_rows
from fwbench.running.runner import run_group
from fwbench.study.grid import Cell

# A warm worker that compiles nothing: it finds its cell's launch cache (FWBENCH_LAUNCH_CACHE) cold or warm as a
# framework's persistent cache would, records the state, "compiles" for 1 s of record cold and 0.1 s warm, and leaves
# an entry behind; its bursts are the blocks protocol's own. FAIL (framework, start) exits in that start.
FAKE_WORKER = r"""
import json, os, sys, time
from fwbench.backends import launch_cache
from fwbench.scenarios import blocks
spec = json.load(open(sys.argv[1]))
cell = spec["cell"]
with open(LOG, "a") as handle:
    handle.write(cell["framework"] + "\n")
start = open(LOG).read().split().count(cell["framework"])
if (cell["framework"], start) == FAIL:
    sys.exit(7)
root = os.environ.get(launch_cache.LAUNCH_CACHE_ENV)
cache = {"state": "disabled"}
if root:
    directory = os.path.join(root, "fake")
    os.makedirs(directory, exist_ok=True)
    cache = launch_cache.describe(directory)
    open(os.path.join(directory, "program"), "w").write("compiled")
compile_s = 0.1 if cache["state"] == "warm" else 1.0
session = blocks.session(blocks.BurstPlan.from_settings(spec["settings"]))
measured = session.measure({"forward": (lambda i: time.sleep(0.0005), lambda _: None)})
timed = blocks.summarise(measured, "forward", cell["batch_size"])
metrics = {
    "throughput_img_s": timed["throughput_img_s"], "throughput_img_s_total": 1.0, "n_iters": len(timed["samples_ms"]),
    "latency_ms": {"p50": 1.0, "p95": 1.0, "p99": 1.0, "mean": 1.0}, "ci95": timed["ci95"],
    "blocks": timed["blocks"], "flags": {"noisy": False}, "timed_s": timed["timed_s"], "stop_reason": "blocks",
    "compile_s": compile_s, "compile_breakdown_s": {"compile": compile_s}, "first_call_s": compile_s / 10,
    "rss_mb": {"before": 1.0, "peak": 2.0}, "missing": timed["missing"],
    "phases_s": {"compile_s": compile_s, "first_call_s": compile_s / 10, "timed_s": timed["timed_s"]},
}
framework = {"name": cell["framework"], "settings": {"compilation_cache": cache}}
json.dump({"metrics": metrics, "samples_ms": timed["samples_ms"], "framework": framework}, open(sys.argv[2], "w"))
"""


def _group(
    tmp_path, *, launch_cache=True, trials=2, blocks=2, fail=None, frameworks=("torch", "jax"), torch_mode="compile"
):
    log = tmp_path / "starts.txt"
    script = tmp_path / "worker.py"
    script.write_text(f"LOG = {str(log)!r}\nFAIL = {fail!r}\n" + FAKE_WORKER)
    cells = [
        Cell("inference", framework, "small_cnn", "fp32", 4, 16, torch_mode if framework == "torch" else "")
        for framework in frameworks
    ]
    settings = {
        "timeout_s": 30,
        "trials": trials,
        "blocks": blocks,
        "burst_s": 0.003,
        "burst_discard": 1,
        "compile": {"launch_cache": launch_cache},
    }
    results = run_group(
        cells,
        settings,
        data_dir=tmp_path / "data",
        weights_path=tmp_path / "w.npz",
        num_classes=4,
        threads=1,
        out_paths=[tmp_path / f"{framework}.json" for framework in frameworks],
        log_path=tmp_path / "group.log",
        worker_cmd=[sys.executable, str(script)],
    )
    return results, log.read_text().split()


@pytest.fixture(scope="module")
def with_cache(tmp_path_factory):
    """A group of two cells in two launches with the launch cache: (results, the workers' starts)."""
    return _group(tmp_path_factory.mktemp("with-cache"), trials=2, blocks=2)


@pytest.fixture(scope="module")
def without_cache(tmp_path_factory):
    return _group(tmp_path_factory.mktemp("without-cache"), launch_cache=False, trials=2)


# the tests that read `with_cache` or `without_cache` (the ledger's test reads both): one worker runs them, and each
# group once (tests/background.py: group_by_mark)
CACHE_GROUPS = pytest.mark.xdist_group("test_compile_launch.cache_groups")


@CACHE_GROUPS
def test_a_compile_launch_fills_the_cache_first_and_every_measured_launch_starts_warm(with_cache):
    results, starts = with_cache
    assert [r["status"] for r in results] == ["ok", "ok"], [r["reason"] for r in results]
    assert starts.count("torch") == starts.count("jax") == 3, "a compile launch and two measured launches"
    group = results[0]["provenance"]["group"]
    compiled = group["blocks"]["compile_launch"]
    assert compiled["order"] == group["order"]["rows"][0] and compiled["iterations_per_step"] == 1
    assert len(group["blocks"]["ran"]) == 2 * 2 and group["rounds"] == 2, "the measured launches' blocks only"
    for result in results:
        metrics = result["metrics"]
        launch = metrics["compile_launch"]
        # the compile launch found the cache cold and gives the cell's compile times
        assert launch["compilation_cache"]["state"] == "cold"
        assert metrics["compile_s"] == launch["compile_s"] == 1.0 and metrics["first_call_s"] == 0.1
        assert metrics["compile_breakdown_s"] == {"compile": 1.0}
        # every measured launch found it warm, and keeps its own (warm) compile time
        trials = metrics["trials"]
        assert [t["round"] for t in trials] == [1, 2]
        assert [t["compilation_cache"]["state"] for t in trials] == ["warm", "warm"]
        assert [t["compile_s"] for t in trials] == [0.1, 0.1]
        # nothing the compile launch timed is pooled: 2 launches x 2 blocks of bursts, their samples only
        blocks = metrics["blocks"]
        assert blocks["bursts"] == 4 and blocks["launches"] == 2 and blocks["burst_blocks"] == [0, 1, 2, 3]
        assert len(result["samples_ms"]) == metrics["n_iters"] == sum(t["n_iters"] for t in trials)
        assert metrics["ci95"]["trials"] == 2
        # its wall time counts in the cell's (and the study's, as a process of its own: trial 0)
        assert result["provenance"]["duration_s"] >= launch["duration_s"] + sum(t["duration_s"] for t in trials)
    rows = process_rows(results)
    assert sorted(rows["trial"]) == [0, 0, 1, 1, 2, 2]
    assert rows.loc[rows["trial"] == 0, "compile"].tolist() == pytest.approx([1.1, 1.1])


@CACHE_GROUPS
def test_without_the_launch_cache_no_compile_launch_runs(without_cache):
    results, starts = without_cache
    assert starts.count("torch") == starts.count("jax") == 2
    for result in results:
        metrics = result["metrics"]
        assert "compile_launch" not in metrics and "compile_launch" not in result["provenance"]["group"]["blocks"]
        assert [t["compilation_cache"]["state"] for t in metrics["trials"]] == ["disabled", "disabled"]
        assert metrics["compile_s"] == 1.0


def test_a_variant_that_compiles_nothing_has_no_compile_launch(tmp_path):
    """Eager PyTorch (and NumPy) keep no programs in a launch cache: the compile launch skips their workers, and
    their cells' first calls are their first measured launch's."""
    results, starts = _group(tmp_path, trials=2, torch_mode="eager")
    assert starts.count("torch") == 2 and starts.count("jax") == 3
    compiled = results[0]["provenance"]["group"]["blocks"]["compile_launch"]
    assert compiled["order"] == ["jax/jit"] and compiled["without_a_cache"] == ["torch/eager"]
    assert "compile_launch" not in results[0]["metrics"] and "compile_launch" in results[1]["metrics"]


def test_one_launch_needs_no_compile_launch(tmp_path):
    results, starts = _group(tmp_path, trials=1)
    assert starts.count("torch") == starts.count("jax") == 1
    assert all("compile_launch" not in r["metrics"] for r in results)


def test_a_worker_that_fails_its_compile_launch_fails_its_cell_only(tmp_path):
    results, starts = _group(tmp_path, trials=2, fail=("jax", 1))
    torch_, jax_ = results
    assert torch_["status"] == "ok" and len(torch_["metrics"]["trials"]) == 2
    assert jax_["status"] == "failed" and jax_["failure"]["trial"] is None
    assert jax_["reason"].startswith("compile launch (before trial 1 of 2): exception (exit code 7)")
    assert starts.count("jax") == 1, "a cell that failed its compile launch leaves the measured launches"
    assert all(row == ["torch/compile"] for row in torch_["provenance"]["group"]["blocks"]["ran"])


@CACHE_GROUPS
def test_the_ledger_holds_on_a_compile_launch_and_names_a_cell_whose_launches_found_different_states(
    with_cache, without_cache
):
    """The runner's own records hold (every measured launch warm); the negative control, a cell whose launch 1
    found the cache cold and launch 2 warm (the order-confounded design this launch replaces), does not, and is
    named with each launch's state."""
    from fwbench.analysis.fairness.cache_checks import CONTROL, launch_cache_row
    from fwbench.analysis.fairness.rows import HELD, NOT_HELD

    results, _ = with_cache
    held = launch_cache_row(results)
    assert held["control"] == CONTROL and held["status"] == HELD, held
    assert held["measured"] == "2 of 2 cells: one state in every measured launch (warm 2)"
    confounded = copy.deepcopy(results)
    jax_ = confounded[1]["metrics"]
    del jax_["compile_launch"]
    jax_["trials"] = [dict(jax_["trials"][0], compilation_cache={"state": "cold"}), jax_["trials"][1]]
    status, measured, where = (launch_cache_row(confounded)[k] for k in ("status", "measured", "where"))
    assert status == NOT_HELD and measured == "1 of 2 cells: one state in every measured launch (warm 1)"
    assert where == "inference jax jit small_cnn fp32 bs4 (launch 1 cold, launch 2 warm)"
    # every launch compiling cold (no launch cache) is one state too; one launch, or no record, is not checked
    off, _ = without_cache
    assert launch_cache_row(off)["status"] == HELD and launch_cache_row(off)["measured"].endswith("(disabled 2)")
    for result in confounded:
        for trial in result["metrics"]["trials"]:
            trial.pop("compilation_cache")
    assert launch_cache_row(confounded) is None


def test_real_workers_compile_cold_in_the_compile_launch_and_load_warm_in_every_measured_one(tiny_study, tmp_path):
    """JAX's persistent cache through the runner and real workers (the tiny study): the compile launch finds the
    cell's cache cold and every measured launch warm; eager PyTorch compiles nothing, has no compile launch and says
    so in every measured launch."""
    from fwbench.analysis.fairness.cache_checks import launch_cache_row
    from fwbench.analysis.fairness.rows import HELD

    root, config, base = tiny_study
    cells = [Cell("inference", framework, "small_cnn", "fp32", 1, 16) for framework in ("torch", "jax")]
    assert config["compile"]["launch_cache"] is True, "the default"
    results = run_group(
        cells,
        {**base, "trials": 2, "blocks": 2, "compile": config["compile"], "autotune": config["autotune"]},
        data_dir=root / "data",
        weights_path=root / "weights.npz",
        num_classes=4,
        threads=1,
        out_paths=[tmp_path / f"{c.framework}.json" for c in cells],
        log_path=tmp_path / "group.log",
    )
    assert [r["status"] for r in results] == ["ok", "ok"], [r["reason"] for r in results]
    assert (tmp_path / "group.log").read_text().count("[fwbench.running.worker]") == 2 * 2 + 1
    torch_, jax_ = (r["metrics"] for r in results)
    assert jax_["compile_launch"]["compilation_cache"]["state"] == "cold"
    assert [t["compilation_cache"]["state"] for t in jax_["trials"]] == ["warm", "warm"]
    assert jax_["compile_s"] == jax_["compile_launch"]["compile_s"] > 0
    assert torch_["compile_s"] is None and "compile_launch" not in torch_
    assert torch_["first_call_s"] == torch_["trials"][0]["first_call_s"], "its first measured launch's"
    assert [t["compilation_cache"]["state"] for t in torch_["trials"]] == ["not applicable (eager)"] * 2
    assert jax_["blocks"]["bursts"] == torch_["blocks"]["bursts"] == 2 * 2, "the compile launch's step not pooled"
    assert launch_cache_row(results)["status"] == HELD


def test_the_first_gpu_run_from_before_the_compile_launch_is_named_by_the_ledger():
    """The real negative control: the H200 smoke study (docs/runs/2026-11-27-gpu-smoke-h200) ran before the compile
    launch, so each compiled cell's launch 1 compiled cold and launch 2 loaded its cache; eager PyTorch's launches
    compiled nothing and agree."""
    import io
    import json
    import tarfile

    from fwbench.analysis.fairness.cache_checks import launch_cache_row
    from fwbench.analysis.fairness.rows import NOT_HELD
    from tests.conftest import REPO

    with tarfile.open(REPO / "docs" / "runs" / "2026-11-27-gpu-smoke-h200" / "study.tar.xz") as archive:
        results = [
            json.load(io.TextIOWrapper(archive.extractfile(member)))
            for member in archive.getmembers()
            if "/cells/inference/" in member.name and member.name.endswith(".json")
        ]
    row = launch_cache_row(results)
    assert row["status"] == NOT_HELD
    assert row["measured"] == "3 of 9 cells: one state in every measured launch (not applicable (eager) 3)"
    assert row["where"].startswith("inference jax jit efficientnet_b0 default bs128 (launch 1 cold, launch 2 warm)")
    assert row["where"].endswith("and 2 more")
