"""The supervised cell runner: real cells produce schema-valid results; every kind of child failure becomes a
failed result with its reason, never a lost cell."""

from __future__ import annotations

import json
import sys

import jsonschema
import pytest

from fwbench.grid import cells
from fwbench.results import load_result, validate_result
from fwbench.runner import run_cell
from tests.conftest import prepare_tiny_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return prepare_tiny_study(tmp_path_factory.mktemp("study"))


def _run(study, cell, tmp_path, **kwargs):
    root, config, settings = study
    settings = {**settings, **kwargs.pop("settings", {})}
    return run_cell(
        cell,
        settings,
        data_dir=root / "data",
        weights_path=root / "weights.npz",
        num_classes=4,
        threads=1,
        out_path=tmp_path / "cell.json",
        log_path=tmp_path / "cell.log",
        **kwargs,
    )


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_real_cell_result_validates(study, tmp_path, framework):
    cell = next(c for c in cells(study[1]) if c.framework == framework and c.batch_size == 2)
    result = _run(study, cell, tmp_path)
    assert result["status"] == "ok", result.get("stderr_tail")
    on_disk = load_result(tmp_path / "cell.json")  # validates against the schema
    assert on_disk == json.loads(json.dumps(result))
    metrics = on_disk["metrics"]
    assert on_disk["cell"] == cell.as_dict() and on_disk["reason"] is None
    assert len(on_disk["samples_ms"]) == metrics["n_iters"] >= 3
    assert metrics["latency_ms"]["p50"] <= metrics["latency_ms"]["p99"]
    assert metrics["throughput_img_s"] == pytest.approx(2000.0 / metrics["latency_ms"]["p50"])
    assert metrics["rss_mb"]["peak"] >= metrics["rss_mb"]["before"] > 0
    framework_prov = on_disk["provenance"]["framework"]
    assert framework_prov["settings"]["intra_op_threads"] == 1
    assert framework_prov["threads"]["affinity"] and len(framework_prov["threads"]["affinity"]) == 1
    assert framework_prov["versions"][framework]
    assert on_disk["provenance"]["python"] and on_disk["provenance"]["cpu_model"] is not None
    assert on_disk["inputs"]["weights_sha256"] and on_disk["inputs"]["dataset_manifest_sha256"]
    if framework == "jax":
        assert metrics["compile_s"] > 0 and "compile_s" not in metrics["missing"]
    else:
        assert metrics["compile_s"] is None and "eager" in metrics["missing"]["compile_s"]
    assert "[fwbench.worker]" in (tmp_path / "cell.log").read_text()
    # what a CPU machine cannot measure is missing with a reason, never 0
    assert (
        metrics["energy"] is not None
        or "RAPL" in metrics["missing"]["energy"]
        or "powercap" in (metrics["missing"]["energy"])
    )
    assert "memory_stats" in metrics["missing"]["device_memory"] or "allocator" in metrics["missing"]["device_memory"]
    assert metrics["isolation"] is None and "CPU" in metrics["missing"]["isolation"]
    assert metrics["flags"] == {
        "noisy": metrics["flags"]["noisy"],
        "ci_not_reached": metrics["flags"]["ci_not_reached"],
        "recompiled": False,
        "other_gpu_processes": False,
    }
    assert metrics["rss_mb"]["samples"] >= 1 and metrics["rss_mb"]["peak"] >= metrics["rss_mb"]["loaded"]


def _failed(study, tmp_path, code, **kwargs):
    cell = cells(study[1])[0]
    result = _run(study, cell, tmp_path, worker_cmd=[sys.executable, "-c", code], **kwargs)
    assert result["status"] == "failed"
    assert result["metrics"] is None and result["samples_ms"] == []
    assert load_result(tmp_path / "cell.json")["reason"] == result["reason"]
    return result


def test_exception_in_child_becomes_failed_result(study, tmp_path):
    result = _failed(study, tmp_path, "print('loading model'); raise RuntimeError('out of device memory')")
    assert result["reason"] == "exception (exit code 1): RuntimeError: out of device memory"
    assert "loading model" in result["stderr_tail"] and "Traceback" in result["stderr_tail"]


def test_crash_signal_in_child_becomes_failed_result(study, tmp_path):
    code = "import os, signal, sys; print('about to crash', flush=True); os.kill(os.getpid(), signal.SIGSEGV)"
    result = _failed(study, tmp_path, code)
    assert result["reason"] == "crashed: killed by SIGSEGV"
    assert "about to crash" in result["stderr_tail"]


def test_hanging_child_is_killed_at_the_timeout(study, tmp_path):
    grandchild = "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])"
    code = f"import subprocess, sys, time; {grandchild}; time.sleep(60)"
    result = _failed(study, tmp_path, code, settings={"timeout_s": 1.5})
    assert result["reason"].startswith("timeout: no result after 1.5 s")
    assert result["provenance"]["duration_s"] < 30


def test_child_exiting_cleanly_without_result_is_a_failure(study, tmp_path):
    result = _failed(study, tmp_path, "pass")
    assert result["reason"].startswith("child exited 0 without a readable result")


def test_stderr_tail_is_bounded(study, tmp_path):
    result = _failed(study, tmp_path, "import sys; sys.stderr.write('x' * 100000); sys.exit(3)")
    assert len(result["stderr_tail"]) <= 4001 and result["reason"].startswith("exception (exit code 3)")


def test_schema_rejects_contract_breaks(study, tmp_path):
    cell = next(c for c in cells(study[1]) if c.framework == "torch")
    result = _run(study, cell, tmp_path)
    broken = json.loads(json.dumps(result))
    del broken["metrics"]["latency_ms"]["p95"]
    with pytest.raises(jsonschema.ValidationError, match="p95"):
        validate_result(broken)
    broken = json.loads(json.dumps(result))
    broken["status"] = "failed"
    with pytest.raises(jsonschema.ValidationError):
        validate_result(broken)  # a failed result needs a reason and no metrics
    broken = json.loads(json.dumps(result))
    broken["metrics"]["throughput_img_s"] = 0
    with pytest.raises(jsonschema.ValidationError, match="throughput_img_s"):
        validate_result(broken)


def test_trials_run_in_fresh_processes_and_report_their_spread(study, tmp_path):
    cell = next(c for c in cells(study[1]) if c.framework == "torch" and c.batch_size == 1)
    result = _run(study, cell, tmp_path, settings={"trials": 2})
    metrics = result["metrics"]
    assert result["status"] == "ok" and len(metrics["trials"]) == 2
    assert sum(t["n_iters"] for t in metrics["trials"]) == metrics["n_iters"] == len(result["samples_ms"])
    spread = metrics["trial_spread"]
    assert spread["throughput_min"] <= spread["throughput_median"] <= spread["throughput_max"]
    log = (tmp_path / "cell.log").read_text()
    assert "=== torch/eager: trial 1 of 2 (round 1, #1) ===" in log
    assert "=== torch/eager: trial 2 of 2 (round 2, #1) ===" in log


def test_a_failed_trial_fails_the_cell_with_its_number(study, tmp_path):
    result = _failed(study, tmp_path, "raise SystemExit(4)", settings={"trials": 3})
    assert result["reason"] == "trial 1 of 3: exception (exit code 4): no output"


def test_jax_compilation_cache_state_is_recorded(study, tmp_path):
    cell = next(c for c in cells(study[1]) if c.framework == "jax" and c.batch_size == 1)
    cache = tmp_path / "xla-cache"
    states = []
    for _ in range(2):
        result = _run(study, cell, tmp_path, settings={"jax_compilation_cache": str(cache)})
        states.append(result["provenance"]["framework"]["settings"]["compilation_cache"]["state"])
    assert states == ["cold", "warm"]
    default = _run(study, cell, tmp_path)
    assert default["provenance"]["framework"]["settings"]["compilation_cache"] == {"state": "disabled"}


# A runner whose only cell's child writes its pid and then sleeps: the scheduler's SIGTERM to the runner must end the
# child too (it runs in a session of its own, out of reach of signals to the runner's group), and write nothing.
SIGTERM_RUNNER = """
import sys
from pathlib import Path
from fwbench.grid import Cell
from fwbench.runner import run_cell
pid_file, out = Path(sys.argv[1]), Path(sys.argv[2])
child = "import os, pathlib, time; pathlib.Path(%r).write_text(str(os.getpid())); time.sleep(120)" % str(pid_file)
run_cell(Cell("inference", "torch", "small_cnn", "fp32", 1, 16), {"timeout_s": 300}, data_dir=out.parent,
         weights_path=out.parent / "w.npz", num_classes=4, threads=1, out_path=out,
         worker_cmd=[sys.executable, "-c", child])
"""


def test_sigterm_to_the_runner_ends_its_child_and_writes_nothing(tmp_path):
    import os
    import signal
    import subprocess
    import time

    pid_file, out = tmp_path / "child.pid", tmp_path / "cell.json"
    runner = subprocess.Popen([sys.executable, "-c", SIGTERM_RUNNER, str(pid_file), str(out)])
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and runner.poll() is None, "the child never started"
        time.sleep(0.05)
    child = int(pid_file.read_text())
    runner.send_signal(signal.SIGTERM)
    assert runner.wait(timeout=30) == 128 + signal.SIGTERM
    deadline = time.monotonic() + 10
    while True:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "the measuring child outlived its runner"
        time.sleep(0.05)
    assert not out.exists()
