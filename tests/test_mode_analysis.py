"""Execution modes in the analysis and the paper: the tidy table keeps PyTorch eager and compiled apart, the ratios
between frameworks pair the configured modes (falling back, and saying so, where a cell is missing), the
compiled-over-eager gain gets its own table and figure, and the tables, setup rows and macros name every mode.

Hand-built cell results only (the skeleton of tests/test_analysis.py), no subprocess."""

from __future__ import annotations

import copy
import re

import pandas as pd
import pytest

from fwbench.analysis.common.names import model_name
from fwbench.analysis.inference.figures import mode_gain_figure, throughput_figure
from fwbench.analysis.inference.findings import Peak, inference_results
from fwbench.analysis.inference.macros import macros
from fwbench.analysis.inference.ratios import (
    MODE_GAIN_COLUMNS,
    SPEEDUP_COLUMNS,
    mode_gains,
    speedups,
    write_ratio_tables,
    write_speedups,
)
from fwbench.analysis.inference.summary import off_pairing, pairings
from fwbench.analysis.inference.tables import inference_table, throughput_table
from fwbench.analysis.inference.tidy import KEY_COLUMNS, read_tidy, write_tidy
from fwbench.analysis.paper.inference import inference_results_section, modes_sentence
from fwbench.analysis.setup.provenance import study_environment
from fwbench.analysis.setup.tables import environment_table
from fwbench.io import atomic_write_json
from fwbench.results import load_result
from fwbench.study.config import validate_config
from tests.test_analysis import BASE, failed_in_rounds, measured_in_rounds
from tests.test_pdf_check import PREAMBLE, _build, _check, needs_latex

THREE = ["torch", "jax", "tensorflow"]
EAGER_RATES = {1: [100.0, 120.0, 90.0], 8: [400.0, 440.0, 380.0]}
COMPILE_S = {("torch", "compile"): 14.0, ("jax", "jit"): 0.2, ("tensorflow", "xla"): 0.3}
# Per-round factors over PyTorch eager. small_cnn: compiled PyTorch is 2x eager at batch 1 (resolved) and failed at
# batch 8, JAX 1.5x eager (so 0.75x compiled), TensorFlow 0.5x eager. resnet50: PyTorch eager only (mode_scope).
FACTORS = {
    ("torch", "compile", "small_cnn", 1): [2.0, 2.0, 2.0],
    ("jax", "jit", "small_cnn", 1): [1.5, 1.5, 1.5],
    ("jax", "jit", "small_cnn", 8): [1.3, 0.8, 1.05],
    ("tensorflow", "xla", "small_cnn", 1): [0.5, 0.5, 0.5],
    ("tensorflow", "xla", "small_cnn", 8): [0.5, 0.5, 0.5],
    ("jax", "jit", "resnet50", 1): [1.5, 1.5, 1.5],
    ("tensorflow", "xla", "resnet50", 1): [0.9, 0.9, 0.9],
}
PRIMARY = {"torch": "eager", "jax": "jit", "tensorflow": "xla"}


def _settings(framework: str, mode: str) -> dict:
    """What a cell records of its mode: the mode, torch.compile's mode, autotuning (not applicable on the CPU) and
    the compilation cache's state."""
    return {
        "intra_op_threads": 2,
        "mode": mode,
        "compile_mode": "default" if (framework, mode) == ("torch", "compile") else None,
        "compilation_cache": {"state": "cold" if mode != "eager" else "not applicable (eager)"},
        "autotune": {"setting": "on", "in_effect": None, "note": "not applicable on the CPU"},
    }


def _cell(
    framework: str,
    mode: str | None,
    batch: int,
    model: str = "small_cnn",
    node: str | None = None,
    factors: dict | None = None,
) -> dict:
    """A cell of group {model}-{batch}, trials in rounds 1-3 at PyTorch eager's rates times `factors` (FACTORS), or
    a failed cell where a compiled variant has no factors. `mode` None: a result from before modes (its framework's
    primary)."""
    factors_of = FACTORS if factors is None else factors
    mode_ = mode or PRIMARY[framework]
    result = copy.deepcopy(BASE)
    result["cell"] = {
        "suite": "inference",
        "framework": framework,
        "model": model,
        "precision": "fp32",
        "batch_size": batch,
        "image_size": 32,
    } | ({"mode": mode} if mode else {})
    result["provenance"]["group"] = {"id": f"{model}-{batch}"}
    if node:
        result["provenance"]["placement"] = {"host": node, "node": node, "slot": 0}
    if mode_ != "eager" and (framework, mode_, model, batch) not in factors_of:
        return failed_in_rounds(result, "compiler error: Inductor failed", "compiler")
    per_round = factors_of.get((framework, mode_, model, batch), [1.0, 1.0, 1.0])
    rates = [rate * factor for rate, factor in zip(EAGER_RATES[batch], per_round, strict=True)]
    report = {"compile_report": {"graph_breaks": 0, "graphs": 1}} if mode_ == "compile" else {}
    measured_in_rounds(result, rates, COMPILE_S.get((framework, mode_)), flags={"recompiled": False}, **report)
    result["provenance"]["framework"] = {
        "name": framework,
        "versions": {framework: "9.9"},
        "device": {"name": "cpu", "platform": "cpu"},
        "settings": _settings(framework, mode_),
    }
    return result


def _study_results() -> list[dict]:
    """small_cnn at batch 1 and 8 in PyTorch eager and compiled, JAX and TensorFlow; resnet50 at batch 1 without
    compiled PyTorch (outside mode_scope)."""
    results = [
        _cell(framework, mode, batch)
        for batch in (1, 8)
        for framework, mode in (("torch", "eager"), ("torch", "compile"), ("jax", "jit"), ("tensorflow", "xla"))
    ]
    results += [_cell(framework, mode, 1, "resnet50") for framework, mode in (("torch", "eager"), ("jax", "jit"))]
    return results + [_cell("tensorflow", "xla", 1, "resnet50")]


def _write(tmp_path, results, prefix="cell"):
    paths = []
    for index, result in enumerate(results):
        path = tmp_path / f"{prefix}{index}.json"
        atomic_write_json(path, result)
        paths.append(path)
    return paths


@pytest.fixture
def study(tmp_path):
    """(paths, tidy frame, ratios, gains) of the mode study."""
    paths = _write(tmp_path, _study_results())
    ratios, gains = write_ratio_tables(paths, tmp_path / "speedups.csv", tmp_path / "mode_gains.csv")
    return paths, write_tidy(paths, tmp_path / "inference.csv"), ratios, gains


def _macro(text, name):
    match = re.search(r"\\newcommand\{\\" + name + r"\}\{(.*)\}$", text, flags=re.M)
    assert match, f"{name} not defined"
    return match.group(1)


# --- the tidy table ---------------------------------------------------------------------------------------------


def test_tidy_keeps_one_framework_in_two_modes_apart(study, tmp_path):
    _, frame, _, _ = study
    assert KEY_COLUMNS == ["suite", "model", "precision", "batch_size", "framework", "mode"]
    torch = frame[(frame["framework"] == "torch") & (frame["model"] == "small_cnn") & (frame["batch_size"] == 1)]
    assert torch["mode"].tolist() == ["eager", "compile"], "eager sorts before compiled"
    assert torch["compiled"].tolist() == [False, True]
    compiled = torch.iloc[1]
    assert compiled["compile_mode"] == "default" and compiled["compile_s"] == 14.0
    assert compiled["compilation_cache"] == "cold" and compiled["autotune"] == "on"
    assert pd.isna(compiled["autotune_in_effect"]) and compiled["graph_breaks"] == 0
    assert torch.iloc[0]["throughput_img_s"] * 2 == pytest.approx(compiled["throughput_img_s"])
    assert list(frame.columns[:3]) == ["suite", "framework", "mode"]
    reread = read_tidy(tmp_path / "inference.csv")
    assert len(reread) == len(frame) == 11 and not reread.duplicated(KEY_COLUMNS).any()
    # a failed compiled cell keeps its mode, and a result from before modes ran in its framework's primary one
    failed = frame[(frame["mode"] == "compile") & (frame["status"] != "ok")]
    assert failed["batch_size"].tolist() == [8] and failed["failure_kind"].tolist() == ["compiler"]
    legacy = write_tidy(_write(tmp_path, [_cell("torch", None, 1), _cell("jax", None, 1)], "old"), tmp_path / "o.csv")
    by_framework = legacy.set_index("framework")
    assert by_framework["mode"].to_dict() == {"torch": "eager", "jax": "jit"}
    assert by_framework["compiled"].to_dict() == {"torch": False, "jax": True}


# --- ratios between frameworks ----------------------------------------------------------------------------------


def _by(ratios):
    return ratios.set_index(["model", "batch_size", "numerator"])


def test_ratios_pair_the_ratio_modes_and_mark_a_stand_in(study):
    _, _, ratios, _ = study
    assert list(ratios.columns) == SPEEDUP_COLUMNS
    by = _by(ratios)
    paired = by.loc[("small_cnn", 1, "jax")]
    assert (paired["numerator_mode"], paired["denominator_mode"]) == ("jit", "compile")
    assert paired["ratio"] == pytest.approx(0.75) and bool(paired["resolved"]) and not paired["mixed_modes"]
    assert pd.isna(paired["stand_in"]) and paired["ci_scope"] == "paired_rounds"
    # compiled PyTorch failed at batch 8 and was not measured for resnet50: eager stands in, and the ratio says so
    for key in (("small_cnn", 8, "jax"), ("resnet50", 1, "tensorflow")):
        row = by.loc[key]
        assert row["denominator_mode"] == "eager" and bool(row["mixed_modes"])
        assert row["stand_in"] == "torch: eager for compile"
    assert by.loc[("small_cnn", 8, "tensorflow"), "ratio"] == pytest.approx(0.5), "over eager PyTorch"
    assert pairings(ratios) == {"jax": ("jit", "compile"), "tensorflow": ("xla", "compile")}
    assert off_pairing(ratios).tolist() == list(ratios["stand_in"].notna())
    # the config's ratio_modes pair eager PyTorch on purpose: no stand-in, every ratio mixed
    eager = speedups([load_result(p) for p in study[0]], ratio_modes={"torch": "eager"})
    assert set(eager["denominator_mode"]) == {"eager"} and eager["stand_in"].isna().all()
    assert eager["mixed_modes"].all() and not off_pairing(eager).any()
    assert _by(eager).loc[("small_cnn", 1, "jax"), "ratio"] == pytest.approx(1.5)


# --- the compiled-over-eager gain -------------------------------------------------------------------------------


def test_mode_gains_have_the_paired_interval(study, tmp_path):
    paths, _, _, gains = study
    assert list(gains.columns) == MODE_GAIN_COLUMNS
    assert len(gains) == 1, "batch 8's compiled cell failed and resnet50 has no compiled cell: no gain there"
    gain = gains.iloc[0]
    assert (gain["model"], gain["batch_size"], gain["framework"], gain["mode"], gain["baseline_mode"]) == (
        "small_cnn",
        1,
        "torch",
        "compile",
        "eager",
    )
    assert gain["ratio"] == pytest.approx(2.0) and gain["ci_low"] > 1 and bool(gain["resolved"])
    assert gain["ci_scope"] == "paired_rounds" and gain["pairs"] == 3
    assert read_tidy(tmp_path / "mode_gains.csv").shape == gains.shape
    assert mode_gains([]).columns.tolist() == MODE_GAIN_COLUMNS, "no framework in two modes: an empty table"
    # two modes of one framework on different nodes: kept, marked, each named with its mode
    apart = [_cell("torch", "eager", 1, node="n1"), _cell("torch", "compile", 1, node="n2")]
    row = mode_gains(apart).iloc[0]
    assert bool(row["node_differs"]) and row["node_detail"] == "nodes differ: torch n1, torch compile n2"


# --- tables -----------------------------------------------------------------------------------------------------


def _header(table: str) -> list[str]:
    """The column names of a tabular's header row, a stacked name's lines joined by a space ("PT compiled")."""
    line = next(line for line in table.splitlines() if line.startswith(r"\textbf{Model}"))
    names = []
    for cell in line.removesuffix(r" \\").split(" & "):
        stacked = re.search(r"\\end\{tabular\}", cell)
        if stacked:
            body = re.search(r"@\{\}\}(.*)\\end\{tabular\}", cell).group(1)
            names.append(" ".join(part.strip() for part in body.split(r"\\")))
        else:
            names.append(re.fullmatch(r"\\textbf\{(.*)\}", cell).group(1))
    return names


def _line(table: str, model: str, batch: int) -> list[str]:
    current, found = None, None
    for line in table.splitlines():
        cells = line.split(" & ")
        if len(cells) < 5 or "textbf{Model}" in line:
            continue
        current = cells[0] or current
        if current == model_name(model) and cells[2] == str(batch):
            found = [cell.removesuffix(r" \\") for cell in cells]
    assert found, (model, batch)
    return found


def test_the_throughput_table_shows_every_mode_and_marks_stand_ins(study):
    _, frame, ratios, _ = study
    table = inference_table(frame, THREE, ratios)
    throughput = throughput_table(frame, THREE, ratios)
    assert _header(throughput) == [
        *["Model", "Prec.", "BS", "PT eager", "PT compiled", "JAX", "TF"],
        *["JAX/PT-compiled", "TF/PT-compiled"],
    ]
    assert throughput.startswith(r"\setlength{\tabcolsep}{3pt}"), "four variants: narrower gaps"
    small1, small8 = _line(throughput, "small_cnn", 1), _line(throughput, "small_cnn", 8)
    assert small1[7].startswith(r"\textbf{0.750$\times$") and "$^{m}$" not in small1[7]
    assert small8[4] == r"failed$^\dagger$" and small8[7].endswith("$^{m}$") and small8[8].endswith("$^{m}$")
    assert _line(throughput, "resnet50", 1)[4] == "---", "no compiled PyTorch cell measured for resnet50"
    assert "PT-eager for PyTorch (eager), PT-compiled for PyTorch (compiled), JAX for JAX/Flax" in table
    assert r"$^{m}$: another mode stands in for the column's (PT-eager for PT-compiled)" in table
    assert "so the ratio sets an eager against a compiled program" in table and r"\fwbNumRatiosStandIn{}" in table
    assert "Execution modes: PyTorch eager (operator by operator) and torch.compile (Dynamo + Inductor; mode " in table
    assert "Every mode but eager runs a compiled program." in table
    # the latency table: a compile-time column for compiled PyTorch too, and what each compile time covers
    latency = table.split(r"\label{tab:inference-latency}")[1]
    assert _header(latency)[-3:] == ["PT compiled", "JAX", "TF"]
    assert _line(latency, "small_cnn", 1)[-3:] == ["14.0", "0.200", "0.300"]
    assert "torch.compile's first call (Dynamo tracing and Inductor code generation)" in table


def test_a_study_without_compiled_pytorch_names_the_eager_pairing_in_its_header(tmp_path):
    results = [_cell(framework, mode, 1) for framework, mode in (("torch", "eager"), ("jax", "jit"))]
    paths = _write(tmp_path, results)
    frame, ratios = write_tidy(paths, tmp_path / "i.csv"), write_speedups(paths, tmp_path / "s.csv")
    table = inference_table(frame, ["torch", "jax"], ratios)
    assert _header(throughput_table(frame, ["torch", "jax"], ratios)) == [
        *["Model", "Prec.", "BS", "PyTorch", "JAX/Flax", "JAX/PT-eager"]
    ]
    assert "$^{m}$" not in table, "the column itself pairs eager PyTorch: its header says so, no row stands apart"
    assert "Every ratio in JAX/PT-eager sets a compiled program against an eager one." in table
    assert "Execution modes: PyTorch eager (operator by operator); JAX/Flax jax.jit" in table


# --- macros -----------------------------------------------------------------------------------------------------


def test_macros_for_the_mode_axis(study, tiny_config):
    paths, frame, ratios, gains = study
    config = validate_config({**tiny_config, "frameworks": THREE})
    text = macros(frame, ratios, study_environment(paths), config)
    names = re.findall(r"\\newcommand\{\\([^}]*)\}", text)
    assert all(re.fullmatch(r"fwb[A-Za-z]+", name) for name in names) and len(names) == len(set(names))
    assert _macro(text, "fwbNumRatiosStandIn") == "4"
    assert _macro(text, "fwbTorchCompileMode") == "default"
    assert _macro(text, "fwbAutotune") == "on (not applicable on the CPU)"
    # the Results' findings (report/templates/inference_results.tex.j2): the column's ratios against compiled PyTorch,
    # the stand-ins against eager PyTorch (no compiled PyTorch cell) as a family of their own, never left out
    results = inference_results(frame, ratios, gains, config)
    compiled, eager = results.groups
    assert compiled.baseline == "compiled PyTorch" and [f.framework for f in compiled.findings] == ["JAX", "TensorFlow"]
    assert (compiled.findings[0].tally.comparisons, compiled.findings[0].tally.typical) == (1, pytest.approx(0.75))
    assert eager.stand_in and eager.mixed and eager.models == ("ResNet-50", "small CNN")
    assert [(f.framework, f.tally.comparisons, f.tally.faster, f.tally.slower) for f in eager.findings] == [
        ("JAX", 2, 1, 0),
        ("TensorFlow", 2, 0, 2),
    ]
    assert results.stand_ins_left_out == 0 and results.deviating == 0
    assert (results.gain.tally.comparisons, results.gain.tally.faster, results.gain.tally.typical) == (1, 1, 2.0)
    assert results.gain.compile_median == 14.0
    section = inference_results_section(frame, ratios, gains, config)
    assert "on the small CNN, JAX was slower on the one comparison (0.75$\\times$)." in section
    assert "Against eager PyTorch, on ResNet-50 and the small CNN, where PyTorch has no compiled cell" in section
    assert "Compiling was faster on the one comparison (2.0$\\times$)." in section
    assert "took 14~s per process in the median" in section
    assert modes_sentence(frame) == (
        "In this study, PyTorch ran eagerly for every model and compiled for the small CNN only; JAX and "
        "TensorFlow ran compiled for every model."
    )
    assert results.peak == Peak("JAX", "small CNN", 8, results.peak.throughput), "the fastest cell of any mode"
    # without gains the section says none was measured
    none = inference_results(frame, ratios, None, config).gain
    assert none.tally.comparisons == 0 and none.compile_median == 14.0, "compiled cells without a gain"
    assert "No framework ran both eagerly and compiled" in inference_results_section(frame, ratios, None, config)


# --- figures ----------------------------------------------------------------------------------------------------


def _legend_of(draw, *args):
    import matplotlib.pyplot as plt

    seen = []
    original = plt.Figure.savefig

    def spy(fig, *a, **kw):
        seen.append([t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()])
        return original(fig, *a, **kw)

    plt.Figure.savefig = spy
    try:
        draw(*args)
    finally:
        plt.Figure.savefig = original
    return seen[0]


def test_the_throughput_figure_has_a_series_per_mode(study, tmp_path):
    _, frame, _, _ = study
    legend = _legend_of(throughput_figure, frame, tmp_path / "t.pdf", tmp_path / "t.png")
    assert legend == ["PyTorch (eager)", "PyTorch (compiled)", "JAX/Flax", "TensorFlow/Keras"]


def test_the_mode_gain_figure_is_written_measured_or_not(study, tmp_path):
    _, _, _, gains = study
    mode_gain_figure(gains, tmp_path / "gain.pdf", tmp_path / "gain.png")
    assert (tmp_path / "gain.pdf").read_bytes().startswith(b"%PDF")
    assert (tmp_path / "gain.png").read_bytes()[:4] == b"\x89PNG"
    mode_gain_figure(gains.iloc[0:0], tmp_path / "none.pdf", tmp_path / "none.png")
    assert (tmp_path / "none.png").stat().st_size > 0
    assert not list(tmp_path.glob(".*tmp*")), "temporary files must be renamed away"


# --- the page ---------------------------------------------------------------------------------------------------


def _widest() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The inference tables at their widest with four variants: the longest model name, every mark on a throughput,
    MFU, a compile time for every compiled mode, ratios with every mark including $^m$."""
    rows, ratios = [], []
    for model in ("mobilenet_v3_small", "efficientnet_b0"):
        for batch in (1, 256):
            for framework, mode in (("torch", "eager"), ("torch", "compile"), ("jax", "jit"), ("tensorflow", "xla")):
                rows.append(
                    {
                        "suite": "inference",
                        "framework": framework,
                        "mode": mode,
                        "model": model,
                        "precision": "fp32",
                        "batch_size": batch,
                        "status": "ok",
                        "deviations": "xla_autotune_off",
                        "throughput_img_s": 12345.6,
                        "latency_p50_ms": 123.456,
                        "compile_s": None if mode == "eager" else 123.45,
                        "mfu": 0.12345,
                        "noisy": True,
                        "ci_not_reached": True,
                        "settings_differ": "True",
                    }
                )
            for framework, mode in (("jax", "jit"), ("tensorflow", "xla")):
                ratios.append(
                    {
                        "numerator": framework,
                        "model": model,
                        "precision": "fp32",
                        "batch_size": batch,
                        "ratio": 0.0123456,
                        "ci_low": 0.0111111,
                        "ci_high": 0.0133333,
                        "resolved": "False",
                        "ci_scope": "unpaired_trials",
                        "deviation_differs": "True",
                        "node_differs": True,
                        "numerator_mode": mode,
                        "denominator_mode": "eager" if batch == 256 else "compile",
                        "mixed_modes": batch == 256,
                        "stand_in": "torch: eager for compile" if batch == 256 else None,
                    }
                )
    return pd.DataFrame(rows), pd.DataFrame(ratios)


@needs_latex
def test_the_mode_tables_fit_the_page_at_8_pt(tmp_path, study):
    frame, ratios = _widest()
    (tmp_path / "inference.tex").write_text(inference_table(frame, THREE, ratios))
    (tmp_path / "environment.tex").write_text(environment_table(study_environment(study[0])))
    body = r"""
\newcommand{\fwbNumRatiosStandIn}{2}
\section{Results}
Tables~\ref{tab:inference}, \ref{tab:inference-latency} and~\ref{tab:environment} give the numbers.
\begin{table}[t]
\caption{Machine and software}
\label{tab:environment}
\footnotesize
\input{environment}
\end{table}
\input{inference}
\section{Failures}
\label{sec:failures}
"""
    pdf, log, tex = _build(tmp_path, body)
    report = _check(tmp_path, pdf, log, tex)
    assert report["problems"] == [], report["problems"]
    assert PREAMBLE.startswith(r"\documentclass[conference]{IEEEtran}"), "the paper's document class"


# --- published vs reproduced ------------------------------------------------------------------------------------


def test_a_published_eager_ratio_gets_the_paired_interval_of_the_eager_cells(study, tmp_path):
    """The H100 source states no modes (taken as PyTorch eager); the study's ratio table pairs JAX with compiled
    PyTorch. The eager cells of the same interleaved group still give a paired interval, from the cells."""
    from fwbench.analysis.published.judgement import DIRECTION_ONLY, REPRODUCED, SAME, UNPAIRED_SCOPE
    from fwbench.analysis.published.matching import compare
    from tests.test_published import _published_row, _sources

    paths, frame, ratios, _ = study
    rows = [_published_row("small_cnn", "pytorch", 1, 500.0), _published_row("small_cnn", "jax", 1, 750.0)]
    sources = _sources(tmp_path, rows)
    kwargs = {"inference": frame, "speedups": ratios, "training": None, "image_size": 32}
    without = compare(sources, **kwargs).iloc[0]
    assert without["ci_scope"] == UNPAIRED_SCOPE
    assert (without["verdict"], without["direction"]) == (DIRECTION_ONLY, SAME)
    row = compare(sources, cell_paths=paths, **kwargs).iloc[0]
    assert (row["ours_torch_mode"], row["ours_other_mode"]) == ("eager", "jit")
    # JAX ran at 1.5x PyTorch eager in every round: the paired ratio and its interval, resolved, same direction
    assert row["ratio"] == pytest.approx(1.5) and row["ci_scope"] == "paired_rounds"
    assert row["ci_low"] == pytest.approx(1.5) and row["ci_high"] == pytest.approx(1.5)
    assert (row["verdict"], row["direction"], bool(row["agrees"])) == (REPRODUCED, SAME, True)
