"""End to end through the snakemake CLI, in a fresh copy of the workflow: PDF, no-op rerun, partial reruns."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fwbench.results import load_result
from fwbench.workflow.rule_kinds import MEASURING_RULES
from tests import background
from tests.conftest import REPO, STUDY_ARGS, STUDY_FILE, copy_workflow, write_study


def _snakemake(workdir, venv_bin, *args, timeout=900, env=None):
    env = env or {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [str(venv_bin / "snakemake"), *args], cwd=workdir, capture_output=True, text=True, timeout=timeout, env=env
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _run_study(workdir, venv_bin, *args, timeout=900, env=None):
    """Snakemake on the test's own study file (conftest.write_study), beside the shipped config/ of the copy."""
    return _snakemake(workdir, venv_bin, *STUDY_ARGS, *args, timeout=timeout, env=env)


def _paper_text(workdir) -> str:
    """The study's paper as text (pdftotext)."""
    pdf = workdir / "results" / "report" / "paper.pdf"
    return subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout


def _planned_jobs(output) -> dict[str, int]:
    if "Nothing to be done" in output:
        return {}
    stats = output.split("Job stats:", 1)[1]
    return {m[0]: int(m[1]) for m in re.findall(r"^(\w+)\s+(\d+)$", stats, flags=re.M) if m[0] != "total"}


def _planned_cells(output) -> set[str]:
    """The cell results the planned jobs of a dry run write."""
    return {
        path
        for line in output.splitlines()
        if line.startswith("    output: ")
        for path in line.removeprefix("    output: ").split(", ")
        if path.startswith("results/cells/")
    }


# What adding one inference batch size plans: the new batch size's comparison job (fwbench.workflow.comparison_jobs)
# and what depends on it.
NEW_BATCH_SIZE_JOBS = {
    "inference_group": 1,
    "cell_index": 1,  # the inference suite's: what the analyses that read every cell take as input
    "aggregate_inference": 1,
    "inference_figure": 1,
    "mode_gain_figure": 1,  # its table (mode_gains.csv) is rewritten with the others
    "headline_figure": 1,  # so is the ratio table it plots
    "loader_figure": 1,
    "paper_tables": 1,
    # the generated sections read the new cells too; so do the parity logits, read from each framework's cells at
    # the largest batch size (fwbench.scenarios.logits): reading JSON, no framework imported
    "parity_logits": 2,
    "parity": 1,
    "published_comparison": 1,
    "op_profile": 1,
    "fairness_ledger": 1,
    "conclusions": 1,
    "study_time": 1,
    "paper": 1,
    "paper_check": 1,
    "all": 1,
}


# The module's study has every suite, so that the paper is built once with all its sections; the tests of each suite
# read its cells and sections, and check with dry runs that a suite's cells stand apart from the others'.
TRAINING = {"batch_sizes": [8], "epochs": 2, "lr": 0.001, "target_top1": 0.3}
MICRO = {
    "batch_sizes": [1, 64],
    "dim": 32,
    "trials": 2,  # intervals over processes, paired by launch with NumPy, at the least cost
    "warmup_iters": 2,
    "blocks": 4,
    "burst_s": 0.01,
    "repeat_disturbed": 0,  # as the inference suite's (conftest.TINY_CONFIG)
}


@background.study("workdir")
def _workflow_study(root, venv_bin, env):
    from tests.conftest import TINY_CONFIG

    copy_workflow(root)
    # Two trials: every comparison group runs interleaved rounds, as the default study's do.
    # and the profiling pass at batch 2 (docs/op-profile.md), as the default study profiles one batch size
    config = {
        **TINY_CONFIG,
        "suites": ["inference", "training", "micro"],
        "inference": {**TINY_CONFIG["inference"], "trials": 2, "profile": {"batch_sizes": [2], "steps": 2}},
        "training": TRAINING,
        "micro": MICRO,
    }
    write_study(root, config)
    _run_study(root, venv_bin, env=env)
    # the HTML report of the study as run (test_html_report_opens_in_a_browser_with_every_figure opens it)
    _run_study(root, venv_bin, "--report", "results/report/report.html", env=env)
    return root


@pytest.fixture(scope="module")
def workdir(background_studies):
    """The module's study, built in the background (tests/background.py); its tests change it in place."""
    return background_studies.result(_workflow_study)


def _set_config(workdir, **inference):
    path = workdir / STUDY_FILE
    config = yaml.safe_load(path.read_text())
    config["inference"].update(inference)
    path.write_text(yaml.safe_dump(config))


@pytest.mark.slow
def test_full_run_produces_the_paper(workdir):
    pdf = workdir / "results" / "report" / "paper.pdf"
    assert pdf.read_bytes().startswith(b"%PDF") and pdf.stat().st_size > 20_000
    shipped = sorted(p.relative_to(REPO / "report") for p in (REPO / "report").rglob("*") if p.is_file())
    after = sorted(p.relative_to(workdir / "report") for p in (workdir / "report").rglob("*") if p.is_file())
    assert after == shipped, "no LaTeX clutter in report/: only paper.tex and the templates, as shipped"
    cells = sorted((workdir / "results" / "cells" / "inference").rglob("*.json"))
    assert len(cells) == 4
    assert all(load_result(p)["status"] == "ok" for p in cells)
    # One job per comparison: both frameworks' cells at a batch size share a group and alternate round by round.
    for batch in (1, 2):
        torch_cell, jax_cell = (
            load_result(workdir / "results" / "cells" / "inference" / fw / "small_cnn" / "fp32" / f"bs{batch}.json")
            for fw in ("torch/eager", "jax/jit")
        )
        assert torch_cell["provenance"]["group"]["id"] == jax_cell["provenance"]["group"]["id"]
        # two rounds of two variants: a complete (Williams) design, each first once, in a seeded order
        torch_orders = [t["order"] for t in torch_cell["metrics"]["trials"]]
        assert sorted(torch_orders) == [1, 2]
        assert [t["order"] for t in jax_cell["metrics"]["trials"]] == [3 - order for order in torch_orders]
        assert torch_cell["provenance"]["group"]["order"]["complete"] is True
        assert torch_cell["metrics"]["ci95"]["scope"] == "between_processes"
    speedups = (workdir / "results" / "tables" / "speedups.csv").read_text()
    assert speedups.count("paired_rounds") == 2
    csv = (workdir / "results" / "tables" / "inference.csv").read_text().splitlines()
    assert len(csv) == 5
    for name in ("inference_throughput.pdf", "inference_throughput.png", "loader_throughput.pdf"):
        assert (workdir / "results" / "figures" / name).stat().st_size > 0
    macros = (workdir / "results" / "tables" / "macros.tex").read_text()
    assert r"\newcommand{\fwbNumCells}{4}" in macros
    # where the time goes: the batch-2 cells were profiled after their launches, the batch-1 cells were not
    for framework in ("torch/eager", "jax/jit"):
        metrics = {
            b: load_result(workdir / f"results/cells/inference/{framework}/small_cnn/fp32/bs{b}.json")["metrics"]
            for b in (1, 2)
        }
        assert "op_profile" not in metrics[1] and metrics[2]["op_profile"]["status"] == "ok", framework
    profile = pd.read_csv(workdir / "results" / "tables" / "op_profile.csv")
    assert set(profile["batch_size"]) == {2} and set(profile["framework"]) == {"torch", "jax"}
    assert profile.groupby("framework")["share"].sum().round(9).eq(1).all()
    assert (workdir / "results" / "tables" / "op_profile_top.csv").stat().st_size > 0
    assert r"\section{Where the time goes}" in (workdir / "results" / "tables" / "profile_section.tex").read_text()


@pytest.mark.slow
def test_the_paper_passes_its_check_as_a_reader_sees_it(workdir):
    """The paper_check job ran after the PDF and found nothing: no undefined reference, "??", unexpanded macro,
    overfull box, unreferenced float or text below 7 pt; every page was rendered to an image."""
    report = json.loads((workdir / "results" / "report" / "paper_check.json").read_text())
    assert report["problems"] == [], report["problems"]
    assert report["pages"] > 1 and len(report["images"]) == report["pages"]
    for number in range(1, report["pages"] + 1):
        image = workdir / "results" / "report" / "pages" / f"page-{number}.png"
        assert image.read_bytes().startswith(b"\x89PNG") and image.stat().st_size > 1000, image


@pytest.mark.slow
def test_time_to_report_covers_every_job_and_reaches_the_paper(workdir):
    """Every job left its time (a benchmark file, or its own record for the measuring jobs), every measuring process
    its phases, and the paper's table adds up to the study's wall time."""
    results = workdir / "results"
    jobs = {p.relative_to(results / "benchmarks").parts[0] for p in (results / "benchmarks").rglob("*.*")}
    assert {"inference_group", "device_peak", "prepare_dataset", "model_facts", "paper_tables", "paper"} <= jobs
    assert not list((results / "benchmarks" / "inference_group").rglob("*.tsv")), "no smaps sampler beside cells"
    summary = json.loads((results / "tables" / "study_time.json").read_text())
    # inference 2 workers (one per framework, each serving every cell of its launch) x 2 trials and a compile launch
    # for JAX's (the launch cache is on by default, fwbench.running.compile_launch; eager PyTorch compiles nothing),
    # training 2 cells x 1 run, micro 3 workers (NumPy and both frameworks, each serving both operations at both
    # batch sizes) x 2 trials and JAX's compile launch
    assert summary["runs"] == 1 and summary["processes"] == (2 * 2 + 1) + 2 + (3 * 2 + 1)
    assert sum(summary["seconds"].values()) == pytest.approx(summary["wall_s"])
    assert 0 < summary["timed_share"] < 1 and summary["overhead_median_s"] > 0
    text = _paper_text(workdir)
    text = " ".join(text.split())
    # The LaTeX build's own time is in the PDF: the first pass's placeholders were replaced.
    # (Only the sentence's start: pdftotext may interleave the two columns' lines after it.)
    assert re.search(r"This study took (\d+ min )?\d+ s from its first", text), text[-3000:]
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "study_time.py"), str(results)], capture_output=True, text=True
    )
    assert done.returncode == 0 and "study wall time" in done.stdout, done.stderr


@pytest.mark.slow
def test_the_paper_has_its_ledger_published_comparison_and_conclusions(workdir):
    """The study measured its own parity, its ledger read the fresh cells' digests, and the generated sections are in
    the PDF (the tiny study matches no published figure: the section says so)."""
    tables = workdir / "results" / "tables"
    parity = pd.read_csv(tables / "parity.csv")
    assert list(parity["framework"]) == ["jax"] and parity["holds"].all()
    # PyTorch's float64 logits gave its own float32 error, which the float32 bound is at least three times
    assert parity["reference_error"].between(0, 1e-5, inclusive="neither").all(), parity.to_dict("records")
    ledger = pd.read_csv(tables / "ledger.csv").set_index("control")["status"]
    for control in ("Same weights in every framework", "Same input bytes and order", "Same threads"):
        assert ledger[control] == "held", ledger
    assert pd.read_csv(tables / "published.csv").empty
    text = _paper_text(workdir)
    text = " ".join(text.split())
    for heading in ("Fairness ledger", "Published vs reproduced", "Where the time goes", "Conclusions and limitations"):
        assert heading.upper() in text.upper(), heading
    assert "No published figure matches a cell of this study" in text


# The jobs that measure or compute with a framework (and the data and weights they read): none runs where restored
# results build the paper (the workflow's own list, which a report-only restore also relies on).
MEASURING_JOBS = MEASURING_RULES
FRAMEWORK_MODULES = ("torch", "torchvision", "jax", "jaxlib", "flax", "optax", "tensorflow", "keras")


@pytest.mark.slow
def test_archived_results_build_the_paper_in_a_fresh_checkout_where_no_framework_can_be_imported(
    workdir, venv_bin, tmp_path
):
    """fwbench archive in the study's checkout, fwbench restore in a fresh copy of the workflow without its data or
    weights, in an environment where no framework can be imported (tests/hidden_frameworks): the usual snakemake
    command plans and runs no measuring job, builds the paper, and its tables are the measuring checkout's byte for
    byte (the study's timing tables aside, which add the jobs run here)."""
    env = _hidden_frameworks_env(venv_bin)
    archive = tmp_path / "study.tar.xz"
    fwbench = [str(venv_bin / "fwbench")]
    made = subprocess.run([*fwbench, "archive", str(workdir), str(archive), "--config", STUDY_FILE], **_quietly(env))
    assert made.returncode == 0 and "cells) of study.yaml" in made.stdout, made.stderr
    fresh = copy_workflow(tmp_path / "fresh")
    (fresh / STUDY_FILE).write_text((workdir / STUDY_FILE).read_text())
    restored = subprocess.run([*fwbench, "restore", str(archive), "--into", str(fresh)], **_quietly(env))
    assert restored.returncode == 0, restored.stderr
    assert not list((fresh / "results" / "data").glob("*.npy")) and not list(fresh.glob("results/weights/*.npz"))

    planned = _planned_jobs(_run_study(fresh, venv_bin, "-n", env=env))
    assert planned and not MEASURING_JOBS & set(planned), planned
    _run_study(fresh, venv_bin, env=env)
    assert json.loads((fresh / "results" / "report" / "paper_check.json").read_text())["problems"] == []
    tables = sorted(p.relative_to(workdir) for p in (workdir / "results" / "tables").iterdir())
    differ = [str(t) for t in tables if (fresh / t).read_bytes() != (workdir / t).read_bytes()]
    assert differ and all(name.startswith("results/tables/study_time") for name in differ), differ
    assert _planned_jobs(_run_study(fresh, venv_bin, "-n", env=env)) == {}

    # a study that needs a cell the archive lacks is not completed from the restored results
    config = yaml.safe_load((fresh / STUDY_FILE).read_text())
    config["inference"]["batch_sizes"] = [*config["inference"]["batch_sizes"], 8]
    (fresh / STUDY_FILE).write_text(yaml.safe_dump(config))
    refused = subprocess.run([str(venv_bin / "snakemake"), *STUDY_ARGS, "-n"], cwd=fresh, **_quietly(env))
    assert refused.returncode != 0 and "fwbench: results/ holds results restored from" in refused.stderr


def _hidden_frameworks_env(venv_bin) -> dict[str, str]:
    """An environment in which no framework can be imported (tests/hidden_frameworks)."""
    return {
        **os.environ,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO / "tests" / "hidden_frameworks"), os.environ.get("PYTHONPATH")])
        ),
        "FWBENCH_TESTS_HIDE": ",".join(FRAMEWORK_MODULES),
    }


GPU_SMOKE_ARCHIVE = REPO / "docs" / "runs" / "2026-11-27-gpu-smoke-h200" / "study.tar.xz"


@pytest.mark.slow
def test_the_first_gpu_study_is_written_up_by_this_code_from_its_archive(venv_bin, tmp_path):
    """The H200 smoke study's archive was made by older code: `fwbench restore --report-only` restores what was
    measured there, and the printed command plans no measuring job (no framework can be imported here) and writes
    the tables, figures and paper with this checkout's code, the paper check clean."""
    env = _hidden_frameworks_env(venv_bin)
    fresh = copy_workflow(tmp_path / "fresh")
    refused = subprocess.run(
        [str(venv_bin / "fwbench"), "restore", str(GPU_SMOKE_ARCHIVE), "--into", str(fresh)], **_quietly(env)
    )
    assert refused.returncode != 0 and "--report-only" in refused.stderr, refused.stderr
    restored = subprocess.run(
        [str(venv_bin / "fwbench"), "restore", str(GPU_SMOKE_ARCHIVE), "--into", str(fresh), "--report-only"],
        **_quietly(env),
    )
    assert restored.returncode == 0, restored.stderr
    command = restored.stdout.split("paper with:\n", 1)[1].splitlines()[0].split()
    assert command[:6] == ["snakemake", "--cores", "all", "--resources", "gpu=1", "--configfile"], command
    args = ["--cores", "2", *command[5:]]
    planned = _planned_jobs(_snakemake(fresh, venv_bin, *args, "-n", env=env))
    assert planned and not MEASURING_RULES & set(planned), planned
    _snakemake(fresh, venv_bin, *args, env=env)
    check = json.loads((fresh / "results" / "report" / "paper_check.json").read_text())
    assert check["problems"] == [], check
    text = " ".join(_paper_text(fresh).split())
    assert "H200" in text and "ViT-B/16" in text
    assert "Measured at commit e86603fc4251 (dirty), written up at" in text, text[:600]


def _quietly(env):
    return {"env": env, "capture_output": True, "text": True, "timeout": 600}


@pytest.mark.slow
def test_reruns_are_minimal(workdir, venv_bin):
    assert _planned_jobs(_run_study(workdir, venv_bin, "-n")) == {}, "a complete run leaves nothing to do"

    old_cells = {p: p.stat().st_mtime_ns for p in (workdir / "results" / "cells").rglob("*.json")}
    _set_config(workdir, batch_sizes=[1, 2, 4])
    output = _run_study(workdir, venv_bin, "-n")
    assert _planned_jobs(output) == NEW_BATCH_SIZE_JOBS
    new_cells = {f"results/cells/inference/{variant}/small_cnn/fp32/bs4.json" for variant in ("torch/eager", "jax/jit")}
    assert _planned_cells(output) == new_cells
    _run_study(workdir, venv_bin)
    # only the new batch size is measured; no cell of it or another suite is measured again
    assert {p for p, mtime in old_cells.items() if p.stat().st_mtime_ns != mtime} == set()
    assert len(list((workdir / "results" / "cells" / "inference").rglob("*.json"))) == 6
    log = workdir / "results" / "logs" / "cells" / "inference" / "small_cnn" / "fp32" / "bs4.log"
    assert log.read_text().endswith("\nbs4: measured\n"), "its job measured it alone"
    assert _planned_jobs(_run_study(workdir, venv_bin, "-n")) == {}

    _set_config(workdir, blocks=3)  # changes what every cell measures: every batch size's job
    assert _planned_jobs(_run_study(workdir, venv_bin, "-n"))["inference_group"] == 3
    _set_config(workdir, blocks=2)
    assert _planned_jobs(_run_study(workdir, venv_bin, "-n")) == {}

    rule = workdir / "workflow" / "rules" / "inference.smk"
    original = rule.read_text()
    rule.write_text(original.replace("harness_version=HARNESS_VERSION", 'harness_version="bumped"'))
    try:
        assert _planned_jobs(_run_study(workdir, venv_bin, "-n"))["inference_group"] == 3
    finally:
        rule.write_text(original)


def _study_cells(config) -> set[str]:
    from fwbench.study.config import validate_config
    from fwbench.study.grid import cell_paths

    return set(cell_paths(validate_config(config)))


# Each edit of the study, and the cells a dry run must plan after it: exactly the new ones, except for a framework,
# whose comparisons are measured again whole (a comparison's cells are measured interleaved, in the same launches).
STUDY_EDITS = {
    "a model": (lambda c: c.update(models=[*c["models"], "mobilenet_v3_small"]), "new"),
    "a precision": (lambda c: c.update(precisions=[*c["precisions"], "bf16"]), "new"),
    "a micro batch size": (lambda c: c["micro"].update(batch_sizes=[*c["micro"]["batch_sizes"], 512]), "new"),
    "a framework": (lambda c: c.update(frameworks=[*c["frameworks"], "tensorflow"]), "its comparisons"),
}


@pytest.mark.slow
@pytest.mark.parametrize("edit", list(STUDY_EDITS))
def test_an_added_axis_value_plans_exactly_its_cells(workdir, venv_bin, edit):
    path = workdir / STUDY_FILE
    original = path.read_text()
    config = yaml.safe_load(original)
    assert not _planned_cells(_run_study(workdir, venv_bin, "-n")), "a complete study plans no cell"
    change, expected = STUDY_EDITS[edit]
    edited = json.loads(json.dumps(config))
    change(edited)
    # written in another key order too, as an editor that sorts keys would
    path.write_text(yaml.safe_dump(_reordered(edited), sort_keys=False))
    try:
        planned = _planned_cells(_run_study(workdir, venv_bin, "-n"))
    finally:
        path.write_text(original)
    new = _study_cells(edited) - _study_cells(config)
    if expected == "new":
        assert new and planned == new, sorted(planned ^ new)
    else:  # every inference comparison gains the framework's cells: the other frameworks' cells of it measured again
        inference = {p for p in _study_cells(edited) if "/cells/inference/" in p}
        assert {p for p in planned if "/cells/inference/" in p} == inference


@pytest.mark.slow
def test_lint_is_clean(venv_bin):
    output = _snakemake(REPO, venv_bin, "--lint")
    assert "Congratulations" in output


@pytest.mark.slow
def test_image_folder_study_plans_no_download(workdir, venv_bin, tmp_path):
    (tmp_path / "photos" / "a").mkdir(parents=True)
    (tmp_path / "photos" / "b").mkdir()
    config = tmp_path / "folder.yaml"
    # The tiny study with another dataset: a study file naming its base (fwbench.study.files)
    config.write_text(
        yaml.safe_dump({"extends": STUDY_FILE, "dataset": {"source": "imagefolder", "path": str(tmp_path / "photos")}})
    )
    planned = _planned_jobs(_snakemake(workdir, venv_bin, "-n", "--configfile", str(config)))
    assert planned["prepare_dataset"] == 1 and "download_dataset" not in planned


def _without_suite(workdir, venv_bin, suite: str) -> dict[str, int]:
    """What the study plans once `suite` is dropped from it (the study file restored after): nothing measured."""
    path = workdir / STUDY_FILE
    original = path.read_text()
    config = yaml.safe_load(original)
    config["suites"] = [name for name in config["suites"] if name != suite]
    path.write_text(yaml.safe_dump(config))
    try:
        return _planned_jobs(_run_study(workdir, venv_bin, "-n"))
    finally:
        path.write_text(original)


MEASURING_RULES = {"inference_group", "training_cell", "micro_group", "device_check", "device_peak", "parity_logits"}


@pytest.mark.slow
def test_the_training_suite_has_its_cells_and_paper_section_and_stands_apart(workdir, venv_bin):
    cells = sorted((workdir / "results" / "cells" / "training").rglob("*.json"))
    assert [load_result(p)["status"] for p in cells] == ["ok", "ok"]
    section = (workdir / "results" / "tables" / "training_section.tex").read_text()
    assert r"\includegraphics[width=\columnwidth]{training_curves}" in section and "small" in section
    assert (workdir / "results" / "figures" / "training_curves.pdf").stat().st_size > 0
    # adding or dropping the suite reruns the report, never a cell of another suite
    assert not MEASURING_RULES & set(_without_suite(workdir, venv_bin, "training")), "a cell would be measured again"
    assert _planned_jobs(_run_study(workdir, venv_bin, "-n")) == {}


@pytest.mark.slow
def test_the_micro_suite_has_its_cells_and_paper_section_and_stands_apart(workdir, venv_bin):
    planned = _planned_jobs(_run_study(workdir, venv_bin, "-n", "--forcerun", "micro_operands"))
    # one job per operation and batch size (the first of an operation measures both, micro.share_workers)
    assert planned["micro_group"] == 2 * 2 and planned["micro_operands"] == 1 and planned["micro_analysis"] == 1
    assert "inference_group" not in planned and "training_cell" not in planned, "micro cells alone depend on it"
    cells = sorted((workdir / "results" / "cells" / "micro").rglob("*.json"))
    assert len(cells) == 3 * 2 * 2 and {load_result(p)["status"] for p in cells} == {"ok"}
    # the first job measured every operation and batch size, one worker per framework per launch serving all four
    # of its cells (micro.share_workers: launch, the default)
    results = [load_result(p) for p in cells]
    assert len({r["provenance"]["group"]["id"] for r in results}) == 1, "one group: every operation's cells"
    assert {r["metrics"]["worker"]["cells"] for r in results} == {2 * 2}
    section = (workdir / "results" / "tables" / "micro_section.tex").read_text()
    assert r"\section{Micro-benchmarks}" in section and "{micro}" in section
    assert (workdir / "results" / "figures" / "micro.pdf").stat().st_size > 0
    text = _paper_text(workdir)
    assert "Micro-benchmarks" in text and "NumPy" in text
    assert not MEASURING_RULES & set(_without_suite(workdir, venv_bin, "micro")), "a cell would be measured again"


@pytest.mark.slow
def test_device_cuda_without_a_gpu_stops_before_any_cell(tmp_path, venv_bin):
    """On this CPU machine a study that must run on a GPU stops at the device check with one line; no cell runs."""
    from tests.conftest import TINY_CONFIG

    copy_workflow(tmp_path)
    write_study(tmp_path, {**TINY_CONFIG, "device": "cuda"})
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [str(venv_bin / "snakemake"), *STUDY_ARGS], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "fwbench: device: cuda, but torch sees only cpu" in output or "fwbench: device: cuda, but jax" in output
    assert not (tmp_path / "results" / "cells").exists() and not (tmp_path / "results" / "device.json").exists()
    assert not (tmp_path / "results" / "probe").exists()


def _reordered(value):
    """The same mapping with every level's keys in reverse order."""
    if isinstance(value, dict):
        return {key: _reordered(value[key]) for key in reversed(list(value))}
    return value


def _params_changes(workdir, venv_bin) -> set[str]:
    output = _run_study(workdir, venv_bin, "--list-changes", "params")
    return {line for line in output.splitlines() if line.startswith("results/")}


@pytest.mark.slow
def test_params_do_not_depend_on_key_order_or_number_spelling(workdir, venv_bin):
    """Snakemake compares params by repr: the rules pass canonical values, so rewriting the config in another key
    order plans only what a real change needs, and an equal value written differently plans nothing."""
    path = workdir / STUDY_FILE
    original = path.read_text()
    config = yaml.safe_load(original)
    # What an earlier test may have left to do (e.g. the loader after the training-suite test restored the config).
    baseline, baseline_changes = _planned_jobs(_run_study(workdir, venv_bin, "-n")), _params_changes(workdir, venv_bin)
    assert "inference_group" not in baseline and not any("/cells/" in f for f in baseline_changes)
    try:
        inference = config["inference"]
        added = {**inference, "batch_sizes": [*inference["batch_sizes"], 2 * max(inference["batch_sizes"])]}
        for text in (
            yaml.safe_dump(_reordered({**config, "inference": added}), sort_keys=False),
            yaml.safe_dump({**config, "inference": added}, sort_keys=True),
        ):
            path.write_text(text)
            # the new batch size's comparison job and what depends on it, nothing else measured again
            output = _run_study(workdir, venv_bin, "-n")
            assert _planned_jobs(output) == {**baseline, **NEW_BATCH_SIZE_JOBS}
            assert {Path(p).name for p in _planned_cells(output)} == {f"bs{added['batch_sizes'][-1]}.json"}
            # Snakemake 9.27 alone would list the last output of every job here (fwbench.workflow.state): no
            # measured cell changed params
            assert _params_changes(workdir, venv_bin) == baseline_changes, "no measured cell's job changed"

        spelled = {**inference, "timeout_s": float(inference["timeout_s"])}
        path.write_text(yaml.safe_dump(_reordered({**config, "inference": spelled}), sort_keys=False))
        assert "timeout_s: 120.0\n" in path.read_text() and isinstance(inference["timeout_s"], int)
        assert _planned_jobs(_run_study(workdir, venv_bin, "-n")) == baseline, "120 and 120.0 are the same setting"
    finally:
        path.write_text(original)


@pytest.mark.slow
def test_html_report_opens_in_a_browser_with_every_figure(workdir, tmp_path):
    """`snakemake --report` after the study (made with it, `_workflow_study`), opened in headless Chromium
    (fwbench.workflow.report_check): the page loads without errors and lists the paper, figures and tables by
    category, each with its description, every figure decodes, and a screenshot is saved."""
    from fwbench.workflow.report_check import check_report

    expected = {
        "Paper": ["paper.pdf"],
        "Inference": ["inference_throughput.png", "inference.csv", "speedups.csv"],
        "Data": ["loader_throughput.png", "manifest.json", "throughput.json"],
        "Where the time goes": ["op_profile.png", "op_profile.csv", "op_profile_top.csv"],
    }
    shot = tmp_path / "report.png"
    check = check_report(
        workdir / "results" / "report" / "report.html", expected, screenshot=shot, show="inference_throughput.png"
    )
    assert check.ok, check.summary()
    figures = {
        "Inference: results/figures/inference_throughput.png",
        "Data: results/figures/loader_throughput.png",
        "Where the time goes: results/figures/op_profile.png",
    }
    assert figures <= set(check.figures), check.summary()
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000
