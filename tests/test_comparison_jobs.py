"""Comparison jobs by batch size (fwbench.workflow.comparison_jobs): the first job of a model measures every batch size
of it that is due in the same warm workers and holds their cells; the others' jobs take them and measure nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fwbench.study.config import validate_config
from fwbench.study.params import comparison_settings, merged_settings
from fwbench.workflow import comparison_jobs
from fwbench.workflow.comparison_jobs import Claims, Comparisons, due, owner_alive, run_job, take_held
from fwbench.workflow.state import owner_record
from tests.conftest import TINY_CONFIG


def _config(**inference):
    return validate_config(
        {
            **TINY_CONFIG,
            "inference": {
                **TINY_CONFIG["inference"],
                "batch_sizes": [1, 2, 4],
                "profile": {"batch_sizes": [2], "steps": 2},
                **inference,
            },
        }
    )


@pytest.fixture
def study(tmp_path):
    inputs = [tmp_path / "data" / "manifest.json", tmp_path / "weights" / "small_cnn.npz", tmp_path / "device.json"]
    for path in inputs:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    return tmp_path, tuple(map(str, inputs))


def _comparisons(study, config=None) -> Comparisons:
    root, inputs = study
    return Comparisons(config or _config(), "inference", "small_cnn", "fp32", root / "results", inputs)


class FakeMeasure:
    """Writes each cell as the runner would (its job key in provenance) and records what it was asked to measure."""

    def __init__(self):
        self.calls = []

    def __call__(self, cells, out_paths, job_keys, settings, weights=None):
        self.calls.append(([cell.batch_size for cell in cells], dict(settings)))
        for cell, path, key in zip(cells, out_paths, job_keys, strict=True):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"cell": cell.as_dict(), "provenance": {"job_key": key}}))


def _run(comparisons, batch, measure, share=True):
    return run_job(comparisons, batch, comparisons.paths(batch), measure, share_workers=share)


def test_the_first_job_measures_every_due_batch_size_and_the_others_take_their_held_cells(study):
    comparisons, measure = _comparisons(study), FakeMeasure()
    outcome = _run(comparisons, 2, measure)
    assert outcome.measured == _bs(2, 1, 4) and len(measure.calls) == 1
    batches, settings = measure.calls[0]
    # one call: each worker (framework and mode) serves the three batch sizes, its own batch size first
    assert sorted(set(batches)) == [1, 2, 4] and len(batches) == 3 * 2
    assert settings["profile"]["batch_sizes"] == [2], "the profiled batch sizes joined again"
    assert all(path.exists() for path in comparisons.paths(2))
    assert all(path.exists() for b in (1, 4) for path in comparisons.paths(b, held=True))
    assert not due(comparisons, 1) and not due(comparisons, 4), "held under the current identity"

    for batch in (4, 1):
        outcome = _run(comparisons, batch, measure)
        assert outcome.measured == () and "measured by another job" in outcome.line()
        assert all(path.exists() for path in comparisons.paths(batch))
        assert not any(path.exists() for path in comparisons.paths(batch, held=True))
    assert len(measure.calls) == 1, "nothing measured twice"
    assert not list((comparisons.results / "held" / "claims").rglob("*.json")), "every claim released"


def _bs(*batches, model="small_cnn", precision="fp32"):
    """What a job measured, as JobOutcome names it."""
    return tuple(f"{model}/{precision}/bs{b}" for b in batches)


def test_a_new_batch_size_measures_only_its_own_cells(study):
    root, inputs = study
    measure = FakeMeasure()
    before = Comparisons(_config(batch_sizes=[1, 2]), "inference", "small_cnn", "fp32", root / "results", inputs)
    _run(before, 1, measure)
    _run(before, 2, measure)
    after = Comparisons(_config(batch_sizes=[1, 2, 8]), "inference", "small_cnn", "fp32", root / "results", inputs)
    assert [due(after, b) for b in (1, 2, 8)] == [False, False, True], "the same identity with a batch size added"
    assert _run(after, 8, measure).measured == _bs(8)
    assert [sorted(set(call[0])) for call in measure.calls] == [[1, 2], [8]]


def test_a_job_serves_every_model_and_precision_of_its_scope_whose_weights_exist(tmp_path):
    config = _config()
    config["models"], config["precisions"] = ["small_cnn", "resnet50", "vit_b_16"], ["fp32", "tf32"]
    manifest, pattern = tmp_path / "data" / "manifest.json", str(tmp_path / "weights" / "{model}.npz")
    for path in (manifest, Path(pattern.format(model="small_cnn")), Path(pattern.format(model="resnet50"))):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")  # no weights for vit_b_16 yet: its comparisons wait for their own jobs
    own = Comparisons(
        config,
        "inference",
        "small_cnn",
        "fp32",
        tmp_path / "results",
        (str(manifest), pattern.format(model="small_cnn")),
        pattern,
    )
    resnet = own.peer("resnet50", "tf32")
    assert resnet.inputs == (str(manifest), pattern.format(model="resnet50")) and resnet.weights.endswith(
        "resnet50.npz"
    )
    assert [(p.model, p.precision) for p in own.peers("models")] == [
        ("small_cnn", "fp32"),
        ("resnet50", "fp32"),
        ("vit_b_16", "fp32"),
    ]
    measure = FakeMeasure()
    outcome = run_job(own, 1, own.paths(1), measure, share_workers="launch")
    expected = [
        *_bs(1, 2, 4),
        *_bs(1, 2, 4, model="resnet50"),
        *_bs(1, 2, 4, precision="tf32"),
        *_bs(1, 2, 4, model="resnet50", precision="tf32"),
    ]
    assert sorted(outcome.measured) == sorted(expected) and outcome.measured[0] == "small_cnn/fp32/bs1"
    assert len(measure.calls) == 1 and len(measure.calls[0][0]) == len(expected) * 2
    # the peer's job takes its held cells under the same key its own job computes, and measures nothing
    assert not due(resnet, 2) and run_job(resnet, 2, resnet.paths(2), measure, share_workers="launch").measured == ()
    # the last model's weights appear: its own job measures its comparisons (every other one is done)
    Path(pattern.format(model="vit_b_16")).write_text("x")
    vit = own.peer("vit_b_16", "tf32")
    assert sorted(run_job(vit, 4, vit.paths(4), measure, share_workers="launch").measured) == sorted(
        [*_bs(1, 2, 4, model="vit_b_16", precision="tf32"), *_bs(1, 2, 4, model="vit_b_16")]
    )


def test_the_identity_is_the_comparisons_own(study):
    comparisons = _comparisons(study)
    keys = {b: comparisons.key(b) for b in (1, 2, 4)}
    assert len(set(keys.values())) == 3
    # profiling another batch size changes that batch size's comparison only
    profiled = _comparisons(study, _config(profile={"batch_sizes": [2, 4], "steps": 2}))
    assert [profiled.key(b) == keys[b] for b in (1, 2, 4)] == [True, True, False]
    # a setting of every comparison changes every key; so does an input written again
    assert all(_comparisons(study, _config(blocks=3)).key(b) != keys[b] for b in keys)
    weights = Path(study[1][1])
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))
    assert all(comparisons.key(b) != keys[b] for b in keys)


def test_comparison_settings_reduce_the_profiled_batch_sizes_and_merge_back():
    config = _config(profile={"batch_sizes": [2, 4], "steps": 2})
    per_batch = [comparison_settings(config, "inference", b) for b in (1, 2, 4)]
    assert [s["profile"]["batch_sizes"] for s in per_batch] == [[], [2], [4]]
    assert merged_settings(per_batch)["profile"] == {"batch_sizes": [2, 4], "steps": 2}
    with pytest.raises(ValueError, match="share their settings"):
        merged_settings([per_batch[0], {**per_batch[1], "blocks": 99}])


def test_cells_of_another_identity_or_without_one_are_due_and_stale_held_cells_are_dropped(study):
    comparisons, measure = _comparisons(study), FakeMeasure()
    for path in comparisons.paths(1):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"provenance": {}}))  # a cell written before job keys existed
    assert due(comparisons, 1)
    held = comparisons.paths(4, held=True)
    for path in held:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"provenance": {"job_key": "another"}}))
    assert due(comparisons, 4)
    assert not take_held(comparisons, 4, comparisons.paths(4))
    assert not any(path.exists() for path in held)
    assert _run(comparisons, 4, measure).measured == _bs(4, 1, 2)


def test_without_share_workers_each_job_measures_its_own_batch_size(study):
    comparisons, measure = _comparisons(study), FakeMeasure()
    assert _run(comparisons, 1, measure, share=False).measured == _bs(1)
    assert not (comparisons.results / "held" / "cells").exists()


def test_a_forced_rerun_of_cells_up_to_date_measures_only_its_own(study):
    comparisons, measure = _comparisons(study), FakeMeasure()
    for batch in (1, 2, 4):
        _run(comparisons, batch, measure)
    assert _run(comparisons, 2, measure).measured == _bs(2)


def test_a_batch_size_claimed_by_a_live_job_is_left_to_it_and_a_job_waits_for_its_own(study):
    comparisons, measure = _comparisons(study), FakeMeasure()
    claim = comparisons.claim_path(4)
    claim.parent.mkdir(parents=True)
    # another live process of this host holds batch size 4
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = owner_record(sleeper.pid)
        claim.write_text(json.dumps(record))
        assert owner_alive(claim)
        assert _run(comparisons, 1, measure).measured == _bs(1, 2)
        # the job of batch size 4 waits until the claim goes, then measures (nothing was held for it)
        threading.Timer(0.5, claim.unlink).start()
        started = time.monotonic()
        assert _run(comparisons, 4, measure).measured == _bs(4)
        assert time.monotonic() - started >= 0.4
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_claim_whose_owner_is_gone_is_taken_over(study):
    comparisons = _comparisons(study)
    claim = comparisons.claim_path(1)
    claim.parent.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    record = {**owner_record(), "pid": int(dead.stdout), "start_time": 1}
    claim.write_text(json.dumps(record))
    assert not owner_alive(claim)
    # another host's claim: alive while its heartbeat is fresh
    claim.write_text(json.dumps({**record, "host": "elsewhere"}))
    assert owner_alive(claim)
    assert not owner_alive(claim, now=time.time() + comparison_jobs.STALE_AFTER_S + 1)
    old = time.time() - comparison_jobs.STALE_AFTER_S - 1
    os.utime(claim, (old, old))
    with Claims(comparisons) as claims:
        assert claims.claim(1)
        assert json.loads(claim.read_text())["pid"] == os.getpid()
    assert not claim.exists()


def test_each_job_is_keyed_by_its_own_frameworks_software_only(study, monkeypatch):
    from fwbench.workflow.requirements import framework_software

    installed = {"jax": "0.10.0", "jax-cuda13-plugin": "0.10.0", "jaxlib": "0.10.0", "keras": "3.15", "torch": "2.14"}
    assert framework_software(installed, ["torch"]) == {"torch": "2.14"}
    assert list(framework_software(installed, ["jax", "numpy"])) == ["jax", "jax-cuda13-plugin", "jaxlib"]
    comparisons = _comparisons(study)  # torch and jax
    monkeypatch.setattr(comparison_jobs, "_installed", lambda: installed)
    key = comparisons.key(1)
    monkeypatch.setattr(comparison_jobs, "_installed", lambda: {**installed, "keras": "3.16"})
    assert comparisons.key(1) == key, "TensorFlow's Keras is not in this study"
    monkeypatch.setattr(comparison_jobs, "_installed", lambda: {**installed, "jaxlib": "0.10.1"})
    assert comparisons.key(1) != key


def test_the_log_ends_with_what_the_job_did(tmp_path):
    log = tmp_path / "bs1.log"
    log.write_text("the group's log")
    comparison_jobs.write_log_line(log, comparison_jobs.JobOutcome(1, _bs(1, 4)))
    line = "bs1: measured, with small_cnn/fp32/bs4 in the same warm workers (held for their jobs)"
    assert log.read_text() == f"the group's log\n{line}\n"
    comparison_jobs.write_log_line(tmp_path / "bs4.log", comparison_jobs.JobOutcome(4, ()))
    assert "measured by another job" in (tmp_path / "bs4.log").read_text()


def test_a_cell_index_lists_its_suites_cells_and_a_foreign_file_is_named(tmp_path):
    from fwbench.results import read_cell_index, write_cell_index

    write_cell_index(tmp_path / "inference.json", "inference", ["results/cells/inference/a.json"])
    write_cell_index(tmp_path / "micro.json", "micro", ["results/cells/micro/b.json"])
    assert read_cell_index([tmp_path / "inference.json", tmp_path / "micro.json"]) == [
        "results/cells/inference/a.json",
        "results/cells/micro/b.json",
    ]
    (tmp_path / "other.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="other.json: not a cell index"):
        read_cell_index(tmp_path / "other.json")
