"""Trials and intervals: the process is the unit of a cell's CI, a framework ratio is taken round by round from
interleaved trials, and a single trial's within-process interval is labelled and never resolves a comparison."""

from __future__ import annotations

import copy
import sys
from collections import Counter

import numpy as np
import pytest

from fwbench.analysis.inference.findings import inference_results
from fwbench.analysis.inference.macros import macros
from fwbench.analysis.inference.ratios import speedups
from fwbench.analysis.inference.tables import inference_table, throughput_table
from fwbench.analysis.inference.tidy import tidy
from fwbench.io import atomic_write_json
from fwbench.running.merge import merge_trials
from fwbench.running.runner import run_group
from fwbench.study.config import validate_config
from fwbench.study.grid import Cell
from fwbench.trackers.latency import timing_metrics
from fwbench.trackers.stats import WITHIN_PROCESS_ONLY, is_noisy, noisy_trials, summary

BATCH = 8


def _config(**inference) -> dict:
    from tests.conftest import TINY_CONFIG

    return validate_config({**TINY_CONFIG, "inference": {**TINY_CONFIG["inference"], **inference}})


def _part(median_ms: float, n: int = 200, jitter: float = 0.001, seed: int = 0, framework: str = "torch") -> dict:
    """One trial's part as a measuring child writes it: tight samples (±0.1%) around `median_ms`."""
    rng = np.random.default_rng(seed)
    samples = (median_ms * (1 + jitter * rng.uniform(-1, 1, n))).tolist()
    timing = timing_metrics(samples, BATCH)
    noisy = timing.pop("noisy")
    metrics = {
        **timing,
        "flags": {"noisy": noisy, "ci_not_reached": False},
        "timed_s": sum(samples) / 1000,
        "stop_reason": "ci_reached",
        "compile_s": None,
        "first_call_s": 0.01,
        "rss_mb": {"before": 1.0, "peak": 2.0},
        "missing": {},
    }
    return {"metrics": metrics, "samples_ms": samples, "framework": {"name": framework}}


def _rate(median_ms: float) -> float:
    return BATCH * 1000.0 / median_ms


def test_cell_ci_covers_the_spread_between_processes():
    """Three trials, each tight (±0.1%) but with medians 10% apart: the interval must cover the trials' spread.
    A bootstrap of the pooled samples would claim about ±1%."""
    medians = [10.0, 11.0, 12.1]
    parts = [_part(m, seed=i) for i, m in enumerate(medians)]
    merged = merge_trials(parts, BATCH)["metrics"]
    low, high = merged["ci95"]["throughput_img_s"]
    rates = [part["metrics"]["throughput_img_s"] for part in parts]  # each trial's own (median-step) throughput
    assert low < min(rates) and high > max(rates)
    assert merged["ci95"]["relative_half_width"] > 0.10
    assert merged["ci95"]["scope"] == "between_processes" and merged["ci95"]["trials"] == 3
    assert "Student-t" in merged["ci95"]["method"] and "2 df" in merged["ci95"]["method"]
    # each trial weighs the same whatever its iteration count: the headline is the trials' geometric mean
    assert merged["throughput_img_s"] == pytest.approx(float(np.exp(np.mean(np.log(rates)))))
    # the pooled percentiles stay, as descriptive statistics, and say so
    assert merged["n_iters"] == 600 and merged["latency_ms"]["p50"] == pytest.approx(11.0, rel=0.01)
    assert "pool" in merged["pooled"]


def test_unequal_iteration_counts_do_not_weight_the_headline():
    few, many = _part(10.0, n=20), _part(20.0, n=2000, seed=1)
    merged = merge_trials([few, many], BATCH)["metrics"]
    own = [part["metrics"]["throughput_img_s"] for part in (few, many)]
    assert merged["throughput_img_s"] == pytest.approx(np.sqrt(own[0] * own[1]))
    assert merged["throughput_img_s_pooled_median"] == pytest.approx(_rate(20.0), rel=0.01)  # pooled: many wins


def test_a_single_trial_is_labelled_within_process():
    merged = merge_trials([_part(10.0)], BATCH)["metrics"]
    assert merged["ci95"]["scope"] == "within_process" and merged["ci95"]["trials"] == 1
    assert merged["ci95"]["method"].endswith(WITHIN_PROCESS_ONLY)
    assert merged["throughput_img_s"] == pytest.approx(_rate(10.0), rel=0.002)


def test_noise_is_judged_per_trial_not_over_the_pooled_samples():
    """Three tight trials (±0.1%) whose medians differ by 10%: pooled, their IQR is about 19% of the median, which
    the old flag called noise; each trial on its own is quiet. One jittery trial (±50%) flags the cell."""
    medians = [10.0, 11.0, 12.1]
    quiet = [_part(m, seed=i) for i, m in enumerate(medians)]
    assert summary([s for part in quiet for s in part["samples_ms"]])["noisy"], "pooled, the trials look noisy"
    merged = merge_trials(quiet, BATCH)["metrics"]
    assert merged["flags"]["noisy"] is False and merged["noisy_trials"] == 0
    assert [trial["noisy"] for trial in merged["trials"]] == [False, False, False]
    jittery = [*quiet[:1], _part(11.0, jitter=0.5, seed=1), quiet[2]]
    merged = merge_trials(jittery, BATCH)["metrics"]
    assert merged["flags"]["noisy"] is True and merged["noisy_trials"] == 1
    assert [trial["noisy"] for trial in merged["trials"]] == [False, True, False]
    assert is_noisy(jittery[1]["samples_ms"]) and not is_noisy(quiet[1]["samples_ms"])
    assert noisy_trials([part["samples_ms"] for part in jittery]) == [False, True, False]
    assert all(is_noisy(part["samples_ms"]) == summary(part["samples_ms"])["noisy"] for part in jittery)
    single = merge_trials([_part(10.0, jitter=0.5)], BATCH)["metrics"]
    assert single["flags"]["noisy"] is True and single["noisy_trials"] == 1 and single["trials"][0]["noisy"]


def test_a_part_without_its_own_flag_is_judged_on_its_samples():
    part = _part(10.0, jitter=0.5)
    del part["metrics"]["flags"]["noisy"]
    merged = merge_trials([part, _part(10.0, seed=1)], BATCH)["metrics"]
    assert merged["noisy_trials"] == 1 and merged["flags"]["noisy"] is True


def test_the_tidy_table_counts_noisy_trials(tmp_path):
    results = [
        _result("torch", [10.0, 11.0, 12.1]),
        _result("jax", [10.0, 10.0, 10.0], jitters=[0.5, 0.001, 0.5]),
    ]
    paths = []
    for index, result in enumerate(results):
        atomic_write_json(tmp_path / f"{index}.json", result)
        paths.append(tmp_path / f"{index}.json")
    frame = tidy(paths).set_index("framework")
    assert not frame.loc["torch", "noisy"] and frame.loc["torch", "noisy_trials"] == 0
    assert frame.loc["jax", "noisy"] and frame.loc["jax", "noisy_trials"] == 2


BASE = {
    "schema_version": 2,
    "settings": {},
    "stderr_tail": None,
    "inputs": {},
    "reason": None,
    "failure": None,
    "deviations": [],
    "status": "ok",
}


def _result(framework: str, medians: list[float], group: str | None = "g1", batch: int = BATCH, jitters=None) -> dict:
    """A cell result as run_group writes it, its trials in rounds 1..T of group `group` (`jitters[k]`: trial k's
    relative spread of samples, ±0.1% by default)."""
    schedule = [{"round": k + 1, "order": 1, "started_s": float(k), "duration_s": 1.0} for k in range(len(medians))]
    jitters = jitters or [0.001] * len(medians)
    parts = [
        _part(m, seed=k, framework=framework, jitter=j) for k, (m, j) in enumerate(zip(medians, jitters, strict=True))
    ]
    merged = merge_trials(parts, BATCH, schedule)
    result = copy.deepcopy(BASE)
    result.update(
        cell={
            "suite": "inference",
            "framework": framework,
            "model": "small_cnn",
            "precision": "fp32",
            "batch_size": batch,
            "image_size": 32,
        },
        metrics=merged["metrics"],
        samples_ms=merged["samples_ms"],
        provenance={
            "python": "3.11",
            "harness_version": "x",
            "cpu_model": "Test CPU",
            "git": {},
            "env": {},
            "libraries": {},
            "framework": {"versions": {framework: "1"}, "device": {"name": "cpu"}, "settings": {}},
            "group": {"id": group} if group else None,
        },
    )
    return result


# Drift over time moves both frameworks alike (round 2 is 25% slower, round 3 20% faster); JAX is 1.5x throughout.
TORCH_MS = [10.0, 12.5, 8.0]
JAX_MS = [m / 1.5 for m in TORCH_MS]


def test_speedup_ci_pairs_the_rounds_of_one_group():
    paired = speedups([_result("torch", TORCH_MS), _result("jax", JAX_MS)]).iloc[0]
    assert paired["ci_scope"] == "paired_rounds" and paired["pairs"] == 3
    assert paired["ratio"] == pytest.approx(1.5, rel=1e-3)
    assert paired["ci_high"] / paired["ci_low"] < 1.02, "drift common to both frameworks cancels round by round"
    assert bool(paired["resolved"]) and "per-round ratios" in paired["method"]
    # the same trials, not measured together: no pairing, the drift stays in the interval
    apart = speedups([_result("torch", TORCH_MS, group="a"), _result("jax", JAX_MS, group="b")]).iloc[0]
    assert apart["ci_scope"] == "unpaired_trials" and apart["pairs"] == 0
    assert apart["ci_low"] < 1.2 and apart["ci_high"] > 1.9
    assert not bool(apart["resolved"])


def test_a_single_trial_never_resolves_a_ratio(tmp_path):
    results = [_result("torch", [10.0]), _result("jax", [5.0])]
    row = speedups(results).iloc[0]
    assert row["ci_scope"] == "within_process" and row["method"].endswith(WITHIN_PROCESS_ONLY)
    assert row["ci_low"] > 1.9, "the within-process interval excludes 1 by far ..."
    assert not bool(row["resolved"]), "... but cannot resolve the comparison"
    paths = []
    for index, result in enumerate(results):
        atomic_write_json(tmp_path / f"{index}.json", result)
        paths.append(tmp_path / f"{index}.json")
    frame = tidy(paths)
    assert frame["ci_scope"].tolist() == ["within_process"] * 2 and frame["trials"].tolist() == [1, 1]
    ratios = speedups(results)
    table = throughput_table(frame, ["torch", "jax"], ratios)
    assert r"\textbf{" not in table.split(r"\midrule")[1] and r"$\times$ {\scriptsize[" in table and "$^{w}$" in table
    config = _config(batch_sizes=[8])
    text = macros(frame, ratios, {}, config)
    assert r"\newcommand{\fwbNumRatiosUnresolvable}{1}" in text and r"\newcommand{\fwbTrials}{1}" in text
    (group,) = inference_results(frame, ratios, None, config).groups
    tally = group.findings[0].tally
    assert (tally.comparisons, tally.unresolvable, tally.faster, tally.slower) == (1, 1, 0, 0)


def test_resolved_counts_and_bold_use_the_paired_interval(tmp_path):
    results = [_result("torch", TORCH_MS), _result("jax", JAX_MS)]
    results += [_result("torch", [10.0, 10.5, 9.5], batch=1), _result("jax", [10.2, 10.1, 9.8], batch=1)]
    paths = []
    for index, result in enumerate(results):
        atomic_write_json(tmp_path / f"{index}.json", result)
        paths.append(tmp_path / f"{index}.json")
    frame, ratios = tidy(paths), speedups(results)
    assert ratios["resolved"].tolist() == [False, True]
    table = inference_table(frame, ["torch", "jax"], ratios)
    assert table.count(r"\textbf{1.50$\times$") == 1 and "$^{w}$" not in table
    config = _config(batch_sizes=[1, 8], trials=3)
    text = macros(frame, ratios, {}, config)
    assert r"\newcommand{\fwbNumRatiosUnresolvable}{0}" in text and r"\newcommand{\fwbTrials}{3}" in text
    (group,) = inference_results(frame, ratios, None, config).groups
    tally = group.findings[0].tally
    assert (tally.comparisons, tally.unresolvable, tally.faster, tally.slower) == (2, 0, 1, 0)


# A measuring child that appends its framework to ORDER, fails where FAIL says so (framework, its trial number),
# and otherwise writes a plausible part (samples around 10 ms).
FAKE_WORKER = """
import json, sys
spec = json.load(open(sys.argv[1]))
framework = spec["cell"]["framework"]
with open(ORDER, "a") as handle:
    handle.write(framework + "\\n")
trial = open(ORDER).read().split().count(framework)
if (framework, trial) == FAIL:
    sys.exit("simulated failure of " + framework)
samples = [10.0 + 0.01 * i for i in range(20)]
p50 = sorted(samples)[10]
metrics = {
    "throughput_img_s": 8000.0 / p50, "throughput_img_s_total": 8000.0 / p50, "n_iters": 20,
    "latency_ms": {"p50": p50, "p95": 10.2, "p99": 10.2, "mean": 10.1},
    "ci95": {"throughput_img_s": [780.0, 800.0], "method": "fake"},
    "flags": {"noisy": False, "ci_not_reached": False}, "timed_s": 0.2, "stop_reason": "ci_reached",
    "compile_s": None, "first_call_s": 0.01, "rss_mb": {"before": 1.0, "peak": 2.0}, "missing": {},
}
json.dump({"metrics": metrics, "samples_ms": samples, "framework": {"name": framework}}, open(sys.argv[2], "w"))
"""


def _group(tmp_path, trials: int, fail=None, frameworks=("torch", "jax")):
    order = tmp_path / "order.txt"
    script = tmp_path / "fake_worker.py"
    script.write_text(f"ORDER = {str(order)!r}\nFAIL = {fail!r}\n" + FAKE_WORKER)
    cells = [Cell("inference", framework, "small_cnn", "fp32", BATCH, 16) for framework in frameworks]
    results = run_group(
        cells,
        {"timeout_s": 30, "trials": trials},
        data_dir=tmp_path / "data",
        weights_path=tmp_path / "w.npz",
        num_classes=4,
        threads=1,
        out_paths=[tmp_path / f"{framework}.json" for framework in frameworks],
        log_path=tmp_path / "group.log",
        worker_cmd=[sys.executable, str(script)],
    )
    return results, order.read_text().split()


def _planned(results) -> list[list[str]]:
    """The frameworks of each round as the group planned them (provenance.group.order.rows, "jax/jit" -> "jax")."""
    rows = results[0]["provenance"]["group"]["order"]["rows"]
    assert all(r["provenance"]["group"]["order"]["rows"] == rows for r in results), "one plan for the whole group"
    return [[name.split("/")[0] for name in row] for row in rows]


def test_a_group_interleaves_its_trials_in_a_balanced_order(tmp_path):
    """Two frameworks over four rounds: two whole Williams designs (AB, BA), each framework first twice and right
    after the other twice; the order that ran is the recorded plan, and every trial records its round's order."""
    results, order = _group(tmp_path, trials=4)
    rows = _planned(results)
    assert order == [framework for row in rows for framework in row]
    assert rows[0] == rows[2] and rows[1] == rows[0][::-1] and rows[3] == rows[1]
    plan = results[0]["provenance"]["group"]["order"]
    assert plan["design"] == "williams" and plan["complete"] and plan["rounds_needed"] == 2 and plan["rounds"] == 4
    assert plan["variants"] == ["torch/eager", "jax/jit"] and isinstance(plan["seed"], int)
    torch_, jax_ = (r["metrics"]["trials"] for r in results)
    assert [t["round"] for t in torch_] == [1, 2, 3, 4]
    assert sorted(t["order"] for t in torch_) == [1, 1, 2, 2] and sorted(t["order"] for t in jax_) == [1, 1, 2, 2]
    for trials in (torch_, jax_):
        for trial in trials:
            ran = [name.split("/")[0] for name in trial["round_order"]]
            assert ran == rows[trial["round"] - 1]
            assert trial["round_order"][trial["order"] - 1] == ("torch/eager" if trials is torch_ else "jax/jit")
    starts = sorted((t["started_s"], r["cell"]["framework"]) for r in results for t in r["metrics"]["trials"])
    assert [framework for _, framework in starts] == order, "each trial records when it started in the group"
    assert results[0]["provenance"]["group"]["id"] == results[1]["provenance"]["group"]["id"]
    assert results[0]["provenance"]["group"]["rounds"] == 4
    assert all(r["status"] == "ok" and r["metrics"]["ci95"]["scope"] == "between_processes" for r in results)
    row = speedups(results).iloc[0]
    assert row["ci_scope"] == "paired_rounds" and row["pairs"] == 4
    log = (tmp_path / "group.log").read_text()
    headers = [line for line in log.splitlines() if "(round 2, #" in line]
    assert [line.split("/")[0] for line in headers] == [f"=== {framework}" for framework in rows[1]], headers


def test_three_frameworks_run_a_whole_williams_design_in_six_rounds(tmp_path):
    """Three frameworks need six rounds (a Latin square and its mirror): then each runs in each position twice and
    right after each other framework twice. A rotation (a b c, b c a, c a b) balances the positions only: the
    framework after torch would always be the same one."""
    results, order = _group(tmp_path, trials=6, frameworks=("torch", "jax", "tensorflow"))
    rows = _planned(results)
    assert order == [framework for row in rows for framework in row]
    assert results[0]["provenance"]["group"]["order"]["complete"]
    for result in results:
        assert sorted(t["order"] for t in result["metrics"]["trials"]) == [1, 1, 2, 2, 3, 3]
    after = Counter((a, b) for row in rows for a, b in zip(row, row[1:], strict=False))
    assert len(after) == 6 and set(after.values()) == {2}, after


def test_fewer_rounds_than_the_design_needs_take_its_first_rows_and_say_so(tmp_path):
    results, _ = _group(tmp_path, trials=3, frameworks=("torch", "jax", "tensorflow"))
    plan = results[0]["provenance"]["group"]["order"]
    assert not plan["complete"] and plan["rounds"] == 3 and plan["rounds_needed"] == 6
    for result in results:  # the first three rows are a Latin square: positions balanced, carry-over not
        assert sorted(t["order"] for t in result["metrics"]["trials"]) == [1, 2, 3], result["cell"]["framework"]


def test_a_failed_trial_fails_only_its_own_cell(tmp_path):
    results, order = _group(tmp_path, trials=3, fail=("jax", 2))
    torch_, jax_ = results
    rows = _planned(results)
    assert order == rows[0] + rows[1] + ["torch"], "the failed framework leaves the later rounds"
    assert jax_["status"] == "failed" and jax_["reason"].startswith("trial 2 of 3: exception (exit code 1)")
    assert "simulated failure of jax" in jax_["reason"] and "simulated failure" in jax_["stderr_tail"]
    assert torch_["status"] == "ok" and len(torch_["metrics"]["trials"]) == 3
    last = torch_["metrics"]["trials"][2]
    assert last["round_order"] == ["torch/eager"] and last["order"] == 1, "round 3 ran without the failed cell"
    assert speedups(results).empty


def test_a_group_of_one_runs_its_trials_in_sequence(tmp_path):
    results, order = _group(tmp_path, trials=2, frameworks=("jax",))
    assert order == ["jax", "jax"] and [t["round"] for t in results[0]["metrics"]["trials"]] == [1, 2]
