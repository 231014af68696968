"""The supervised cell runner: real cells produce schema-valid results; every kind of child failure becomes a
failed result with its reason, never a lost cell."""

from __future__ import annotations

import json
import math
import sys

import jsonschema
import pytest

from fwbench.results import load_result, validate_result
from fwbench.running import order as trial_order
from fwbench.study.grid import cells
from tests.conftest import run_tiny_cell


@pytest.fixture(scope="module")
def study(tiny_study):
    return tiny_study


def _run(study, cell, tmp_path, **kwargs):
    return run_tiny_cell(study, cell, tmp_path, **kwargs)


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
    # the cell's rate is the geometric mean of its bursts' rates; the median step's is kept beside it
    blocks = metrics["blocks"]
    (iters,) = blocks["iters_per_burst"]  # one launch
    assert blocks["bursts"] == 2 and blocks["burst_blocks"] == [0, 1] and iters >= 1 and blocks["launches"] == 1
    rates = [2000.0 * iters / sum(chunk) for chunk in _bursts(on_disk["samples_ms"], iters)]
    assert blocks["burst_rates"] == pytest.approx(rates)
    assert metrics["throughput_img_s"] == pytest.approx(math.exp(sum(map(math.log, rates)) / len(rates)))
    assert metrics["throughput_img_s_median_step"] == pytest.approx(2000.0 / metrics["latency_ms"]["p50"])
    assert blocks["cpu_per_wall"] > 0 and blocks["steal_flagged"] in (0, 1, 2) and metrics["stop_reason"] == "blocks"
    assert blocks["hardware_counters"] is not None or "perf_event_open" in metrics["missing"]["hardware_counters"]
    assert metrics["rss_mb"]["peak"] >= metrics["rss_mb"]["before"] > 0
    framework_prov = on_disk["provenance"]["framework"]
    assert framework_prov["settings"]["intra_op_threads"] == 1
    assert framework_prov["threads"]["affinity"] and len(framework_prov["threads"]["affinity"]) == 1
    assert framework_prov["threads"]["waiting"] == {"OPENBLAS_THREAD_TIMEOUT": "4"}
    assert framework_prov["versions"][framework]
    assert on_disk["provenance"]["python"] and on_disk["provenance"]["cpu_model"] is not None
    assert on_disk["inputs"]["weights_sha256"] and on_disk["inputs"]["dataset_manifest_sha256"]
    if framework == "jax":
        assert metrics["compile_s"] > 0 and "compile_s" not in metrics["missing"]
        # no jax_compilation_cache setting: no cache (test_jax_compilation_cache_state_is_recorded has one)
        assert framework_prov["settings"]["compilation_cache"] == {"state": "disabled"}
    else:
        assert metrics["compile_s"] is None and "eager" in metrics["missing"]["compile_s"]
    assert "[fwbench.running.worker]" in (tmp_path / "cell.log").read_text()
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
        "steal": metrics["blocks"]["steal_flagged"] > 0,
        "recompiled": False,
        "other_gpu_processes": False,
    }
    assert metrics["rss_mb"]["samples"] >= 1 and metrics["rss_mb"]["peak"] >= metrics["rss_mb"]["loaded"]


def _bursts(samples_ms, size):
    return [samples_ms[i : i + size] for i in range(0, len(samples_ms), size)]


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


@pytest.fixture(scope="module")
def two_trials(study, tmp_path_factory):
    """A real torch cell in two launches, run once for the tests that read it (the TWO_TRIALS xdist group, so one
    worker runs them, tests/background.py: group_by_mark): (result, the directory of its cell.json and cell.log)."""
    cell = next(c for c in cells(study[1]) if c.framework == "torch" and c.batch_size == 1)
    root = tmp_path_factory.mktemp("two-trials")
    return _run(study, cell, root, settings={"trials": 2}), root


TWO_TRIALS = pytest.mark.xdist_group("test_runner.two_trials")


@TWO_TRIALS
def test_schema_rejects_contract_breaks(two_trials):
    result, _ = two_trials
    assert result["status"] == "ok"
    validate_result(result)  # the real result holds, and each break below is what fails it
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
    broken = json.loads(json.dumps(result))
    broken["metrics"]["trials"][0]["round_order"] = ["torch/eager", "torch/eager"]
    with pytest.raises(jsonschema.ValidationError, match="round_order"):
        validate_result(broken)  # a round runs each variant once
    broken = json.loads(json.dumps(result))
    broken["provenance"]["group"]["order"]["complete"] = "yes"
    with pytest.raises(jsonschema.ValidationError, match="complete"):
        validate_result(broken)


@TWO_TRIALS
def test_trials_run_in_fresh_processes_and_report_their_spread(two_trials):
    result, tmp_path = two_trials
    metrics = result["metrics"]
    assert result["status"] == "ok" and len(metrics["trials"]) == 2
    assert sum(t["n_iters"] for t in metrics["trials"]) == metrics["n_iters"] == len(result["samples_ms"])
    spread = metrics["trial_spread"]
    assert spread["throughput_min"] <= spread["throughput_median"] <= spread["throughput_max"]
    log = (tmp_path / "cell.log").read_text()
    assert "=== torch/eager: launch 1 of 2 (#1) ===" in log
    assert "=== torch/eager: launch 2 of 2 (#1) ===" in log
    assert [t["round_order"] for t in metrics["trials"]] == [["torch/eager"]] * 2
    assert all(isinstance(t["noisy"], bool) for t in metrics["trials"])
    assert metrics["noisy_trials"] == sum(t["noisy"] for t in metrics["trials"])
    assert metrics["flags"]["noisy"] == (metrics["noisy_trials"] > 0), "noisy: at least one trial is"
    plan = result["provenance"]["group"]["order"]
    assert plan["design"] == "williams" and plan["variants"] == ["torch/eager"] and plan["complete"]


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
    assert states == ["cold", "warm"]  # without the setting, "disabled": test_real_cell_result_validates[jax]


# A runner whose only cell's child writes its pid and then sleeps: the scheduler's SIGTERM to the runner must end the
# child too (it runs in a session of its own, out of reach of signals to the runner's group), and write nothing.
SIGTERM_RUNNER = """
import sys
from pathlib import Path
from fwbench.study.grid import Cell
from fwbench.running.runner import run_cell
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


# --- the order of the trials in a group's rounds (fwbench.running.order)
# ----------------------------------------------------

# The Williams designs for 2, 3 and 4 variants, labels 0..n-1 (A, B, C, D).
WILLIAMS = {
    2: ["AB", "BA"],
    3: ["ABC", "BCA", "CAB", "CBA", "ACB", "BAC"],
    4: ["ABDC", "BCAD", "CDBA", "DACB"],
}


def _letters(rows) -> list[str]:
    return ["".join("ABCD"[label] for label in row) for row in rows]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_the_williams_design_balances_positions_and_carry_over(n):
    rows = trial_order.williams(n)
    assert _letters(rows) == WILLIAMS[n]
    balance = trial_order.balance(_letters(rows))
    assert balance.positions_balanced and balance.carry_balanced and balance.problems() == []
    every = len(rows) // n  # each variant in each position, and each ordered pair adjacent, this often
    assert all(set(counts.values()) == {every} and len(counts) == n for counts in balance.positions.values())
    assert {balance.carry[pair] for pair in balance.pairs()} == {every}


@pytest.mark.parametrize("n", [1, 5, 6])
def test_other_group_sizes_are_balanced_too(n):
    rows = trial_order.williams(n)
    assert len(rows) == (2 * n if n % 2 and n > 1 else n)
    assert trial_order.balance(rows).balanced


def test_a_design_cycles_its_rows_and_says_whether_it_is_complete():
    names = ["torch/eager", "torch/compile", "jax/jit", "tensorflow/xla"]
    three = trial_order.design(names, 3)
    assert not three.complete and three.needed == 4 and [three.names(k)[0] for k in range(3)] == names[:3]
    problems = trial_order.balance([three.names(k) for k in range(3)]).problems()
    assert problems == ["tensorflow/xla never first", "carry-over unbalanced (3 of 12 ordered pairs never adjacent)"]
    six = trial_order.design(names, 6)
    assert not six.complete and six.rows[4:] == six.rows[:2], "past a whole design, the rows start again"
    assert trial_order.design(names, 8).complete
    record = trial_order.design(names[:2], 3).record()
    assert record == {
        "design": "williams",
        "variants": names[:2],
        "rounds": 3,
        "rounds_needed": 2,
        "complete": False,
        "seed": None,
        "relabelling": [0, 1],
        "rows": [names[:2], names[1::-1], names[:2]],
    }


def test_a_seed_permutes_the_labels_reproducibly_and_keeps_the_balance():
    names = ["torch/eager", "torch/compile", "jax/jit", "tensorflow/xla"]
    seed = trial_order.group_seed(["inference/torch/eager/small_cnn/fp32/bs1", "inference/jax/jit/small_cnn/fp32/bs1"])
    assert seed == trial_order.group_seed(
        ["inference/torch/eager/small_cnn/fp32/bs1", "inference/jax/jit/small_cnn/fp32/bs1"]
    ), "the same group always gets the same order"
    plan = trial_order.design(names, 4, seed)
    assert plan == trial_order.design(names, 4, seed) and sorted(plan.relabelling) == [0, 1, 2, 3]
    base = trial_order.williams(4)
    assert [list(row) for row in plan.rows] == [[plan.relabelling[label] for label in row] for row in base]
    assert trial_order.balance([plan.names(k) for k in range(4)]).balanced
    firsts = {trial_order.design(names, 3, s).names(2)[0] for s in range(40)}
    never = {
        next(v for v in names if v not in {trial_order.design(names, 3, s).names(k)[0] for k in range(3)})
        for s in range(40)
    }
    assert len(firsts) > 1 and len(never) == 4, "different groups leave different variants out of first place"
    with pytest.raises(ValueError, match="distinct"):
        trial_order.design(["a", "a"], 2)
