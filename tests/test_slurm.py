"""The study on a real SLURM cluster through Snakemake's SLURM executor and profiles/slurm: a one-node cluster
(slurmctld, slurmd, slurmdbd with MariaDB, munge; one GPU gres, this machine's CPUs) started on this machine by
tests/slurm_cluster.py, and a tiny study (small CNN, both frameworks, two inference batch sizes, one training batch
size) with `cluster.pairing: same_node`, so the training cells of both frameworks are one job group. Every benchmark
job goes through sbatch; the light rules run where Snakemake runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from fwbench.results import load_result
from tests import background, slurm_cluster
from tests.conftest import STUDY_ARGS, TINY_CONFIG, copy_workflow, write_study

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

CONFIG = {
    **TINY_CONFIG,
    "suites": ["inference", "training"],
    "inference": {**TINY_CONFIG["inference"], "trials": 1},
    "training": {"models": ["small_cnn"], "batch_sizes": [8], "epochs": 2, "timeout_s": 300},
    "cluster": {"pairing": "same_node"},
}
BENCHMARK_RULES = ("device_check", "device_peak", "parity_logits", "inference_group", "training_cell")
CPU_RULES = ("prepare_dataset", "loader_throughput", "model_facts")
# The node has two CPUs and ~80% of this machine's memory: each job asks for one core and 2 GB instead of the
# profile's GPU-node sizes; the status checks start after 2 s instead of 40 and repeat every 2 s (_command): a test,
# not a queue of hours.
OVERRIDES = [
    "--set-threads",
    *(f"{rule}=1" for rule in (*BENCHMARK_RULES, "prepare_dataset", "loader_throughput")),
    "--set-resources",
    *(f"{rule}:mem_mb=2000" for rule in (*BENCHMARK_RULES, *CPU_RULES)),
    "--slurm-init-seconds-before-status-checks",
    "2",
]
TRAINING_CELL = "results/cells/training/torch/eager/small_cnn/fp32/bs8.json"


def _stop_cluster(root: Path) -> None:
    if (root / "cluster").exists():
        slurm_cluster.stop(root / "cluster")


@background.study("cluster", stop=_stop_cluster)
def _cluster_and_study(root, venv_bin, env):
    """The one-node cluster started under root/cluster, and the study run on it in root/study: (cluster, the study's
    directory, its snakemake process, its wall time)."""
    if os.geteuid() != 0:
        pytest.skip("the SLURM test cluster needs root (it installs and starts SLURM's daemons)")
    if not shutil.which("apt-get") and not shutil.which("slurmctld"):
        pytest.skip("the SLURM test cluster needs Debian's slurm-wlm (apt-get)")
    cluster = slurm_cluster.start(root / "cluster")
    workdir = root / "study"
    workdir.mkdir()
    copy_workflow(workdir)
    write_study(workdir, CONFIG)
    started = time.monotonic()
    proc = _snakemake(workdir, venv_bin, env=env)
    return cluster, workdir, proc, time.monotonic() - started


@pytest.fixture(scope="module")
def cluster(background_studies):
    """The cluster, started with the study in the background (tests/background.py), stopped after this module."""
    try:
        yield background_studies.result(_cluster_and_study)[0]
    finally:
        background_studies.stop(_cluster_and_study)


def _command(venv_bin, *args):
    """The README's SLURM command with the test's study and overrides, through tests/slurm_snakemake.py: Snakemake's
    command line with the executor's status checks every 2 s."""
    snakemake = [str(venv_bin / "python"), str(Path(__file__).with_name("slurm_snakemake.py"))]
    return [*snakemake, "--workflow-profile", "profiles/slurm", *STUDY_ARGS, *OVERRIDES, *args]


def _env(venv_bin):
    return {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}"}


def _snakemake(workdir, venv_bin, *args, timeout=600, env=None):
    proc = subprocess.run(
        _command(venv_bin, *args),
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or _env(venv_bin),
    )
    return proc


def _rule_of(comment: str) -> str:
    """The rule of a job from the comment the executor gives it: "rule_{rule}[_wildcards_...]", or for a job group
    "rule_{group id}_{its rules}" (here: the training pair, "rule_training_small_cnn_fp32_bs8_training_cell")."""
    name = comment.removeprefix("rule_").split("_wildcards_")[0]
    return "training_cell" if name.endswith("training_cell") else name


def _sacct() -> list[dict[str, str]]:
    fields = ["JobIdRaw", "State", "Comment", "NodeList", "AllocTRES"]
    out = subprocess.run(
        ["sacct", "-X", "--parsable2", "--noheader", f"--format={','.join(fields)}", "--starttime=now-1days"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines() if line]


@pytest.fixture(scope="module")
def study(cluster, background_studies):
    _, workdir, proc, wall_s = background_studies.result(_cluster_and_study)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return workdir, proc.stdout + proc.stderr, wall_s


def test_every_benchmark_job_went_through_sbatch_and_each_cell_records_its_job(study, cluster):
    workdir, _, _ = study
    jobs = {job["JobIdRaw"]: job for job in _sacct()}
    by_rule: dict[str, list[dict[str, str]]] = {}
    for job in jobs.values():
        by_rule.setdefault(_rule_of(job["Comment"]), []).append(job)
    assert {rule: len(by_rule.get(rule, [])) for rule in (*BENCHMARK_RULES, *CPU_RULES)} == {
        "device_check": 1,
        "device_peak": 1,
        "parity_logits": 2,
        # one job per batch size: the first measures both (inference.share_workers), the other takes its held cells
        "inference_group": 2,
        "training_cell": 1,  # both frameworks' cells: one group, one job (cluster.pairing: same_node)
        "prepare_dataset": 1,
        "loader_throughput": 1,
        "model_facts": 1,
    }, by_rule
    assert set(by_rule) <= {*BENCHMARK_RULES, *CPU_RULES}, "the light rules run locally, not as jobs"
    for rule in BENCHMARK_RULES:
        for job in by_rule[rule]:
            assert job["State"] == "COMPLETED" and job["NodeList"] == cluster.node, job
            assert "gres/gpu=1" in job["AllocTRES"], job  # one GPU each
            # a job that measures has the node to itself (cluster.share_nodes: false → --exclusive: all its CPUs);
            # the device check measures nothing and takes its one core
            cpus = 1 if rule == "device_check" else os.cpu_count()
            assert f"cpu={cpus}," in job["AllocTRES"], job
    cells = sorted((workdir / "results" / "cells").rglob("*.json"))
    assert len(cells) == 6
    for path in cells:
        result = load_result(path)
        assert result["status"] == "ok", (path, result["reason"])
        scheduler = result["provenance"]["placement"]["scheduler"]
        assert scheduler["name"] == "slurm" and scheduler["node"] == cluster.node, scheduler
        rule = "inference_group" if "/inference/" in str(path) else "training_cell"
        assert _rule_of(jobs[scheduler["job_id"]]["Comment"]) == rule
        assert result["provenance"]["placement"]["node"] == cluster.node
    training = {
        load_result(p)["provenance"]["placement"]["scheduler"]["job_id"] for p in cells if "/training/" in str(p)
    }
    assert training == {by_rule["training_cell"][0]["JobIdRaw"]}, "the pair ran in one job, on one node"


def test_the_paper_is_built_and_a_second_run_has_nothing_to_do(study, venv_bin):
    workdir, _, _ = study
    assert (workdir / "results" / "report" / "paper.pdf").read_bytes().startswith(b"%PDF")
    proc = _snakemake(workdir, venv_bin, "-n")
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-2000:]


def _running_job(rule: str, timeout_s: float = 120.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "--noheader", "-o", "%i|%k|%T"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            job_id, comment, state = line.split("|")
            if _rule_of(comment) == rule and state == "RUNNING":
                return job_id
        time.sleep(0.2)
    raise AssertionError(f"no {rule} job was running within {timeout_s:g} s")


def test_a_job_killed_by_the_scheduler_is_retried_and_the_study_completes(study, venv_bin):
    """scancel the running training job (the pair's group): Snakemake sees it CANCELLED, the profile's retries
    resubmit it, and the command completes; no cell is half-written, and the retried cell records the new job. The
    cell is the command's target: what it feeds (tables, figures, the paper) is built from retried cells as from
    any other, which the first run's report already shows, so it is not rebuilt here."""
    workdir, _, _ = study
    proc = subprocess.Popen(
        _command(venv_bin, "--forcerun", TRAINING_CELL, "--", TRAINING_CELL),
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(venv_bin),
    )
    try:
        killed = _running_job("training_cell")
        subprocess.run(["scancel", killed], check=True)
        output, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output[-4000:]
    jobs = {job["JobIdRaw"]: job for job in _sacct()}
    assert jobs[killed]["State"].startswith("CANCELLED"), jobs[killed]
    result = load_result(workdir / TRAINING_CELL)
    retried = result["provenance"]["placement"]["scheduler"]["job_id"]
    assert result["status"] == "ok" and int(retried) > int(killed), (killed, retried)
    assert jobs[retried]["State"] == "COMPLETED" and _rule_of(jobs[retried]["Comment"]) == "training_cell"
    assert f"SLURM jobid {killed} " in output and "Trying to restart job" in output, output[-4000:]
