"""Warm workers that serve every batch size of their model (inference.share_workers, micro.share_workers): one process
per framework and mode per launch, each batch size compiled on its own shapes, the batch sizes' bursts in the same
blocks, each cell's record its own; a crash fails every cell of its worker; the study's time counts a process once."""

from __future__ import annotations

import pytest

from fwbench.analysis.time.study_time import process_rows
from fwbench.running.faults import INJECT_FAULT_ENV
from fwbench.running.runner import _workers, run_group
from fwbench.study.config import validate_config
from fwbench.study.grid import WORKER_SCOPES, Cell, measuring_processes
from tests.conftest import READS_TINY_GROUP


def _cells():
    return [
        Cell("inference", framework, "small_cnn", "fp32", batch, 16)
        for framework in ("torch", "jax")
        for batch in (1, 2)
    ]


def _run(tiny_study, tmp_path, settings=None):
    root, _, base = tiny_study
    cells = _cells()
    return run_group(
        cells,
        {**base, "trials": 2, "blocks": 2, **(settings or {})},
        data_dir=root / "data",
        weights_path=root / "weights.npz",
        num_classes=4,
        threads=1,
        out_paths=[tmp_path / f"{c.framework}-{c.batch_size}.json" for c in cells],
        log_path=tmp_path / "group.log",
    )


def test_workers_group_the_batch_sizes_of_a_framework_and_mode_unless_told_not_to():
    cells = [*_cells(), Cell("inference", "torch", "small_cnn", "fp32", 8, 16)]
    assert _workers(cells, {"blocks": 2}) == [[0, 1, 4], [2, 3]]
    assert _workers(cells, {"blocks": 2, "share_workers": False}) == [[0], [1], [2], [3], [4]]
    assert _workers(cells, {"blocks": 2, "share_workers": "batch_sizes"}) == [[0, 1, 4], [2, 3]]
    training = [Cell("training", "torch", "small_cnn", "fp32", b, 16) for b in (8, 16)]
    assert _workers(training, {"blocks": 2}) == [[0], [1]], "a training cell is a process of its own"


def test_the_study_counts_a_process_per_worker_and_launch():
    config = validate_config(
        {"suites": ["inference", "micro"], "frameworks": ["torch", "jax"], "models": ["small_cnn", "resnet50"]}
    )
    launch = measuring_processes(config)  # the default: a worker per framework and mode serves its whole launch
    config["inference"]["share_workers"] = config["micro"]["share_workers"] = "batch_sizes"
    shared = measuring_processes(config)
    config["inference"]["share_workers"] = config["micro"]["share_workers"] = False
    alone = measuring_processes(config)
    inference, micro = config["inference"], config["micro"]
    assert launch == {"inference": 2 * inference["trials"], "micro": 3 * micro["trials"]}
    assert shared == {
        "inference": 2 * 2 * inference["trials"],
        "micro": 3 * len(micro["operations"]) * micro["trials"],
    }
    assert alone == {
        "inference": shared["inference"] * len(inference["batch_sizes"]),
        "micro": shared["micro"] * len(micro["batch_sizes"]),
    }


def test_a_worker_scope_groups_models_and_precisions_as_its_setting_says():
    cells = [
        Cell("inference", framework, model, precision, batch, 16)
        for framework in ("torch", "jax")
        for model in ("small_cnn", "resnet50")
        for precision in ("fp32", "tf32")
        for batch in (1, 2)
    ]
    by_scope = {scope: _workers(cells, {"blocks": 2, "share_workers": scope}) for scope in WORKER_SCOPES}
    assert [len(workers) for workers in by_scope.values()] == [16, 8, 4, 2]
    assert by_scope["cell"] == [[i] for i in range(16)]
    assert _workers(cells, {"blocks": 2, "share_workers": True}) == by_scope["batch_sizes"]
    assert _workers(cells, {"blocks": 2}) == by_scope["launch"], "a worker serves its launch by default"
    torch, jax = by_scope["launch"]
    assert {cells[i].framework for i in torch} == {"torch"} and len(torch) == 8
    # by comparison: each (model, precision) in the group's order, its batch sizes ascending
    assert [cells[i].comparison() for i in torch][:4] == [
        ("small_cnn", "fp32", 1),
        ("small_cnn", "fp32", 2),
        ("small_cnn", "tf32", 1),
        ("small_cnn", "tf32", 2),
    ]
    assert all({cells[i].precision for i in w} == {cells[w[0]].precision} for w in by_scope["models"])
    with pytest.raises(ValueError, match="share_workers: 'all' is not one of"):
        _workers(cells, {"blocks": 2, "share_workers": "all"})


@READS_TINY_GROUP
def test_one_worker_per_framework_serves_both_batch_sizes_in_the_same_blocks(tiny_group):
    """The session's tiny group (tests/conftest.py: tiny_group): this module's cells in two launches of two blocks;
    its profiling pass adds no process and no burst."""
    results = tiny_group["results"]
    assert tiny_group["cells"] == _cells()
    assert [r["status"] for r in results] == ["ok"] * 4, [r["reason"] for r in results]
    log = (tiny_group["dir"] / "group.log").read_text()
    assert log.count("[fwbench.running.worker]") == 2 * 2, "one process per framework per launch"
    group = results[0]["provenance"]["group"]
    assert group["order"]["variants"] == ["torch/eager", "jax/jit"] and all(
        len(row) == 2 for row in group["blocks"]["ran"]
    )
    for result in results:
        metrics, batch = result["metrics"], result["cell"]["batch_size"]
        assert metrics["blocks"]["bursts"] == 2 * 2, "a burst per block per launch"
        mode = "eager" if result["cell"]["framework"] == "torch" else "jit"
        served = [f"inference/{result['cell']['framework']}/{mode}/small_cnn/fp32/bs{b}" for b in (1, 2)]
        for trial in metrics["trials"]:
            assert trial["process"]["cells"] == served and trial["process"]["first"] is (batch == 1)
        assert "batch sizes [1, 2]" in metrics["rss_mb"]["source"]
    # each batch size ran its own shapes: the inputs differ, the bursts are the cell's own
    torch1, torch2 = results[0]["metrics"], results[1]["metrics"]
    assert torch1["input_sha256"] != torch2["input_sha256"]
    # the study's time: 4 processes (2 workers x 2 launches), each counted once with its wall time
    rows = process_rows(results)
    assert int((~rows["shared_process"]).sum()) == 4 and rows.loc[rows["shared_process"], "wall_s"].eq(0).all()
    assert rows.loc[~rows["shared_process"], "timed"].gt(0).all()
    # without its first cell's result (an analysis of some cells only) a cell keeps its process's wall time
    alone = process_rows([results[1]])
    assert not alone["shared_process"].any() and alone["wall_s"].gt(0).all()


def test_a_crash_fails_every_cell_of_its_worker_and_no_other(tiny_study, tmp_path, monkeypatch):
    monkeypatch.setenv(INJECT_FAULT_ENV, "segfault@inference/jax/jit/small_cnn/fp32/bs2")
    results = {(r["cell"]["framework"], r["cell"]["batch_size"]): r for r in _run(tiny_study, tmp_path)}
    for batch in (1, 2):
        crashed = results["jax", batch]
        assert crashed["status"] == "failed" and crashed["failure"]["kind"] == "crash", batch
        assert "Segmentation fault" in crashed["stderr_tail"]
        assert results["torch", batch]["status"] == "ok"


def test_without_sharing_each_cell_has_a_process_of_its_own(tiny_study, tmp_path):
    results = _run(tiny_study, tmp_path, {"share_workers": False})
    assert [r["status"] for r in results] == ["ok"] * 4
    assert (tmp_path / "group.log").read_text().count("[fwbench.running.worker]") == 4 * 2
    assert not any("process" in trial for r in results for trial in r["metrics"]["trials"])


def test_a_launch_disturbed_by_another_process_is_run_again_for_every_variant(tiny_study, tmp_path, monkeypatch):
    """A busy process beside the first launch (injected): that launch is run again, every worker of it, and what
    it measured stays beside each cell's result; the group records the repeat and the bound."""
    monkeypatch.setenv(INJECT_FAULT_ENV, "other_load@inference/torch/eager/small_cnn/fp32/bs1")
    results = _run(tiny_study, tmp_path, {"repeat_disturbed": 1, "burst_s": 0.1})
    assert [r["status"] for r in results] == ["ok"] * 4, [r["reason"] for r in results]
    blocks = results[0]["provenance"]["group"]["blocks"]
    repeated = blocks["repeated"]
    assert blocks["repeat_bound"] == 1
    # the loaded launch, once: the bound holds though another disturbance (the other test worker, whose core is half
    # the machine) may flag the repeat or the second launch too
    assert [r["launch"] for r in repeated] == [1], repeated
    assert len(blocks["ran"]) == 2 * 2, "the blocks of the launches kept"
    for result in results:
        metrics = result["metrics"]
        assert [t["round"] for t in metrics["trials"]] == [1, 2], "both launches, the loaded one from its repeat"
        assert [d["launch"] for d in metrics["disturbed_launches"]] == [r["launch"] for r in repeated]
        assert metrics["disturbed_launches"][0]["samples_ms"], "the disturbed launch's raw samples are kept"
    log = (tmp_path / "group.log").read_text()
    assert "launch 1 of 2 run again" in log
    assert log.count("[fwbench.running.worker]") == 2 * (2 + len(repeated)), "every worker of a launch again"


@READS_TINY_GROUP
def test_each_worker_knows_its_running_companions_so_their_gpu_contexts_are_not_other_processes(tiny_group):
    """On a GPU every warm worker of a comparison holds a CUDA context while the next one starts: the first GPU study
    (an H200) flagged all 9 of its cells for "other processes" that were their own companions. Each worker is told
    the pids of the workers of its launch already running (fwbench.trackers.nvml.COMPANIONS_ENV)."""
    started = tiny_group["started"]
    assert [r["status"] for r in tiny_group["results"]] == ["ok"] * 4
    assert len(started) == 4  # two workers in each of two launches
    for first, second in (started[0:2], started[2:4]):
        assert first[1] == "" and second[1] == str(first[0])


def test_a_worker_serves_its_launch_across_precisions_and_a_cell_that_fails_to_build_fails_alone(tiny_study, tmp_path):
    """One process per framework per launch serves small_cnn in fp32 and bf16 and a model whose weights do not fit
    (resnet50 given small_cnn's): that model's cells fail in their own build, naming it, and leave the later launch;
    the others are measured, each on its own precision's backend instance, with what their worker held recorded."""
    root, _, base = tiny_study
    cells = [
        Cell("inference", framework, model, precision, 1, 16)
        for framework in ("torch", "jax")
        for model, precision in (("small_cnn", "fp32"), ("resnet50", "fp32"), ("small_cnn", "bf16"))
    ]
    weights = {"small_cnn": root / "weights.npz", "resnet50": root / "weights.npz"}
    results = run_group(
        cells,
        {**base, "trials": 2, "blocks": 2, "share_workers": "launch"},
        data_dir=root / "data",
        weights_path=weights,
        num_classes=4,
        threads=1,
        out_paths=[tmp_path / f"{c.framework}-{c.model}-{c.precision}.json" for c in cells],
        log_path=tmp_path / "group.log",
    )
    by_label = {r["cell"]["framework"] + "/" + r["cell"]["model"] + "/" + r["cell"]["precision"]: r for r in results}
    log = (tmp_path / "group.log").read_text()
    assert log.count("[fwbench.running.worker]") == 2 * 2, "one process per framework per launch"
    for framework in ("torch", "jax"):
        broken = by_label[f"{framework}/resnet50/fp32"]
        assert broken["status"] == "failed" and "own preparation" in broken["reason"], broken["reason"]
        assert broken["failure"]["trial"] == 1, "it failed in the first launch and left the second"
        for precision, dtype in (("fp32", "float32"), ("bf16", "bfloat16")):
            result = by_label[f"{framework}/small_cnn/{precision}"]
            assert result["status"] == "ok", result["reason"]
            metrics = result["metrics"]
            assert result["provenance"]["framework"]["settings"]["dtype"] == dtype
            assert metrics["blocks"]["bursts"] == 2 * 2
            worker = metrics["worker"]
            assert worker["precisions"] == ["bf16", "fp32"] and worker["cells"] in (3, 2)
            assert f"inference/{framework}/" in worker["beside"][0]
    # the later launch served only the cells still measured
    assert "resnet50" not in log.split("launch 2 of 2")[-1].split("[fwbench.running.worker]")[1].split("\n")[0]


@READS_TINY_GROUP
def test_a_block_runs_comparison_by_comparison_each_ones_variants_side_by_side(tiny_group):
    """However many cells a worker serves, a block runs one comparison's bursts of every worker before the next
    comparison's: a cell's variants stay adjacent in time (the controller's requests, in the order sent), in every
    block of every launch."""
    sent, started = tiny_group["sent"], tiny_group["started"]
    assert len(started) == 4  # two workers in each of two launches
    for launch in (started[0:2], started[2:4]):
        workers = {pid for pid, _ in launch}
        blocks = sorted({b for b, _, pid in sent if pid in workers})
        assert len(blocks) == 2, "two blocks a launch (numbered across the launches)"
        for block in blocks:
            steps = [step for b, step, pid in sent if b == block and pid in workers]
            assert sorted(steps) == sorted(["small_cnn/fp32/bs1", "small_cnn/fp32/bs2"] * 2)
            # each comparison's two bursts (one per framework's worker) are consecutive
            assert steps[0] == steps[1] and steps[2] == steps[3] and steps[0] != steps[2], steps
            pids = [pid for b, _, pid in sent if b == block and pid in workers]
            assert pids[0] != pids[1] and pids[2] != pids[3]
    assert {pid for _, _, pid in sent} == {pid for pid, _ in started}, "every burst asked of the group's workers"
