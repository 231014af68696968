"""The profiling pass (fwbench.running.profiling, fwbench.scenarios.profile): after a group's timed launches, one more
process per profiled cell records where the step's time goes in the cell's result; cells outside the profiled batch
sizes have none, and a profiling process that fails leaves the timed result standing with the reason."""

from __future__ import annotations

import math

import pytest

from fwbench.study.grid import cells
from fwbench.trackers.op_profile import KEYS
from tests.conftest import run_tiny_cell

PROFILE = {"batch_sizes": [2], "steps": 2}


@pytest.fixture(scope="module")
def study(tiny_study):
    return tiny_study


def _run(study, cell, tmp_path, profile):
    return run_tiny_cell(study, cell, tmp_path, settings={"profile": profile})


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_a_profiled_cell_records_its_op_profile_after_its_timed_launches(study, tmp_path, framework):
    cell = next(c for c in cells(study[1]) if c.framework == framework and c.batch_size == 2)
    result = _run(study, cell, tmp_path, PROFILE)
    assert result["status"] == "ok", result.get("stderr_tail")
    profile = result["metrics"]["op_profile"]
    assert profile["status"] == "ok" and profile["steps"] == 2 and profile["platform"] == "cpu"
    assert [entry["category"] for entry in profile["categories"]] == list(KEYS)
    assert math.isclose(sum(entry["share"] for entry in profile["categories"]), 1.0, abs_tol=1e-9)
    assert profile["profiled_step_ms"] > 0 and profile["process_s"] > 0 and 0 < len(profile["top"]) <= 10
    # the timed numbers are the launches' alone: the profiling process adds no trial
    assert len(result["metrics"]["trials"]) == 1


def test_a_cell_outside_the_profiled_batch_sizes_has_no_profile(study, tmp_path):
    cell = next(c for c in cells(study[1]) if c.framework == "torch" and c.batch_size == 1)
    result = _run(study, cell, tmp_path, PROFILE)
    assert result["status"] == "ok" and "op_profile" not in result["metrics"]


def test_a_failed_profiling_process_leaves_the_timed_result_and_says_why(study, tmp_path, monkeypatch):
    """A profiling child that fails (here: 0 steps, which its own check refuses) is recorded as failed with its
    reason; the cell's timed result stands."""
    cell = next(c for c in cells(study[1]) if c.framework == "torch" and c.batch_size == 2)
    result = _run(study, cell, tmp_path, {"batch_sizes": [2], "steps": 0})
    assert result["status"] == "ok" and result["metrics"]["throughput_img_s"] > 0
    profile = result["metrics"]["op_profile"]
    assert profile["status"] == "failed" and profile["reason"], profile
