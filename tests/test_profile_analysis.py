"""The section "Where the time goes" (fwbench.analysis.profile) from hand-built cells whose `metrics.op_profile`
follows the contract of issue 35: the tables and their checks, the sentences that attribute a resolved ratio
beyond 1.25x (and only those), the listing of such ratios without profiles, the section with and without
profiles, and the figure. No framework is imported and nothing is profiled."""

from __future__ import annotations

import copy
import math
import re

import pandas as pd
import pytest

from fwbench.analysis.inference.ratios import write_ratio_tables
from fwbench.analysis.inference.tidy import write_tidy
from fwbench.analysis.paper.profile_section import profile_section, write_profile_outputs
from fwbench.analysis.paper.structure_check import long_sentences
from fwbench.analysis.profile.categories import CATEGORIES
from fwbench.analysis.profile.figure import profile_figure
from fwbench.analysis.profile.findings import CategoryShare, profile_findings
from fwbench.analysis.profile.outputs import OUTPUT_KEYS
from fwbench.analysis.profile.sentences import attribution
from fwbench.analysis.profile.tables import (
    PROFILE_COLUMNS,
    TOP_COLUMNS,
    ProfileError,
    op_profile_table,
    op_profile_top_table,
    op_profile_unmapped_table,
)
from fwbench.io import atomic_write_json
from fwbench.scenarios.profiled import WHERE_IN_WORKER
from fwbench.trackers.op_profile.categories import Totals, summarise
from tests.test_analysis import BASE, failed_in_rounds, measured_in_rounds
from tests.test_pdf_check import _build, _check, needs_latex

NO_PROFILE = "No inference cell was profiled in this study, so its step time is not split by operation here."
CONTRACT_COLUMNS = [
    "model",
    "framework",
    "mode",
    "precision",
    "batch_size",
    "category",
    "ms_per_step",
    "share",
    "profiled_step_ms",
    "timed_step_ms",
    "profiler_overhead",
    "platform",
    "profiler",
    "time_basis",
]
PROFILERS = {"torch": "torch.profiler", "jax": "jax.profiler", "tensorflow": "tf.profiler"}
# ms per step by category: JAX's convolutions take 30 ms more than compiled PyTorch's, the rest alike (a 2x ratio).
TORCH_TIMES = {"convolution": 10.0, "matmul": 2.0, "normalization": 3.0, "elementwise": 4.0, "other": 1.0}
JAX_TIMES = TORCH_TIMES | {"convolution": 40.0, "data_movement": 0.5}


def op_profile(framework: str, times: dict[str, float], unmapped: tuple[str, ...] = ()) -> dict:
    """An op profile as fwbench.trackers.op_profile.profile_steps returns it: every category in the contract's order,
    shares of the attributed time, a top list, the profiled step a little above the attributed time."""
    attributed = math.fsum(times.values())
    categories = [
        {"category": c, "ms_per_step": times.get(c, 0.0), "share": times.get(c, 0.0) / attributed} for c in CATEGORIES
    ]
    top = [
        {"name": f"{framework}::{c}_op", "category": c, "ms_per_step": ms * 0.9, "calls_per_step": 3.0}
        for c, ms in sorted(times.items(), key=lambda item: -item[1])
        if c != "other"
    ]
    return {
        "profiler": PROFILERS[framework],
        "platform": "cpu",
        "steps": 5,
        "profiled_step_ms": attributed * 1.02,
        "attributed_ms": attributed,
        "categories": categories,
        "top": top,
        "unmapped": sorted(unmapped),
        "time_basis": "host op self time",
    }


def _cell(framework: str, mode: str, rates: list[float], model: str = "resnet50", batch: int = 8, profile=None):
    """A successful inference cell of group {model}-{batch}, trials in rounds 1.. at `rates` img/s, with
    `profile` as its `metrics.op_profile` (None: not profiled)."""
    result = copy.deepcopy(BASE)
    result["cell"] = {
        "suite": "inference",
        "framework": framework,
        "mode": mode,
        "model": model,
        "precision": "fp32",
        "batch_size": batch,
        "image_size": 32,
    }
    result["provenance"]["group"] = {"id": f"{model}-{batch}"}
    extra = {"op_profile": profile} if profile is not None else {}
    measured_in_rounds(result, rates, 1.0 if mode != "eager" else None, **extra)
    result["provenance"]["framework"] = {
        "name": framework,
        "versions": {framework: "9.9"},
        "device": {"name": "cpu", "platform": "cpu"},
        "settings": {"intra_op_threads": 2, "mode": mode},
    }
    return result


def _study(with_profiles: bool = True) -> list[dict]:
    """resnet50 at batch 8: compiled PyTorch twice JAX's throughput, both profiled (JAX with an unmapped name);
    small_cnn at batch 8: JAX at half compiled PyTorch's throughput, not profiled; and a failed TensorFlow cell."""
    torch_profile = op_profile("torch", TORCH_TIMES) if with_profiles else None
    jax_profile = op_profile("jax", JAX_TIMES, unmapped=("custom-call.7",)) if with_profiles else None
    if jax_profile is not None:  # profiled by its warm worker; compiled PyTorch on the CPU in a process of its own
        jax_profile["where"] = WHERE_IN_WORKER
    results = [
        _cell("torch", "compile", [400.0, 410.0, 390.0], profile=torch_profile),
        _cell("jax", "jit", [200.0, 206.0, 194.0], profile=jax_profile),
        _cell("torch", "compile", [800.0, 820.0, 790.0], model="small_cnn"),
        _cell("jax", "jit", [400.0, 405.0, 396.0], model="small_cnn"),
    ]
    failed = copy.deepcopy(BASE)
    failed["cell"] = results[0]["cell"] | {"framework": "tensorflow", "mode": "xla"}
    results.append(failed_in_rounds(failed, "compiler error", "compiler"))
    return results


def _write(tmp_path, results: list[dict]) -> list:
    paths = []
    for index, result in enumerate(results):
        path = tmp_path / f"cell{index}.json"
        atomic_write_json(path, result)
        paths.append(path)
    return paths


def _outputs(tmp_path) -> dict:
    names = {"table": "op_profile.csv", "top": "op_profile_top.csv", "unmapped": "op_profile_unmapped.csv"}
    names |= {"section": "profile_section.tex", "pdf": "op_profile.pdf", "png": "op_profile.png"}
    return {key: tmp_path / "out" / name for key, name in names.items()}


def _ratio(ratio: float, resolved: bool = True, model: str = "resnet50", **columns) -> dict:
    """A speedups row of JAX over compiled PyTorch at batch 8, fp32."""
    return {
        "model": model,
        "precision": "fp32",
        "batch_size": 8,
        "ratio": ratio,
        "ci_low": ratio * 0.95,
        "ci_high": ratio * 1.05,
        "ci_scope": "paired_rounds",
        "resolved": resolved,
        "resolved_adjusted": resolved,
        "numerator": "jax",
        "denominator": "torch",
        "numerator_mode": "jit",
        "denominator_mode": "compile",
        "refused": None,
    } | columns


def _tidy(results: list[dict]) -> pd.DataFrame:
    rows = [
        {**{k: r["cell"][k] for k in ("suite", "framework", "mode", "model", "precision", "batch_size")}}
        | {"status": r["status"], "latency_p50_ms": (r["metrics"] or {}).get("latency_ms", {}).get("p50")}
        for r in results
    ]
    return pd.DataFrame(rows)


def _ratios_paragraph(section: str) -> str:
    """The section's last paragraph, where the ratios are attributed (its floats left out)."""
    return section.partition(r"\paragraph{Where the ratios come from} ")[2].partition(r"\begin{figure")[0].strip()


def test_every_cell_shares_sum_to_one_and_the_tables_have_the_contract_columns():
    results = _study()
    table = op_profile_table(results, _tidy(results))
    assert list(table.columns[: len(CONTRACT_COLUMNS)]) == CONTRACT_COLUMNS
    assert list(table.columns) == PROFILE_COLUMNS
    assert len(table) == 2 * len(CATEGORIES), "two profiled cells (failed and unprofiled ones left out)"
    assert list(table["category"][: len(CATEGORIES)]) == list(CATEGORIES), "categories in the contract's order"
    for _, cell in table.groupby(["framework", "mode"]):
        assert cell["share"].sum() == pytest.approx(1.0, abs=1e-9)
    jax = table[table["framework"] == "jax"].iloc[0]
    assert jax["timed_step_ms"] == pytest.approx(8 * 1000 / (200.0 * 206.0 * 194.0) ** (1 / 3))
    assert jax["profiler_overhead"] == pytest.approx(jax["profiled_step_ms"] / jax["timed_step_ms"] - 1)
    top = op_profile_top_table(results)
    assert list(top.columns) == TOP_COLUMNS
    first = top[(top["framework"] == "jax") & (top["rank"] == 1)].iloc[0]
    assert (first["name"], first["category"]) == ("jax::convolution_op", "convolution")
    unmapped = op_profile_unmapped_table(results)
    assert unmapped.to_dict("records") == [
        {"framework": "jax", "platform": "cpu", "profiler": "jax.profiler", "name": "custom-call.7", "cells": 1}
    ]


def test_a_cell_whose_shares_do_not_sum_to_one_is_named():
    results = _study()
    results[1]["metrics"]["op_profile"]["categories"][0]["share"] += 0.01
    with pytest.raises(ProfileError, match=r"inference/jax/jit/resnet50/fp32/bs8.*sum to 1\.01"):
        op_profile_table(results, None)
    empty = summarise(Totals(), steps=5, profiler="tf.profiler", platform="cuda", time_basis="device kernel time")
    results[1]["metrics"]["op_profile"] = empty
    with pytest.raises(ProfileError, match=r"inference/jax/jit/resnet50/fp32/bs8 attributes no time"):
        op_profile_table(results, None)


def test_a_record_as_the_capture_writes_it_reads_back_without_a_wall_clock_too():
    """The capture's own reduction (`summarise`), with and without the profiled step time: the table takes its
    categories and top list as they are, and a record with no wall clock has no overhead to show."""
    totals = Totals()
    totals.add("aten::mkldnn_convolution", "convolution", us=50_000.0, calls=265)
    totals.add("aten::addmm", "matmul", us=5_000.0, calls=5)
    totals.add("aten::mystery", None, us=1_000.0, calls=5)
    results = _study()
    results[0]["metrics"]["op_profile"] = summarise(
        totals,
        steps=5,
        profiler="torch.profiler",
        platform="cpu",
        time_basis="host op self time",
        profiled_step_ms=12.0,
    )
    results[1]["metrics"]["op_profile"] = summarise(
        totals, steps=5, profiler="jax.profiler", platform="cpu", time_basis="device op time"
    )
    table = op_profile_table(results, _tidy(results))
    torch = table[table["framework"] == "torch"].set_index("category")
    assert torch.loc["convolution", "ms_per_step"] == pytest.approx(10.0)
    assert torch.loc["other", "ms_per_step"] == pytest.approx(0.2 + 0.8), "unmapped op, overhead 12 - 11.2"
    jax = table[table["framework"] == "jax"]
    assert jax["profiled_step_ms"].isna().all() and jax["profiler_overhead"].isna().all()
    assert "aten::mystery" in op_profile_unmapped_table(results)["name"].tolist()
    section = profile_section(table, pd.DataFrame(), op_profile_unmapped_table(results))
    assert "Profiled over timed, minus one, is $-$40\\% (one cell)." in section, "12 ms profiled, 20 ms timed"
    assert profile_findings(table, pd.DataFrame()).method.overhead.low == pytest.approx(-0.4, abs=1e-3)


def test_a_resolved_2x_ratio_names_the_dominant_category_with_both_times():
    table = op_profile_table(_study(), None)
    ratios = pd.DataFrame([_ratio(0.5)])
    (found,) = profile_findings(table, ratios).attributed
    assert (found.ratio.model, found.ratio.numerator, found.ratio.denominator) == ("ResNet-50", "JAX", "PyTorch")
    assert found.shares == (CategoryShare("convolution", 40.0, 10.0, 30.0),), "half the difference: one category"
    assert found.ordered and not found.partial and found.numerator_timed_ms is None
    text = _ratios_paragraph(profile_section(table, ratios))
    assert "On ResNet-50 at batch 8, JAX over PyTorch has a ratio of 0.50 [0.47, 0.53]" in text
    assert "Of the 30~ms difference, convolution accounts for 30~ms (40 against 10~ms)." in text
    assert "data movement" not in text, "half the difference is covered by convolution alone"


def test_the_sentence_quotes_the_timed_step_times_from_the_tidy_table():
    results = _study()
    table = op_profile_table(results, _tidy(results))
    ratios = pd.DataFrame([_ratio(0.5)])
    (found,) = profile_findings(table, ratios).attributed
    assert (found.numerator_timed_ms, found.denominator_timed_ms) == pytest.approx((40.0, 20.0), rel=0.05)
    assert found.numerator_profiled_ms == pytest.approx(50.5) and found.difference == pytest.approx(30.5)
    text = _ratios_paragraph(profile_section(table, ratios))
    assert "JAX takes 40~ms per step to PyTorch's 20~ms in the timed trials" in text
    assert "Profiled, their steps add up to 50 and 20~ms. Of the 30~ms difference" in text


def test_no_sentence_for_an_unresolved_or_a_1_1x_ratio():
    table = op_profile_table(_study(), None)
    ratios = pd.DataFrame([_ratio(0.5, resolved=False), _ratio(1.1), _ratio(1 / 1.1)])
    found = profile_findings(table, ratios)
    assert (found.attributed, found.unattributed, found.resolved, found.ratios) == ((), (), 2, 3)
    text = _ratios_paragraph(profile_section(table, ratios))
    assert "accounts for" not in text
    assert text == (
        "No resolved ratio between frameworks is beyond 1.25$\\times$ either way (2 resolved of 3), so no "
        "difference is attributed to categories."
    )
    refused = pd.DataFrame([_ratio(float("nan"), resolved=False, refused="cpu A against cpu B")])
    assert profile_findings(table, refused).attributed == ()
    assert "accounts for" not in _ratios_paragraph(profile_section(table, refused))


def test_a_ratio_beyond_1_25x_without_profiles_is_listed():
    table = op_profile_table(_study(), None)
    ratios = pd.DataFrame([_ratio(0.5), _ratio(2.0, model="small_cnn")])
    found = profile_findings(table, ratios)
    assert len(found.attributed) == 1 and found.attributed[0].shares[0].category == "convolution"
    (unprofiled,) = found.unattributed
    assert (unprofiled.ratio.model, unprofiled.missing) == ("the small CNN", ("JAX", "PyTorch"))
    text = _ratios_paragraph(profile_section(table, ratios))
    assert "One resolved ratio beyond 1.25$\\times$ either way cannot be attributed" in text
    assert r"\item the small CNN at batch 8, JAX over PyTorch, 2.0 [1.9, 2.1] (neither profiled)." in text


def test_the_categories_cover_half_the_difference_at_most_three_and_only_those_that_moved_with_it():
    shares = attribution({"a": 20.0, "b": 18.0, "c": 16.0, "d": 14.0, "e": 0.0}, {"e": 10.0})
    assert [s.category for s in shares] == ["a", "b"], "20 + 18 of the 58 ms difference: more than half"
    many = attribution({c: 10.0 for c in "abcdefgh"}, {})
    assert len(many) == 3, "at most three, even below half"
    assert attribution({"a": 5.0}, {"a": 5.0}) == []


def test_a_profile_that_orders_the_variants_the_other_way_attributes_nothing():
    results = _study()
    results[1]["metrics"]["op_profile"] = op_profile("jax", {"convolution": 5.0, "other": 1.0})
    table = op_profile_table(results, None)
    (found,) = profile_findings(table, pd.DataFrame([_ratio(0.5)])).attributed
    assert not found.ordered and found.shares == ()
    text = _ratios_paragraph(profile_section(table, pd.DataFrame([_ratio(0.5)])))
    assert "which does not order them as the timed trials do, so nothing is attributed" in text
    assert "accounts for" not in text, "no category is named"


def test_the_section_builds_with_and_without_profiles(tmp_path):
    results = _study()
    table = op_profile_table(results, _tidy(results))
    section = profile_section(table, pd.DataFrame([_ratio(0.5)]), op_profile_unmapped_table(results))
    assert section.startswith("\\section{Where the time goes} \\label{sec:profile}\n\n")
    for expected in (
        "Convolution takes the largest part of the step in both profiled cells",
        "Two inference cells were profiled",
        "then five steps ran under",
        "One ran in the warm worker of the cell's last launch, once every worker of that launch had ended its timed",
        "One ran in a process of its own, where the model is built and compiled as for the timed trials; compiled "
        "PyTorch on the CPU compiles Inductor's C++ kernels again to record them.",
        r"\texttt{jax.profiler} for JAX.",
        "host op self time",
        "One operation name was in no mapping table",
        r"\begin{figure}[t]",
        r"\includegraphics[width=\columnwidth]{op_profile}",
        r"\label{tab:profile}",
        "convolution accounts for 30~ms",
        "With \\texttt{torch.profiler} and \\texttt{jax.profiler} on the CPU, an operation's time is host op self "
        "time.",
        "from +2.0\\% to +29\\% (median +15\\%) over two cells",
    ):
        assert expected in section, expected
    assert r"Conv. \\ 40.0~ms (79.2\%)" in section and r"Elementwise \\ 4.00~ms (7.92\%)" in section
    empty = profile_section(op_profile_table([], None), pd.DataFrame([_ratio(0.5)]))
    assert empty == f"\\section{{Where the time goes}} \\label{{sec:profile}}\n\n{NO_PROFILE}\n"


def test_the_entry_point_writes_every_output_from_the_workflow_tables(tmp_path):
    """The cells, the tidy table and the ratio tables as the workflow writes them: the section attributes the
    resolved JAX/PyTorch ratio of the profiled comparison and lists the other one."""
    paths = _write(tmp_path, _study())
    write_tidy(paths, tmp_path / "inference.csv")
    write_ratio_tables(paths, tmp_path / "speedups.csv", tmp_path / "mode_gains.csv")
    outputs = _outputs(tmp_path)
    written = write_profile_outputs(paths, tmp_path / "inference.csv", tmp_path / "speedups.csv", outputs)
    assert set(OUTPUT_KEYS) | {"section"} == set(outputs)
    assert list(pd.read_csv(outputs["table"]).columns[: len(CONTRACT_COLUMNS)]) == CONTRACT_COLUMNS
    assert list(pd.read_csv(outputs["top"]).columns) == TOP_COLUMNS
    assert pd.read_csv(outputs["unmapped"])["name"].tolist() == ["custom-call.7"]
    assert outputs["pdf"].stat().st_size > 1000 and outputs["png"].stat().st_size > 10000
    section = outputs["section"].read_text()
    assert section == written.section
    assert "convolution accounts for 30~ms (40 against 10~ms)" in section
    assert "the small CNN at batch 8, JAX over PyTorch" in section and "neither profiled" in section


def test_without_profiles_the_entry_point_still_writes_every_output(tmp_path):
    paths = _write(tmp_path, _study(with_profiles=False))
    outputs = _outputs(tmp_path)
    written = write_profile_outputs(paths, None, None, outputs)
    assert written.table.empty and NO_PROFILE in outputs["section"].read_text()
    assert list(pd.read_csv(outputs["table"]).columns) == PROFILE_COLUMNS
    assert outputs["pdf"].exists() and outputs["png"].stat().st_size > 1000
    with pytest.raises(KeyError, match="needs outputs png"):
        write_profile_outputs(paths, None, None, {k: v for k, v in outputs.items() if k != "png"})


def test_the_figure_is_written_for_several_panels(tmp_path):
    results = _study()
    results += [
        _cell("torch", "compile", [100.0, 101.0, 99.0], batch=32, profile=op_profile("torch", TORCH_TIMES)),
        _cell("torch", "eager", [50.0, 51.0, 49.0], batch=32, profile=op_profile("torch", JAX_TIMES)),
    ]
    table = op_profile_table(results, _tidy(results))
    profile_figure(table, tmp_path / "f.pdf", tmp_path / "f.png")
    assert (tmp_path / "f.pdf").stat().st_size > 1000 and (tmp_path / "f.png").stat().st_size > 10000
    section = profile_section(table, pd.DataFrame())
    assert r"\begin{figure*}[t]" in section and r"\includegraphics[width=\textwidth]{op_profile}" in section
    assert "(0 resolved of 0)" in section, "no ratio table: nothing to attribute, and the section says so"


@needs_latex
def test_the_section_sets_clean_in_the_papers_class(tmp_path):
    paths = _write(tmp_path, _study())
    write_tidy(paths, tmp_path / "inference.csv")
    write_ratio_tables(paths, tmp_path / "speedups.csv", tmp_path / "mode_gains.csv")
    outputs = {key: tmp_path / path.name for key, path in _outputs(tmp_path).items()}
    write_profile_outputs(paths, tmp_path / "inference.csv", tmp_path / "speedups.csv", outputs)
    pdf, log, tex = _build(tmp_path, r"\input{profile_section}")
    report = _check(tmp_path, pdf, log, tex, search_path=[tmp_path])
    assert report["problems"] == [], report["problems"]


# --- the section's words (report/templates/profile.tex.j2) on the studies it must render for ----------------------


def _case(case: str) -> tuple[pd.DataFrame, pd.DataFrame, list[tuple[str, str]]]:
    """(op-profile table, ratios, failed profiles) of one edge case: `resolved` (a 2x ratio, attributed, and one
    without profiles), `unresolved` (no ratio resolved), `failed` (a cell's profiling failed), `one framework`
    (PyTorch alone, no ratio), `gpu` (both cells profiled on a GPU)."""
    results = _study()
    ratios = [_ratio(0.5), _ratio(2.0, model="small_cnn")]
    failed = []
    if case == "unresolved":
        ratios = [_ratio(0.5, resolved=False), _ratio(1.1)]
    if case == "failed":
        failed = [(results[0]["cell"] | {"framework": "tensorflow", "mode": "xla"}, "profiler crashed")]
    if case == "one framework":
        results, ratios = results[:1], []
    if case == "gpu":
        for result in results[:2]:
            result["metrics"]["op_profile"]["platform"] = "cuda"
            result["metrics"]["op_profile"]["time_basis"] = "device kernel time"
    return op_profile_table(results, _tidy(results)), pd.DataFrame(ratios), failed


@pytest.mark.parametrize("case", ["resolved", "unresolved", "failed", "one framework", "gpu"])
def test_the_section_renders_short_sentences_in_display_names(case):
    table, ratios, failed = _case(case)
    section = profile_section(table, ratios, None, failed=failed)
    text = section.partition(r"\begin{figure")[0]
    assert long_sentences(text, "profile") == [], case
    assert not re.search(r"resnet50|small_cnn|fp32|JAX/Flax|\(jit\)|\(compiled\)", text), text
    found = profile_findings(table, ratios, None, failed)
    if case == "resolved":
        assert len(found.attributed) == len(found.unattributed) == 1
    if case == "unresolved":
        assert found.attributed == () and "No resolved ratio between frameworks is beyond" in text
    if case == "failed":
        assert [(f.model, f.batch, f.variant) for f in found.failed] == [("ResNet-50", 8, "TensorFlow")]
        assert "failed for one cell, whose timed results stand: ResNet-50 at batch 8 in TensorFlow (profiler" in text
    if case == "one framework":
        assert found.method.cells == 1 and "\\texttt{torch.profiler} for PyTorch." in text
        assert "the one profiled cell" in text
    if case == "gpu":
        assert [b.platform for b in found.method.bases] == ["the GPU"]
        assert "on the GPU, an operation's time is device kernel time." in text


def test_the_checks_of_the_sections_words_fail_the_old_wording():
    """Negative controls: the f-string section's opening sentence and its identifiers are caught by the checks the
    test above applies."""
    old = (
        "On EfficientNet-B0 at batch 32 (fp32), JAX/Flax (jit) takes 194~ms per step to PyTorch (eager)'s 94.9~ms in "
        "the timed trials (throughput ratio 0.504 [0.470, 0.541]); profiled, their categories add up to 161~ms and "
        "114~ms per step, and of the 47.1~ms difference convolution accounts for 56.8~ms (148~ms against 91.3~ms)."
    )
    assert len(long_sentences(old, "profile")) == 1
    assert re.search(r"JAX/Flax|\(jit\)|fp32", old)
