"""Aggregation, tables, macros and figures from cell results, including failed cells."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pandas as pd
import pytest

from fwbench.analysis.common.latex import escape, macro_name, number
from fwbench.analysis.common.verdicts import VERDICT_COLUMNS, adjust_verdicts
from fwbench.analysis.failures.report import failures_table
from fwbench.analysis.inference.figures import throughput_figure
from fwbench.analysis.inference.findings import inference_results
from fwbench.analysis.inference.macros import macros
from fwbench.analysis.inference.ratios import speedups, write_speedups
from fwbench.analysis.inference.summary import geometric_summary, quoted_interval
from fwbench.analysis.inference.tables import inference_table
from fwbench.analysis.inference.tidy import write_tidy
from fwbench.analysis.paper.failures import failure_summary
from fwbench.analysis.setup.provenance import study_environment
from fwbench.analysis.setup.tables import environment_table
from fwbench.io import atomic_write_json
from fwbench.results import load_result
from fwbench.study.config import validate_config

BASE = {
    "schema_version": 2,
    "failure": None,
    "deviations": [],
    "settings": {},
    "stderr_tail": None,
    "inputs": {},
    "provenance": {
        "python": "3.11.7",
        "harness_version": "1",
        "cpu_model": "Test CPU",
        "git": {"commit": "abc", "dirty": False},
        "env": {},
        "libraries": {"numpy": "2.0"},
    },
}


def failed_in_rounds(result: dict, reason: str, kind: str, signal: str | None = None) -> dict:
    """`result` as a cell whose first trial failed (`kind`, `reason`): no metrics, no framework record."""
    result.update(status="failed", reason=reason, metrics=None, samples_ms=[], stderr_tail="Traceback ...")
    result["failure"] = {
        "kind": kind,
        "reason": reason,
        "exit_code": None if signal else 1,
        "signal": signal,
        "trial": 1,
        "workarounds_tried": [],
    }
    result["provenance"]["framework"] = None
    return result


def measured_in_rounds(result: dict, rates: list[float], compile_s: float | None, **metrics) -> dict:
    """`result` as a successful cell whose trials (rounds 1, 2, ...) ran at `rates` img/s: throughput their
    geometric mean, every latency its batch over that; `metrics` adds or replaces fields (`trials=None`: a cell
    measured in one process, which has no trial record)."""
    batch = result["cell"]["batch_size"]
    throughput = float(pd.Series(rates).prod() ** (1 / len(rates)))
    p50 = batch * 1000.0 / throughput
    result.update(
        status="ok",
        reason=None,
        samples_ms=[p50] * 3,
        metrics={
            "throughput_img_s": throughput,
            "throughput_img_s_total": throughput,
            "latency_ms": {"p50": p50, "p95": p50, "p99": p50, "mean": p50},
            "trials": [{"round": k + 1, "throughput_img_s": rate} for k, rate in enumerate(rates)],
            "compile_s": compile_s,
            "first_call_s": 0.5,
            "rss_mb": {"before": 100.0, "peak": 200.0},
            "missing": {},
            "n_iters": 3,
        }
        | metrics,
    )
    if result["metrics"]["trials"] is None:
        del result["metrics"]["trials"]
    return result


def _result(framework, batch, throughput=None, reason=None, kind="crash"):
    result = copy.deepcopy(BASE)
    result["cell"] = {
        "suite": "inference",
        "framework": framework,
        "model": "small_cnn",
        "precision": "fp32",
        "batch_size": batch,
        "image_size": 32,
    }
    if reason:
        return failed_in_rounds(result, reason, kind, signal="SIGSEGV" if kind == "crash" else None)
    measured_in_rounds(result, [throughput], 0.2 if framework == "jax" else None, trials=None)
    result["provenance"]["framework"] = {
        "versions": {framework: "9.9"},
        "device": {"name": "cpu"},
        "settings": {"intra_op_threads": 2},
    }
    return result


@pytest.fixture
def cell_files(tmp_path):
    results = [
        _result("torch", 1, 100.0),
        _result("jax", 1, 150.0),
        _result("torch", 8, 400.0),
        _result("jax", 8, reason="crashed: killed by SIGSEGV & more_stuff_50%"),
    ]
    paths = []
    for index, result in enumerate(results):
        path = tmp_path / f"cell{index}.json"
        atomic_write_json(path, result)
        paths.append(path)
    return paths


def test_tidy_table_keeps_failed_cells_with_reason(cell_files, tmp_path):
    frame = write_tidy(cell_files, tmp_path / "inference.csv")
    assert len(frame) == 4
    failed = frame[frame["status"] == "failed"]
    assert failed["reason"].tolist() == ["crashed: killed by SIGSEGV & more_stuff_50%"]
    assert pd.isna(failed["throughput_img_s"]).all(), "a failed cell has no throughput, not 0"
    reread = pd.read_csv(tmp_path / "inference.csv")
    assert reread.shape == frame.shape


def test_speedups_only_where_both_succeeded_with_intervals(cell_files, tmp_path):
    ratios = write_speedups(cell_files, tmp_path / "speedups.csv")
    assert ratios["batch_size"].tolist() == [1]
    row = ratios.iloc[0]
    assert row["ratio"] == pytest.approx(1.5)
    assert row["ci_low"] <= 1.5 <= row["ci_high"] and row["ci_high"] - row["ci_low"] < 0.2
    assert speedups(load_result(p) for p in cell_files).equals(ratios)


def test_inference_and_failure_tables(cell_files, tmp_path):
    frame = write_tidy(cell_files, tmp_path / "inference.csv")
    table = inference_table(frame, ["torch", "jax"], write_speedups(cell_files, tmp_path / "s.csv"))
    assert r"failed$^\dagger$" in table and "---" in table
    # One trial per cell: the ratio's CI is within-process only, so it is marked and never bold (never "resolved").
    assert r"1.50$\times$ {\scriptsize[1.50, 1.50]}$^{w}$" in table and r"\textbf{1.50" not in table
    failures = failures_table(frame, summary=failure_summary(frame))
    assert r"SIGSEGV \& more\_stuff\_50\%" in failures and r"\texttt{crash}" in failures
    assert "1 cell failed (1 crash)" in failures
    ok = frame[frame["status"] == "ok"]
    assert failures_table(ok, summary=failure_summary(ok)).startswith("No cell failed and none needed a workaround.\n")


def test_macros_and_environment(cell_files, tmp_path, tiny_config):
    frame = write_tidy(cell_files, tmp_path / "inference.csv")
    env = study_environment(cell_files)
    assert env["CPU"] == "Test CPU" and env["Threads per cell"] == 2
    text = macros(frame, write_speedups(cell_files, tmp_path / "s.csv"), env, validate_config(tiny_config))
    assert r"\newcommand{\fwbNumFailed}{1}" in text
    assert r"\newcommand{\fwbNumRatios}{1}" in text
    assert "Median" not in text and r"\fwbPeakJax" not in text, "the Results' summary is the template's"
    results = inference_results(frame, write_speedups(cell_files, tmp_path / "s.csv"), None, tiny_config)
    assert results.groups[0].findings[0].tally.typical == pytest.approx(1.5)
    assert (results.peak.variant, results.peak.throughput) == ("PyTorch", 400)


ZEN4 = {
    "format": "x86",
    "vendor_id": "AuthenticAMD",
    "cpu_family": "25",
    "model": "17",
    "stepping": "1",
    "microcode": "0xa10113e",
    "model_name": "AMD EPYC",
    "logical_cpus": 2,
    "physical_cores": 2,
    "sockets": 1,
    "isa_extensions": ["avx", "avx2", "avx512_bf16", "avx512f", "fma"],
    "isa_level": "AVX-512 (BF16)",
    "cache_summary": "L1d 32 KiB, L1i 32 KiB, L2 1 MiB, L3 32 MiB",
    "hypervisor": True,
    "missing": {},
}
NUMPY_BLAS = {
    "internal_api": "openblas",
    "version": "0.3.31",
    "architecture": "Haswell",
    "num_threads": 2,
    "library": "libscipy_openblas64_.so",
    "kernel_env": {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576"},
    "forced_core_type": "Haswell",
    "core_type_forced": True,
    "forced_vs_cpu": "below",
    "missing": {},
}
GOMP = {"user_api": "openmp", "internal_api": "openmp", "version": None, "num_threads": 2, "library": "libgomp.so.1"}


def _recorded(result: dict, framework: str, hardware: dict) -> dict:
    """`result` with the hardware, BLAS and per-process library records a cell of this fwbench writes."""
    result["provenance"] |= {"hardware": hardware, "blas": NUMPY_BLAS}
    record = result["provenance"]["framework"]
    record["name"] = framework
    record["settings"]["process_blas"] = {"libraries": [GOMP], "missing": {}}
    if framework == "torch":
        record["versions"] |= {"cpu_capability": "AVX512", "mkl": "2024.2", "onednn": "3.12.0"}
    return result


def test_the_setup_table_names_the_cpu_its_isa_caches_and_blas(tmp_path):
    results = [_recorded(_result(f, 1, 100.0), f, ZEN4) for f in ("torch", "jax")]
    paths = []
    for index, result in enumerate(results):
        paths.append(tmp_path / f"cell{index}.json")
        atomic_write_json(paths[-1], result)
    env = study_environment(paths)
    assert env["CPU"] == "Test CPU"
    assert env["CPU identity"] == (
        "AuthenticAMD family 25 model 17 stepping 1, microcode 0xa10113e; 2 logical CPUs (2 cores, 1 socket); "
        "under a hypervisor"
    )
    assert env["ISA extensions"] == "AVX-512 (BF16): avx, avx2, avx512_bf16, avx512f, fma"
    assert env["Caches"] == "L1d 32 KiB, L1i 32 KiB, L2 1 MiB, L3 32 MiB"
    assert env["BLAS (NumPy)"] == "openblas 0.3.31, Haswell kernels (libscipy_openblas64_.so)"
    assert env["BLAS/OpenMP loaded (PyTorch)"] == env["BLAS/OpenMP loaded (JAX)"] == "openmp, 2 threads (libgomp.so.1)"
    assert env["PyTorch CPU kernels"] == "ATen AVX512; MKL 2024.2; oneDNN 3.12.0"
    assert env["Kernel-forcing variables"] == (
        "OPENBLAS_CORETYPE=Haswell (forced core type, below the CPU's AVX-512 (BF16)), OPENBLAS_L2_SIZE=1048576"
    )
    assert "BLAS/OpenMP loaded (TensorFlow)" not in env, "a row only for the frameworks the study has"
    keys = list(env)
    assert keys[:4] == ["CPU", "CPU identity", "ISA extensions", "Caches"]
    assert keys.index("NumPy") < keys.index("BLAS (NumPy)") < keys.index("Threads per cell")
    table = environment_table(env)
    assert r"OPENBLAS\_\allowbreak{}CORETYPE=\allowbreak{}Haswell" in table
    assert r"avx512\_\allowbreak{}bf16" in table and "#" not in table


def test_cells_on_two_cpu_generations_differ_in_the_setup_table_and_old_cells_read_not_recorded(tmp_path):
    zen3 = ZEN4 | {"model": "1", "isa_extensions": ["avx", "avx2", "fma"], "isa_level": "AVX2"}
    results = [_recorded(_result("torch", 1, 100.0), "torch", ZEN4), _recorded(_result("jax", 1, 90.0), "jax", zen3)]
    paths = []
    for index, result in enumerate(results):
        paths.append(tmp_path / f"cell{index}.json")
        atomic_write_json(paths[-1], result)
    env = study_environment(paths)
    assert env["ISA extensions"].endswith("(differs by cell)") and "AVX2: avx, avx2, fma" in env["ISA extensions"]
    assert env["CPU identity"].endswith("(differs by cell)")
    old = tmp_path / "old.json"
    atomic_write_json(old, _result("torch", 1, 100.0))
    env = study_environment([old])
    assert env["CPU identity"] is None and env["BLAS (NumPy)"] is None and env["PyTorch CPU kernels"] is None
    assert env["Kernel-forcing variables"] is None and r"CPU identity & --- \\" in environment_table(env)


def test_figure_is_written(cell_files, tmp_path):
    frame = write_tidy(cell_files, tmp_path / "inference.csv")
    throughput_figure(frame, tmp_path / "fig.pdf", tmp_path / "fig.png")
    assert (tmp_path / "fig.pdf").read_bytes().startswith(b"%PDF")
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"
    assert not list(tmp_path.glob(".*tmp*")), "temporary files must be renamed away"
    all_failed = frame.assign(status="failed", throughput_img_s=float("nan"))
    throughput_figure(all_failed, tmp_path / "failed.pdf", tmp_path / "failed.png")
    assert (tmp_path / "failed.png").stat().st_size > 0


def test_latex_helpers():
    assert escape("a_b & 5% {x}") == r"a\_b \& 5\% \{x\}"
    assert number(None) == "---" and number(float("nan")) == "---"
    assert number(1234.5) == "1{,}234" and number(0.01234) == "0.0123" and number(2.0) == "2.00"
    # an interval over two processes can span 1e-16 to 1e12: powers of ten, never 19 digits that run off the page
    assert number(1.37e-16) == r"1.37\ensuremath{\times 10^{-16}}" and number(0.0001) == "0.000100"
    assert number(4.564e12) == r"4.56\ensuremath{\times 10^{12}}" and number(123456789.0) == "123{,}456{,}789"
    assert number(float("inf")) == r"\ensuremath{\infty}"
    assert macro_name("peak", "torch", "cell") == "fwbPeakTorchCell"
    assert macro_name("bs", "8") == "fwbBsEight"


def test_unknown_results_are_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"status": "ok"}))
    with pytest.raises(Exception, match="cell result invalid"):
        write_tidy([path], tmp_path / "out.csv")


def test_mfu_against_the_measured_peak(cell_files, tmp_path):
    facts = [{"model": "small_cnn", "image_size": 32, "flops_torch": 2e6, "configuration": "study"}]
    peak = {"fp32": {"peak_flops": 1e12}, "tf32": {"peak_flops": 2e12}, "bf16": {"peak_flops": 4e12}}
    frame = write_tidy(cell_files, tmp_path / "inference.csv", facts=facts, peak=peak)
    ok = frame[frame["status"] == "ok"]
    assert (ok["achieved_flops"] == ok["throughput_img_s"] * 2e6).all()
    assert ok["mfu"].tolist() == pytest.approx((ok["throughput_img_s"] * 2e6 / 1e12).tolist())
    assert frame[frame["status"] != "ok"]["mfu"].isna().all(), "a failed cell has no MFU, not 0"
    table = inference_table(frame, ["torch", "jax"], write_speedups(cell_files, tmp_path / "s.csv"))
    assert "MFU" in table


def test_mfu_uses_the_study_configuration_not_the_reference_row(cell_files, tmp_path):
    # a study at torchvision's reference resolution: the 1000-class reference row has the same (model, image_size)
    facts = [
        {"model": "small_cnn", "image_size": 32, "flops_torch": 2e6, "configuration": "study"},
        {"model": "small_cnn", "image_size": 32, "flops_torch": 9e9, "configuration": "reference"},
    ]
    peak = {"fp32": {"peak_flops": 1e12}, "tf32": {"peak_flops": 2e12}, "bf16": {"peak_flops": 4e12}}
    ok = write_tidy(cell_files, tmp_path / "inference.csv", facts=facts, peak=peak).query("status == 'ok'")
    assert (ok["flops_per_image"] == 2e6).all()
    assert ok["mfu"].tolist() == pytest.approx((ok["throughput_img_s"] * 2e6 / 1e12).tolist())


def test_each_cell_is_divided_by_the_peak_of_the_arithmetic_it_ran_in(tmp_path):
    """MFU divides by the peak of what the cell recorded it computed in, not by its precision's name: a tf32 cell with
    TF32 in effect by the TF32 peak, one where it was not (a CPU) by the FP32 peak, and a precision-`default` ViT-B/16
    whose matmuls ran in true FP32 (PyTorch's own default on a GPU: TF32 convolutions only) by the FP32 peak, while a
    CNN with the same record, whose convolutions do its arithmetic, is divided by the TF32 peak."""
    from fwbench.trackers.flops import peak_for

    cases = {  # name: (model, precision, tf32_scope, expected peak)
        "tf32": ("small_cnn", "tf32", "matmuls and convolutions", 8e12),
        "tf32-cpu": ("small_cnn", "tf32", "none", 1e12),
        "vit-default": ("vit_b_16", "default", "convolutions", 1e12),
        "cnn-default": ("small_cnn", "default", "convolutions", 8e12),
        "bf16": ("small_cnn", "bf16", "none", 4e12),
    }
    for name, (model, precision, scope, _) in cases.items():
        result = _result("torch", 8, 400.0)
        result["cell"] |= {"precision": precision, "model": model}
        result["provenance"]["framework"]["settings"] |= {
            "tf32_scope": scope,
            "dtype": "bfloat16" if precision == "bf16" else "float32",
        }
        atomic_write_json(tmp_path / f"{name}.json", result)
    facts = [
        {"model": m, "image_size": 32, "flops_torch": 2e6, "configuration": "study"} for m in ("small_cnn", "vit_b_16")
    ]
    peak = {"fp32": {"peak_flops": 1e12}, "tf32": {"peak_flops": 8e12}, "bf16": {"peak_flops": 4e12}}
    frame = write_tidy([tmp_path / f"{n}.json" for n in cases], tmp_path / "inference.csv", facts=facts, peak=peak)
    by_scope = {(r.model, r.precision, r.tf32_scope): r.peak_flops for r in frame.itertuples()}
    assert by_scope == {(m, p, s): expected for m, p, s, expected in cases.values()}
    assert frame["mfu"].tolist() == pytest.approx((400.0 * 2e6 / frame["peak_flops"]).tolist())
    assert [peak_for(p, peak) for p in ("fp32", "tf32", "bf16")] == [1e12, 8e12, 4e12]
    with pytest.raises(KeyError, match="rerun the device_peak rule"):
        peak_for("tf32", {"fp32": {"peak_flops": 1e12}, "bf16": {"peak_flops": 4e12}})


def test_peak_probe_measures_both_frameworks_and_every_precision():
    from fwbench.trackers.flops import TF32_ON_CPU, measure_peak, peak_for

    peak = measure_peak(start=64, max_size=128, seconds=0.02, budget_s=2.0, min_call_s=0.0)
    for precision in ("fp32", "tf32", "bf16"):
        assert {key.split("/")[0] for key in peak[precision]["probes"]} == {"torch", "jax"}
        assert "torch/64" in peak[precision]["probes"] and "jax/64" in peak[precision]["probes"]
        assert peak[precision]["peak_flops"] == max(peak[precision]["probes"].values()) > 0
        assert peak_for(precision, peak) == peak[precision]["peak_flops"]
        for series in peak[precision]["series"].values():
            assert series["sizes"][0]["size"] == 64 and series["stopped"]
            assert all(t["flops_per_s"] > 0 and t["call_s"] > 0 for t in series["sizes"])
    assert peak["devices"] == {"torch": "cpu", "jax": "cpu"}  # the test machine has no GPU
    assert peak["tf32"]["same_as"] == "fp32" and peak["tf32"]["reason"] == TF32_ON_CPU
    assert peak["tf32"]["peak_flops"] == peak["fp32"]["peak_flops"]


# --- verdicts through the ratio table -----------------------------------------------------------------------------


def _null_cell(framework: str, model: str, rates: list[float]) -> dict:
    """An inference cell of group `model`, its trials in rounds 1, 2, ... at `rates`."""
    result = copy.deepcopy(BASE)
    result["cell"] = {
        "suite": "inference",
        "framework": framework,
        "model": model,
        "precision": "fp32",
        "batch_size": 1,
        "image_size": 32,
    }
    result["provenance"]["group"] = {"id": model}
    measured_in_rounds(result, rates, None)
    result["provenance"]["framework"] = {"versions": {}, "device": {"name": "cpu"}, "settings": {}}
    return result


def test_adjusted_verdicts_of_the_ratio_table_keep_the_family_wise_rate_on_null_comparisons():
    """Studies of 12 JAX/PyTorch comparisons with no real difference (both frameworks' rounds drawn alike, 3 rounds
    each): by their own 95% intervals at least one ratio is resolved in about 1 - 0.95^12 = 46% of the studies; the
    adjusted verdicts of `speedups` (Holm, the default) in at most 5%, Benjamini-Hochberg too (every null true)."""
    rng = np.random.default_rng(7)
    studies, family = 300, 12
    unadjusted = holm = bh = 0
    for _ in range(studies):
        results = []
        for index in range(family):
            base = 100.0 * np.exp(rng.normal(0.0, 0.2, 3))  # drift common to both frameworks, round by round
            for framework in ("torch", "jax"):
                results.append(_null_cell(framework, f"m{index}", list(base * np.exp(rng.normal(0.0, 0.05, 3)))))
        ratios = speedups(results)
        assert set(ratios["family"]) == {"inference jax/torch"} and (ratios["family_size"] == family).all()
        assert set(ratios["multiplicity"]) == {"holm"}
        unadjusted += bool(ratios["resolved"].any())
        holm += bool(ratios["resolved_adjusted"].any())
        assert (ratios["p_adjusted"] >= ratios["p_value"]).all()
        assert not (ratios["resolved_adjusted"] & ~ratios["resolved"]).any(), "adjusting never resolves more"
        rebuilt = adjust_verdicts(ratios.drop(columns=VERDICT_COLUMNS), list(ratios["family"]), "bh")
        bh += bool(rebuilt["resolved_adjusted"].any())
    bound = 0.05 + 3 * math.sqrt(0.05 * 0.95 / studies)
    assert unadjusted / studies > 0.3
    assert holm / studies <= bound and bh / studies <= bound


def test_the_largest_ratio_is_quoted_with_a_simultaneous_interval():
    results = []
    for index, factor in enumerate((2.0, 1.0, 1.0, 1.0)):
        rates = [100.0, 120.0, 90.0]
        results += [
            _null_cell("torch", f"m{index}", rates),
            _null_cell("jax", f"m{index}", [r * factor * f for r, f in zip(rates, (1.0, 1.05, 0.97), strict=True)]),
        ]
    ratios = speedups(results).set_index("model")
    top = ratios.loc["m0"]
    assert bool(top["resolved"]) and bool(top["resolved_adjusted"]) and top["family_size"] == 4
    assert top["ci_low_simultaneous"] < top["ci_low"] and top["ci_high_simultaneous"] > top["ci_high"]
    low, high, simultaneous = quoted_interval(top)
    assert simultaneous and (low, high) == (top["ci_low_simultaneous"], top["ci_high_simultaneous"])
    none = speedups(results, multiplicity="none").set_index("model")
    assert none["p_adjusted"].tolist() == none["p_value"].tolist()
    assert none.loc["m0", "ci_low_simultaneous"] == pytest.approx(none.loc["m0", "ci_low"])
    with pytest.raises(ValueError, match="unknown multiplicity"):
        speedups(results, multiplicity="sidak")


def _ratios(values: list[tuple[str, int, float]], spread: float = 0.05) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"model": m, "batch_size": b, "ratio": r, "ci_low": r * (1 - spread), "ci_high": r * (1 + spread)}
            for m, b, r in values
        ]
    )


def test_the_summary_is_the_geometric_mean_and_inverting_every_ratio_inverts_it():
    values = [("a", 1, 0.62), ("a", 32, 0.9), ("b", 1, 1.4), ("b", 32, 0.71), ("c", 1, 0.83), ("c", 32, 1.05)]
    ratios = _ratios(values)
    summary = geometric_summary(ratios)
    assert summary.estimate == pytest.approx(math.exp(np.log(ratios["ratio"]).mean()), rel=1e-12)
    inverted = ratios.assign(ratio=1 / ratios["ratio"], ci_low=1 / ratios["ci_high"], ci_high=1 / ratios["ci_low"])
    flipped = geometric_summary(inverted)
    assert flipped.estimate == pytest.approx(1 / summary.estimate, rel=1e-12)
    assert (flipped.low, flipped.high) == pytest.approx((1 / summary.high, 1 / summary.low), rel=1e-12)
    # the arithmetic median of ratios, which it replaces, is not invariant: median(1/r) != 1/median(r)
    assert ratios["ratio"].median() * inverted["ratio"].median() != pytest.approx(1.0)
    # the model is the unit: with every model at both batch sizes, the t interval over the models' own means
    assert (summary.kind, summary.pairs, summary.models, summary.df) == ("models", 6, 3, 2)
    means = np.log(ratios["ratio"]).groupby(ratios["model"]).mean()
    half = 4.302652729911275 * means.std(ddof=1) / math.sqrt(3)
    assert (summary.low, summary.high) == pytest.approx((math.exp(means.mean() - half), math.exp(means.mean() + half)))


def test_a_summary_over_one_model_is_a_range_and_over_one_pair_its_own_interval():
    one_model = geometric_summary(_ratios([("a", 1, 0.5), ("a", 32, 2.0)]))
    assert (one_model.kind, one_model.estimate, one_model.low, one_model.high) == ("range", 1.0, 0.5, 2.0)
    one = geometric_summary(_ratios([("a", 1, 0.5)]))
    assert (one.kind, one.low, one.high) == ("one", 0.475, 0.525)
    assert geometric_summary(_ratios([])).kind == "none"


def test_the_ratio_table_bolds_the_adjusted_verdict_and_marks_a_ratio_resolved_only_alone():
    from fwbench.analysis.inference.marks import _ratio, ratio_notes

    row = {"ratio": 1.2, "ci_low": 1.01, "ci_high": 1.4, "ci_scope": "paired_rounds", "multiplicity": "holm"}
    alone = pd.Series(row | {"resolved": True, "resolved_adjusted": False})
    both = pd.Series(row | {"resolved": True, "resolved_adjusted": True})
    assert _ratio(alone) == r"1.20$\times$ {\scriptsize[1.01, 1.40]}$^{a}$", "its own interval, unbolded, marked"
    assert _ratio(both).startswith(r"\textbf{1.20$\times$ {\scriptsize[1.01, 1.40]}}")
    # a table from before the adjusted column: its own verdict stands in
    assert _ratio(pd.Series(row | {"resolved": True})).startswith(r"\textbf{")
    notes = ratio_notes(pd.DataFrame([alone, both]))
    assert "resolved by the paired $t$ test over interleaved rounds, after Holm's adjustment within each" in notes
    assert r"$^{a}$: its own CI excludes 1, but the adjusted test does not resolve it" in notes
    assert "$^{a}$" not in ratio_notes(pd.DataFrame([both]))
