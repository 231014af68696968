"""Time to report: job times (Snakemake benchmark files and the measuring jobs' own records) and the measuring
processes' phases add up to the study's wall time, row by row."""

import json
import os
import time

import pandas as pd
import pytest

from fwbench.analysis.time import study_time
from fwbench.workflow.jobtime import JobTime, read_jobs, timed_job


def _job(rule, start, end, name=None):
    return JobTime(rule, name or rule, end - start, start, end, None, "test")


def _processes(rows):
    cells = []
    for suite, framework, wall, phases in rows:
        cell = {"suite": suite, "framework": framework, "model": "m", "precision": "fp32", "batch_size": 1}
        if suite == "inference":
            cells.append({"cell": cell, "metrics": {"trials": [{"duration_s": wall, "phases_s": phases}]}})
        else:
            cells.append({"cell": cell, "metrics": {"phases_s": phases}, "provenance": {"duration_s": wall}})
    return study_time.process_rows(cells)


def test_rows_add_up_to_the_wall_time_with_overlap_and_gaps():
    jobs = [
        _job("model_facts", 0, 10, "a"),
        _job("init_weights", 5, 12),  # runs beside model_facts: 5 s counted twice
        _job("inference_group", 13, 40),  # 1 s gap before it
        _job("paper_tables", 41, 45),
        _job("study_time", 45, 46),  # the breakdown's own job is not counted
    ]
    phases = {"process_start_s": 0.1, "harness_imports_s": 0.2, "framework_import_s": 1.5, "load_s": 1.0}
    phases |= {"compile_s": 2.0, "first_call_s": 0.5, "warmup_s": 0.3, "timed_s": 3.0}
    processes = _processes([("inference", "jax", 10.0, phases), ("inference", "torch", 12.0, None)])
    summary = study_time.breakdown(jobs, processes)
    seconds = summary["seconds"]
    assert summary["wall_s"] == pytest.approx(45.0)
    assert sum(seconds.values()) == pytest.approx(summary["wall_s"])
    assert seconds["overlap"] == pytest.approx(-5.0) and seconds["scheduler"] == pytest.approx(2.0)
    assert seconds["runner"] == pytest.approx(27.0 - 22.0)
    assert seconds["timed"] == pytest.approx(3.0) and seconds["compile"] == pytest.approx(2.5)
    assert seconds["startup"] == pytest.approx(1.8)
    # The process without phases (e.g. one that failed) is all "rest of the process", never dropped.
    assert seconds["process_other"] == pytest.approx(10.0 - 3.0 - 0.3 - 2.5 - 1.8 - 1.0 + 12.0)
    assert summary["overhead_median_s"] == pytest.approx(10.0 - 3.0 - 2.5)  # the one process with phases
    assert summary["framework_import_median_s"] == {"jax": pytest.approx(1.5)}
    assert summary["runs"] == 1 and summary["jobs"] == 4
    assert summary["timed_share"] == pytest.approx(3.0 / 45.0)


def test_a_long_idle_gap_separates_runs_and_is_not_study_time():
    jobs = [_job("prepare_dataset", 0, 10), _job("paper_tables", 10_000, 10_004)]
    summary = study_time.breakdown(jobs, pd.DataFrame())
    assert summary["runs"] == 2
    assert summary["wall_s"] == pytest.approx(14.0)


def test_training_phases_and_latex_from_the_paper_rule():
    phases = {"framework_import_s": 0.6, "load_s": 1.0, "compile_s": 20.0, "step0_s": 3.0, "timed_s": 30.0}
    phases |= {"evaluation_s": 5.0, "checkpoint_s": 0.5}
    processes = _processes([("training", "jax", 62.0, phases)])
    summary = study_time.breakdown([_job("training_cell", 0, 63)], processes, latex_s=4.0)
    assert summary["seconds"]["evaluation"] == pytest.approx(8.5)
    assert summary["seconds"]["latex"] == pytest.approx(4.0) and summary["wall_s"] == pytest.approx(67.0)
    assert summary["overhead_processes"] == 0  # the per-process overhead target is about inference processes
    table = study_time.latex_table(summary, latex_pending=True)
    assert r"\fwbLatexSeconds" in table and r"\fwbStudyWallToPdfSeconds" in table
    assert r"\newcommand{\fwbTimedShare}{" in study_time.latex_macros(summary)


def test_job_times_from_benchmark_files_and_records(tmp_path):
    rule_dir = tmp_path / "model_facts"
    rule_dir.mkdir()
    tsv = rule_dir / "small_cnn.tsv"
    tsv.write_text("s\th:m:s\tmax_rss\tcpu_time\n6.5\t0:00:06\t300\t5.9\n")
    os.utime(tsv, (1000.0, 1000.0))
    with timed_job(tmp_path / "inference_group" / "small_cnn" / "fp32" / "bs1.json", "inference_group", {"b": "1"}):
        time.sleep(0.05)
    jobs = {job.rule: job for job in read_jobs(tmp_path)}
    assert jobs["model_facts"].wall_s == 6.5 and jobs["model_facts"].finished_at == 1000.0
    assert jobs["model_facts"].cpu_s == 5.9 and jobs["model_facts"].name == "model_facts/small_cnn"
    record = jobs["inference_group"]
    assert record.wall_s >= 0.05 and record.finished_at - record.started_at == pytest.approx(record.wall_s)
    assert record.started_at <= time.time() - 0.05  # the process's creation time, not the record's


@pytest.mark.parametrize(
    ("name", "content"),
    [("x.tsv", "foo\tbar\n1\t2\n"), ("x.json", json.dumps({"rule": "x"})), ("x.txt", "hello")],
)
def test_a_foreign_file_among_job_times_is_named(tmp_path, name, content):
    (tmp_path / "rule").mkdir()
    (tmp_path / "rule" / name).write_text(content)
    with pytest.raises(ValueError, match=str(tmp_path / "rule" / name)):
        read_jobs(tmp_path)


def test_no_job_times_is_an_error_not_an_empty_table():
    with pytest.raises(ValueError, match="no job times"):
        study_time.breakdown([_job("study_time", 0, 1)], pd.DataFrame())
