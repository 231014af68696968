"""Faults as findings: every fault a measuring child can meet, injected into the real worker and driven through the
runner, becomes a result with the right failure kind; a known workaround is retried in a fresh process and recorded
as a deviation; a memory limit stops a runaway child; a child never outlives its runner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fwbench.results import load_result
from fwbench.running import memory_limit as memlimit
from fwbench.running.failures import KINDS, Workaround, classify, ladder_from_config
from fwbench.running.faults import INJECT_FAULT_ENV, fault_for, parse
from fwbench.running.memory_limit import MemoryLimit, system_oom_kills
from fwbench.running.runner import run_cell
from fwbench.study.config import ConfigError, validate_config
from fwbench.study.grid import Cell, cells
from tests import background
from tests.conftest import STUDY_ARGS, TINY_CONFIG, copy_workflow, run_tiny_cell, write_study

DEFAULT_LADDER = validate_config(TINY_CONFIG)["fallbacks"]


@pytest.fixture(scope="module")
def study(tiny_study):
    return tiny_study


def _cell(study, framework: str, batch: int = 1) -> Cell:
    return next(c for c in cells(study[1]) if c.framework == framework and c.batch_size == batch)


def _run(study, tmp_path, monkeypatch, fault: str | None, framework="torch", fallbacks=DEFAULT_LADDER, **settings):
    if fault is None:
        monkeypatch.delenv(INJECT_FAULT_ENV, raising=False)
    else:
        monkeypatch.setenv(INJECT_FAULT_ENV, fault)
    result = run_tiny_cell(study, _cell(study, framework), tmp_path, settings=settings, fallbacks=fallbacks)
    assert load_result(tmp_path / "cell.json") is not None  # on disk and schema-valid, whatever happened
    return result


def _failure(result) -> dict:
    assert result["status"] == "failed" and result["metrics"] is None
    assert result["failure"]["reason"] == result["reason"] and result["deviations"] == []
    assert result["failure"]["kind"] in KINDS
    return result["failure"]


# --- classification, without processes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "kind"),
    [
        ({"returncode": None, "output": "", "timeout_s": 5}, "timeout"),
        ({"returncode": -9, "output": "", "oom_killed": True}, "host_oom"),
        ({"returncode": -9, "output": ""}, "crash"),
        ({"returncode": -11, "output": "Fatal Python error: Segmentation fault"}, "crash"),
        ({"returncode": 1, "output": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"}, "device_oom"),
        (
            {"returncode": 1, "output": "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory", "on_gpu": True},
            "device_oom",
        ),
        ({"returncode": 1, "output": "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory"}, "host_oom"),
        ({"returncode": 1, "output": "MemoryError"}, "host_oom"),
        ({"returncode": 1, "output": "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3 GiB"}, "host_oom"),
        ({"returncode": 1, "output": "XlaRuntimeError: INTERNAL: Failed to autotune convolution"}, "compiler"),
        ({"returncode": 1, "output": "triton.compiler.errors.CompilationError: at 1:0"}, "compiler"),
        ({"returncode": 1, "output": "ValueError: shapes do not match"}, "exception"),
        ({"returncode": 0, "output": "", "result_error": "JSONDecodeError"}, "no_result"),
    ],
)
def test_failures_are_classified_into_the_closed_set(kwargs, kind):
    failure = classify(**kwargs)
    assert failure is not None and failure.kind == kind, failure


def test_a_success_is_not_a_failure_and_oom_outranks_compiler():
    assert classify(returncode=0, output="all good") is None
    # an autotuner that ran out of device memory is an out-of-memory finding, which the ladder must not retry
    failure = classify(returncode=1, output="Autotuning failed: CUDA_ERROR_OUT_OF_MEMORY", on_gpu=True)
    assert failure.kind == "device_oom"
    assert Workaround.from_config(DEFAULT_LADDER["ladder"][0]).matches(failure, "autotun", "jax") is None


def test_ladder_rungs_match_kind_pattern_and_framework():
    autotune = Workaround.from_config(DEFAULT_LADDER["ladder"][0])
    failure = classify(returncode=1, output="XlaRuntimeError: INTERNAL: autotuning: CUDA_ERROR_ILLEGAL_ADDRESS")
    assert autotune.name == "xla_autotune_off" and "autotun" in autotune.matches(failure, "", "jax")
    assert autotune.matches(failure, "", "torch") is None  # an XLA flag cannot help PyTorch
    assert autotune.apply({"XLA_FLAGS": "--xla_dump_to=/tmp/x"})["XLA_FLAGS"] == (
        "--xla_dump_to=/tmp/x --xla_gpu_autotune_level=0"
    )
    assert ladder_from_config({**DEFAULT_LADDER, "enabled": False}) == []
    assert [rung.name for rung in ladder_from_config(DEFAULT_LADDER)] == [
        "xla_autotune_off",
        "triton_gemm_off",
        "cudnn_benchmark_off",
    ]


@pytest.mark.parametrize(
    ("ladder", "message"),
    [
        ([{"name": "a", "kinds": ["device_oom"], "pattern": "x", "env": {"A": "1"}}], "fallbacks.ladder[0].kinds"),
        ([{"name": "a", "kinds": ["crash"], "pattern": "(", "env": {"A": "1"}}], "fallbacks.ladder[0].pattern"),
        ([{"name": "a", "kinds": ["crash"], "pattern": "x"}], "fallbacks.ladder[0]"),
        ([{"name": "a", "kinds": ["crash"], "pattern": "x", "env": {"A": "1"}}] * 2, "fallbacks.ladder[1].name"),
    ],
)
def test_a_bad_ladder_is_a_config_error_naming_the_rung(ladder, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate_config({**TINY_CONFIG, "fallbacks": {"ladder": ladder}})


def test_fault_spec_parsing_and_cell_globs():
    assert parse("raise@inference/jax/*,hang") == [("raise", "inference/jax/*"), ("hang", "*")]
    with pytest.raises(ValueError, match="unknown fault 'explode'"):
        parse("explode")
    env = {INJECT_FAULT_ENV: "segfault@inference/torch/*/bs2"}
    assert fault_for("inference/torch/small_cnn/fp32/bs2", env) == "segfault"
    assert fault_for("inference/jax/small_cnn/fp32/bs2", env) is None
    assert fault_for("inference/torch/small_cnn/fp32/bs2", {}) is None


# --- memory limits, with a fake cgroup file system ----------------------------------------------------------------


def test_a_cgroup_v2_limit_is_made_under_the_own_cgroup(tmp_path):
    root, own = tmp_path / "cgroup", "/user.slice/job"
    (root / own.lstrip("/")).mkdir(parents=True)
    for name in ("cgroup.controllers", "cgroup.procs"):
        (root / name).write_text("")
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(f"0::{own}\n")
    limit = MemoryLimit.create(256, root=root, proc_cgroup=proc)
    assert limit.mechanism == "cgroup_v2" and limit.cgroup.parent == root / own.lstrip("/")
    assert (limit.cgroup / "memory.max").read_text() == str(256 * 1024 * 1024)
    limit.in_child()
    assert (limit.cgroup / "cgroup.procs").read_text() == str(os.getpid())
    assert limit.oom_kills() == 0
    (limit.cgroup / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert limit.oom_kills() == 1


def test_without_a_writable_cgroup_the_limit_is_rlimit_as(tmp_path):
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text("0::/\n")
    limit = MemoryLimit.create(512, root=tmp_path / "absent", proc_cgroup=proc)
    assert limit.mechanism == "rlimit_as" and limit.cgroup is None and limit.oom_kills() == 0
    assert limit.describe() == {"limit_mb": 512, "mechanism": "rlimit_as"}


def test_system_oom_kill_counter_is_read_from_vmstat(tmp_path):
    vmstat = tmp_path / "vmstat"
    vmstat.write_text("nr_free_pages 1\noom_kill 7\n")
    assert system_oom_kills(vmstat) == 7
    assert system_oom_kills(tmp_path / "missing") is None


# --- injected faults through the runner and the real worker -------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "kind", "reason"),
    [
        ("raise", "exception", "exception (exit code 1): RuntimeError: injected fault: raise"),
        ("segfault", "crash", "crashed: killed by SIGSEGV"),
        ("no_result", "no_result", "child exited 0 without a readable result"),
        ("truncated_result", "no_result", "child exited 0 without a readable result: JSONDecodeError"),
        ("device_oom", "device_oom", "device oom (exit code 1): RuntimeError: CUDA out of memory"),
        ("compiler", "compiler", "compiler (exit code 1): RuntimeError: XlaRuntimeError: INTERNAL: ptxas"),
    ],
)
def test_each_injected_fault_is_recorded_with_its_kind(study, tmp_path, monkeypatch, fault, kind, reason):
    failure = _failure(_run(study, tmp_path, monkeypatch, fault))
    assert failure["kind"] == kind and failure["reason"].startswith(reason), failure
    assert failure["workarounds_tried"] == [] and failure["trial"] == 1


def test_a_hanging_child_is_a_timeout(study, tmp_path, monkeypatch):
    result = _run(study, tmp_path, monkeypatch, "hang", timeout_s=2)
    assert _failure(result)["kind"] == "timeout" and "inference.timeout_s" in result["reason"]


def test_a_runaway_child_is_stopped_at_its_memory_limit(study, tmp_path, monkeypatch):
    from fwbench.running import children

    limits = []  # this cell's limits (a test in the other xdist worker may hold a cgroup of its own meanwhile)
    create = children.MemoryLimit.create

    def create_and_keep(*args, **kwargs):
        limits.append(create(*args, **kwargs))
        return limits[-1]

    monkeypatch.setattr(children.MemoryLimit, "create", create_and_keep)
    result = _run(study, tmp_path, monkeypatch, "host_alloc", max_host_mb=400)
    failure = _failure(result)
    assert failure["kind"] == "host_oom" and "inference.max_host_mb limit of 400 MB" in failure["reason"], failure
    assert result["provenance"]["host_memory_limit"]["limit_mb"] == 400
    # and the machine's own cgroup is left as it was: no per-cell cgroup survives its child
    mechanism = result["provenance"]["host_memory_limit"]["mechanism"]
    assert limits and all(limit.mechanism == mechanism for limit in limits)
    if mechanism.startswith("cgroup"):
        assert all(str(limit.cgroup).startswith("/sys/fs/cgroup/") for limit in limits)
        assert not [limit.cgroup for limit in limits if limit.cgroup.exists()]


def test_the_rlimit_fallback_also_stops_a_runaway_child(study, tmp_path, monkeypatch):
    monkeypatch.setattr(memlimit, "CGROUP_ROOT", tmp_path / "no-cgroups")
    result = _run(study, tmp_path, monkeypatch, "host_alloc", max_host_mb=1500)
    failure = _failure(result)
    assert result["provenance"]["host_memory_limit"] == {"limit_mb": 1500, "mechanism": "rlimit_as"}
    assert failure["kind"] == "host_oom" and "MemoryError" in failure["reason"], failure


def test_a_healthy_cell_runs_under_a_generous_limit(study, tmp_path, monkeypatch):
    result = _run(study, tmp_path, monkeypatch, None, max_host_mb=4000)
    assert result["status"] == "ok" and result["failure"] is None and result["deviations"] == []
    assert result["provenance"]["host_memory_limit"]["limit_mb"] == 4000


def test_the_autotune_workaround_is_retried_and_recorded_as_a_deviation(study, tmp_path, monkeypatch):
    result = _run(study, tmp_path, monkeypatch, "autotune_once", framework="jax")
    assert result["status"] == "ok" and result["failure"] is None, result["reason"]
    (deviation,) = result["deviations"]
    assert deviation["name"] == "xla_autotune_off" and "autotun" in deviation["applied_because"]
    assert deviation["first_failure"]["kind"] == "compiler" and deviation["first_failure"]["trial"] == 1
    assert deviation["changes"]["xla_flags"] == ["--xla_gpu_autotune_level=0"]
    # the measuring process really ran with the workaround, and the retry is in the log beside the first failure
    assert "--xla_gpu_autotune_level=0" in result["provenance"]["framework"]["settings"]["xla_flags"]
    log = (tmp_path / "cell.log").read_text()
    assert "attempt 2 with xla_autotune_off" in log and "Failed to autotune" in log
    assert result["metrics"]["trials"][0]["attempts"] == 2
    assert result["provenance"]["injected_faults"] == "autotune_once"


def test_nothing_is_retried_without_a_matching_rung(study, tmp_path, monkeypatch):
    disabled = {**DEFAULT_LADDER, "enabled": False}
    failure = _failure(_run(study, tmp_path, monkeypatch, "autotune_once", framework="jax", fallbacks=disabled))
    assert failure["kind"] == "compiler" and failure["workarounds_tried"] == []
    # the XLA rungs are for XLA's frameworks only: a PyTorch cell failing the same way stays failed
    failure = _failure(_run(study, tmp_path, monkeypatch, "autotune_once", framework="torch"))
    assert failure["kind"] == "compiler" and failure["workarounds_tried"] == []


def test_a_workaround_that_does_not_help_is_named_in_the_failure(study, tmp_path, monkeypatch):
    ladder = {
        "enabled": True,
        "ladder": [{"name": "env_tweak", "kinds": ["exception"], "pattern": "injected", "env": {"A": "1"}}],
    }
    failure = _failure(_run(study, tmp_path, monkeypatch, "raise", fallbacks=ladder))
    assert failure["kind"] == "exception" and failure["workarounds_tried"] == ["env_tweak"]
    assert failure["reason"].endswith("(also with workaround env_tweak)")
    assert (tmp_path / "cell.log").read_text().count("injected fault: raise") >= 2


def test_device_oom_is_never_retried(study, tmp_path, monkeypatch):
    ladder = {
        "enabled": True,
        "ladder": [{"name": "any", "kinds": ["exception", "compiler", "crash"], "pattern": ".", "env": {"A": "1"}}],
    }
    failure = _failure(_run(study, tmp_path, monkeypatch, "device_oom", fallbacks=ladder))
    assert failure["kind"] == "device_oom" and failure["workarounds_tried"] == []


def test_a_measuring_child_dies_with_its_runner(study, tmp_path):
    """A runner killed by a scheduler or a user must not leave its child measuring (holding the GPU slot)."""
    root, _, settings = study
    script = textwrap.dedent(
        f"""
        from fwbench.study.grid import Cell
        from fwbench.running.runner import run_cell
        cell = Cell(**{_cell(study, "torch").as_dict()!r})
        run_cell(cell, {{**{settings!r}, "timeout_s": 300}}, data_dir={str(root / "data")!r},
                 weights_path={str(root / "weights.npz")!r}, num_classes=4, threads=1,
                 out_path={str(tmp_path / "cell.json")!r})
        """
    )
    env = {**os.environ, INJECT_FAULT_ENV: "hang"}
    runner = subprocess.Popen([sys.executable, "-c", script], env=env, start_new_session=True)
    try:
        child = None
        deadline = time.monotonic() + 60
        while child is None and time.monotonic() < deadline:
            for stat in Path("/proc").glob("[0-9]*/stat"):
                try:
                    fields = stat.read_text().rsplit(")", 1)[1].split()
                    cmdline = (stat.parent / "cmdline").read_bytes()
                except OSError:
                    continue
                if int(fields[1]) == runner.pid and b"fwbench.running.worker" in cmdline:
                    child = int(stat.parent.name)
            time.sleep(0.2)
        assert child is not None, "the runner never started its child"
        time.sleep(1.0)  # let the child reach its hang
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
            state = (Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split() or ["?"])[0]
            if state == "Z":
                break
            time.sleep(0.1)
        alive = (
            Path(f"/proc/{child}").exists()
            and Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        )
        assert not alive, "the measuring child outlived its runner"
        assert not (tmp_path / "cell.json").exists(), "no result from a killed runner"
    finally:
        if runner.poll() is None:
            runner.kill()


# --- the whole study with injected faults -------------------------------------------------------------------------


# The crash fails one cell of torch's warm worker, the autotuner failure one cell of JAX's.
CRASH, AUTOTUNE = "inference/torch/eager/small_cnn/fp32/bs2", "inference/jax/jit/small_cnn/fp32/bs1"


@background.study("two_fault_study")
def _two_fault_study(root, venv_bin, env):
    """The tiny study run with a crash and an autotuner failure injected; its results/ directory."""
    copy_workflow(root)
    write_study(root, TINY_CONFIG)
    env = {**env, INJECT_FAULT_ENV: f"segfault@{CRASH},autotune_once@{AUTOTUNE}"}
    proc = subprocess.run(
        [str(venv_bin / "snakemake"), *STUDY_ARGS], cwd=root, capture_output=True, text=True, timeout=900, env=env
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root / "results"


@pytest.fixture(scope="module")
def two_fault_study(background_studies):
    return background_studies.result(_two_fault_study)


@pytest.mark.slow
def test_a_study_with_two_injected_faults_builds_its_paper_listing_them(two_fault_study):
    """A crash and an autotuner failure (fixed by the ladder) in one study: the study completes, the crash is a
    failed cell of kind crash, the other cell ran with its workaround, and the paper's table lists both. Each
    framework's warm worker serves both batch sizes (inference.share_workers): the crash fails the other batch size
    of its worker too, naming the same crash, and the workaround applies to both cells of the retried worker."""
    results = two_fault_study
    for batch in (1, 2):
        crashed = load_result(results / "cells" / f"inference/torch/eager/small_cnn/fp32/bs{batch}.json")
        assert crashed["status"] == "failed" and crashed["failure"]["kind"] == "crash", batch
        assert crashed["failure"]["signal"] == "SIGSEGV" and "Segmentation fault" in crashed["stderr_tail"]
        worked_around = load_result(results / "cells" / f"inference/jax/jit/small_cnn/fp32/bs{batch}.json")
        assert worked_around["status"] == "ok", batch
        assert [d["name"] for d in worked_around["deviations"]] == ["xla_autotune_off"], batch
    assert AUTOTUNE.endswith("bs1") and CRASH.endswith("bs2"), "each fault names one cell of its worker"
    tidy = (results / "tables" / "inference.csv").read_text()
    assert "crash" in tidy and "xla_autotune_off" in tidy
    text = subprocess.run(
        ["pdftotext", str(results / "report" / "paper.pdf"), "-"], capture_output=True, text=True, check=True
    ).stdout
    assert "xla_autotune_off" in text and "crash" in text and "SIGSEGV" in text


def test_a_training_cell_retried_with_a_workaround_starts_again_from_epoch_zero(study, tmp_path, monkeypatch):
    root, config, _ = study
    settings = {k: v for k, v in config["training"].items() if k != "batch_sizes"}
    settings.update(epochs=1, loader=config["loader"], seed=config["seed"])
    state = tmp_path / "state"
    state.mkdir()
    (state / "stale-from-the-failed-attempt").write_text("x")
    monkeypatch.setenv(INJECT_FAULT_ENV, "autotune_once@training/jax/*")
    cell = Cell("training", "jax", "small_cnn", "fp32", 4, 16)
    result = run_cell(
        cell,
        settings,
        data_dir=root / "data",
        weights_path=root / "weights.npz",
        num_classes=4,
        threads=1,
        out_path=tmp_path / "cell.json",
        state_dir=state,
        fallbacks=DEFAULT_LADDER,
    )
    assert result["status"] == "ok", result["reason"]
    assert [d["name"] for d in result["deviations"]] == ["xla_autotune_off"]
    assert result["metrics"]["resumed_from_epoch"] is None and len(result["metrics"]["epochs"]) == 1
    assert not (state / "stale-from-the-failed-attempt").exists()
