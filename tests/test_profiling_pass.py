"""The profiling pass (fwbench.scenarios.profiled, fwbench.running.profiling): after a group's timed blocks, each
profiled cell records where the step's time goes. Its warm worker profiles it at the end of the group's last launch
(no process of its own); a torch.compile cell on the CPU gets a process of its own (its kernel profile needs another
compile). Cells outside the profiled batch sizes have none; a pass that fails, or a worker that crashes while
profiling, leaves the timed result standing with the reason."""

from __future__ import annotations

import dataclasses
import math

import pytest

from fwbench.analysis.time.study_time import process_rows
from fwbench.running.faults import INJECT_FAULT_ENV
from fwbench.scenarios.profiled import WHERE_IN_WORKER
from fwbench.study.grid import cells
from fwbench.trackers.op_profile import KEYS
from tests.conftest import READS_TINY_GROUP, TINY_GROUP_PROFILE, run_tiny_cell

PROFILE = {"batch_sizes": [2], "steps": 2}


@pytest.fixture(scope="module")
def study(tiny_study):
    return tiny_study


def _run(study, cell, tmp_path, profile):
    return run_tiny_cell(study, cell, tmp_path, settings={"profile": profile})


def _check_record(profile):
    assert profile["status"] == "ok" and profile["steps"] == 2 and profile["platform"] == "cpu"
    assert [entry["category"] for entry in profile["categories"]] == list(KEYS)
    assert math.isclose(sum(entry["share"] for entry in profile["categories"]), 1.0, abs_tol=1e-9)
    assert profile["profiled_step_ms"] > 0 and 0 < len(profile["top"]) <= 10


def _result_of(tiny_group, framework, batch_size):
    group, results = tiny_group["cells"], tiny_group["results"]
    (result,) = (
        r for c, r in zip(group, results, strict=True) if (c.framework, c.batch_size) == (framework, batch_size)
    )
    return result


@READS_TINY_GROUP
@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_a_profiled_cell_is_profiled_by_its_warm_worker_after_the_blocks(tiny_group, framework):
    result = _result_of(tiny_group, framework, 2)
    assert result["status"] == "ok", result.get("stderr_tail")
    profile = result["metrics"]["op_profile"]
    _check_record(profile)
    assert profile["where"] == WHERE_IN_WORKER and "process_s" not in profile
    assert profile["phases_s"]["profile_s"] > 0
    # the timed numbers are the launches' alone: the pass adds no trial, and its time is its worker's, apart
    first, last = result["metrics"]["trials"]
    assert last["phases_s"]["profiling_s"] >= profile["phases_s"]["profile_s"]


@READS_TINY_GROUP
def test_only_the_last_launch_profiles_and_the_study_time_counts_it_as_profiling(tiny_group):
    """Two launches of a group of two frameworks x two batch sizes (the session's tiny group, tests/conftest.py):
    the workers of the last launch profile their batch-2 cells, the first launch's do not; the study's time table
    counts the pass as profiling, not as the processes' rest or their overhead."""
    group, results = tiny_group["cells"], tiny_group["results"]
    assert len(results) == len(group) == 4 and TINY_GROUP_PROFILE == PROFILE
    for cell, result in zip(group, results, strict=True):
        assert result["status"] == "ok", result.get("failure")
        first, last = result["metrics"]["trials"]
        assert "profiling_s" not in (first["phases_s"] or {})
        if cell.batch_size == 2:
            assert result["metrics"]["op_profile"]["where"] == WHERE_IN_WORKER
            assert last["phases_s"]["profiling_s"] > 0
        else:
            assert "op_profile" not in result["metrics"]
    rows = process_rows(results)
    passes = sum(r["metrics"]["trials"][-1]["phases_s"]["profiling_s"] for r in results if r["cell"]["batch_size"] == 2)
    assert math.isclose(rows["profiling_in_worker"].sum(), passes)
    lead = rows[~rows["shared_process"] & (rows["trial"] == 2)]
    assert len(lead) == 2 and (lead["profiling_in_worker"] > 0).all()  # one worker per framework: both profiled
    parts = ["timed", "warmup", "compile", "evaluation", "startup", "load", "profiling_in_worker"]
    assert ((lead["wall_s"] - lead[parts].sum(axis=1)).clip(lower=0) - lead["process_other"]).abs().max() < 1e-9
    overhead = lead["wall_s"] - lead["timed"] - lead["compile"] - lead["profiling_in_worker"]
    assert (overhead - lead["overhead"]).abs().max() < 1e-9


@pytest.mark.slow  # two cold torch.compile runs (the cell's, and the pass's with kernel profiling): ~50 s
def test_a_torch_compile_cell_on_the_cpu_is_profiled_in_a_process_of_its_own(study, tmp_path):
    cell = next(c for c in cells(study[1]) if c.framework == "torch" and c.batch_size == 2)
    result = _run(study, dataclasses.replace(cell, mode="compile"), tmp_path, PROFILE)
    assert result["status"] == "ok", result.get("stderr_tail")
    profile = result["metrics"]["op_profile"]
    _check_record(profile)
    assert profile["process_s"] > 0 and "where" not in profile
    assert "profiling_s" not in result["metrics"]["trials"][-1]["phases_s"]


@READS_TINY_GROUP
@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_a_cell_outside_the_profiled_batch_sizes_has_no_profile(tiny_group, framework):
    """Batch size 1, served by the same warm worker as the profiled batch size 2, is not profiled."""
    result = _result_of(tiny_group, framework, 1)
    assert result["status"] == "ok" and "op_profile" not in result["metrics"]


def test_a_failed_profiling_pass_leaves_the_timed_result_and_says_why(study, tmp_path):
    """A pass that fails (here: 0 steps, which profile_steps refuses) is recorded as failed with its reason; the
    cell's timed result stands."""
    cell = next(c for c in cells(study[1]) if c.framework == "torch" and c.batch_size == 2)
    result = _run(study, cell, tmp_path, {"batch_sizes": [2], "steps": 0})
    assert result["status"] == "ok" and result["metrics"]["throughput_img_s"] > 0
    profile = result["metrics"]["op_profile"]
    assert profile["status"] == "failed" and "steps must be >= 1" in profile["reason"], profile


def test_a_worker_that_crashes_while_profiling_keeps_its_timed_result(study, tmp_path, monkeypatch):
    """The worker wrote its timed result, then died in native code in the profiler: the cell is measured (its
    throughput and samples as timed), its profile failed with the crash's reason, and nothing is a zero."""
    cell = next(c for c in cells(study[1]) if c.framework == "jax" and c.batch_size == 2)
    monkeypatch.setenv(INJECT_FAULT_ENV, f"profiler_crash@{cell.label()}")
    result = _run(study, cell, tmp_path, PROFILE)
    assert result["status"] == "ok", result.get("failure")
    assert result["metrics"]["throughput_img_s"] > 0 and result["samples_ms"]
    profile = result["metrics"]["op_profile"]
    assert profile["status"] == "failed" and profile["where"] == WHERE_IN_WORKER, profile
    assert "the worker ended while profiling, after writing its timed result" in profile["reason"]
    assert profile["kind"] == "crash", profile
