"""Execution modes in the analysis beside inference: training rows and step-0 agreement per (framework, mode), the
micro suite's speedups per mode, the ledger's mode controls, published figures matched by mode, and the setup,
time-to-report and loader reports naming modes. Hand-built results, no framework runs."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest

from fwbench.analysis.common.partners import check_placement, flag_deviations
from fwbench.analysis.fairness import ledger as lg
from fwbench.analysis.fairness.rows import HELD, NOT_HELD, NOT_MEASURED
from fwbench.analysis.inference.tidy import read_tidy
from fwbench.analysis.micro.findings import micro_findings
from fwbench.analysis.micro.macros import micro_macros
from fwbench.analysis.micro.tables import micro_table
from fwbench.analysis.paper.micro_section import micro_section, write_micro_outputs
from fwbench.analysis.paper.published_section import published_section
from fwbench.analysis.paper.training_section import training_section
from fwbench.analysis.published.counts import PublishedModes, published_modes
from fwbench.analysis.published.judgement import DIRECTION_ONLY, SAME, UNPAIRED_SCOPE
from fwbench.analysis.published.matching import compare
from fwbench.analysis.published.table import OTHER_MODE_MARK, comparison_table
from fwbench.analysis.setup.data_report import fastest_consumer
from fwbench.analysis.setup.provenance import study_environment
from fwbench.analysis.time.study_time import breakdown, process_rows
from fwbench.analysis.time.study_time import macros as time_macros
from fwbench.analysis.training.epochs import write_training_tables
from fwbench.analysis.training.figure import training_figure
from fwbench.analysis.training.findings import section_values
from fwbench.analysis.training.macros import training_macros
from fwbench.analysis.training.reference import comparison_float, read_published
from fwbench.analysis.training.reference_findings import reference_values
from fwbench.analysis.training.tables import step0_table, training_table
from fwbench.workflow.jobtime import JobTime
from tests.test_conclusions import _section, training_paragraph
from tests.test_ledger import _parity
from tests.test_ledger import _result as _ledger_cell
from tests.test_micro_analysis import REFERENCE_CSV, RESAMPLES, _outputs
from tests.test_micro_analysis import _result as _micro_cell
from tests.test_micro_analysis import _write as _write_micro
from tests.test_multi_framework_analysis import PUBLISHED, _training, _write
from tests.test_published import _cell, _published_row, _ratio, _sources

AUTOTUNE_ON_CPU = {"setting": "on", "in_effect": None, "note": "not applicable on the CPU"}


def _in_mode(result: dict, mode: str, **settings) -> dict:
    """`result` as a cell of `mode`, its settings recording the mode (and `settings`) as the backends do."""
    result = copy.deepcopy(result)
    result["cell"]["mode"] = mode
    if result["provenance"].get("framework"):
        result["provenance"]["framework"]["settings"] |= {"mode": mode, "autotune": AUTOTUNE_ON_CPU} | settings
    return result


# --- training ---------------------------------------------------------------------------------------------------


def _compiled_torch(loss_after_step=2.2002, top1=0.65, graph_breaks=0):
    """torch.compile's small-CNN cell: its step-0 probe 1e-4 off eager PyTorch's after the step, faster epochs."""
    result = _in_mode(
        _training("torch", loss_after_step=loss_after_step, top1=top1),
        "compile",
        compile_mode="default",
        compilation_cache={"state": "cold (empty per process)"},
    )
    for epoch in result["metrics"]["epochs"]:
        epoch["time_s"] /= 2  # twice eager PyTorch's speed
        epoch["compile_s"] = 12.0 if epoch["epoch"] == 0 else 0.0
    result["metrics"]["compile_report"] = {"graphs": 1, "graph_breaks": graph_breaks}  # as the backend reports it
    return result


def _trained_results():
    return [
        _in_mode(_training("torch"), "eager"),
        _compiled_torch(),
        _in_mode(_training("jax", top1=0.5), "jit"),
        _in_mode(_training("tensorflow", top1=0.62), "xla"),
    ]


@pytest.fixture
def modes_trained(tmp_path):
    paths = _write(tmp_path, _trained_results(), "train")
    write_training_tables(paths, tmp_path / "training.csv", tmp_path / "step0.csv")
    return paths, read_tidy(tmp_path / "training.csv"), read_tidy(tmp_path / "step0.csv")


def test_eager_and_compiled_pytorch_are_distinct_training_rows(modes_trained):
    _, frame, agreement = modes_trained
    torch = frame[frame["framework"] == "torch"]
    assert sorted(set(torch["mode"])) == ["compile", "eager"] and len(torch) == 4, "two epochs per mode"
    assert set(torch.loc[torch["mode"] == "compile", "compile_mode"]) == {"default"}
    assert bool(frame.loc[frame["mode"] == "compile", "compiled"].all())
    assert not bool(frame.loc[frame["mode"] == "eager", "compiled"].any())
    assert {"mode", "numerator_mode", "denominator_mode"} <= set(frame.columns) | set(agreement.columns)
    table = training_table(frame)
    rows = [line.split(" & ")[1] for line in table.splitlines() if line.startswith("small CNN")]
    assert rows == ["PyTorch (eager)", "PyTorch (compiled)", "JAX/Flax", "TensorFlow/Keras"], "paper order, modes named"


def test_compiled_pytorch_step0_is_shown_against_eager_pytorch(modes_trained):
    _, frame, agreement = modes_trained
    rows = [(r.numerator, r.numerator_mode, r.denominator, r.denominator_mode) for r in agreement.itertuples()]
    assert rows == [
        ("torch", "compile", "torch", "eager"),
        ("jax", "jit", "torch", "eager"),
        ("tensorflow", "xla", "torch", "eager"),
    ]
    compiled = agreement.iloc[0]
    assert compiled["loss_torch_compile"] == pytest.approx(2.3) and compiled["loss_torch"] == pytest.approx(2.3)
    assert compiled["rel_diff_loss_after_step"] == pytest.approx(0.0002 / 2.2)
    assert compiled["final_top1_torch_compile"] == pytest.approx(0.65)
    defs = training_macros(frame, agreement)
    assert defs["fwbStepZeroLossDiffTorchCompile"] == "0.0e+00"
    assert defs["fwbStepZeroMaxDiffTorchCompile"] == "9.1e-05" and defs["fwbNumTrainPairsTorchCompile"] == "1"
    assert defs["fwbStepZeroMaxDiffJax"] == "0.0e+00", "every other framework still against eager PyTorch"
    assert "fwbStepZeroCompiledSentence" not in defs, "the sentence is the template's (tests/test_training_section.py)"
    table = step0_table(agreement)
    assert "PyTorch (compiled) & 2.3000" in table and "(PyTorch eager)" in table
    [compiled] = section_values(frame, agreement)["compiled"]
    assert (compiled.pairs, compiled.flagged, compiled.loss) == (1, 0, 0.0)
    assert compiled.loss_after_step == pytest.approx(9.1e-05, rel=0.01)
    section = training_section(frame, agreement)
    assert "Compiled PyTorch's first optimiser step agrees with eager PyTorch's to a relative" in section
    assert "PyTorch trains in two modes, eager (operator by operator) and torch.compile (Dynamo + Inductor)" in section
    assert "every other framework's loss equals eager PyTorch's" in section, "JAX and TensorFlow: 0 after the step"
    assert "At batch 32, compiled PyTorch trained the small CNN 2.0$\\times$ as fast as eager PyTorch" in section
    assert "(2.5~s against 5.0~s), after 12~s of compilation." in section
    assert "relative differences of each framework from PyTorch (compiled PyTorch: from eager PyTorch)" in section


def test_a_step0_table_from_before_modes_still_reads(modes_trained):
    _, frame, agreement = modes_trained
    old = agreement[agreement["numerator"] != "torch"].drop(columns=["numerator_mode", "denominator_mode"])
    assert "JAX/Flax" in step0_table(old) and "PyTorch eager" not in step0_table(old)


def test_the_curves_figure_draws_each_mode(modes_trained, tmp_path, monkeypatch):
    paths, _, _ = modes_trained
    drawn = []
    import matplotlib.axes

    original = matplotlib.axes.Axes.plot

    def spy(self, *args, **kwargs):
        drawn.append((kwargs.get("label"), kwargs.get("color")))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    training_figure(paths, tmp_path / "curves.pdf", tmp_path / "curves.png")
    colours = dict(drawn)
    assert {"PyTorch (eager)", "PyTorch (compiled)", "JAX/Flax"} <= set(colours)
    assert colours["PyTorch (eager)"] != colours["PyTorch (compiled)"]


def test_training_ratios_pair_compiled_with_compiled_and_say_when_not(modes_trained):
    _, frame, agreement = modes_trained
    line = training_paragraph(frame, agreement)
    assert "Training the small CNN at batch 32, the last epoch took compiled PyTorch 1.5~s. " in line
    assert "JAX took 3.0~s, 0.50$\\times$ compiled PyTorch's speed." in line and "eager one" not in line
    assert "Compiled PyTorch's first optimiser step agrees with eager PyTorch's" in line, "the section's words"
    assert "compiled PyTorch trained the small CNN 2.0$\\times$ as fast as eager PyTorch" in line
    eager = training_paragraph(frame, agreement, config={"ratio_modes": {"torch": "eager"}})
    assert "took eager PyTorch 3.0~s" in eager
    assert "1.0$\\times$ eager PyTorch's speed. This sets a compiled program against an eager one" in eager


def test_the_l4_table_names_both_pytorch_modes(modes_trained):
    _, frame, agreement = modes_trained
    text = "\n".join(comparison_float(frame, read_published(PUBLISHED)))
    assert "PyTorch & this study (eager, fp32, batch 32, 2 epochs)" in text
    assert " & this study (compiled, fp32, batch 32, 2 epochs)" in text
    assert "JAX/Flax & this study (fp32, batch 32, 2 epochs)" in text, "one mode: not named"
    beside = reference_values(frame, read_published(PUBLISHED))
    assert [(m.framework, m.modes) for m in beside.modes] == [("PyTorch", ("eager", "compiled"))] and not beside.stated
    said = training_section(frame, agreement, published=read_published(PUBLISHED))
    assert "does not state whether it compiled any framework" in said and "(PyTorch eager and compiled)." in said


def test_partners_keep_two_modes_of_one_framework_apart(modes_trained):
    _, frame, _ = modes_trained
    first = frame[frame["epoch"] == 0]
    eager, compiled = (
        first[(first["framework"] == "torch") & (first["mode"] == m)].iloc[0] for m in ("eager", "compile")
    )
    check = check_placement([eager, compiled.to_dict() | {"node": "other"}])
    assert check.node_values() == "torch None, torch compile other".replace("None", "unknown")
    deviating = first.assign(deviations=[None, "cudnn_benchmark_off", None, None])
    flagged = flag_deviations(deviating, ["model", "precision", "batch_size"])
    assert flagged["deviation_differs"].all(), "a workaround in compiled PyTorch only is a difference"


# --- micro ------------------------------------------------------------------------------------------------------


def _micro_study(root: Path) -> list[Path]:
    """NumPy, eager and compiled PyTorch and JAX cells of matmul; compiled PyTorch twice eager's speed."""
    times = {1: (0.01, 0.1), 16: (0.1, 0.12), 256: (1.6, 0.3)}
    paths = []
    for batch, (numpy_ms, torch_ms) in times.items():
        cells = [
            _micro_cell("numpy", "matmul", batch, ms=numpy_ms),
            _in_mode(_micro_cell("torch", "matmul", batch, ms=torch_ms), "eager"),
            _in_mode(_micro_cell("torch", "matmul", batch, ms=torch_ms / 2), "compile"),
            _micro_cell("jax", "matmul", batch, ms=numpy_ms * 5),
        ]
        paths += [_write_micro(root, cell) for cell in cells]
    return paths


def test_micro_speedups_and_crossovers_per_mode(tmp_path):
    outputs = _outputs(tmp_path)
    analysis = write_micro_outputs(_micro_study(tmp_path), REFERENCE_CSV, outputs=outputs, resamples=RESAMPLES)
    assert any("/torch/compile/matmul/" in path for path in analysis.frame["path"]), "the mode's folder"
    speedups = analysis.speedups[analysis.speedups["framework"] == "torch"].set_index(["mode", "batch_size"])
    assert speedups.loc[("compile", 256), "speedup"] == pytest.approx(
        2 * speedups.loc[("eager", 256), "speedup"], rel=0.1
    )
    crossovers = analysis.crossovers.set_index(["framework", "mode"])
    assert {("torch", "eager"), ("torch", "compile"), ("jax", "jit")} <= set(crossovers.index)
    table = micro_table(analysis.frame, analysis.speedups)
    assert r"\textbf{PyTorch (eager)}" in table and r"\textbf{PyTorch (compiled)}" in table
    assert r"\textbf{JAX/Flax}" in table
    defs = micro_macros(analysis)
    assert "fwbMicroCrossoverTorchCompileMatmulFpThreeTwoResident" in defs
    assert "fwbMicroCrossoverTorchMatmulFpThreeTwoResident" in defs, "the primary mode's name as before modes"
    section = micro_section(analysis)
    names = [f.name for f in micro_findings(analysis).frameworks]
    assert names == ["eager PyTorch", "compiled PyTorch", "JAX"], "a mode named where its framework has several"
    assert "compiled PyTorch never overtakes NumPy" in section or "compiled PyTorch overtakes NumPy" in section
    assert "compiled PyTorch and JAX compile before the timed calls" in section
    assert "(framework, mode, operation" in section
    assert "Each framework runs in its execution mode: eager PyTorch eager (operator by operator)" in section
    assert "so the speedups of compiled modes include what their compiler gains" in section
    assert "PT-compiled for PyTorch compiled" in section and "Five caveats" in section
    assert "They are compared with eager PyTorch; compiled PyTorch has no reference series." in section
    compared = analysis.comparison.set_index(["framework", "mode"])
    assert compared.loc[("torch", "eager"), "reference"] == "torch_cpu"
    assert compared.loc[("torch", "compile"), "agreement"] == "not comparable"
    assert "taken as eager; this series ran in compile" in compared.loc[("torch", "compile"), "note"]


# --- ledger -----------------------------------------------------------------------------------------------------


def _ledger(results, speedups=None):
    rows = lg.ledger(results, _parity(), pd.DataFrame({"settings_differ": [False]}), speedups)
    return {row.control: (row.status, row.measured, row.where) for row in rows.itertuples()}


def _speedups(mixed: list[bool]) -> pd.DataFrame:
    rows = [
        _ratio("resnet50", batch, 1.2, 1.1, 1.3)
        | {"numerator_mode": "jit", "denominator_mode": "eager" if m else "compile", "mixed_modes": m}
        for batch, m in zip((1, 8, 32), mixed, strict=False)
    ]
    return pd.DataFrame(rows)


def test_the_pairing_control_counts_mixed_ratios_and_whether_they_are_marked():
    cells = [_ledger_cell("torch", mode="eager"), _ledger_cell("jax")]
    status, measured, where = _ledger(cells, _speedups([True, False]))["Ratios pair compiled with compiled"]
    assert status == NOT_HELD, "a ratio of a compiled program over an eager one is not a compiled pairing"
    assert measured == (
        "inference: 1 of 2 ratios pair compiled with compiled, 1 set a compiled program against an eager one "
        "(each marked in its table)"
    )
    assert where == "inference: inference jax resnet50 fp32 bs1"
    status, measured, _ = _ledger(cells)["Ratios pair compiled with compiled"]
    assert status == NOT_MEASURED and "not given" in measured, "derived from the cells, the marks not read"
    compiled = [_ledger_cell("torch"), _ledger_cell("torch", mode="eager"), _ledger_cell("jax")]
    assert _ledger(compiled)["Ratios pair compiled with compiled"] == (
        HELD,
        "inference: 1 of 1 ratios pair compiled with compiled",
        "",
    ), "compiled PyTorch is the ratio mode; its eager cell is not a ratio between frameworks"
    training = [_ledger_cell(f, suite="training", mode=m) for f, m in (("torch", "eager"), ("jax", "jit"))]
    status, measured, _ = _ledger(training)["Ratios pair compiled with compiled"]
    assert status == NOT_HELD and "each named as such in the conclusions" in measured
    status, _, where = _ledger(cells, _speedups([False, False]))["Ratios pair compiled with compiled"]
    assert (status, where) == (HELD, "")


def test_the_autotune_control():
    cells = [_ledger_cell(f) for f in ("torch", "jax", "tensorflow")]
    assert _ledger(cells)["Autotuning alike"][0] == HELD
    on_gpu = copy.deepcopy(cells)
    for cell in on_gpu:
        cell["provenance"]["framework"]["settings"]["autotune"] = {"setting": "on", "in_effect": True}
    assert _ledger(on_gpu)["Autotuning alike"][1] == (
        "on in 3 of 3 cells; in effect: PyTorch yes, JAX/Flax yes, TensorFlow/Keras yes"
    )
    on_gpu[1]["provenance"]["framework"]["settings"]["autotune"]["in_effect"] = False
    status, _, where = _ledger(on_gpu)["Autotuning alike"]
    assert status == NOT_HELD and where == "in effect in some frameworks only"
    del cells[0]["provenance"]["framework"]["settings"]["autotune"]
    status, _, where = _ledger(cells)["Autotuning alike"]
    assert status == NOT_MEASURED and "no autotune record in inference torch compile" in where


def test_compile_time_and_graph_breaks_per_mode():
    cells = [_ledger_cell("torch", mode="eager"), _ledger_cell("torch"), _ledger_cell("jax")]
    _, measured, _ = _ledger(cells)["Compile time apart from steady state"]
    assert measured == (
        "compile and first calls recorded outside the timed loops: PyTorch (eager) 0.3 s (eager: first calls), "
        "PyTorch (compiled) 3.3 s, JAX/Flax 3.3 s"
    )
    cells[1]["metrics"]["compile_report"] = {"graphs": 3, "graph_breaks": 2, "graph_break_reasons": ["print"]}
    status, measured, where = _ledger(cells)["No recompilation or graph break while timed"]
    assert status == NOT_HELD and measured.endswith("; 1 of 1 torch.compile cells had graph breaks")
    assert where == "graph breaks in inference torch compile resnet50 fp32 bs1 (2)"


# --- published --------------------------------------------------------------------------------------------------


def test_published_ratios_are_matched_in_the_published_modes(tmp_path):
    rows = [_published_row("resnet50", "pytorch", 1, 500.0), _published_row("resnet50", "jax", 1, 750.0)]
    inference = pd.DataFrame(
        [
            _cell("torch", "resnet50", 1, 80.0) | {"mode": "eager"},
            _cell("torch", "resnet50", 1, 160.0) | {"mode": "compile"},
            _cell("jax", "resnet50", 1, 100.0) | {"mode": "jit"},
        ]
    )
    # the ratio table pairs the ratio modes: JAX over compiled PyTorch
    speedups = pd.DataFrame(
        [_ratio("resnet50", 1, 0.625, 0.6, 0.65) | {"numerator_mode": "jit", "denominator_mode": "compile"}]
    )
    unstated = compare(_sources(tmp_path, rows), inference=inference, speedups=speedups, training=None, image_size=32)
    row = unstated.iloc[0]
    assert (row["published_torch_mode"], row["published_other_mode"], bool(row["modes_stated"])) == (
        "eager",
        "jit",
        False,
    )
    assert (row["ours_torch_mode"], row["ours_other_mode"], bool(row["modes_match"])) == ("eager", "jit", True)
    assert row["ratio"] == pytest.approx(100.0 / 80.0) and row["ci_scope"] == UNPAIRED_SCOPE
    assert (row["verdict"], row["direction"]) == (DIRECTION_ONLY, SAME)
    assert published_modes(unstated) == PublishedModes(variants=("eager PyTorch", "jitted JAX"), stated="none", other=0)
    said = published_section(unstated, _sources(tmp_path, rows), None)
    assert "No source states a mode, so the published figures are taken in each framework's primary one" in said
    assert "eager PyTorch and jitted JAX. This study's cells ran in the same modes." in said
    assert (
        "Modes of the published figures (not stated by the source, so each framework's primary one): PT eager; JAX jit"
        in comparison_table(unstated, _sources(tmp_path, rows)[0])
    )

    (tmp_path / "stated").mkdir()
    stated = _sources(tmp_path / "stated", rows, modes={"pytorch": "compile", "jax": "jit"})
    compiled = compare(stated, inference=inference, speedups=speedups, training=None, image_size=32).iloc[0]
    assert bool(compiled["modes_stated"]) and compiled["ours_torch_mode"] == "compile"
    assert compiled["ratio"] == pytest.approx(0.625) and compiled["ci_scope"] == "paired_rounds"

    only_compiled = inference[inference["mode"] != "eager"]
    other = compare(_sources(tmp_path, rows), inference=only_compiled, speedups=speedups, training=None, image_size=32)
    row = other.iloc[0]
    assert row["ours_torch_mode"] == "compile" and not bool(row["modes_match"]), "no eager cell: compiled stands in"
    assert published_modes(other).other == 1 and published_modes(unstated).other == 0
    said = published_section(other, _sources(tmp_path, rows), None)
    assert f"except in one row (marked {OTHER_MODE_MARK} in the tables)" in said
    assert published_modes(compare(stated, inference=inference, speedups=speedups, training=None, image_size=32)) == (
        PublishedModes(variants=("compiled PyTorch", "jitted JAX"), stated="all", other=0)
    )
    table = comparison_table(other, _sources(tmp_path, rows)[0])
    assert "ResNet-50" + OTHER_MODE_MARK in table and "so the cells here ran PT compiled, JAX jit." in table


def test_an_unknown_published_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"unknown mode\(s\) torch: fast"):
        _sources(tmp_path, [_published_row("resnet50", "pytorch", 1, 1.0)], modes={"pytorch": "fast"})


# --- conclusions on inference ratios ----------------------------------------------------------------------------


def test_ratios_against_eager_pytorch_are_said_as_such():
    """Where the study has no compiled PyTorch cell for a model, its ratios form the family against eager PyTorch
    (`ratio_macros.eager_family`): counted with the compiled pairs and said to stand against eager PyTorch, never
    dropped (which PyTorch the largest difference stands against, read from the cells: tests/test_abstract.py)."""
    from fwbench.analysis.inference.ratio_macros import eager_family, summary_ratios

    compiled = {"numerator_mode": "jit", "denominator_mode": "compile", "mixed_modes": False, "stand_in": ""}
    eager = {"numerator_mode": "jit", "denominator_mode": "eager", "mixed_modes": True, "stand_in": "torch: eager"}
    ratios = pd.DataFrame(
        [
            _ratio("small_cnn", 1, 1.5, 1.2, 1.8) | compiled,
            _ratio("small_cnn", 8, 1.4, 1.2, 1.6) | compiled,
            _ratio("vit_b_16", 1, 2.0, 1.5, 2.5) | eager,
            _ratio("vit_b_16", 8, 1.1, 0.8, 1.4) | eager,
            _ratio("resnet50", 1, 0.4, 0.3, 0.5) | eager,
        ]
    )
    config = {"fallbacks": {}}
    kept, family = summary_ratios(ratios, config)[0], eager_family(ratios, config)
    assert kept["model"].tolist() == ["small_cnn", "small_cnn"]
    assert family["model"].tolist() == ["vit_b_16", "vit_b_16", "resnet50"]
    text = _section(ratios)
    assert "PyTorch was compiled for the small CNN, eager otherwise." in text
    assert "ViT-B/16" in text and "ResNet-50" in text, "the eager pairs are counted, not left out"
    assert "JAX's largest difference, ResNet-50 at batch 1, was 0.40$\\times$ [0.30, 0.50]" in text
    # a study without compiled PyTorch at all: its column pairs eager PyTorch, and no family stands apart
    only_eager = ratios.iloc[2:].assign(stand_in="")
    assert eager_family(only_eager, config).empty
    alone = _section(ratios.iloc[2:])
    assert "compiled for" not in alone and "no ratio" not in alone


# --- setup, time to report, loader ------------------------------------------------------------------------------


def test_the_setup_table_has_the_mode_rows(modes_trained):
    paths, _, _ = modes_trained
    env = study_environment(paths)
    assert env["Execution modes"] == "PyTorch eager, compiled; JAX/Flax jit; TensorFlow/Keras XLA"
    assert env["torch.compile mode"] == "default"
    assert env["Compilation cache"] == "PyTorch (compiled): cold (empty per process)"
    assert env["Kernel autotuning"] == "on (not applicable on the CPU)"


def test_time_to_report_names_each_process_with_its_mode():
    phases = {"compile_s": 10.0, "first_call_s": 1.0, "timed_s": 3.0}
    cells = [
        {
            "cell": {"suite": "training", "framework": "torch", "model": "m", "precision": "fp32", "batch_size": 1}
            | ({"mode": mode} if mode else {}),
            "metrics": {"phases_s": phases},
            "provenance": {"duration_s": 20.0},
        }
        for mode in (None, "compile")
    ]
    processes = process_rows(cells)
    assert list(processes["cell"]) == ["training/torch/eager/m/fp32/bs1", "training/torch/compile/m/fp32/bs1"]
    summary = breakdown([JobTime("training_cell", "t", 40.0, 0.0, 40.0, None, "test")], processes)
    assert summary["compile_by_variant_s"] == {"torch/compile": 11.0, "torch/eager": 11.0}
    assert time_macros(summary)["fwbCompileByMode"] == "PyTorch (eager) 11~s, PyTorch (compiled) 11~s"


def test_the_fastest_consumer_is_named_with_its_mode():
    frame = pd.DataFrame(
        [
            {
                "status": "ok",
                "framework": "torch",
                "mode": "compile",
                "model": "m",
                "batch_size": 8,
                "throughput_img_s": 9.0,
            },
            {"status": "ok", "framework": "torch", "model": "m", "batch_size": 8, "throughput_img_s": 3.0},
        ]
    )
    assert fastest_consumer(frame) == (9.0, "compiled PyTorch on m at batch 8")
    assert fastest_consumer(frame.drop(columns="mode").iloc[1:])[1] == "eager PyTorch on m at batch 8"
