"""Cells of one comparison on different nodes or device models (a SLURM cluster): a ratio across device models is
refused everywhere (speedups, table, summary macros, conclusions, training sentence), one across nodes of the same
model is kept and marked, and the ledger names the pairs. Old results without `node`/`scheduler` still work.

Hand-built cell results only (the skeletons of tests/test_analysis.py and tests/test_multi_framework_analysis.py)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from fwbench.analysis.common.partners import check_placement
from fwbench.analysis.fairness import ledger as lg
from fwbench.analysis.fairness.rows import HELD, NOT_HELD, NOT_MEASURED
from fwbench.analysis.inference.findings import inference_results
from fwbench.analysis.inference.macros import macros
from fwbench.analysis.inference.ratios import SPEEDUP_COLUMNS, write_speedups
from fwbench.analysis.inference.tables import inference_table
from fwbench.analysis.inference.tidy import read_tidy, write_tidy
from fwbench.analysis.paper.conclusions import conclusions_section
from fwbench.analysis.published.judgement import FAILED
from fwbench.analysis.published.matching import COLUMNS as PUBLISHED_COLUMNS
from fwbench.analysis.published.matching import compare
from fwbench.analysis.setup.provenance import study_environment
from fwbench.analysis.training.epochs import write_training_tables
from fwbench.scenarios.parity import PARITY_COLUMNS
from fwbench.study.config import validate_config
from tests.test_conclusions import training_paragraph
from tests.test_multi_framework_analysis import THREE, _inference, _macro, _training, _write
from tests.test_published import _cell, _epochs, _published_row, _sources
from tests.test_published import _ratio as _published_ratio

A100, H100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"
REFUSED = f"device models differ: torch {A100}, jax {H100}"


def _on(result, node, gpu=A100, job=None):
    """`result` as computed on `gpu` of `node`, by a SLURM job when `job` is given (the placement a cell records)."""
    result["provenance"]["framework"]["device"] = {"name": gpu, "platform": "cuda"}
    scheduler = {"name": "slurm", "job_id": job, "node": node, "partition": "gpu", "restart_count": 0}
    result["provenance"]["placement"] = {
        "host": node,
        "slot": 0,
        "node": node,
        "scheduler": scheduler if job else None,
    }
    return result


def _cluster(jax_node="gpu01", jax_gpu=A100):
    """Three frameworks at batch 1 (JAX 1.5x, TensorFlow 0.5x PyTorch, paired rounds) and at batch 8 (JAX only, not
    resolved): PyTorch and TensorFlow on gpu01's A100s; JAX at batch 1 where asked, at batch 8 with the others."""
    results = []
    for batch in (1, 8):
        for framework in THREE:
            result = _inference(framework, batch)
            if result["status"] == "ok":
                placed = framework == "jax" and batch == 1
                _on(result, jax_node if placed else "gpu01", jax_gpu if placed else A100, job=f"{batch}")
            results.append(result)
    return results


def _ratios(tmp_path, results):
    paths = _write(tmp_path, results)
    return paths, write_tidy(paths, tmp_path / "inference.csv"), write_speedups(paths, tmp_path / "speedups.csv")


def _by(ratios):
    return ratios.set_index(["numerator", "batch_size"])


# --- the helper -------------------------------------------------------------------------------------------------


def test_the_helper_names_each_frameworks_model_and_node():
    torch, jax = _on(_inference("torch", 1), "gpu01"), _on(_inference("jax", 1), "gpu02", H100)
    check = check_placement([torch, jax])
    assert check.models_differ and check.nodes_differ
    assert check.models_detail == REFUSED and check.nodes_detail == "nodes differ: torch gpu01, jax gpu02"
    same = check_placement([torch, _on(_inference("jax", 1), "gpu01")])
    assert not same.models_differ and not same.nodes_differ and same.models_detail is same.nodes_detail is None
    # tidy rows (a CSV's NaN for a value never recorded) as well as results; unknown values never differ
    rows = [
        pd.Series({"framework": "torch", "platform": "cuda", "device": A100, "cpu_model": "x", "node": "gpu01"}),
        pd.Series({"framework": "jax", "platform": "cuda", "device": math.nan, "cpu_model": "y", "node": math.nan}),
    ]
    assert not check_placement(rows).models_differ and not check_placement(rows).nodes_differ


def test_on_a_cpu_the_cpu_model_is_the_device_model_and_platforms_differing_count():
    torch, jax = _inference("torch", 1), _inference("jax", 1)  # device "cpu" on both
    jax["provenance"]["cpu_model"] = "Intel Xeon"
    assert check_placement([torch, jax]).models_detail == "device models differ: torch Test CPU, jax Intel Xeon"
    _on(torch, "gpu01")
    assert check_placement([torch, jax]).models_detail == (
        f"device models differ: torch {A100} (cuda), jax Intel Xeon (cpu)"
    )


# --- speedups and the tidy table --------------------------------------------------------------------------------


def test_a_pair_on_different_gpu_models_is_refused_naming_both(tmp_path):
    _, _, ratios = _ratios(tmp_path, _cluster(jax_node="gpu02", jax_gpu=H100))
    assert list(ratios.columns) == SPEEDUP_COLUMNS
    row = _by(ratios).loc[("jax", 1)]
    assert row["refused"] == REFUSED
    assert math.isnan(row["ratio"]) and math.isnan(row["ci_low"]) and math.isnan(row["ci_high"])
    assert not bool(row["resolved"]) and row["pairs"] == 0
    assert bool(row["node_differs"]) and row["node_detail"] == "nodes differ: torch gpu01, jax gpu02"
    kept = _by(ratios).loc[("tensorflow", 1)]
    assert kept["ratio"] == pytest.approx(0.5) and bool(kept["resolved"]) and pd.isna(kept["refused"])
    assert not bool(kept["node_differs"]) and pd.isna(kept["node_detail"])


def test_a_pair_of_one_model_on_two_nodes_keeps_its_ratio_and_is_flagged(tmp_path):
    _, _, ratios = _ratios(tmp_path, _cluster(jax_node="gpu02"))
    row = _by(ratios).loc[("jax", 1)]
    assert row["ratio"] == pytest.approx(1.5) and bool(row["resolved"]) and pd.isna(row["refused"])
    assert bool(row["node_differs"]) and row["node_detail"] == "nodes differ: torch gpu01, jax gpu02"


def test_a_pair_on_one_node_is_neither_refused_nor_flagged(tmp_path):
    _, _, ratios = _ratios(tmp_path, _cluster())
    assert ratios["refused"].isna().all() and not ratios["node_differs"].astype(bool).any()
    assert ratios["node_detail"].isna().all()
    assert _by(ratios).loc[("jax", 1), "ratio"] == pytest.approx(1.5)


def test_the_tidy_table_has_the_node_and_the_slurm_job(tmp_path):
    _, frame, _ = _ratios(tmp_path, _cluster(jax_node="gpu02"))
    ok = frame[frame["status"] == "ok"].set_index(["framework", "batch_size"])
    assert ok.loc[("jax", 1), "node"] == "gpu02" and ok.loc[("torch", 1), "node"] == "gpu01"
    assert ok.loc[("jax", 1), "slurm_job_id"] == "1" and ok.loc[("jax", 8), "slurm_job_id"] == "8"
    assert ok.loc[("jax", 1), "device"] == A100 and ok.loc[("jax", 1), "platform"] == "cuda"
    failed = frame[frame["status"] != "ok"].iloc[0]
    assert pd.isna(failed["node"]) and pd.isna(failed["slurm_job_id"]), "a failed cell without a placement"


def test_old_results_without_node_or_scheduler(tmp_path):
    """Results from before `node`/`scheduler`: the host is the node, no SLURM job; no placement at all: unknown."""
    results = _cluster()
    for result in results:
        if result["status"] == "ok":
            placement = result["provenance"]["placement"]
            del placement["node"], placement["scheduler"]
    results[1]["provenance"]["placement"]["host"] = "old02"  # JAX at batch 1 on another host
    results[3]["provenance"]["placement"] = None  # PyTorch at batch 8 recorded none
    _, frame, ratios = _ratios(tmp_path, results)
    ok = frame[frame["status"] == "ok"].set_index(["framework", "batch_size"])
    assert ok.loc[("jax", 1), "node"] == "old02" and ok.loc[("torch", 1), "node"] == "gpu01"
    assert pd.isna(ok.loc[("torch", 8), "node"]) and ok["slurm_job_id"].isna().all()
    by = _by(ratios)
    assert bool(by.loc[("jax", 1), "node_differs"]) and by.loc[("jax", 1), "ratio"] == pytest.approx(1.5)
    assert not bool(by.loc[("jax", 8), "node_differs"]), "an unknown node never counts as differing"


# --- the table --------------------------------------------------------------------------------------------------


def _ratio_cells(table: str, batch: int) -> list[str]:
    line = next(line for line in table.splitlines() if line.count(" & ") > 5 and line.split(" & ")[2] == str(batch))
    return [cell.removesuffix(r" \\") for cell in line.split(" & ")[6:]]


def test_the_table_marks_a_refused_and_a_node_differing_ratio(tmp_path):
    _, frame, refused = _ratios(tmp_path / "refused", _cluster(jax_node="gpu02", jax_gpu=H100))
    table = inference_table(frame, THREE, refused)
    assert _ratio_cells(table, 1)[0] == r"---$^{r}$", "refused: a marked dash"
    assert r"$^{r}$: no ratio, because its two cells ran on different device models" in table
    assert r"\fwbNumRatiosRefused{}" in table and r"$^{x}$: the ratio" not in table, "only the marks used"

    _, frame, across = _ratios(tmp_path / "across", _cluster(jax_node="gpu02"))
    table = inference_table(frame, THREE, across)
    assert _ratio_cells(table, 1)[0] == r"\textbf{1.50$\times$ {\scriptsize[1.50, 1.50]}}$^{x}$"
    assert r"$^{x}$: the ratio's two cells ran on different nodes" in table and "$^{r}$: no ratio" not in table

    _, frame, local = _ratios(tmp_path / "local", _cluster())
    table = inference_table(frame, THREE, local)
    assert "$^{x}$" not in table and "$^{r}$" not in table
    # a speedups CSV from before these columns reads as neither
    assert inference_table(frame, THREE, local.drop(columns=["refused", "node_differs", "node_detail"])) == table


# --- summaries --------------------------------------------------------------------------------------------------


def test_summary_macros_never_count_a_refused_ratio(tmp_path, tiny_config):
    paths, frame, ratios = _ratios(tmp_path, _cluster(jax_node="gpu02", jax_gpu=H100))
    config = validate_config({**tiny_config, "frameworks": THREE})
    text = macros(frame, read_tidy(tmp_path / "speedups.csv"), study_environment(paths), config)
    assert _macro(text, "fwbNumRatiosRefused") == "1" and _macro(text, "fwbNumRatiosNodeDiffer") == "0"
    batch8 = _by(ratios).loc[("jax", 8), "ratio"]
    assert _macro(text, "fwbNumRatios") == "2" and _macro(text, "fwbNumPairsAll") == "2"
    assert _macro(text, "fwbNumPairsExcludedDeviating") == "0"
    # the Results' findings count the kept ratio alone: the refused one is in no summary
    results = inference_results(frame, read_tidy(tmp_path / "speedups.csv"), None, config)
    (jax,) = [f for group in results.groups for f in group.findings if f.framework == "JAX"]
    assert jax.tally.comparisons == 1 and jax.tally.typical == pytest.approx(batch8)
    assert results.deviating == 0 and results.stand_ins_left_out == 0
    kept = _ratios(tmp_path / "across", _cluster(jax_node="gpu02"))[2]
    across = macros(frame, kept, {}, config)
    assert _macro(across, "fwbNumRatiosRefused") == "0" and _macro(across, "fwbNumRatiosNodeDiffer") == "1"
    groups = inference_results(frame, kept, None, config).groups
    assert [f.tally.comparisons for g in groups for f in g.findings if f.framework == "JAX"] == [2], "it is kept"


CONFIG = {
    "frameworks": THREE,
    "suites": ["inference"],
    "models": ["small_cnn"],
    "precisions": ["fp32"],
    "dataset": {"image_size": 32, "source": "synthetic"},
    "training": {},
    "fallbacks": {},
}
LEDGER = pd.DataFrame([{"control": "Device to itself", "status": "held", "measured": "", "where": ""}])


def _conclusions(ratios, frame):
    return conclusions_section(
        ratios=ratios,
        inference=frame,
        epochs=None,
        agreement=None,
        published=pd.DataFrame(columns=PUBLISHED_COLUMNS),
        ledger=LEDGER,
        config=CONFIG,
    )


def test_conclusions_skip_refused_ratios_and_say_how_many(tmp_path):
    _, frame, ratios = _ratios(tmp_path, _cluster(jax_node="gpu02", jax_gpu=H100))
    text = _conclusions(read_tidy(tmp_path / "speedups.csv"), frame)
    assert "JAX showed no resolved difference on the small CNN comparison (" in text, "one ratio counted, not two"
    assert (
        "One ratio was refused because the two cells ran on different device models (marked $^{r}$ in "
        r"Table~\ref{tab:inference})." in text
    )
    assert "different nodes" not in text
    _, frame, ratios = _ratios(tmp_path / "across", _cluster(jax_node="gpu02"))
    text = _conclusions(ratios, frame)
    assert "refused" not in text and "small CNN comparisons" in text
    assert "One ratio compares cells on different nodes with the same device model (marked $^{x}$) and is kept." in text
    _, frame, ratios = _ratios(tmp_path / "local", _cluster())
    text = _conclusions(ratios, frame)
    assert "refused" not in text and "different nodes" not in text


def test_the_training_comparison_is_refused_across_device_models_and_kept_across_nodes(tmp_path):
    results = [_training(framework) for framework in THREE]
    _on(results[0], "gpu01")
    _on(results[1], "gpu02", H100)
    _on(results[2], "gpu03")
    results[2]["metrics"]["epochs"][1]["time_s"] = 6.0  # TensorFlow's last epoch: half PyTorch's speed
    write_training_tables(_write(tmp_path, results, "train"), tmp_path / "training.csv", tmp_path / "step0.csv")
    epochs = read_tidy(tmp_path / "training.csv")
    assert set(epochs["node"]) == {"gpu01", "gpu02", "gpu03"} and set(epochs["device"]) == {A100, H100}
    sentence = training_paragraph(epochs)
    # eager PyTorch (these cells' only mode) against compiled frameworks: named, and said so
    assert sentence == (
        "Training the small CNN at batch 32, the last epoch took eager PyTorch 3.0~s. JAX has no comparable "
        f"time: the cells ran on different device models (PyTorch {A100}, JAX {H100}), so the comparison is refused. "
        "TensorFlow took 6.0~s, 0.50$\\times$ eager PyTorch's speed, on another node of the same device "
        "model (PyTorch gpu01, TensorFlow gpu03). This sets a compiled program against an eager one, for want of a "
        "cell in the ratio mode."
    )
    _on(results[1], "gpu01")
    results[2]["provenance"]["placement"]["node"] = "gpu01"
    write_training_tables(_write(tmp_path, results, "same"), tmp_path / "same.csv", tmp_path / "same0.csv")
    sentence = training_paragraph(read_tidy(tmp_path / "same.csv"))
    assert "JAX took 3.0~s, 1.0$\\times$ eager PyTorch's speed. This sets a compiled" in sentence
    assert "node" not in sentence


# --- the ledger -------------------------------------------------------------------------------------------------

PARITY = pd.DataFrame(columns=PARITY_COLUMNS)


def _ledger(results):
    rows = lg.ledger(results, PARITY, pd.DataFrame({"settings_differ": [False]}))
    return {row.control: (row.status, row.measured, row.where) for row in rows.itertuples()}


def test_the_ledger_reads_device_models_and_nodes_per_pair():
    one_node = _ledger(_cluster())
    assert one_node["Same node for each pair"] == (HELD, "every cell ran on 1 node (gpu01)", "")
    assert one_node["Same device and settings"][0] == HELD
    assert one_node["Same device and settings"][1].endswith("; one device model in 2 of 2 comparison pairs")

    # each comparison on one node, the two comparisons on two nodes: held
    apart = _cluster()
    for result in apart[3:]:
        if result["status"] == "ok":
            _on(result, "gpu02")
    assert _ledger(apart)["Same node for each pair"] == (
        HELD,
        "2 nodes; 2 of 2 comparison pairs each on one node",
        "",
    )

    across = _ledger(_cluster(jax_node="gpu02"))
    assert across["Same node for each pair"] == (
        NOT_HELD,
        "2 nodes; 1 of 2 comparison pairs each on one node",
        "nodes differ within inference small_cnn fp32 bs1 (torch gpu01, jax gpu02, tensorflow gpu01)",
    )
    assert across["Same device and settings"][0] == HELD

    status, _, where = _ledger(_cluster(jax_node="gpu02", jax_gpu=H100))["Same device and settings"]
    assert status == NOT_HELD
    assert (
        where
        == f"device models differ within inference small_cnn fp32 bs1 (torch {A100}, jax {H100}, tensorflow {A100})"
    )


def test_the_ledger_checks_training_pairs_and_old_cells():
    training = [_on(_training(framework), "gpu01") for framework in THREE]
    _on(training[2], "gpu02")
    status, _, where = _ledger(_cluster() + training)["Same node for each pair"]
    assert status == NOT_HELD
    assert where == "nodes differ within training small_cnn fp32 bs32 (torch gpu01, jax gpu01, tensorflow gpu02)"
    old = _cluster()
    for result in old:
        if result["status"] == "ok":
            result["provenance"]["placement"] = None
    assert _ledger(old)["Same node for each pair"][0] == NOT_MEASURED


def test_a_refused_ratio_is_not_set_beside_a_published_one(tmp_path):
    sources = _sources(
        tmp_path, [_published_row("resnet50", "pytorch", 1, 500.0), _published_row("resnet50", "jax", 1, 750.0)]
    )
    inference = pd.DataFrame([_cell("torch", "resnet50", 1, 80.0), _cell("jax", "resnet50", 1, 100.0)])
    speedups = pd.DataFrame([_published_ratio("resnet50", 1, 1.0, 1.0, 1.0) | {"ratio": math.nan, "refused": REFUSED}])
    (row,) = compare(sources, inference=inference, speedups=speedups, training=None, image_size=32).itertuples()
    assert row.verdict == FAILED and row.reason == f"ratio refused, {REFUSED}"


def test_the_setup_table_names_the_scheduler_and_the_nodes(tmp_path):
    """Cells from SLURM jobs on two nodes: the environment rows count the jobs and name the nodes; a local study on
    one machine has neither row."""
    paths = _write(tmp_path, _cluster(jax_node="gpu02"))
    env = study_environment(paths)
    assert env["Scheduler"] == "SLURM (2 jobs)" and env["Nodes"] == "2 (gpu01, gpu02)"
    local = tmp_path / "local"
    local.mkdir()
    assert "Scheduler" not in study_environment(_write(local, [_inference(f, 1) for f in THREE]))


def test_a_training_time_ratio_across_device_models_is_not_set_beside_a_published_one(tmp_path):
    """The published training times compare as a speed ratio only between cells on one device model (the
    conclusions' training sentence refuses the same pair)."""
    sources = _sources(
        tmp_path,
        [],
        training_rows=[
            _published_row("small_cnn", "pytorch", 32, 100.0, metric="time_s"),
            _published_row("small_cnn", "jax", 32, 200.0, metric="time_s"),
        ],
    )
    placed = {"device": {"torch": A100, "jax": H100}, "platform": {"torch": "cuda", "jax": "cuda"}}
    epochs = _epochs({"torch": (1.0, 1.0), "jax": (1.0, 3.0)}, **placed)
    inference = pd.DataFrame([_cell("torch", "small_cnn", 1, 1.0)])
    rows = compare(sources[1:], inference=inference, speedups=pd.DataFrame(), training=epochs, image_size=224)
    row = rows.iloc[0]
    assert row["verdict"] == FAILED and row["reason"] == f"ratio refused, {REFUSED}", row.to_dict()
    same = _epochs({"torch": (1.0, 1.0), "jax": (1.0, 3.0)}, device={"torch": A100, "jax": A100})
    kept = compare(sources[1:], inference=inference, speedups=pd.DataFrame(), training=same, image_size=224)
    assert kept.iloc[0]["ratio"] == pytest.approx(0.5)
