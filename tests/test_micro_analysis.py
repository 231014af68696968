"""The micro suite's analysis: crossovers, speedups over NumPy, the published reference and the outputs, on
constructed samples and constructed cell results (no framework runs)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fwbench.analysis import micro, micro_reference, micro_report
from fwbench.analysis.micro import (
    Crossover,
    crossover,
    crossover_text,
    load_micro_cells,
    micro_crossovers,
    micro_frame,
    micro_speedups,
    speedup_interval,
)
from fwbench.analysis.micro_figure import (
    micro_figure,
)
from fwbench.analysis.micro_reference import (
    agreement,
    published_crossovers,
    published_micro,
    reference_flatness,
)
from fwbench.analysis.micro_report import (
    micro_macros,
    micro_section,
    write_micro_outputs,
)
from fwbench.modes import primary
from tests.test_analysis import BASE

REPO = Path(__file__).resolve().parents[1]
REFERENCE_CSV = REPO / "reference" / "published-t4-micro.csv"
RESAMPLES = 200  # enough for the intervals these tests ask about, and fast

SETTINGS = {"dim": 64, "hidden": 256, "classes": 10, "include_transfer": True, "trials": 1}


def _samples(median_ms: float, n: int, seed: int) -> list[float]:
    """Per-call times scattered by a few percent around `median_ms`."""
    rng = np.random.default_rng(seed)
    return (median_ms * np.exp(rng.normal(0.0, 0.03, n))).tolist()


def _framework_provenance(framework: str, platform: str) -> dict:
    settings = {"intra_op_threads": 2, "dtype": "float32"}
    if framework == "numpy":
        settings["blas"] = [{"internal_api": "openblas", "version": "0.3.30", "num_threads": 2, "user_api": "blas"}]
    name = "Test CPU" if platform == "cpu" else "NVIDIA Test GPU"
    return {
        "name": framework,
        "versions": {framework: "1.0"},
        "device": {"platform": platform, "name": name},
        "settings": settings,
        "threads": {"requested": 2, "effective": 2},
    }


def _result(
    framework: str,
    operation: str,
    batch: int,
    *,
    ms: float | list[list[float]] = 1.0,
    transfer_ms: float | None = None,
    precision: str = "fp32",
    reason: str | None = None,
    platform: str = "cpu",
    n: int = 200,
) -> dict:
    """A micro cell result as the runner writes it; `ms` is a median (one trial of n samples) or the trials'
    samples themselves."""
    result = copy.deepcopy(BASE)
    result["cell"] = {
        "suite": "micro",
        "framework": framework,
        "model": operation,
        "precision": precision,
        "batch_size": batch,
        "image_size": None,
    }
    result["settings"] = dict(SETTINGS)
    if reason:
        result.update(status="failed", reason=reason, metrics=None, samples_ms=[])
        result["failure"] = {
            "kind": "exception",
            "reason": reason,
            "exit_code": 1,
            "signal": None,
            "trial": 1,
            "workarounds_tried": [],
        }
        result["provenance"]["framework"] = None
        return result
    seed = hash((framework, operation, batch, precision)) % 2**32
    trials = ms if isinstance(ms, list) else [_samples(ms, n, seed)]
    variants = {"resident": {"trial_samples_ms": trials, "what": "each call on device-resident inputs"}}
    if transfer_ms is not None:
        samples = [_samples(transfer_ms, n, seed + 1)]
        variants["transfer"] = {"trial_samples_ms": samples, "what": "the copy of the input batch, then the call"}
    p50 = float(np.median(np.concatenate(trials)))
    result.update(status="ok", reason=None, samples_ms=[s for t in trials for s in t])
    result["metrics"] = {
        "throughput_img_s": batch / p50 * 1000.0,
        "latency_ms": {"p50": p50, "p95": p50, "p99": p50, "mean": p50},
        "compile_s": 0.25 if framework == "jax" else None,
        "first_call_s": 0.01,
        "variants": variants,
        "agreement": {"max_rel_error": 3e-7, "bound": 1e-4, "reference": "float64 NumPy"},
        "operation": {"name": operation, "dim": 64, "hidden": 256, "classes": 10, "flops_per_row": 8192},
        "missing": {} if framework != "numpy" else {"transfer": "numpy computes on the host"},
        "flags": {"noisy": False, "ci_not_reached": False, "recompiled": False},
    }
    result["provenance"]["framework"] = _framework_provenance(framework, platform)
    return result


def _write(root: Path, result: dict) -> Path:
    """At the cell's path (its mode's folder included: a result without a mode ran its framework's primary one)."""
    cell = result["cell"]
    mode = cell.get("mode") or primary(cell["framework"])
    path = root / "cells" / "micro" / cell["framework"] / mode / cell["model"] / cell["precision"]
    path = path / f"bs{cell['batch_size']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    return path


BATCHES = [1, 4, 16, 64, 256]
# NumPy's time per call grows with the batch; torch's is flat (dispatch-bound), so it wins from 64 on; jax's is
# always 5x NumPy's: it never wins.
NUMPY_MS = {1: 0.01, 4: 0.03, 16: 0.1, 64: 0.4, 256: 1.6}
TORCH_MS = {1: 0.1, 4: 0.1, 16: 0.12, 64: 0.2, 256: 0.3}


def _study(root: Path, *, failed: dict | None = None) -> list[Path]:
    """numpy, torch (with the copy variant) and jax cells of matmul at BATCHES; `failed`: {(framework, batch):
    reason}."""
    failed = failed or {}
    paths = []
    for batch in BATCHES:
        specs = [
            ("numpy", {"ms": NUMPY_MS[batch]}),
            ("torch", {"ms": TORCH_MS[batch], "transfer_ms": TORCH_MS[batch] * 2.5}),
            ("jax", {"ms": NUMPY_MS[batch] * 5}),
        ]
        for framework, kwargs in specs:
            reason = failed.get((framework, batch))
            kwargs = {"reason": reason} if reason else kwargs
            paths.append(_write(root, _result(framework, "matmul", batch, **kwargs)))
    return paths


# ---------------------------------------------------------------------------------------------------------------
# The crossover on constructed CI lower bounds


def test_clear_crossover():
    result = crossover([1, 4, 16, 64, 256], [0.2, 0.5, 0.8, 1.4, 3.0])
    assert (result.kind, result.batch, result.below) == ("crossover", 64, 16)
    assert not result.at_smallest
    assert crossover_text(result) == "64"


def test_never_in_range():
    result = crossover([1, 4, 16, 64], [0.2, 1.5, 1.2, 0.97])
    assert result.kind == "never" and result.batch is None
    assert crossover_text(result) == "never in 1--64"
    assert result.bracket() == (64.0, math.inf)


def test_ci_straddling_one_at_one_batch_size_moves_the_crossover_later():
    result = crossover([1, 4, 16, 64, 256, 1024], [0.5, 0.9, 1.2, 0.95, 1.3, 1.5])
    assert (result.kind, result.batch, result.below) == ("crossover", 256, 64)


def test_a_lower_bound_of_exactly_one_is_not_above_one():
    assert crossover([1, 2], [1.0, 1.0]).kind == "never"
    assert crossover([1, 2], [1.0, 1.0000001]).batch == 2


def test_faster_everywhere_is_at_or_below_the_smallest_batch():
    result = crossover([4, 16, 64], [1.1, 2.0, 9.0])
    assert result.kind == "crossover" and result.batch == 4 and result.at_smallest
    assert result.below is None and result.bracket() == (0.0, 4.0)
    assert crossover_text(result) == r"$\le$ 4"


def test_unsorted_input_is_sorted_by_batch_size():
    assert crossover([256, 1, 64, 16], [3.0, 0.2, 1.4, 0.8]).batch == 64


def test_a_missing_batch_above_the_crossover_makes_it_unverified():
    result = crossover([1, 4, 16, 64, 256], [0.5, 1.5, None, 2.0, float("nan")])
    assert (result.kind, result.batch, result.below) == ("crossover", 4, 1)
    assert result.missing == (16, 256) and result.unverified == (16, 256)
    assert crossover_text(result).endswith(micro.UNVERIFIED_MARK)


def test_a_missing_batch_below_widens_the_bracket_but_is_not_unverified():
    result = crossover([1, 4, 16], [0.5, None, 2.0])
    assert (result.batch, result.below, result.unverified, result.missing) == (16, 1, (), (4,))


def test_nothing_measured():
    result = crossover([1, 4], [None, None])
    assert result.kind == "no data" and result.bracket() is None and crossover_text(result) == "---"
    with pytest.raises(ValueError):
        crossover([1, 4], [1.0])


@pytest.mark.parametrize(
    ("ours", "published", "expected"),
    [
        (Crossover("crossover", 64, 16, 1, 4096), Crossover("crossover", 64, 16, 1, 4096), "same"),
        # ours between 32 and 64 on a finer grid lies inside the reference's (16, 64]
        (Crossover("crossover", 64, 32, 1, 4096), Crossover("crossover", 64, 16, 1, 4096), "same"),
        (Crossover("crossover", 16, 4, 1, 4096), Crossover("crossover", 256, 64, 1, 4096), "earlier"),
        (Crossover("never", None, 4096, 1, 4096), Crossover("crossover", 256, 64, 1, 4096), "later"),
        (Crossover("never", None, 4096, 1, 4096), Crossover("never", None, 4096, 1, 4096), "same"),
        # never up to 64 here says nothing against a crossover at 256 there
        (Crossover("never", None, 64, 1, 64), Crossover("crossover", 256, 64, 1, 4096), "same"),
        (Crossover("no data", None, None, None, None), Crossover("crossover", 4, 1, 1, 4096), "not comparable"),
    ],
)
def test_agreement_compares_brackets(ours, published, expected):
    assert agreement(ours, published) == expected


# ---------------------------------------------------------------------------------------------------------------
# Speedup intervals


def test_speedup_is_the_ratio_of_medians_with_a_ci_around_it():
    baseline, framework = _samples(10.0, 300, 1), _samples(2.0, 300, 2)
    interval = speedup_interval([baseline], [framework], resamples=RESAMPLES)
    assert interval.estimate == pytest.approx(np.median(baseline) / np.median(framework))
    assert interval.low < interval.estimate < interval.high
    assert interval.low > 4.7 and interval.high < 5.3
    assert speedup_interval([baseline], [framework], resamples=RESAMPLES) == interval  # fixed seed


def test_trials_that_disagree_widen_the_interval_beyond_the_pooled_one():
    """Four processes whose medians differ by 5% steps: resampling the trials shows their disagreement, pooling
    their samples as one process hides it."""
    baseline = [_samples(10.0, 400, 3)]
    trials = [_samples(median, 400, 4 + i) for i, median in enumerate([1.0, 1.05, 1.1, 1.15])]
    hierarchical = speedup_interval(baseline, trials, resamples=RESAMPLES)
    pooled = speedup_interval(baseline, [sum(trials, [])], resamples=RESAMPLES)
    assert hierarchical.estimate == pytest.approx(pooled.estimate)
    assert hierarchical.high - hierarchical.low > 4 * (pooled.high - pooled.low)


@pytest.mark.parametrize("n", [1, 2, 7, 200])
def test_resampled_medians_equal_the_median_of_the_gathered_values(n):
    """The counting shortcut gives exactly np.median of each resample (odd and even sizes)."""
    values = np.random.default_rng(n).lognormal(size=n)
    draws = micro.median_draws([values], np.random.default_rng(5), resamples=300)
    ranks = np.random.default_rng(5).integers(0, n, size=(300, n))
    assert np.array_equal(draws, np.median(np.sort(values)[ranks], axis=1))


def test_large_cells_are_resampled_in_bounded_chunks(monkeypatch):
    class Recording:
        """A generator that records the size of every index array it is asked for."""

        def __init__(self):
            self.rng, self.sizes = np.random.default_rng(0), []

        def integers(self, low, high, size):
            self.sizes.append(int(np.prod(size)))
            return self.rng.integers(low, high, size=size)

    monkeypatch.setattr(micro, "CHUNK_ELEMENTS", 50_000)
    values, rng = _samples(1.0, 20_000, 6), Recording()
    draws = micro.median_draws([values], rng, resamples=20)
    assert draws.shape == (20,) and max(rng.sizes) <= 50_000 and len(rng.sizes) == 10
    assert np.all(np.abs(draws / np.median(values) - 1) < 0.01)


# ---------------------------------------------------------------------------------------------------------------
# From cell results


def test_tidy_frame_has_a_row_per_cell_and_variant(tmp_path):
    paths = _study(tmp_path, failed={("jax", 4): "XLA ran out of memory"})
    frame = micro_frame(paths)
    assert list(frame.columns) == micro.FRAME_COLUMNS
    torch = frame[(frame["framework"] == "torch") & (frame["batch_size"] == 16)]
    assert sorted(torch["variant"]) == ["resident", "transfer"]
    resident = torch[torch["variant"] == "resident"].iloc[0]
    assert resident["median_ms"] == pytest.approx(0.12, rel=0.02)
    assert resident["median_ci_low"] < resident["median_ms"] < resident["median_ci_high"]
    assert resident["n_samples"] == 200 and resident["trials"] == 1
    failed = frame[frame["status"] == "failed"]
    assert len(failed) == 1 and failed.iloc[0]["reason"] == "XLA ran out of memory"
    assert failed.iloc[0]["variant"] == "resident" and pd.isna(failed.iloc[0]["median_ms"])
    numpy = frame[frame["framework"] == "numpy"].iloc[0]
    assert numpy["blas"] == "openblas 0.3.30, 2 threads" and numpy["threads"] == 2
    assert frame.loc[frame["framework"] == "jax", "compile_s"].dropna().eq(0.25).all()


def test_speedups_and_crossovers_from_cells(tmp_path):
    cells = load_micro_cells(_study(tmp_path))
    speedups = micro_speedups(cells, resamples=RESAMPLES)
    torch = speedups[(speedups["framework"] == "torch") & (speedups["variant"] == "resident")]
    assert torch["speedup"].tolist() == pytest.approx([NUMPY_MS[b] / TORCH_MS[b] for b in BATCHES], rel=0.02)
    crossovers = micro_crossovers(speedups).set_index(["framework", "variant"])
    assert crossovers.loc[("torch", "resident"), "crossover_batch"] == 64
    assert crossovers.loc[("torch", "resident"), "platform"] == "cpu"
    # with the copy (2.5x the time) torch only wins at 256
    assert crossovers.loc[("torch", "transfer"), "crossover_batch"] == 256
    assert crossovers.loc[("jax", "resident"), "kind"] == "never"
    assert crossovers.loc[("jax", "resident"), "speedup_at_largest"] == pytest.approx(0.2, rel=0.02)


def test_a_failed_cell_gives_a_missing_speedup_with_its_reason_never_zero(tmp_path):
    paths = _study(tmp_path, failed={("numpy", 16): "BLAS crashed", ("torch", 256): "out of memory"})
    speedups = micro_speedups(paths, resamples=RESAMPLES)
    missing = speedups[speedups["status"] == "missing"]
    assert not (speedups["speedup"] == 0).any()
    assert missing["speedup"].isna().all()
    at16 = missing[missing["batch_size"] == 16]
    assert set(at16["framework"]) == {"torch", "jax"} and at16["reason"].str.contains("NumPy cell failed").all()
    # the failed torch cell stands for both of torch's variants
    at256 = missing[(missing["framework"] == "torch") & (missing["batch_size"] == 256)]
    assert sorted(at256["variant"]) == ["resident", "transfer"]
    assert at256["reason"].str.contains("torch|PyTorch").all() and at256["reason"].str.contains("out of memory").all()
    crossovers = micro_crossovers(speedups).set_index(["framework", "variant"])
    # torch wins at 64; 256 failed: the claim "from 64 on" is unverified there
    row = crossovers.loc[("torch", "resident")]
    assert row["crossover_batch"] == 64 and row["unverified_batches"] == "256" and row["largest_batch"] == 64


def test_foreign_and_corrupt_files_are_named(tmp_path):
    good = _write(tmp_path, _result("numpy", "matmul", 1))
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"schema_version": 2, "cell": ')
    inference = _result("torch", "matmul", 1)
    inference["cell"] |= {"suite": "inference", "model": "small_cnn", "image_size": 32}
    foreign = tmp_path / "inference.json"
    foreign.write_text(json.dumps(inference))
    with pytest.raises(ValueError, match="corrupt.json") as error:
        load_micro_cells([good, corrupt, foreign])
    assert "inference.json" in str(error.value) and "not valid JSON" in str(error.value)
    moved = tmp_path / "cells" / "micro" / "numpy" / "eager" / "matmul" / "fp32" / "bs4.json"
    moved.write_text(good.read_text())
    with pytest.raises(ValueError, match=r"bs4.json.*holds the result of cell micro/numpy/eager/matmul/fp32/bs1"):
        load_micro_cells([moved])
    old_layout = tmp_path / "cells" / "micro" / "numpy" / "matmul" / "fp32" / "bs8.json"  # before modes
    old_layout.parent.mkdir(parents=True, exist_ok=True)
    old_layout.write_text(good.read_text())
    with pytest.raises(ValueError, match=r"bs8.json.*holds the result of cell micro/numpy/eager/matmul/fp32/bs1"):
        load_micro_cells([old_layout])
    with pytest.raises(ValueError, match="no micro cell"):
        load_micro_cells([])


def test_unusable_samples_are_named(tmp_path):
    result = _result("torch", "matmul", 1)
    result["metrics"]["variants"]["resident"]["trial_samples_ms"] = [[1.0, -2.0]]
    path = _write(tmp_path, result)
    # the schema's own check or the analysis's, whichever sees it first
    with pytest.raises(ValueError, match="bs1.json.*(not positive finite|less than or equal to the minimum)"):
        load_micro_cells([path])


# ---------------------------------------------------------------------------------------------------------------
# The published reference


def test_published_reference_crossovers_and_flatness():
    published = published_micro(REFERENCE_CSV)
    crossovers = published_crossovers(published).set_index(["reference", "operation"])
    assert crossovers.loc[("jax", "matmul"), "crossover_batch"] == 256
    assert crossovers.loc[("torch_cuda", "matmul"), "crossover_batch"] == 64
    # PyTorch CPU wins from 64 to 1024 but loses again at 4096 (by 3%)
    assert crossovers.loc[("torch_cpu", "matmul"), "kind"] == "never"
    assert crossovers.loc[("torch_cpu", "matmul"), "speedup_at_largest"] == pytest.approx(0.973, abs=0.001)
    network = published[(published["operation"] == "mlp") & (published["reference"] != "jax")]
    assert set(network["baseline"]) == {"numpy_s_in_jax_table"}
    matrix = published[(published["operation"] == "matmul") & (published["reference"] == "torch_cuda")]
    assert set(matrix["baseline"]) == {"numpy_s_in_pytorch_table"}
    flat = reference_flatness(published).set_index("operation")
    assert f"{flat.loc['matmul', 'jax_ratio']:.1f}" == "3.0" and round(flat.loc["matmul", "numpy_ratio"]) == 367


def test_a_foreign_reference_file_is_named(tmp_path):
    bad = tmp_path / "ref.csv"
    bad.write_text("suite,batch_size\nmatrix,1\n")
    with pytest.raises(ValueError, match="ref.csv"):
        published_micro(bad)


def test_torch_is_compared_with_the_reference_series_of_its_platform(tmp_path):
    paths = [_write(tmp_path, _result("numpy", "matmul", b, ms=NUMPY_MS[b])) for b in BATCHES]
    paths += [_write(tmp_path, _result("torch", "matmul", b, ms=0.05, platform="cuda")) for b in BATCHES]
    analysis = micro_report.analyse_micro(paths, REFERENCE_CSV, resamples=RESAMPLES)
    comparison = analysis.comparison
    ours = comparison[comparison["framework"].eq("torch") & comparison["kind"].ne("not measured")].iloc[0]
    assert ours["reference"] == "torch_cuda" and ours["reference_device"] == "NVIDIA T4"
    # 0.05 ms against NumPy's 0.03 at 4 and 0.1 at 16: ours in (4, 16], the reference's in (16, 64]
    assert ours["crossover_batch"] == 16 and ours["published_crossover_batch"] == 64
    assert ours["agreement"] == "earlier"
    others = comparison[comparison["kind"] == "not measured"]
    assert {"torch_cpu", "jax"} <= set(others["reference"]) and (others["agreement"] == "not comparable").all()


# ---------------------------------------------------------------------------------------------------------------
# Outputs


OUTPUTS = ("csv", "speedups", "crossovers", "section", "macros", "pdf", "png")


def _outputs(root: Path) -> dict[str, str]:
    names = {"csv": "micro.csv", "speedups": "micro_speedups.csv", "crossovers": "micro_crossovers.csv"}
    names |= {"section": "micro_section.tex", "macros": "micro_macros.tex", "pdf": "micro.pdf", "png": "micro.png"}
    return {key: str(root / "out" / names[key]) for key in OUTPUTS}


def test_write_micro_outputs_end_to_end(tmp_path):
    paths = _study(tmp_path, failed={("torch", 256): "out of memory"})
    paths.append(_write(tmp_path, _result("numpy", "mlp", 64, ms=0.5)))
    paths.append(_write(tmp_path, _result("torch", "mlp", 64, ms=0.1, transfer_ms=0.2)))
    outputs = _outputs(tmp_path)
    write_micro_outputs(paths, REFERENCE_CSV, outputs=outputs, resamples=RESAMPLES)
    assert all(Path(path).stat().st_size > 0 for path in outputs.values())
    assert list(pd.read_csv(outputs["speedups"]).columns) == micro.SPEEDUP_COLUMNS
    comparison = pd.read_csv(outputs["crossovers"])
    assert list(comparison.columns) == micro_reference.COMPARISON_COLUMNS
    section = Path(outputs["section"]).read_text()
    assert section.startswith("\\section{Micro-benchmarks}\n\\label{sec:micro}")
    for needle in (r"\includegraphics[width=\textwidth]{micro}", r"\label{tab:micro}", r"\label{tab:micro-crossover}"):
        assert needle in section
    # numbers from the data: the reference's JAX flatness, the BLAS found, the batch sizes, the crossovers
    assert "varies by a factor of 2.96 over batch sizes 1--4096" in section and "367" in section
    assert "openblas 0.3.30, 2 threads" in section and "batch sizes $b$ = 1, 4, 16, 64 and 256" in section
    assert "PyTorch \\texttt{matmul} from 64" in section and "unverified" in section
    assert "never" in section and "JAX/Flax \\texttt{matmul}" in section
    macros = Path(outputs["macros"]).read_text()
    assert "\\newcommand{\\fwbMicroCrossoverTorchMatmulFpThreeTwoResident}{64$^{m}$}" in macros
    assert "\\newcommand{\\fwbMicroCrossoverJaxMatmulFpThreeTwoResident}{never in 1--256}" in macros
    assert "\\newcommand{\\fwbMicroRefCrossoverJaxMatmul}{256}" in macros
    assert "\\newcommand{\\fwbMicroNumFailed}{1}" in macros


def test_macros_are_valid_latex_names_and_values(tmp_path):
    analysis = micro_report.analyse_micro(_study(tmp_path), REFERENCE_CSV, resamples=RESAMPLES)
    defs = micro_macros(analysis)
    assert all(name.isalpha() and name.startswith("fwbMicro") for name in defs)
    assert defs["fwbMicroNumCrossovers"] == "2" and defs["fwbMicroNumNever"] == "1"
    assert defs["fwbMicroRefJaxRatioMatmul"] == "2.96" and defs["fwbMicroRefNumpyRatioMatmul"] == "367"
    assert defs["fwbMicroNumpyThreads"] == "2" and defs["fwbMicroDim"] == "64"


def test_section_without_micro_suite():
    text = micro_section(None)
    assert text.startswith("\\section{Micro-benchmarks}")
    assert "This study has no micro suite (\\texttt{suites} in its config)." in text


@pytest.mark.parametrize("case", ["numpy only", "one batch", "all failed"])
def test_figure_and_section_in_degenerate_studies(tmp_path, case):
    if case == "numpy only":
        paths = [_write(tmp_path, _result("numpy", "matmul", b, ms=NUMPY_MS[b])) for b in (1, 4)]
    elif case == "one batch":
        paths = [_write(tmp_path, _result(f, "mlp", 8, ms=ms)) for f, ms in (("numpy", 1.0), ("jax", 0.5))]
    else:
        paths = [_write(tmp_path, _result(f, "matmul", 4, reason="crashed")) for f in ("numpy", "torch", "jax")]
    outputs = _outputs(tmp_path)
    analysis = write_micro_outputs(paths, REFERENCE_CSV, outputs=outputs, resamples=RESAMPLES)
    assert Path(outputs["png"]).stat().st_size > 0
    section = Path(outputs["section"]).read_text()
    table = micro_report.micro_table(analysis.frame, analysis.speedups)
    assert section.startswith("\\section{Micro-benchmarks}") and table in section
    if case == "numpy only":
        assert "No framework besides NumPy was measured" in section and r"\cmidrule" not in table
        assert r"\multicolumn{2}{l}{\texttt{matmul}, fp32}" in table, "the operation heads its rows"
    if case == "one batch":
        assert "JAX/Flax \\texttt{mlp} from $\\le$ 8" in section
    if case == "all failed":
        assert "no successful pair of cells" in section and table.count(micro.FAILED) == 3


def test_figure_marks_crossovers_and_reference_points(tmp_path, monkeypatch):
    analysis = micro_report.analyse_micro(_study(tmp_path), REFERENCE_CSV, resamples=RESAMPLES)
    drawn = {}

    def keep(fig, pdf, png):
        drawn["fig"] = fig

    monkeypatch.setattr("fwbench.analysis.figures.save_figure", keep)
    micro_figure(analysis.frame, analysis.speedups, analysis.crossovers, analysis.published, "x.pdf", "x.png")
    bottom = drawn["fig"].axes[1]
    texts = [t.get_text() for t in bottom.texts]
    assert "64" in texts and "256 copy" in texts  # torch resident and with copy
    labels = bottom.get_legend_handles_labels()[1]
    assert "JAX, reference (T4 report)" in labels and "PyTorch CPU, reference (T4 report)" in labels
