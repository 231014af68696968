"""Warm workers in balanced blocks: the burst, the pipe protocol, the controller's launches and block orders, the
checks per burst, and the interval that matches the design (launch as the unit), checked by simulation."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import threading
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from fwbench.running import order as trial_order
from fwbench.running.runner import run_group
from fwbench.scenarios import blocks
from fwbench.study.grid import Cell
from fwbench.trackers.stats import paired_ratio_interval

PLAN = blocks.BurstPlan(blocks=4, burst_s=0.002, discard=1, max_iters=1000)


def test_calibration_aims_at_the_burst_length_within_bounds():
    assert blocks.calibrate([0.01, 0.01, 0.012], blocks.BurstPlan(10, 0.2, 1, 1000)) == 20
    assert blocks.calibrate([0.5], blocks.BurstPlan(10, 0.2, 1, 1000)) == 1, "at least one iteration"
    assert blocks.calibrate([1e-7], blocks.BurstPlan(10, 0.2, 1, 50)) == 50, "at most max_iters"


def test_cpu_stat_reads_steal_and_total(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 1 2 3\n")
    steal, _, total = blocks.read_cpu_ticks(str(stat))
    assert (steal, total) == (35, 1000)
    stat.write_text("intr 1 2 3\n")
    assert blocks.read_cpu_ticks(str(stat)) is None
    assert blocks.read_cpu_ticks(str(tmp_path / "absent")) is None


def test_other_processes_load_is_the_machines_busy_time_less_the_workers_own(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 10 0 5 35 0 0\n")
    before = blocks.read_cpu_ticks(str(stat))
    assert before == (35, 810, 1000)
    monkeypatch.setattr(blocks.os, "sysconf", lambda name: 100)
    # 40 ticks (0.4 CPU-seconds over both CPUs) pass: 10 idle, 2 stolen, 28 busy; the worker used 0.1 s of them
    after = (37, 820, 1040)
    other, machine = blocks.other_load(before, after, own_cpu_s=0.1)
    assert machine == pytest.approx(0.4) and other == pytest.approx(0.18)
    assert blocks.other_load(before, before, 0.0) is None and blocks.other_load(None, after, 0.0) is None
    assert blocks.other_load(before, after, own_cpu_s=1.0)[0] == 0.0, "never negative (ticks are coarse)"


def test_a_burst_beside_another_busy_process_is_flagged(monkeypatch):
    ticks = iter([(0, 100, 1000), (0, 100, 1040)])  # 40 ticks, none idle: another process took the second CPU
    monkeypatch.setattr(blocks, "read_cpu_ticks", lambda: next(ticks))
    monkeypatch.setattr(blocks.os, "sysconf", lambda name: 100)
    burst = blocks.run_burst((lambda i: None, lambda _: None), iters=1, discard=0, counters=None)
    assert burst["other_cpu_s"] == pytest.approx(0.4 - burst["cpu_s"]) and burst["machine_cpu_s"] == pytest.approx(0.4)
    assert burst["load_flag"]
    quiet = iter([(0, 100, 1000), (0, 139, 1040)])  # 39 of 40 ticks idle
    monkeypatch.setattr(blocks, "read_cpu_ticks", lambda: next(quiet))
    assert not blocks.run_burst((lambda i: None, lambda _: None), iters=1, discard=0, counters=None)["load_flag"]
    short = iter([(0, 100, 1000), (0, 100, 1010)])  # 10 ticks: too coarse to judge one burst
    monkeypatch.setattr(blocks, "read_cpu_ticks", lambda: next(short))
    assert not blocks.run_burst((lambda i: None, lambda _: None), iters=1, discard=0, counters=None)["load_flag"]


def test_hardware_counters_missing_say_why():
    def refuse(*args):
        ctypes.set_errno(2)
        return -1

    counters = blocks.HardwareCounters(syscall=refuse)
    if counters.missing and "no syscall number" in counters.missing:
        pytest.skip("perf_event_open has no known syscall number on this architecture")
    assert counters.read() is None and counters.fds == {}
    assert "No such file or directory" in counters.missing and "hypervisor" in counters.missing


def test_a_burst_times_only_its_iterations_and_records_its_checks():
    calls, synced, window = [], [], []

    class Window:
        def start(self):
            window.append(("start", len(calls)))

        def stop(self):
            window.append(("stop", len(calls)))

    burst = blocks.run_burst((calls.append, synced.append), iters=5, discard=2, counters=None, window=Window())
    assert calls == [0, 1, 0, 1, 2, 3, 4] and len(synced) == 7, "the discarded iterations run first, synchronised"
    assert window == [("start", 2), ("stop", 7)], "the window spans the timed iterations only"
    assert burst["iters"] == 5 and len(burst["samples_ms"]) == 5 and burst["wall_s"] >= sum(burst["samples_ms"]) / 1e3
    assert burst["cpu_s"] >= 0 and (burst["steal_share"] is None or 0 <= burst["steal_share"] <= 1)
    assert burst["steal_flag"] == (burst["steal_share"] is not None and burst["steal_share"] > blocks.STEAL_FLAG)


def test_a_local_session_runs_every_step_in_every_block():
    measured = blocks.LocalBlocks(PLAN).measure({"a": (lambda i: None, lambda _: None), "b": (abs, lambda _: None)})
    assert [b["block"] for b in measured["bursts"]["a"]] == [0, 1, 2, 3]
    assert [b["position"] for b in measured["bursts"]["b"]] == [1, 1, 1, 1]
    summary = blocks.summarise(measured, "a", 4)
    assert summary["blocks"]["bursts"] == 4 and len(summary["samples_ms"]) == 4 * measured["iters_per_burst"]["a"]
    rates = summary["blocks"]["burst_rates"]
    assert summary["throughput_img_s"] == pytest.approx(float(np.exp(np.mean(np.log(rates)))))
    assert "within one process" in summary["ci95"]["method"]


def test_the_pipe_protocol_serves_bursts_until_finish():
    """A worker answers ready (with its steps and iterations), one reply per burst, and returns its bursts at
    finish; while it waits it is blocked in a read."""
    commands_r, commands_w = os.pipe()
    replies_r, replies_w = os.pipe()
    session = blocks.PipeBlocks(PLAN, os.fdopen(commands_r, "rb", buffering=0), os.fdopen(replies_w, "wb", 0))
    out = {}
    worker = threading.Thread(target=lambda: out.update(session.measure({"forward": (abs, lambda _: None)})))
    worker.start()
    replies = os.fdopen(replies_r, "rb")
    ready = json.loads(replies.readline())
    assert ready["ready"] == ["forward"] and ready["iters"]["forward"] >= 1
    for block in range(3):
        os.write(commands_w, json.dumps({"burst": "forward", "block": block, "position": 0}).encode() + b"\n")
        assert json.loads(replies.readline())["done"] == "forward"
    os.write(commands_w, b'{"finish": true}\n')
    worker.join(10)
    assert [b["block"] for b in out["bursts"]["forward"]] == [0, 1, 2]
    assert all(b["idle_cpu_s"] >= 0 and b["idle_wall_s"] >= 0 for b in out["bursts"]["forward"])
    os.close(commands_w)


FAKE_WORKER = r"""
import json, os, sys, time
from fwbench.scenarios import blocks
spec = json.load(open(sys.argv[1]))
cell = spec["cell"]
LOG, FAIL = {log!r}, {fail!r}
with open(LOG, "a") as handle:
    handle.write(cell["framework"] + "\n")
launch = open(LOG).read().split().count(cell["framework"])
delay = {{"torch": 0.0004, "jax": 0.0008, "tensorflow": 0.0006, "numpy": 0.0005}}[cell["framework"]]

def step(i):
    if (cell["framework"], launch) == FAIL and i == 0 and len(session.bursts.get("forward", [])) == 2:
        os._exit(7)  # dies in its third burst
    time.sleep(delay)

session = blocks.session(blocks.BurstPlan.from_settings(spec["settings"]))
measured = session.measure({{"forward": (step, lambda _: None)}})
timed = blocks.summarise(measured, "forward", cell["batch_size"])
metrics = {{
    "throughput_img_s": timed["throughput_img_s"], "throughput_img_s_total": 1.0, "n_iters": len(timed["samples_ms"]),
    "latency_ms": {{"p50": 1.0, "p95": 1.0, "p99": 1.0, "mean": 1.0}}, "ci95": timed["ci95"],
    "blocks": timed["blocks"], "flags": {{"noisy": False}}, "timed_s": timed["timed_s"], "stop_reason": "blocks",
    "compile_s": None, "first_call_s": 0.01, "rss_mb": {{"before": 1.0, "peak": 2.0}}, "missing": timed["missing"],
}}
json.dump({{"metrics": metrics, "samples_ms": timed["samples_ms"], "framework": {{"name": cell["framework"]}}}},
          open(sys.argv[2], "w"))
"""


def _group(tmp_path, frameworks, launches=2, blocks_per_launch=4, fail=None):
    script = tmp_path / "worker.py"
    script.write_text(FAKE_WORKER.format(log=str(tmp_path / "starts.txt"), fail=fail))
    cells = [Cell("inference", framework, "small_cnn", "fp32", 4, 16) for framework in frameworks]
    settings = {"timeout_s": 30, "trials": launches, "blocks": blocks_per_launch, "burst_s": 0.003, "burst_discard": 1}
    return run_group(
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


@pytest.mark.parametrize(
    ("frameworks", "blocks_per_launch"),
    [(("torch", "jax"), 4), (("torch", "jax", "tensorflow"), 6), (("torch", "jax", "tensorflow", "numpy"), 4)],
)
def test_each_launch_runs_its_blocks_in_a_balanced_order(tmp_path, frameworks, blocks_per_launch):
    """2, 3 and 4 variants: every launch's blocks are whole Williams designs (each variant in each position and
    right after each other variant equally often), recorded as planned and as run; each cell has one trial per
    launch whose rate is the geometric mean of its bursts."""
    results = _group(tmp_path, frameworks, blocks_per_launch=blocks_per_launch)
    assert all(r["status"] == "ok" for r in results), [r["reason"] for r in results]
    group = results[0]["provenance"]["group"]
    ran = group["blocks"]["ran"]
    assert len(ran) == 2 * blocks_per_launch and ran == group["blocks"]["order"]["rows"]
    names = group["order"]["variants"]
    for launch in range(2):
        balance = trial_order.balance(ran[launch * blocks_per_launch : (launch + 1) * blocks_per_launch], names)
        assert balance.balanced, balance.problems()
    for result in results:
        trials, bursts = result["metrics"]["trials"], result["metrics"]["blocks"]
        assert [t["round"] for t in trials] == [1, 2]
        assert bursts["burst_blocks"] == list(range(2 * blocks_per_launch)) and bursts["bursts"] == len(ran)
        for trial in trials:  # a launch's rate: the geometric mean of its own bursts' rates
            own = trial["blocks"]["burst_rates"]
            assert trial["throughput_img_s"] == pytest.approx(float(np.exp(np.mean(np.log(own)))))
    starts = (tmp_path / "starts.txt").read_text().split()
    assert Counter(starts) == {framework: 2 for framework in frameworks}, "one fresh worker per cell per launch"


def test_burst_positions_follow_the_block_order(tmp_path):
    results = _group(tmp_path, ("torch", "jax"), launches=1, blocks_per_launch=4)
    ran = results[0]["provenance"]["group"]["blocks"]["ran"]
    for result in results:
        name = f"{result['cell']['framework']}/{result['cell']['mode']}"
        positions = result["metrics"]["blocks"]["burst_positions"]
        assert positions == [row.index(name) for row in ran]


def test_a_worker_that_dies_mid_launch_fails_its_cell_only(tmp_path):
    results = _group(tmp_path, ("torch", "jax"), launches=2, fail=("jax", 2))
    torch_, jax_ = results
    assert torch_["status"] == "ok" and len(torch_["metrics"]["trials"]) == 2
    assert jax_["status"] == "failed" and jax_["reason"].startswith("trial 2 of 2: exception (exit code 7)")
    ran = torch_["provenance"]["group"]["blocks"]["ran"]
    assert all(len(row) == 2 for row in ran[:6]) and ran[-1] == ["torch/eager"], "the others go on without it"


def _simulated_block_logs(rng, launches, n_blocks, ratio, launch_sd, drift_sd, noise_sd):
    """Log rates [variant, launch, block] of bursts in blocks in which the machine's speed drifts (a random walk
    shared by both variants, plus drift between the two positions of a block, AB then BA as the Williams design
    for two variants orders them) and each variant's process has its own launch effect."""
    logs = np.empty((2, launches, n_blocks))
    for launch in range(launches):
        effects = rng.normal(0.0, launch_sd, 2)
        walk = np.cumsum(rng.normal(0.0, drift_sd, n_blocks))
        for block in range(n_blocks):
            first, within = block % 2, rng.normal(0.0, drift_sd / 3)
            for variant in range(2):
                position = 0 if variant == first else 1
                logs[variant, launch, block] = (
                    walk[block] + position * within + effects[variant] + rng.normal(0.0, noise_sd)
                )
    logs[0] += np.log(ratio)
    return logs


def test_the_launch_interval_covers_under_drift_and_launch_effects():
    """The documented method (per-launch ratios of the bursts' geometric means, Student-t over launches with
    launches - 1 df) covers the true ratio at its nominal 95% when the machine drifts by several percent per block
    and every process has its own speed; taking every block's ratio as an independent sample does not."""
    rng = np.random.default_rng(20261125)
    truth, launches, n_blocks, runs = 1.05, 3, 12, 2000
    covered = naive_covered = 0
    for _ in range(runs):
        logs = _simulated_block_logs(rng, launches, n_blocks, truth, 0.02, 0.05, 0.02)
        rates = np.exp(logs.mean(axis=2))  # each launch's geometric mean of its bursts' rates
        interval = paired_ratio_interval(rates[0], rates[1])
        covered += interval.low <= truth <= interval.high
        per_block = (logs[0] - logs[1]).ravel()
        naive = stats.t.ppf(0.975, per_block.size - 1) * per_block.std(ddof=1) / np.sqrt(per_block.size)
        naive_covered += abs(per_block.mean() - np.log(truth)) <= naive
    assert 0.94 <= covered / runs <= 0.965, covered / runs
    assert naive_covered / runs < 0.85, naive_covered / runs


SPIN = """
import os, sys, time
from fwbench.running.threads import pin_threads
threads = pin_threads(2)
import numpy as np
a = np.random.default_rng(0).random((256, 256), dtype=np.float32)
for _ in range(50):
    a @ a
cpu, wall = time.process_time(), time.perf_counter()
time.sleep(0.2)
print(threads["waiting"]["OPENBLAS_THREAD_TIMEOUT"], (time.process_time() - cpu) / (time.perf_counter() - wall))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="OpenBLAS runs one thread on one CPU: nothing spins")
def test_a_waiting_worker_leaves_the_cpu_to_the_others():
    """OpenBLAS's threads spin about 0.1 s after each call unless told to sleep at once: a worker's threads are pinned
    with the quiet setting, so while it waits for its next burst it uses next to no CPU."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    out = subprocess.run([sys.executable, "-c", SPIN], env=env, capture_output=True, text=True, check=True).stdout
    timeout, idle = out.split()
    assert timeout == "4" and float(idle) < 0.1, out
