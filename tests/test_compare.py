"""`fwbench compare RUN_A RUN_B`: two results directories compared ratio by ratio (fwbench.analysis.compare.ratios,
runs, change, run_facts and report).

Fast: tables and cells are built by hand and written to temporary directories (one test writes them with the
study's own aggregation from the hand-built cells of tests/test_mode_analysis.py); no framework, no workflow."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from fwbench.analysis.common import verdicts
from fwbench.analysis.compare import ratios as compare
from fwbench.analysis.compare import run_facts
from fwbench.analysis.compare.change import change_between, side_estimate
from fwbench.analysis.compare.runs import CompareError
from fwbench.analysis.inference import ratios as inference_ratios
from fwbench.analysis.inference.ratios import SPEEDUP_COLUMNS
from fwbench.analysis.micro.speedups import SPEEDUP_COLUMNS as MICRO_SPEEDUP_COLUMNS
from fwbench.cli import main
from fwbench.trackers.stats import paired_ratio_interval

MODES = {"torch": "eager", "jax": "jit", "tensorflow": "xla"}


def _interval_columns(ratio: float, se: float | None, df: float | None, scope: str = "paired_rounds") -> dict:
    """A ratio's interval columns as aggregate writes them: a t interval from (se, df) on the log scale, or, with
    no se, a within-process bootstrap's (an interval, no se, no df)."""
    if se is None:
        low, high = ratio * 0.9, ratio * 1.1
        return {"ratio": ratio, "ci_low": low, "ci_high": high, "ci_scope": "within_process", "resolved": False}
    low, high = verdicts.interval(math.log(ratio), se, df)
    paired = scope == "paired_rounds"
    return {
        "ratio": ratio,
        "ci_low": low,
        "ci_high": high,
        "ci_scope": scope,
        "pairs": int(df) + 1 if paired else 0,
        "resolved": bool(paired and (low > 1 or high < 1)),
        "se_log": se,
        "df": df,
        "p_value": verdicts.p_value(math.log(ratio), se, df) if paired else math.nan,
    }


def _speedup(
    ratio: float,
    model: str = "small_cnn",
    batch: int = 1,
    framework: str = "jax",
    se: float | None = 0.01,
    df: float | None = 4,
    **extra,
) -> dict:
    """One row of speedups.csv: `framework` over PyTorch eager."""
    return {
        "model": model,
        "precision": "fp32",
        "batch_size": batch,
        "numerator": framework,
        "denominator": "torch",
        "numerator_mode": MODES[framework],
        "denominator_mode": "eager",
        **_interval_columns(ratio, se, df),
        **extra,
    }


def _micro(ratio: float, batch: int = 64, se: float = 0.01, df: float = 2, **extra) -> dict:
    """One row of micro_speedups.csv: JAX over NumPy for the matrix product."""
    interval = _interval_columns(ratio, se, df)
    interval["speedup"] = interval.pop("ratio")
    del interval["resolved"]
    return {
        "framework": "jax",
        "mode": "jit",
        "operation": "matmul",
        "precision": "fp32",
        "variant": "resident",
        "batch_size": batch,
        "status": "ok",
        **interval,
        **extra,
    }


def _provenance(cpu: str = "AMD EPYC", torch: str = "2.14.1", **extra) -> dict:
    return {
        "python": "3.11.2",
        "harness_version": "9",
        "cpu_model": cpu,
        "cpu_count": 2,
        "git": {"commit": "abc", "dirty": False},
        "env": {"OMP_NUM_THREADS": "2"},
        "libraries": {"numpy": "2.0"},
        "framework": {"versions": {"torch": torch}, "device": {"platform": "cpu"}, "settings": {"dtype": "float32"}},
        **extra,
    }


def _cell(provenance: dict, framework: str = "torch", batch: int = 1) -> dict:
    return {
        "status": "ok",
        "cell": {"suite": "inference", "framework": framework, "mode": MODES[framework], "model": "small_cnn"}
        | {"precision": "fp32", "batch_size": batch, "image_size": 32},
        "settings": {"min_time_s": 1.0},
        "provenance": provenance,
    }


def _run(tmp_path, name, speedups, *, gains=None, micro=None, provenance=None):
    """A results directory: tables/speedups.csv (and mode_gains.csv, micro_speedups.csv where given) and one
    PyTorch cell with `provenance`."""
    run = tmp_path / name
    (run / "tables").mkdir(parents=True)
    pd.DataFrame(speedups).reindex(columns=SPEEDUP_COLUMNS).to_csv(run / "tables" / "speedups.csv", index=False)
    if gains is not None:
        pd.DataFrame(gains).to_csv(run / "tables" / "mode_gains.csv", index=False)
    if micro is not None:
        table = pd.DataFrame(micro).reindex(columns=MICRO_SPEEDUP_COLUMNS)
        table.to_csv(run / "tables" / "micro_speedups.csv", index=False)
    cell = run / "cells" / "inference" / "torch" / "eager" / "small_cnn" / "fp32" / "bs1.json"
    cell.parent.mkdir(parents=True)
    cell.write_text(json.dumps(_cell(provenance or _provenance())))
    return run


STUDY = [_speedup(0.5, batch=1), _speedup(1.5, batch=32), _speedup(0.8, framework="tensorflow", se=0.2)]


def _verdicts(comparison) -> dict[str, str]:
    return dict(zip(comparison.rows["label"], comparison.rows["verdict"], strict=True))


def test_identical_runs_are_all_the_same_and_exit_0(tmp_path, capsys):
    a, b = _run(tmp_path, "a", STUDY), _run(tmp_path, "b", STUDY)
    comparison = compare.compare_runs(a, b)
    assert set(comparison.rows["verdict"]) == {"same"}
    assert comparison.rows["change"].tolist() == pytest.approx([1.0, 1.0, 1.0])
    assert comparison.environment == [] and not comparison.has_change
    summary = comparison.summary()
    assert summary["compared"] == 3 and summary["same"] == 3 and summary["median_abs_change"] == 0.0
    assert summary["same_equivalent"] == 2, "tight intervals show the change within 5%; the wide one does not"
    assert main(["compare", str(a), str(b), "--fail-on-change"]) == 0
    out = capsys.readouterr().out
    assert "small_cnn fp32 bs1: jax/jit over torch/eager" in out
    assert "summary: 3 ratios in both runs: 3 same (2 shown within +-5%)" in out
    assert "environment: no recorded difference" in out


def test_a_ratio_moving_20_percent_with_tight_intervals_changed(tmp_path, capsys):
    a = _run(tmp_path, "a", STUDY)
    b = _run(tmp_path, "b", [_speedup(0.6, batch=1), *STUDY[1:]])
    comparison = compare.compare_runs(a, b)
    row = comparison.rows.iloc[0]
    assert row["verdict"] == "changed" and row["change"] == pytest.approx(1.2)
    assert row["change_low"] < 1.2 < row["change_high"] and row["change_low"] > 1.05
    expected = verdicts.difference(math.log(0.6), 0.01, 4, math.log(0.5), 0.01, 4)
    assert (row["change_low"], row["change_high"]) == pytest.approx((expected.low, expected.high))
    assert row["change_se_log"] == pytest.approx(math.sqrt(2) * 0.01) and row["change_df"] == pytest.approx(8)
    assert main(["compare", str(a), str(b)]) == 0, "without --fail-on-change a change is reported, not failed"
    assert main(["compare", str(a), str(b), "--fail-on-change"]) == 1
    assert "1 changed" in capsys.readouterr().out


def test_resolved_on_opposite_sides_of_1_is_flipped(tmp_path):
    a = _run(tmp_path, "a", [_speedup(0.8)])
    b = _run(tmp_path, "b", [_speedup(1.25)])
    comparison = compare.compare_runs(a, b)
    assert comparison.rows["verdict"].tolist() == ["flipped"] and comparison.has_change
    assert main(["compare", str(a), str(b), "--fail-on-change"]) == 1


def test_a_move_within_wide_intervals_is_the_same_not_changed(tmp_path):
    a = _run(tmp_path, "a", [_speedup(0.5, se=0.3, df=2)])
    b = _run(tmp_path, "b", [_speedup(0.6, se=0.3, df=2)])
    row = compare.compare_runs(a, b).rows.iloc[0]
    assert row["verdict"] == "same" and row["change_low"] < 1 < row["change_high"]
    assert not row["equivalent"], "a wide interval is not evidence of sameness"
    assert main(["compare", str(a), str(b), "--fail-on-change"]) == 0


def test_a_resolved_change_within_the_tolerance_is_the_same_unless_the_tolerance_is_0(tmp_path):
    a = _run(tmp_path, "a", [_speedup(0.5, se=0.002)])
    b = _run(tmp_path, "b", [_speedup(0.515, se=0.002)])
    row = compare.compare_runs(a, b).rows.iloc[0]
    assert row["change_low"] > 1, "resolved: 3% with tight intervals"
    assert row["verdict"] == "same" and row["equivalent"]
    assert compare.compare_runs(a, b, tolerance=0.0).rows.iloc[0]["verdict"] == "changed"
    assert main(["compare", str(a), str(b), "--tolerance", "0", "--fail-on-change"]) == 1
    assert main(["compare", str(a), str(b), "--tolerance", "0.02", "--fail-on-change"]) == 1
    assert main(["compare", str(a), str(b), "--tolerance", "0.05", "--fail-on-change"]) == 0


def test_ratios_in_one_run_only_are_listed_with_the_reason(tmp_path, capsys):
    refused = _speedup(math.nan, batch=32, se=None, refused="torch on CPU A, jax on CPU B") | {"ci_scope": None}
    gains = [
        {"model": "small_cnn", "precision": "fp32", "batch_size": 1, "framework": "torch", "mode": "compile"}
        | {"baseline_mode": "eager", **_interval_columns(1.6, 0.05, 2)}
    ]
    a = _run(tmp_path, "a", [_speedup(0.5), _speedup(0.7, model="resnet50")], gains=gains)
    b = _run(tmp_path, "b", [_speedup(0.5), refused, _speedup(1.1, model="vit_b_16")])
    comparison = compare.compare_runs(a, b)
    assert _verdicts(comparison) == {
        "small_cnn fp32 bs1: jax/jit over torch/eager": "same",
        "resnet50 fp32 bs1: jax/jit over torch/eager": "missing in B",
        "vit_b_16 fp32 bs1: jax/jit over torch/eager": "missing in A",
        "small_cnn fp32 bs1: torch/compile over torch/eager": "missing in B",
    }, "a ratio refused in B and absent in A is in neither run: left out"
    reasons = dict(zip(comparison.rows["label"], comparison.rows["reason"], strict=True))
    assert reasons["resnet50 fp32 bs1: jax/jit over torch/eager"] == "no such row in B's tables/speedups.csv"
    assert reasons["small_cnn fp32 bs1: torch/compile over torch/eager"] == "B has no tables/mode_gains.csv"
    assert comparison.notes == ["tables/mode_gains.csv is in A only: its ratios are listed as missing in B"]
    main(["compare", str(a), str(b)])
    out = capsys.readouterr().out
    assert "missing in A (1, only B has them):\n  speedups: vit_b_16 fp32 bs1: jax/jit over torch/eager" in out
    assert "missing in B (2, only A has them):" in out


def test_a_refused_ratio_is_missing_with_its_reason(tmp_path):
    refused = _speedup(math.nan, se=None, refused="torch on CPU A, jax on CPU B") | {"ci_scope": None}
    comparison = compare.compare_runs(_run(tmp_path, "a", [_speedup(0.5)]), _run(tmp_path, "b", [refused]))
    (row,) = comparison.rows.to_dict("records")
    assert row["verdict"] == "missing in B" and row["reason"] == "B: refused: torch on CPU A, jax on CPU B"


def test_a_side_without_a_standard_error_gets_no_interval_never_an_invented_one(tmp_path, capsys):
    a = _run(tmp_path, "a", [_speedup(0.5, se=None)])
    b = _run(tmp_path, "b", [_speedup(0.8)])
    (row,) = compare.compare_runs(a, b).rows.to_dict("records")
    assert row["verdict"] == "no interval" and math.isnan(row["change_low"])
    assert row["change"] == pytest.approx(1.6)
    assert "A's interval is a bootstrap within one process" in row["reason"]
    assert main(["compare", str(a), str(b), "--fail-on-change"]) == 0
    assert "no change interval for small_cnn fp32 bs1" in capsys.readouterr().out


def test_a_table_without_se_log_gets_it_from_its_interval_and_pairs(tmp_path):
    """A speedups table written before se_log and df: the standard error comes back from the 95% interval with
    pairs - 1 df, and the change interval is the one the recorded se would give."""
    full = _speedup(0.5, se=0.02, df=2)
    old = {key: value for key, value in full.items() if key not in ("se_log", "df", "p_value")}
    a, b = _run(tmp_path, "a", [old]), _run(tmp_path, "b", [_speedup(0.6, se=0.02, df=2)])
    row = compare.compare_runs(a, b).rows.iloc[0]
    expected = verdicts.difference(math.log(0.6), 0.02, 2, math.log(0.5), 0.02, 2)
    assert (row["change_low"], row["change_high"]) == pytest.approx((expected.low, expected.high))


def test_micro_speedups_are_matched_by_operation_variant_and_batch(tmp_path):
    failed = _micro(math.nan, batch=256) | {"status": "missing", "reason": "the NumPy cell failed: crash"}
    a = _run(tmp_path, "a", STUDY, micro=[_micro(2.0), _micro(3.0, batch=256)])
    b = _run(tmp_path, "b", STUDY, micro=[_micro(0.5), failed])
    rows = compare.compare_runs(a, b).rows
    micro = rows[rows["table"] == "micro_speedups"].to_dict("records")
    assert [(r["label"], r["verdict"]) for r in micro] == [
        ("matmul resident fp32 bs64: jax/jit over numpy", "flipped"),
        ("matmul resident fp32 bs256: jax/jit over numpy", "missing in B"),
    ]
    assert micro[1]["reason"] == "B: the NumPy cell failed: crash"


def test_environment_differences_name_hardware_software_and_settings(tmp_path, capsys):
    provenance_b = _provenance(cpu="Intel Xeon", torch="2.15.0", hardware={"cpu": {"family": 25}, "ram_gb": 23})
    provenance_b["env"] = {}
    del provenance_b["cpu_count"]
    a = _run(tmp_path, "a", STUDY)
    b = _run(tmp_path, "b", STUDY, provenance=provenance_b)
    comparison = compare.compare_runs(a, b)
    found = {(d["category"], d["key"]): (d["a"], d["b"]) for d in comparison.environment}
    assert found == {
        ("hardware", "cpu_model"): (["AMD EPYC"], ["Intel Xeon"]),
        ("hardware", "cpu_count"): (["2"], ["(not recorded)"]),
        ("hardware", "hardware.cpu.family"): (["(not recorded)"], ["25"]),
        ("hardware", "hardware.ram_gb"): (["(not recorded)"], ["23"]),
        ("software", "framework.torch.versions.torch"): (["2.14.1"], ["2.15.0"]),
        ("environment", "env.OMP_NUM_THREADS"): (["2"], ["(not recorded)"]),
    }
    assert comparison.summary()["hardware_differs"]
    main(["compare", str(a), str(b)])
    out = capsys.readouterr().out
    assert "  hardware\n" in out and "    cpu_model: AMD EPYC -> Intel Xeon\n" in out
    assert "framework.torch.versions.torch: 2.14.1 -> 2.15.0" in out
    assert "a change can come from the machine" in out


def test_the_study_grid_and_settings_are_compared_as_configuration():
    cells_a = [_cell(_provenance(), "torch", 1), _cell(_provenance(), "jax", 1)]
    cells_b = [_cell(_provenance(), "torch", 1), _cell(_provenance(), "torch", 8)]
    cells_b[1]["settings"] = {"min_time_s": 2.0}
    found = {d["key"]: (d["a"], d["b"]) for d in run_facts.environment_differences(cells_a, cells_b)}
    assert found["study.inference.variants"] == (["jax/jit, torch/eager"], ["torch/eager"])
    assert found["study.inference.batch_sizes"] == (["1"], ["1, 8"])
    assert found["settings.inference.min_time_s"] == (["1.0"], ["1.0", "2.0"])


def test_scratch_paths_of_groups_and_fresh_caches_are_no_difference():
    def cell(group: str, fresh: str):
        result = _cell(_provenance(), "tensorflow", 1)
        result["provenance"]["framework"] = {
            "settings": {
                "compilation_cache": {"state": "cold", "dir": f"/tmp/fwbench-group-{group}/cache-2/tensorflow"},
                "tf_xla_flags": f"--tf_xla_persistent_cache_directory=/tmp/fwbench-group-{group}/cache-2/tensorflow",
                "inductor": {"dir": f"/tmp/fwbench-inductor-{fresh}"},
                "xla_flags": "--xla_cpu_fast_math=false",
            }
        }
        return result

    other = cell("b2", "y")
    other["provenance"]["framework"]["settings"]["xla_flags"] = "--xla_cpu_fast_math=true"
    found = {d["key"] for d in run_facts.environment_differences([cell("a1", "x")], [other])}
    assert found == {"framework.tensorflow.settings.xla_flags"}, "only the real difference"


def test_a_directory_without_tables_is_an_error_naming_it(tmp_path, capsys):
    a = _run(tmp_path, "a", STUDY)
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(a), str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'empty'} is not a results directory" in err and "tables/speedups.csv" in err
    assert main(["compare", str(a), str(tmp_path / "nowhere")]) == 2
    assert f"{tmp_path / 'nowhere'}: no such directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("model,precision\nsmall_cnn,fp32\nresnet50,fp32,1,2\n", "not a valid CSV table"),
        ("", "empty file"),
        ("model,ratio\nsmall_cnn,0.5\n", "not a speedups table, no column 'precision'"),
    ],
)
def test_a_corrupt_table_is_an_error_naming_the_file(tmp_path, capsys, content, why):
    a, b = _run(tmp_path, "a", STUDY), _run(tmp_path, "b", STUDY)
    (b / "tables" / "speedups.csv").write_text(content)
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert f"{b / 'tables' / 'speedups.csv'}: {why}" in err


def test_a_number_column_holding_text_is_an_error_naming_the_file(tmp_path):
    a, b = _run(tmp_path, "a", STUDY), _run(tmp_path, "b", STUDY)
    table = pd.read_csv(b / "tables" / "speedups.csv").astype({"ratio": object})
    table.loc[1, "ratio"] = "0.5x"
    table.to_csv(b / "tables" / "speedups.csv", index=False)
    with pytest.raises(CompareError, match=r"speedups.csv: column 'ratio' holds '0.5x' in data row 2"):
        compare.compare_runs(a, b)


def test_a_corrupt_cell_file_is_an_error_naming_it(tmp_path, capsys):
    a, b = _run(tmp_path, "a", STUDY), _run(tmp_path, "b", STUDY)
    cell = next((b / "cells").rglob("*.json"))
    cell.write_text('{"status": "ok", "provenance": {"cpu')
    assert main(["compare", str(a), str(b)]) == 2
    assert f"{cell}: not valid JSON" in capsys.readouterr().err


def test_out_writes_the_table_the_json_and_the_plot(tmp_path, capsys):
    a = _run(tmp_path, "a", [*STUDY, _speedup(0.9, model="resnet50")])
    b = _run(
        tmp_path, "b", [_speedup(0.6, batch=1), _speedup(0.7, batch=32), *STUDY[2:]], provenance=_provenance(cpu="X")
    )
    out = tmp_path / "out"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    assert "-> " in capsys.readouterr().out
    table = pd.read_csv(out / "compare.csv")
    assert table.columns.tolist() == compare.ROW_COLUMNS
    assert sorted(table["verdict"]) == ["changed", "flipped", "missing in B", "same"]
    written = json.loads((out / "compare.json").read_text())
    assert written["run_a"] == str(a) and written["tolerance"] == 0.05
    assert len(written["rows"]) == 3 and len(written["missing_in_b"]) == 1 and written["missing_in_a"] == []
    assert written["summary"]["changed"] == 1 and written["summary"]["flipped"] == 1
    assert written["environment"][0]["key"] == "cpu_model"
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "compare.pdf").read_bytes()[:5] == b"%PDF-"


def _measured(framework: str, mode: str, batch: int, factors: list[float]) -> dict:
    """A successful inference cell of group small_cnn-{batch} whose three rounds ran at PyTorch eager's rates times
    `factors`: enough of a result for aggregate's ratio tables."""
    rates = [rate * factor for rate, factor in zip([100.0, 120.0, 90.0], factors, strict=True)]
    return {
        "status": "ok",
        "reason": None,
        "failure": None,
        "deviations": [],
        "cell": {"suite": "inference", "framework": framework, "mode": mode, "model": "small_cnn"}
        | {"precision": "fp32", "batch_size": batch, "image_size": 32},
        "metrics": {"trials": [{"round": k + 1, "throughput_img_s": rate} for k, rate in enumerate(rates)]},
        "samples_ms": [1.0, 1.0, 1.0],
        "provenance": {
            "cpu_model": "AMD EPYC",
            "group": {"id": f"small_cnn-{batch}"},
            "framework": {"versions": {}, "device": {"name": "cpu", "platform": "cpu"}, "settings": {}},
        },
    }


def test_the_study_s_own_tables_compare_with_themselves(tmp_path):
    """The tables as aggregate writes them (booleans, empty marks, modes) read back and match row for row."""
    results = [
        _measured(framework, mode, batch, factors)
        for batch in (1, 8)
        for framework, mode, factors in (
            ("torch", "eager", [1.0, 1.0, 1.0]),
            ("torch", "compile", [2.0, 2.1, 1.9]),
            ("jax", "jit", [1.5, 1.4, 1.6]),
            ("tensorflow", "xla", [0.5, 0.5, 0.6]),
        )
    ]
    ratios, gains = inference_ratios.speedups(results), inference_ratios.mode_gains(results)
    for name in ("a", "b"):
        (tmp_path / name / "tables").mkdir(parents=True)
        ratios.to_csv(tmp_path / name / "tables" / "speedups.csv", index=False)
        gains.to_csv(tmp_path / name / "tables" / "mode_gains.csv", index=False)
    comparison = compare.compare_runs(tmp_path / "a", tmp_path / "b")
    assert len(comparison.compared) == len(ratios) + len(gains) == 6
    assert set(comparison.rows["verdict"]) == {"same"}
    assert set(comparison.rows["label"]) >= {
        "small_cnn fp32 bs1: torch/compile over torch/eager",
        "small_cnn fp32 bs8: tensorflow/xla over torch/compile",
    }
    assert "environment is not compared" in comparison.notes[0]


def test_the_change_interval_covers_the_true_change_95_percent_of_the_time():
    """Simulated pairs of runs (3 and 5 interleaved rounds, unequal noise), each side's interval computed as the
    study computes it: the Welch interval of the change covers the true change at about its nominal level."""
    rng = np.random.default_rng(20261125)
    true_a, true_b, covered, simulations = 0.8, 0.9, 0, 2000
    for _ in range(simulations):
        sides = []
        for rounds, noise, truth in ((3, 0.05, true_a), (5, 0.15, true_b)):
            torch = 100.0 * np.exp(rng.normal(0.0, 0.2, rounds))
            framework = torch * truth * np.exp(rng.normal(0.0, noise, rounds))
            interval = paired_ratio_interval(framework, torch)
            sides.append(
                side_estimate(
                    interval.estimate, interval.low, interval.high, interval.se_log, interval.df, "paired_rounds", "A"
                )
            )
        change = change_between(*sides)
        covered += change.low <= true_b / true_a <= change.high
    assert 0.93 <= covered / simulations <= 0.97


def test_a_change_exactly_at_the_tolerance_is_within_it(tmp_path):
    a = _run(tmp_path, "a", [_speedup(2.0, se=0.005)])
    b = _run(tmp_path, "b", [_speedup(2.1, se=0.005)])
    assert compare.compare_runs(a, b).rows["verdict"].tolist() == ["same"]
    assert compare.compare_runs(a, b, tolerance=0.049).rows["verdict"].tolist() == ["changed"]


def test_a_negative_tolerance_is_an_error(tmp_path, capsys):
    a = _run(tmp_path, "a", STUDY)
    assert main(["compare", str(a), str(a), "--tolerance", "-0.1"]) == 2
    assert "tolerance -0.1: expected a fraction >= 0" in capsys.readouterr().err


def test_tables_without_rows_compare_to_nothing(tmp_path, capsys):
    a, b = _run(tmp_path, "a", []), _run(tmp_path, "b", [])
    comparison = compare.compare_runs(a, b)
    assert comparison.rows.empty and comparison.summary()["median_abs_change"] is None
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "out"), "--fail-on-change"]) == 0
    assert "summary: 0 ratios in both runs" in capsys.readouterr().out
    assert (tmp_path / "out" / "compare.png").exists()


def test_a_list_of_cpu_flags_compares_flag_by_flag(tmp_path, capsys):
    flags = ["avx", "avx2", "fma", "sse4_2"]
    a = _run(tmp_path, "a", STUDY, provenance=_provenance(hardware={"flags": flags, "caches": []}))
    b = _run(tmp_path, "b", STUDY, provenance=_provenance(hardware={"flags": [*flags, "avx512f"], "caches": []}))
    (item,) = compare.compare_runs(a, b).environment
    assert item == {"category": "hardware", "key": "hardware.flags", "a": flags, "b": sorted([*flags, "avx512f"])}
    main(["compare", str(a), str(b)])
    assert "hardware.flags: B only: avx512f; 4 in common" in capsys.readouterr().out
