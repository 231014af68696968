"""Faults as findings: failure kinds and workarounds (deviations) in the tidy tables, the ratios, the paper's tables
and macros. Hand-built results only (no subprocess)."""

from __future__ import annotations

import copy

import pandas as pd
import pytest

from fwbench.analysis.common.partners import deviation_set, deviations_differ
from fwbench.analysis.failures.report import failure_macros, failures_table, largest_batch_table
from fwbench.analysis.inference.findings import inference_results
from fwbench.analysis.inference.macros import macros
from fwbench.analysis.inference.ratios import speedups, write_speedups
from fwbench.analysis.inference.tables import inference_table
from fwbench.analysis.inference.tidy import read_tidy, write_tidy
from fwbench.analysis.paper.failures import failure_summary
from fwbench.analysis.paper.inference import inference_results_section
from fwbench.analysis.paper.training_section import training_section
from fwbench.analysis.training.epochs import epoch_rows
from fwbench.analysis.training.macros import training_macros
from fwbench.analysis.training.step0 import step0_agreement
from fwbench.io import atomic_write_json
from fwbench.results import load_result
from fwbench.study.config import validate_config

PROVENANCE = {
    "python": "3.11.7",
    "harness_version": "6",
    "cpu_model": "Test CPU",
    "git": {"commit": "abc", "dirty": False},
    "env": {},
    "libraries": {},
}


def _failure(kind, reason, tried=()):
    return {
        "kind": kind,
        "reason": reason,
        "exit_code": 1 if kind != "crash" else None,
        "signal": "SIGSEGV" if kind == "crash" else None,
        "trial": 1,
        "workarounds_tried": list(tried),
    }


def _deviation(name, kind="compiler"):
    return {
        "name": name,
        "applied_because": f"{kind} failure matched /[Aa]utotun/ ('Autotun')",
        "first_failure": {
            "kind": kind,
            "reason": f"{kind} (exit code 1): boom",
            "exit_code": 1,
            "signal": None,
            "trial": 1,
        },
        "changes": {"env": {}, "xla_flags": ["--xla_gpu_autotune_level=0"]},
    }


def _cell(framework, batch, model="small_cnn", suite="inference"):
    return {
        "suite": suite,
        "framework": framework,
        "model": model,
        "precision": "fp32",
        "batch_size": batch,
        "image_size": 32,
    }


def _base(framework, batch, **cell):
    return {
        "schema_version": 2,
        "settings": {},
        "inputs": {},
        "stderr_tail": None,
        "cell": _cell(framework, batch, **cell),
        "provenance": copy.deepcopy(PROVENANCE),
        "failure": None,
        "deviations": [],
    }


def _framework(framework):
    return {"versions": {framework: "9.9"}, "device": {"name": "cpu"}, "settings": {"intra_op_threads": 2}}


def _ok(framework, batch, throughput, deviations=(), model="small_cnn"):
    result = _base(framework, batch, model=model)
    p50 = batch * 1000.0 / throughput
    result.update(
        status="ok",
        reason=None,
        samples_ms=[p50] * 3,
        deviations=[_deviation(name) for name in deviations],
        metrics={
            "throughput_img_s": throughput,
            "latency_ms": {"p50": p50, "p95": p50, "p99": p50, "mean": p50},
            "compile_s": None,
            "first_call_s": 0.5,
            "rss_mb": {"before": 100.0, "peak": 200.0},
            "missing": {},
        },
    )
    result["provenance"]["framework"] = _framework(framework)
    return result


def _failed(framework, batch, kind, reason, tried=(), model="small_cnn", suite="inference"):
    result = _base(framework, batch, model=model, suite=suite)
    result.update(status="failed", reason=reason, metrics=None, samples_ms=[], stderr_tail="Traceback ...")
    result["failure"] = _failure(kind, reason, tried)
    result["provenance"]["framework"] = None
    return result


OOM = "device out of memory (exit code 1): torch.OutOfMemoryError: CUDA out of memory"


def _inference_results():
    return [
        _ok("torch", 1, 100.0),
        _ok("jax", 1, 150.0),  # a clean pair: ratio 1.5
        _ok("torch", 8, 400.0),
        _ok("jax", 8, 200.0, deviations=["xla_autotune_off"]),  # a deviating pair: ratio 0.5
        _failed("torch", 64, "device_oom", OOM),
        _ok("jax", 64, 800.0),
        _failed("torch", 128, "device_oom", OOM),
        _failed("jax", 128, "device_oom", OOM),
        _failed("torch", 1, "crash", "crashed: killed by SIGSEGV", tried=["cudnn_benchmark_off"], model="resnet50"),
        _ok("jax", 1, 50.0, model="resnet50"),
    ]


def _write(tmp_path, results, prefix="cell"):
    paths = []
    for index, result in enumerate(results):
        path = tmp_path / f"{prefix}{index}.json"
        atomic_write_json(path, result)
        paths.append(path)
    return paths


@pytest.fixture
def study(tmp_path):
    paths = _write(tmp_path, _inference_results())
    frame = write_tidy(paths, tmp_path / "inference.csv")
    ratios = write_speedups(paths, tmp_path / "speedups.csv")
    return paths, frame, ratios


def _row(frame, framework, batch, model="small_cnn"):
    match = frame[(frame["framework"] == framework) & (frame["batch_size"] == batch) & (frame["model"] == model)]
    assert len(match) == 1
    return match.iloc[0]


def test_tidy_rows_carry_failure_kind_and_deviations(study, tmp_path):
    _, frame, _ = study
    assert _row(frame, "torch", 64)["failure_kind"] == "device_oom"
    assert _row(frame, "torch", 1, "resnet50")["failure_kind"] == "crash"
    assert _row(frame, "torch", 1, "resnet50")["workarounds_tried"] == "cudnn_benchmark_off"
    assert pd.isna(_row(frame, "jax", 64)["failure_kind"]), "an ok cell has no failure kind"
    deviating = _row(frame, "jax", 8)
    assert deviating["deviations"] == "xla_autotune_off"
    assert deviating["deviation_detail"] == "xla_autotune_off: compiler failure matched /[Aa]utotun/ ('Autotun')"
    assert deviating["deviation_first_failure"] == "compiler"
    assert pd.isna(_row(frame, "torch", 8)["deviations"])
    # the partners of the deviating pair are both flagged, beside (not merged with) the GPU settings check
    assert _row(frame, "torch", 8)["deviation_differs"] and deviating["deviation_differs"]
    assert not _row(frame, "torch", 1)["deviation_differs"] and not _row(frame, "jax", 1)["deviation_differs"]
    assert not _row(frame, "jax", 64)["deviation_differs"], "a partner that failed has no ratio to flag"
    assert not frame["settings_differ"].any()
    reread = read_tidy(tmp_path / "inference.csv")
    assert reread["deviations"].fillna("").tolist() == frame["deviations"].fillna("").tolist()


def test_deviation_sets_ignore_order_and_missing_values():
    assert deviation_set(None) == deviation_set(float("nan")) == deviation_set("") == frozenset()
    assert deviation_set("a+b") == frozenset({"a", "b"})
    assert not deviations_differ("a+b", "b+a") and not deviations_differ(None, float("nan"))
    assert deviations_differ("a", None) and deviations_differ("a", "b")


def test_speedups_mark_pairs_that_ran_with_different_workarounds(study):
    paths, _, ratios = study
    by_batch = ratios[ratios["model"] == "small_cnn"].set_index("batch_size")
    assert by_batch.index.tolist() == [1, 8], "bs64 and bs128 have no pair of successful cells"
    assert by_batch.loc[8, "ratio"] == pytest.approx(0.5) and bool(by_batch.loc[8, "deviation_differs"])
    assert by_batch.loc[8, "deviation_detail"] == "jax: xla_autotune_off; torch: none"
    assert not bool(by_batch.loc[1, "deviation_differs"]) and pd.isna(by_batch.loc[1, "deviation_detail"])
    # the same workaround on both sides is not a deviating pair
    both = [_ok("torch", 4, 100.0, ["x"]), _ok("jax", 4, 100.0, ["x"])]
    assert not speedups(both)["deviation_differs"].iloc[0]


def test_inference_table_marks_deviating_ratios_and_cells(study):
    _, frame, ratios = study
    # the throughput table (the first of the two): throughputs and ratios
    table = inference_table(frame, ["torch", "jax"], ratios).split(r"\label{tab:inference-latency}")[0]
    rows = [line for line in table.splitlines() if line.count("&") > 3 and r"\textbf" not in line]
    small = {line.split("&")[2].strip(): line for line in rows if line.split("&")[0].strip() in ("small CNN", "")}
    assert "$^{d}$" not in small["1"], small["1"]
    assert r"0.500$\times$ {\scriptsize[0.500, 0.500]}$^{w}$$^{d}$" in small["8"], small["8"]
    assert "200$^{d}$" in small["8"], "the cell that ran with the workaround is marked too"
    assert "400$^{d}$" not in small["8"]


def test_failures_table_lists_kinds_workarounds_and_training_cells(study):
    _, frame, _ = study
    training = pd.DataFrame(
        [
            {
                "framework": "torch",
                "model": "small_cnn",
                "precision": "fp32",
                "batch_size": 32,
                "status": "failed",
                "reason": "timeout: no result after 60 s",
                "failure_kind": "timeout",
                "path": "t0",
            },
            {
                "framework": "jax",
                "model": "small_cnn",
                "precision": "fp32",
                "batch_size": 32,
                "status": "ok",
                "epoch": 0,
                "deviations": "triton_gemm_off",
                "deviation_first_failure": "crash",
                "deviation_detail": "triton_gemm_off: crash failure matched /[Tt]riton/",
                "path": "t1",
            },
            {
                "framework": "jax",
                "model": "small_cnn",
                "precision": "fp32",
                "batch_size": 32,
                "status": "ok",
                "epoch": 1,
                "deviations": "triton_gemm_off",
                "deviation_first_failure": "crash",
                "deviation_detail": "triton_gemm_off: crash failure matched /[Tt]riton/",
                "path": "t1",
            },
        ]
    )
    text = failures_table(frame, training, summary=failure_summary(frame, training))
    assert text.startswith(
        "Over all suites, 5 cells failed (3 device out of memory, 1 crash, 1 timeout) and 2 cells ran with a "
        "workaround from the fallback ladder."
    ), text.splitlines()[0]
    body = [line for line in text.splitlines() if line.count("&") >= 7 and r"\textbf" not in line]
    assert len(body) == 7, "5 failed cells and 2 deviating ones (the training cell once, not once per epoch)"
    oom = [line for line in body if r"\texttt{device\_oom}" in line]
    assert len(oom) == 3 and all(line.split("&")[5].strip() == "failed" for line in oom)
    crash = next(line for line in body if r"\texttt{crash}" in line and "failed" in line)
    assert r"tried \texttt{cudnn\_benchmark\_off}" in crash and "SIGSEGV" in crash
    autotune = next(line for line in body if r"\texttt{xla\_autotune\_off}" in line)
    assert autotune.startswith("inference & JAX/Flax & small CNN & fp32 & 8 & ok$^{d}$ & \\texttt{compiler}")
    assert "compiler failure matched" in autotune
    triton = next(line for line in body if "triton" in line)
    assert triton.startswith("training & JAX/Flax") and r"\texttt{crash}" in triton
    assert r"\label{tab:failures}" in text and r"\label{tab:largest_batch}" in text


def test_failures_table_says_so_when_nothing_failed_or_deviated(study):
    _, frame, _ = study
    clean = frame[(frame["status"] == "ok") & frame["deviations"].isna()]
    text = failures_table(clean, summary=failure_summary(clean))
    assert text.splitlines()[0] == "No cell failed and none needed a workaround."
    assert r"\begin{table" not in text
    assert "No inference cell ran out of memory; the largest batch size measured was 64." in text


def test_largest_batch_that_fit(study):
    _, frame, _ = study
    table = largest_batch_table(frame)
    assert table.startswith("3 inference cells ran out of memory.")
    rows = [line.replace(" ", "") for line in table.splitlines() if line.count("&") == 4 and "textbf" not in line]
    assert r"smallCNN&fp32&PT&8&64(device)\\" in rows
    assert r"smallCNN&fp32&JAX&64&128(device)\\" in rows
    assert r"ResNet-50&fp32&PT&---&---\\" in rows, "a crash is no out-of-memory finding"
    assert r"ResNet-50&fp32&JAX&1&---\\" in rows
    note = table.split(r"\parbox{\linewidth}")[1]
    assert "Frameworks: PT PyTorch, JAX JAX/Flax." in note, "the note under the table spells out the short names"
    no_oom = largest_batch_table(frame[frame["failure_kind"] != "device_oom"])
    assert no_oom == "No inference cell ran out of memory; the largest batch size measured was 64.\n"


def test_failure_macros_count_every_kind(study):
    _, frame, _ = study
    defs = failure_macros(frame)
    assert defs["fwbNumFailedDeviceOom"] == "3" and defs["fwbNumFailedCrash"] == "1"
    assert defs["fwbNumFailedHostOom"] == "0" and defs["fwbNumFailedNoResult"] == "0"
    assert defs["fwbNumFailedCells"] == "4" and defs["fwbNumDeviatingCells"] == "1"
    assert "fwbFailureSummary" not in defs, "the sentence is the template's (report/templates/failure_summary.tex.j2)"
    assert failure_summary(frame) == (
        "Over all suites, 4 cells failed (3 device out of memory, 1 crash) and 1 cell ran with a workaround from "
        "the fallback ladder."
    )


def _macro(text, name):
    line = next(line for line in text.splitlines() if line.startswith(rf"\newcommand{{\{name}}}"))
    return line[len(rf"\newcommand{{\{name}}}{{") : -1]


def test_macros_leave_deviating_pairs_out_unless_configured(study, tiny_config):
    _, frame, ratios = study
    config = validate_config(tiny_config)
    assert config["fallbacks"]["include_deviating_in_summary"] is False
    text = macros(frame, ratios, {}, config)
    # pairs: small_cnn bs1 (1.5), bs8 (0.5, deviating), bs64 has no torch cell; resnet50 bs1 has no torch cell
    assert _macro(text, "fwbNumPairsAll") == "2" and _macro(text, "fwbNumPairsDeviating") == "1"
    assert _macro(text, "fwbNumPairsExcludedDeviating") == "1"
    results = inference_results(frame, ratios, None, config)
    assert (results.deviating, results.deviating_counted) == (1, False)
    (counted,) = [f.tally for g in results.groups for f in g.findings]
    assert (counted.comparisons, counted.typical, counted.low) == (1, 1.5, 1.5)
    assert "One ratio compares cells that ran with different workarounds (marked $^{d}$) and is left out" in (
        inference_results_section(frame, ratios, None, config)
    )
    assert r"\texttt{xla\_autotune\_off}" in _macro(text, "fwbFallbackLadder")

    config["fallbacks"]["include_deviating_in_summary"] = True
    text = macros(frame, ratios, {}, config)
    assert _macro(text, "fwbNumPairsExcludedDeviating") == "0"
    # the geometric mean of 1.5 and 0.5 (the arithmetic median, 1.00, is gone)
    (counted,) = [f.tally for g in inference_results(frame, ratios, None, config).groups for f in g.findings]
    assert (counted.comparisons, counted.typical, counted.low) == (2, pytest.approx(0.866, abs=5e-4), 0.5)
    assert "the study's configuration counts them here" in inference_results_section(frame, ratios, None, config)

    config["fallbacks"]["enabled"] = False
    assert _macro(macros(frame, ratios, {}, config), "fwbFallbackLadder") == "disabled in this study's configuration"


def _training(framework, deviations=(), model="small_cnn"):
    result = _base(framework, 32, model=model, suite="training")
    epoch = {
        "epoch": 0,
        "time_s": 2.0,
        "img_s": 500.0,
        "compile_s": 0.1,
        "train_loss": 2.0,
        "val_loss": 2.1,
        "top1": 0.4,
        "top5": 0.9,
        "data_wait_frac": 0.01,
    }
    result.update(
        status="ok",
        reason=None,
        samples_ms=[1.0],
        deviations=[_deviation(name, "crash") for name in deviations],
        metrics={
            "epochs": [epoch, {**epoch, "epoch": 1, "top1": 0.5 if framework == "jax" else 0.6}],
            "step0": {"loss": 2.3, "loss_after_step": 2.2, "grad_norm": 1.0},
            "recipe": {},
            "train_time_s": 4.0,
            "final_top1": 0.5,
            "rss_mb": {"max": 300.0},
            "missing": {},
        },
    )
    result["provenance"]["framework"] = _framework(framework)
    return result


def test_training_tables_mark_and_exclude_deviating_pairs(tmp_path):
    results = [
        _training("torch"),
        _training("jax", deviations=["triton_gemm_off"]),
        _failed("torch", 32, "host_oom", "host out of memory: killed", model="resnet50", suite="training"),
        _training("jax", model="resnet50"),
    ]
    frame = epoch_rows(_write(tmp_path, results, "train"))
    assert {"failure_kind", "deviations", "deviation_detail", "deviation_differs"} <= set(frame.columns)
    failed = frame[frame["status"] == "failed"]
    assert len(failed) == 1 and failed["failure_kind"].iloc[0] == "host_oom"
    small = frame[frame["model"] == "small_cnn"]
    assert small["deviation_differs"].all() and len(small) == 4
    assert not frame[frame["model"] == "resnet50"]["deviation_differs"].any()
    agreement = step0_agreement(frame)
    assert agreement["deviation_differs"].tolist() == [True]

    excluded = training_macros(frame, agreement)
    assert excluded["fwbNumTrainPairs"] == "0" and excluded["fwbNumTrainPairsExcludedDeviating"] == "1"
    assert excluded["fwbTopOneMaxGap"] == "---" and excluded["fwbNumTrainDeviating"] == "1"
    included = training_macros(frame, agreement, include_deviating=True)
    assert included["fwbNumTrainPairs"] == "1" and included["fwbNumTrainPairsExcludedDeviating"] == "0"
    assert float(included["fwbTopOneMaxGap"]) == pytest.approx(10.0)

    section = training_section(frame, agreement)
    assert r"small CNN & JAX/Flax$^{d}$ & 32" in section and r"small CNN & PyTorch & 32" in section
    assert r"small CNN$^{d}$ & fp32" in section, "the step-0 row of the deviating pair is marked"
    assert r"failed (host\_oom)" in section
    assert "One pair of cells with different workarounds is left out of the step-0 and top-1 figures" in section
    assert "One pair of cells with different workarounds is counted in the figures" in training_section(
        frame, agreement, include_deviating=True
    )

    # the failures table reads the same training tidy rows
    inference = read_inference_frame(tmp_path)
    text = failures_table(inference, frame, summary=failure_summary(inference, frame))
    assert r"training & PyTorch & ResNet-50 & fp32 & 32 & failed & \texttt{host\_oom}" in text
    assert (
        r"training & JAX/Flax & small CNN & fp32 & 32 & ok$^{d}$ & \texttt{crash} & \texttt{triton\_gemm\_off}" in text
    )


def read_inference_frame(tmp_path):
    paths = _write(tmp_path, [_ok("torch", 1, 100.0), _ok("jax", 1, 100.0)], "clean")
    return write_tidy(paths, tmp_path / "clean.csv")


def test_loaded_results_are_valid(tmp_path):
    """The hand-built fixtures follow the result schema (a failed cell's failure, an ok cell's deviations)."""
    for path in _write(tmp_path, _inference_results()):
        load_result(path)
