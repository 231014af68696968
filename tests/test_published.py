"""Published vs reproduced: matching, ratios, verdicts, the refusal of misread reference files, the section."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from fwbench.analysis.common import verdicts
from fwbench.analysis.common.names import identifiers
from fwbench.analysis.paper.abstract import words
from fwbench.analysis.paper.published_section import published_section
from fwbench.analysis.paper.structure_check import MAX_SENTENCE_WORDS, sentences
from fwbench.analysis.published.counts import published_counts
from fwbench.analysis.published.figure import published_figure
from fwbench.analysis.published.judgement import (
    DEFAULT_MARGIN,
    DIFFERENT,
    DIRECTION_ONLY,
    FAILED,
    HIGHER,
    INCONCLUSIVE,
    LOWER,
    ONE_RUN,
    OPPOSITE,
    REPRODUCED,
    SAME,
    UNRESOLVED,
    VERDICTS,
    agreeing,
    judge,
    verdict_counts,
)
from fwbench.analysis.published.matching import COLUMNS as PUBLISHED_COLUMNS
from fwbench.analysis.published.matching import compare
from fwbench.analysis.published.section import Sides, floats, section_values
from fwbench.analysis.published.sources import read_published, read_sources
from fwbench.analysis.published.table import comparison_table
from tests.conftest import REPO
from tests.test_pdf_check import TEXT, _build, _check, needs_latex


def _se(lo: float, hi: float, df: float) -> float:
    """The log-scale standard error behind a 95% t interval [lo, hi] with `df` degrees of freedom."""
    return math.log(hi / lo) / (2 * stats.t.ppf(0.975, df))


def _judge(published, ratio, lo, hi, df=2, scope="paired_rounds", margin=DEFAULT_MARGIN):
    se = _se(lo, hi, df) if lo is not None else None
    return judge(published, ratio, scope=scope, ci_low=lo, ci_high=hi, se_log=se, df=df, margin=margin)


@pytest.mark.parametrize(
    ("published", "ratio", "lo", "hi", "df", "scope", "verdict", "direction", "side"),
    [
        # narrow, around the published ratio: shown equivalent within a factor of 1.1
        (1.5, 1.5, 1.45, 1.55, 2, "paired_rounds", REPRODUCED, SAME, None),
        # the case: [0.73, 2.99] contains the published ratio and says nothing about sameness
        (1.6, 1.48, 0.73, 2.99, 2, "paired_rounds", INCONCLUSIVE, UNRESOLVED, None),
        (1.5, 1.4, 1.2, 1.6, 2, "paired_rounds", INCONCLUSIVE, SAME, None),
        (1.5, 3.0, 2.5, 3.5, 2, "paired_rounds", DIFFERENT, SAME, HIGHER),
        (1.5, 0.5, 0.4, 0.6, 2, "paired_rounds", DIFFERENT, OPPOSITE, LOWER),
        (0.5, 2.0, 1.5, 2.5, 2, "paired_rounds", DIFFERENT, OPPOSITE, HIGHER),
        (2.5, 1.1, 0.9, 1.3, 2, "paired_rounds", DIFFERENT, UNRESOLVED, LOWER),
        # narrow but 15% off: resolved, different, although close
        (1.5, 1.3, 1.28, 1.32, 9, "paired_rounds", DIFFERENT, SAME, LOWER),
        # an interval that is not paired over interleaved rounds is not tested, however narrow
        (1.5, 1.5, 1.49, 1.51, 9, "within_process", DIRECTION_ONLY, SAME, None),
        (1.5, 1.5, 1.49, 1.51, 9, "unpaired_trials", DIRECTION_ONLY, SAME, None),
        (1.5, 0.8, None, None, None, ONE_RUN, DIRECTION_ONLY, OPPOSITE, None),
        (1.5, None, None, None, None, None, FAILED, None, None),
    ],
)
def test_judge(published, ratio, lo, hi, df, scope, verdict, direction, side):
    judged = _judge(published, ratio, lo, hi, df, scope)
    assert (judged.verdict, judged.direction, judged.ours_vs_published) == (verdict, direction, side), judged
    assert judged.columns()["agrees"] == (verdict == REPRODUCED)
    if verdict == DIRECTION_ONLY:
        assert judged.text.startswith("direction only, no interval (") and judged.text.endswith(
            f"{direction} direction"
        )
        assert math.isnan(judged.tost_p)
    if verdict == DIFFERENT:
        assert f"ours {side} than published" in judged.text


def test_a_wide_interval_never_reproduces_a_published_figure():
    """Centred exactly on the published ratio, an interval wider than the margin allows is inconclusive at every
    width and number of rounds; failing to find a difference is no evidence of sameness."""
    for df in (1, 2, 4, 9):
        for half_width in (1.3, 1.5, 2.0, 4.0):  # 95% CI x/÷ this: its 90% CI wider than x/÷ 1.1
            judged = _judge(1.5, 1.5, 1.5 / half_width, 1.5 * half_width, df)
            assert judged.verdict == INCONCLUSIVE and judged.tost_p >= 0.05, (df, half_width, judged)
            assert not judged.columns()["agrees"]
    # the same interval reproduces at a margin wide enough to hold its 90% interval, and not at a narrower one
    assert _judge(1.5, 1.5, 1.2, 1.875, 9, margin=0.3).verdict == REPRODUCED
    assert _judge(1.5, 1.5, 1.2, 1.875, 9, margin=0.1).verdict == INCONCLUSIVE


def test_a_narrow_interval_inside_the_margin_reproduces():
    judged = _judge(1.5, 1.55, 1.52, 1.58, 4)
    assert judged.verdict == REPRODUCED and judged.tost_p < 0.05
    assert 1.5 / 1.1 < judged.ci90_low < judged.ci90_high < 1.5 * 1.1
    assert judged.text == f"reproduced within a factor of 1.1 (TOST p = {judged.tost_p:.2g})"
    # just inside the margin's edge (ratio 1.6 against 1.5 x 1.1 = 1.65) with an interval that crosses it: not shown
    assert _judge(1.5, 1.6, 1.5, 1.7, 4).verdict == INCONCLUSIVE


def _sources(tmp_path, inference_rows, training_rows=None, **override):
    pd.DataFrame(inference_rows).to_csv(tmp_path / "inf.csv", index=False)
    listing = {
        "gpu-inference": {
            "file": "inf.csv",
            "suite": "inference",
            "metric": "throughput_img_s",
            "unit": "img/s",
            "higher_is_better": True,
            "precision": "fp32",
            "image_size": 224,
            "device": "NVIDIA H100 NVL",
            "device_kind": "gpu",
            "source": "a study",
            "notes": "measured somehow.",
        }
        | override
    }
    if training_rows is not None:
        pd.DataFrame(training_rows).to_csv(tmp_path / "train.csv", index=False)
        listing["gpu-training"] = listing["gpu-inference"] | {
            "file": "train.csv",
            "suite": "training",
            "metric": "time_s",
            "unit": "s",
            "higher_is_better": False,
        }
    (tmp_path / "sources.yaml").write_text(yaml.safe_dump(listing))
    return read_sources(tmp_path / "sources.yaml")


def _published_row(model, framework, batch, value, metric="throughput_img_s"):
    return {"model": model, "framework": framework, "batch_size": batch, metric: value}


def _cell(framework, model, batch, throughput, status="ok"):
    return {
        "framework": framework,
        "model": model,
        "precision": "fp32",
        "batch_size": batch,
        "status": status,
        "reason": None if status == "ok" else "boom",
        "throughput_img_s": throughput if status == "ok" else None,
        "platform": "cpu",
        "cpu_model": "AMD EPYC",
        "device": "cpu",
    }


def _ratio(model, batch, ratio, lo, hi, numerator="jax", df=None, scope="paired_rounds"):
    """A speedups.csv row; with `df`, the log-scale standard error, df and p-value of a t interval [lo, hi] (as the
    ratio table records them), without it a row of a table from before them."""
    row = {
        "model": model,
        "precision": "fp32",
        "batch_size": batch,
        "ratio": ratio,
        "ci_low": lo,
        "ci_high": hi,
        "ci_scope": scope,
        "resolved": lo > 1 or hi < 1,
        "numerator": numerator,
        "denominator": "torch",
    }
    if df is not None:
        se = _se(lo, hi, df)
        row |= {"se_log": se, "df": df, "p_value": verdicts.p_value(math.log(ratio), se, df)}
    return row


def test_only_matching_cells_are_compared_and_absolute_numbers_are_labelled(tmp_path):
    sources = _sources(
        tmp_path,
        [
            _published_row("resnet50", "pytorch", 1, 500.0),
            _published_row("resnet50", "jax", 1, 750.0),  # published ratio 1.5
            _published_row("resnet50", "pytorch", 128, 6000.0),  # no cell at 128 here: not shown
            _published_row("resnet50", "jax", 128, 12000.0),
            _published_row("vit_b_16", "pytorch", 1, 300.0),
            _published_row("vit_b_16", "jax", 1, 150.0),  # 0.5, but this study's JAX cell failed
        ],
    )
    inference = pd.DataFrame(
        [
            _cell("torch", "resnet50", 1, 80.0),
            _cell("jax", "resnet50", 1, 100.0),
            _cell("torch", "vit_b_16", 1, 20.0),
            _cell("jax", "vit_b_16", 1, None, status="failed"),
            _cell("torch", "small_cnn", 1, 900.0),  # published nowhere
        ]
    )
    speedups = pd.DataFrame([_ratio("resnet50", 1, 1.25, 1.1, 1.4, df=2)])
    rows = compare(sources, inference=inference, speedups=speedups, training=None, image_size=32)
    assert list(zip(rows["model"], rows["batch_size"], strict=True)) == [("resnet50", 1), ("vit_b_16", 1)]
    resnet, vit = rows.iloc[0], rows.iloc[1]
    assert resnet["published_ratio"] == pytest.approx(1.5)
    # faster than PyTorch as published, but resolved slower than the published 1.5: different, never agreement
    assert (resnet["verdict"], resnet["direction"], resnet["ours_vs_published"]) == (DIFFERENT, SAME, "lower")
    assert not bool(resnet["agrees"]) and resnet["margin"] == DEFAULT_MARGIN
    assert resnet["margin_low"] == pytest.approx(1.5 / 1.1) and resnet["margin_high"] == pytest.approx(1.65)
    assert resnet["verdict_text"].endswith("; across device classes (GPU there, CPU here)")
    assert vit["verdict"] == FAILED and "boom" in vit["reason"]
    assert not resnet["absolute_comparable"]
    assert "NVIDIA H100 NVL there, AMD EPYC (CPU) here" in resnet["absolute_note"]
    assert "224 px there, 32 px here" in resnet["absolute_note"]
    # the counts the section and the conclusions say, and the section's words for them
    counts = published_counts(rows)
    assert (counts.total, counts.reproduced, counts.different, counts.lower, counts.failed) == (2, 0, 1, 1, 1)
    assert (counts.across, counts.classes, counts.margin) == (2, (("GPU", "CPU"),), "1.1")
    text = published_section(rows, sources, "published_vs_reproduced")
    assert (
        "Of the two published ratios that match cells of this study, none is reproduced, one differs (ours lower in "
        "one) and one met a failed cell here." in text
    )
    assert "Both compare ratios across device classes (GPU there, CPU here)." in text
    table = comparison_table(rows, sources[0])
    assert r"\label{tab:published-gpu-inference}" in table and "not comparable" in table
    assert "different: ours lower" in table and "ratios across device classes (GPU there, CPU here)" in table
    # a published CPU figure set beside CPU cells: no note on device classes
    (tmp_path / "cpu").mkdir()
    cpu = _sources(
        tmp_path / "cpu",
        [_published_row("resnet50", "pytorch", 1, 8.0), _published_row("resnet50", "jax", 1, 10.0)],
        device="AMD EPYC",
        device_kind="cpu",
    )
    same = compare(cpu, inference=inference, speedups=speedups, training=None, image_size=32).iloc[0]
    # 1.25 [1.1, 1.4] from 3 rounds: its 90% CI (x/÷ 1.085) inside the published 1.25 x/÷ 1.1
    assert same["verdict"] == REPRODUCED and bool(same["agrees"]) and "device classes" not in same["verdict_text"]
    assert published_counts(pd.DataFrame([same])).classes == ()
    assert "device classes" not in published_section(pd.DataFrame([same]), cpu, None)


def _epochs(times: dict[str, tuple[float, ...]], **columns: dict[str, object]) -> pd.DataFrame:
    """A training table of small_cnn at batch 32 in fp32: per framework, one ok row per epoch time in `times`, and
    `columns` (name -> {framework: value}) added to that framework's rows."""
    return pd.DataFrame(
        [
            {
                "framework": f,
                "model": "small_cnn",
                "precision": "fp32",
                "batch_size": 32,
                "status": "ok",
                "reason": None,
                "epoch": e,
                "time_s": t,
            }
            | {name: values[f] for name, values in columns.items()}
            for f, epoch_times in times.items()
            for e, t in enumerate(epoch_times)
        ]
    )


def test_training_times_compare_as_speed_ratios(tmp_path):
    sources = _sources(
        tmp_path,
        [],
        training_rows=[
            _published_row("small_cnn", "pytorch", 32, 100.0, metric="time_s"),
            _published_row("small_cnn", "jax", 32, 200.0, metric="time_s"),  # JAX half PyTorch's speed: 0.5
        ],
    )
    epochs = _epochs({"torch": (1.0, 1.0), "jax": (1.0, 3.0)})
    inference = pd.DataFrame([_cell("torch", "small_cnn", 1, 1.0)])
    rows = compare(sources[1:], inference=inference, speedups=pd.DataFrame(), training=epochs, image_size=224)
    assert len(rows) == 1
    row = rows.iloc[0]
    assert row["published_ratio"] == pytest.approx(0.5)
    assert row["ratio"] == pytest.approx(0.5)  # 2 s of PyTorch's epochs over JAX's 4 s
    # exactly the published ratio, but from one run each: direction only, never agreement
    assert (row["verdict"], row["direction"], bool(row["agrees"])) == (DIRECTION_ONLY, SAME, False)
    assert row["verdict_text"].startswith("direction only, no interval (one run each): same direction")
    assert math.isnan(row["tost_p"]) and math.isnan(row["ci90_low"])


def test_a_misread_reference_is_refused_with_its_file(tmp_path):
    (tmp_path / "sources.yaml").write_text(yaml.safe_dump({"x": {"file": "x.csv", "suite": "inference"}}))
    with pytest.raises(ValueError, match=r"sources\.yaml: source 'x' lacks .*device"):
        read_sources(tmp_path / "sources.yaml")
    sources = _sources(tmp_path, [{"model": "resnet50", "framework": "jax", "batch_size": 1, "img_s": 1.0}])
    with pytest.raises(ValueError, match=r"inf\.csv: expected the columns"):
        read_published(sources[0])
    sources = _sources(tmp_path, [_published_row("resnet50", "mxnet", 1, 1.0)])
    with pytest.raises(ValueError, match=r"inf\.csv: unknown framework\(s\) mxnet"):
        read_published(sources[0])


def test_the_repository_references_are_read_and_noted():
    """Every listed file is in reference/ (never ../shared/), readable, and named in reference/README.md."""
    sources = read_sources(REPO / "reference" / "sources.yaml")
    readme = (REPO / "reference" / "README.md").read_text()
    assert {s.suite for s in sources} == {"inference", "training"}
    for source in sources:
        assert source.path.parent == REPO / "reference"
        assert len(read_published(source)) > 0
        assert source.path.name in readme


def test_the_section_says_what_matches_and_what_does_not(tmp_path):
    sources = _sources(
        tmp_path, [_published_row("resnet50", "pytorch", 1, 1.0), _published_row("resnet50", "jax", 1, 2.0)]
    )
    empty = compare(
        sources,
        inference=pd.DataFrame([_cell("torch", "small_cnn", 1, 1.0)]),
        speedups=pd.DataFrame(),
        training=None,
        image_size=32,
    )
    values = section_values(empty, sources, "published_vs_reproduced")
    assert [source.matched for source in values["sources"]] == [0] and values["counts"].total == 0
    assert (values["departures"], values["modes"], values["machine"], values["figure"]) == ((), None, None, "")
    assert floats(empty, sources, "published_vs_reproduced") == ""
    text = published_section(empty, sources, "published_vs_reproduced")
    assert "A study measured inference on the NVIDIA H100 NVL at 224~px." in text
    assert "none of its ratios matches a cell here" in text
    assert r"\begin{table" not in text and "includegraphics" not in text and "The source notes" not in text
    assert "No published figure matches a cell of this study" in text and "reproduced when" not in text
    # no source at all: the section still stands
    assert "No published figure matches" in published_section(empty, [], None)


def _one_comparison(tmp_path, published_ratio=1.5):
    """A published JAX/PyTorch ratio of resnet50 at batch 1, and this study's two cells of it (CPU)."""
    sources = _sources(
        tmp_path,
        [
            _published_row("resnet50", "pytorch", 1, 100.0),
            _published_row("resnet50", "jax", 1, 100.0 * published_ratio),
        ],
    )
    inference = pd.DataFrame([_cell("torch", "resnet50", 1, 80.0), _cell("jax", "resnet50", 1, 80.0 * published_ratio)])
    return sources, inference


@pytest.mark.parametrize(
    ("speedup", "why"),
    [
        # the published ratio exactly, with the narrowest interval, but not paired over interleaved rounds
        (_ratio("resnet50", 1, 1.5, 1.49, 1.51, df=9, scope="within_process"), "one trial each"),
        (_ratio("resnet50", 1, 1.5, 1.49, 1.51, df=9, scope="unpaired_trials"), "trials not interleaved"),
        # a paired interval from a table without its standard error: nothing to test
        (_ratio("resnet50", 1, 1.5, 1.49, 1.51), "no standard error recorded"),
        # no ratio row at all: the cells' throughputs divided
        (None, "the cells' throughputs divided"),
    ],
)
def test_a_row_without_an_interval_never_agrees(tmp_path, speedup, why):
    sources, inference = _one_comparison(tmp_path)
    speedups = pd.DataFrame([speedup] if speedup else [])
    rows = compare(sources, inference=inference, speedups=speedups, training=None, image_size=32)
    (row,) = rows.itertuples()
    assert row.ratio == pytest.approx(1.5)
    assert (row.verdict, row.direction, bool(row.agrees)) == (DIRECTION_ONLY, SAME, False)
    assert row.verdict_text.startswith(f"direction only, no interval ({why}")
    assert verdict_counts(rows)[REPRODUCED] == 0 and not agreeing(rows).any()
    assert "direction only, no interval: same" in comparison_table(rows, sources[0])
    assert "1.50 [" not in comparison_table(rows, sources[0]), "a direction-only row's interval is not printed"


def test_the_summary_never_counts_direction_only_rows_as_agreement(tmp_path):
    """Rows of every verdict, written to published.csv and read back as the conclusions read them: only the
    reproduced row is counted as agreement; the direction-only rows are counted apart, with their directions."""
    sources, inference = _one_comparison(tmp_path)
    judged = {
        "reproduced": _judge(1.5, 1.5, 1.45, 1.55),
        "different": _judge(1.5, 3.0, 2.5, 3.5),
        "inconclusive": _judge(1.5, 1.48, 0.73, 2.99),
        "same": _judge(1.5, 1.5, None, None, None, ONE_RUN),
        "same2": _judge(1.5, 1.5, 1.49, 1.51, 9, "within_process"),
        "opposite": _judge(1.5, 0.5, None, None, None, ONE_RUN),
    }
    rows = pd.DataFrame(
        [
            {"source": "gpu-inference", "framework": "jax", "published_ratio": 1.5, "margin": DEFAULT_MARGIN}
            | j.columns()
            | {"published_device_kind": "gpu", "ours_device_kind": "gpu"}
            for j in judged.values()
        ],
        columns=PUBLISHED_COLUMNS,
    )
    path = tmp_path / "published.csv"
    rows.to_csv(path, index=False)
    back = pd.read_csv(path)
    counts = verdict_counts(back)
    assert counts == {
        REPRODUCED: 1,
        DIFFERENT: 1,
        INCONCLUSIVE: 1,
        DIRECTION_ONLY: 3,
        FAILED: 0,
    }
    assert back["agrees"].astype(str).tolist() == ["True", "False", "False", "False", "False", "False"]
    assert agreeing(back).sum() == 1
    counts = published_counts(back)
    assert (counts.reproduced, counts.different, counts.higher, counts.inconclusive) == (1, 1, 1, 1)
    assert (counts.direction_only, counts.same, counts.opposite) == (3, 2, 1)
    text = published_section(back, sources, None)
    assert (
        "Of the six published ratios that match cells of this study, one is reproduced, one differs (ours higher in "
        "one), one is inconclusive and three can be compared by direction only." in text
    )
    assert "By direction, two agree and one runs the other way, which never counts as agreement." in text


def test_published_csv_never_claims_agreement_for_an_interval_wider_than_its_margin(tmp_path):
    """Constructed ratios of every width and offset around the published one, at two margins: every row the CSV
    calls reproduced (or agreeing) has a paired interval whose 90% bounds lie inside published x [1/(1+m), 1+m],
    and every row with such bounds narrow enough, centred on the published ratio, is reproduced. The offsets and
    half-widths are drawn on the margin's scale (up to three times its band), where a verdict can go either way:
    72 rows a margin hold as many reproduced rows as 200 drawn over a fixed range did, and `compare` matches each
    published ratio against every cell, so the rows cost quadratically (200 took 10 s a margin)."""
    rng = np.random.default_rng(0)
    for margin in (0.05, 0.1):
        published_rows, inference_rows, speedup_rows = [], [], []
        for i in range(72):
            model, published = f"m{i}", float(np.exp(rng.normal(0, 0.5)))
            ratio = published * float(np.exp(rng.normal(0, margin)))
            half = float(np.exp(rng.uniform(0.005, 3 * np.log1p(margin))))
            df = int(rng.integers(1, 10))
            scope = "paired_rounds" if i % 4 else "within_process"
            published_rows += [
                _published_row(model, "pytorch", 1, 100.0),
                _published_row(model, "jax", 1, 100 * published),
            ]
            inference_rows += [_cell("torch", model, 1, 10.0), _cell("jax", model, 1, 10.0 * ratio)]
            speedup_rows.append(_ratio(model, 1, ratio, ratio / half, ratio * half, df=df, scope=scope))
        (tmp_path / str(margin)).mkdir()
        sources = _sources(tmp_path / str(margin), published_rows)
        rows = compare(
            sources,
            inference=pd.DataFrame(inference_rows),
            speedups=pd.DataFrame(speedup_rows),
            training=None,
            image_size=32,
            margin=margin,
        )
        rows.to_csv(tmp_path / "published.csv", index=False)
        back = pd.read_csv(tmp_path / "published.csv")
        assert set(back["verdict"]) <= set(VERDICTS) and (back["margin"] == margin).all()
        claimed = back[(back["verdict"] == REPRODUCED) | (back["agrees"].astype(str) == "True")]
        assert len(claimed) > 5, "the construction reproduces some"
        assert (claimed["verdict"] == REPRODUCED).all() and (claimed["ci_scope"] == "paired_rounds").all()
        assert (claimed["ci90_low"] >= claimed["published_ratio"] / (1 + margin) - 1e-12).all()
        assert (claimed["ci90_high"] <= claimed["published_ratio"] * (1 + margin) + 1e-12).all()
        assert (claimed["ci90_high"] / claimed["ci90_low"] <= (1 + margin) ** 2).all()
        wide = back[np.log(back["ci90_high"] / back["ci90_low"]) > 2 * np.log1p(margin)]
        assert len(wide) and not (wide["verdict"] == REPRODUCED).any(), "wider than the band: never reproduced"
        tested = back[back["ci_scope"] == "paired_rounds"]
        contains = (tested["ci_low"] <= tested["published_ratio"]) & (tested["published_ratio"] <= tested["ci_high"])
        assert (tested.loc[~contains & (tested["verdict"] != REPRODUCED), "verdict"] == DIFFERENT).all()
        assert (back.loc[back["ci_scope"] == "within_process", "verdict"] == DIRECTION_ONLY).all()


def test_the_margin_is_checked_recorded_and_printed(tmp_path):
    sources, inference = _one_comparison(tmp_path)
    speedups = pd.DataFrame([_ratio("resnet50", 1, 1.5, 1.45, 1.55, df=2)])
    for margin in (0, 1.5, -0.1):
        with pytest.raises(ValueError, match="equivalence margin"):
            compare(sources, inference=inference, speedups=speedups, training=None, image_size=32, margin=margin)
    rows = compare(sources, inference=inference, speedups=speedups, training=None, image_size=32, margin=0.2)
    assert rows.iloc[0]["margin"] == 0.2 and rows.iloc[0]["verdict"] == REPRODUCED
    rule = (
        "A published ratio is reproduced when two one-sided tests at 5\\% place this study's ratio within a factor of"
    )
    text = published_section(rows, sources, "published_vs_reproduced")
    assert f"{rule} 1.2 of it either way." in text and "1.1" not in text.split(r"\begin{table")[0]
    assert "only the direction is compared, which never counts as agreement" in text
    # the study's margin where given, whatever the rows record
    assert f"{rule} 1.1 of it either way." in published_section(rows, sources, None, margin=0.1)


def test_the_figure_draws_tested_and_direction_only_ratios(tmp_path):
    sources, inference = _one_comparison(tmp_path)
    rows = pd.concat(
        [
            compare(
                sources,
                inference=inference,
                speedups=pd.DataFrame([speedup]),
                training=None,
                image_size=32,
            )
            for speedup in (
                _ratio("resnet50", 1, 1.5, 1.45, 1.55, df=2),
                _ratio("resnet50", 1, 1.5, 1.49, 1.51, df=2, scope="within_process"),
            )
        ],
        ignore_index=True,
    )
    assert rows["verdict"].tolist() == [REPRODUCED, DIRECTION_ONLY]
    published_figure(rows, tmp_path / "f.pdf", tmp_path / "f.png")
    assert (tmp_path / "f.pdf").stat().st_size > 0 and (tmp_path / "f.png").stat().st_size > 0


def _gpu_cell(framework, model, batch, throughput, precision, device="NVIDIA H200"):
    return _cell(framework, model, batch, throughput) | {"precision": precision, "platform": "cuda", "device": device}


def _ratio_at(precision, model, batch, ratio, lo, hi):
    return _ratio(model, batch, ratio, lo, hi, df=2) | {"precision": precision}


def _default_arithmetic_beside_true_fp32(tmp_path):
    """A published ResNet-50 pair in each framework's default arithmetic, and this study's cells and ratios in
    `default` and in true FP32: (the sources, the matched rows)."""
    sources = _sources(
        tmp_path,
        [_published_row("resnet50", "pytorch", 128, 5915.0), _published_row("resnet50", "jax", 128, 11739.0)],
        precision="default",
    )
    inference = pd.DataFrame(
        [
            _gpu_cell("torch", "resnet50", 128, 3000.0, "default"),
            _gpu_cell("jax", "resnet50", 128, 4500.0, "default"),
            _gpu_cell("torch", "resnet50", 128, 2000.0, "fp32"),
            _gpu_cell("jax", "resnet50", 128, 2400.0, "fp32"),
        ]
    )
    speedups = pd.DataFrame(
        [_ratio_at("default", "resnet50", 128, 1.5, 1.4, 1.6), _ratio_at("fp32", "resnet50", 128, 1.2, 1.1, 1.3)]
    )
    return sources, compare(sources, inference=inference, speedups=speedups, training=None, image_size=224)


def test_the_published_default_arithmetic_is_matched_like_for_like_and_set_beside_true_fp32(tmp_path):
    """A source that ran "FP32" without pinning TF32 ran each framework's default arithmetic (`default`): its rows
    match this study's `default` cells, and the same pairs in true FP32 are set beside them."""
    sources, rows = _default_arithmetic_beside_true_fp32(tmp_path)
    [row] = rows.itertuples()
    assert (row.precision, row.our_precision, row.arithmetic_match) == ("default", "default", True)
    assert row.ratio == pytest.approx(1.5) and row.ours_torch == pytest.approx(3000.0)
    assert (row.ratio_true_fp32, row.ci_low_true_fp32, row.ci_high_true_fp32) == pytest.approx((1.2, 1.1, 1.3))
    values = section_values(rows, sources, figure=None)
    shift = values["true_fp32"]
    assert (shift.shifts, shift.low, shift.high) == (1, pytest.approx(0.8), pytest.approx(0.8))
    assert (shift.largest.framework, shift.largest.model, shift.largest.batch) == ("JAX", "ResNet-50", 128)
    machine = values["machine"]
    assert (machine.device, machine.gpu, machine.bandwidth.ours_tb_s) == ("NVIDIA H200", True, 4.8)
    assert machine.bandwidth.theirs == (("H100 NVL", 3.9),)
    text = published_section(rows, sources, figure=None)
    assert "It ran in each framework's default float32 arithmetic (TF32 not pinned)" in text
    assert "JAX on ResNet-50 at batch 128 moves from 1.5$\\times$ to 1.2$\\times$ [1.1, 1.3]." in text
    assert "This study's cells ran on the NVIDIA H200 (driver, CUDA and framework versions in" in text
    assert "The H200 has the compute of the H100 NVL but 4.8~TB/s of memory bandwidth against 3.9~TB/s." in text
    assert "This study's cells: each framework's default float32 arithmetic (TF32 not pinned) too." in text


@pytest.mark.parametrize(("platform", "like"), [("cuda", False), ("cpu", True)])
def test_true_fp32_cells_stand_in_for_the_default_arithmetic_like_for_like_only_on_a_cpu(tmp_path, platform, like):
    sources = _sources(
        tmp_path,
        [_published_row("resnet50", "pytorch", 1, 500.0), _published_row("resnet50", "jax", 1, 750.0)],
        precision="default",
    )
    cells = [_cell("torch", "resnet50", 1, 80.0), _cell("jax", "resnet50", 1, 100.0)]
    if platform == "cuda":
        cells = [c | {"platform": "cuda", "device": "NVIDIA H100 80GB HBM3"} for c in cells]
    speedups = pd.DataFrame([_ratio("resnet50", 1, 1.25, 1.1, 1.4, df=2)])
    rows = compare(sources, inference=pd.DataFrame(cells), speedups=speedups, training=None, image_size=224)
    [row] = rows.itertuples()
    assert (row.our_precision, bool(row.arithmetic_match)) == ("fp32", like)
    table = comparison_table(rows, sources[0])
    if like:
        assert "on a CPU each framework's default float32 arithmetic is true FP32" in table
        assert r"$^{\S}$" not in table
    else:
        assert "ours in true FP32, theirs in each framework's default arithmetic" in table
        assert r"ResNet-50$^{\S}$" in table and "compare another arithmetic than the source's" in table


def test_the_shipped_h100_figures_are_each_frameworks_default_arithmetic():
    for source in read_sources(REPO / "reference" / "sources.yaml"):
        assert source.precision == "default", source.key


def test_the_readme_paragraph_sets_each_published_ratio_beside_ours_against_eager_and_compiled(tmp_path):
    """benchmarks/readme_published.py: the README's GPU paragraph, generated from a run's tables."""
    import importlib.util
    import json
    import sys

    spec = importlib.util.spec_from_file_location("readme_published", REPO / "benchmarks" / "readme_published.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(REPO / "benchmarks"))
    spec.loader.exec_module(module)
    tables = tmp_path / "results" / "tables"
    tables.mkdir(parents=True)
    published = {c: None for c in PUBLISHED_COLUMNS} | {
        "source": "h100-inference",
        "suite": "inference",
        "model": "resnet50",
        "batch_size": 128,
        "precision": "default",
        "our_precision": "default",
        "framework": "jax",
        "published_ratio": 1.98,
        "ratio": 1.5,
        "ci_low": 1.4,
        "ci_high": 1.6,
        "verdict": DIFFERENT,
    }
    pd.DataFrame([published]).to_csv(tables / "published.csv", index=False)
    pd.DataFrame([_ratio_at("default", "resnet50", 128, 1.2, 1.1, 1.3) | {"denominator_mode": "compile"}]).to_csv(
        tables / "speedups.csv", index=False
    )
    cell = _gpu_cell("torch", "resnet50", 128, 3000.0, "default", device="NVIDIA H100 80GB HBM3")
    pd.DataFrame([cell | {"framework_version": "2.11.0+cu130", "git_commit": "abcdef0123"}]).to_csv(
        tables / "inference.csv", index=False
    )
    (tables / "study_time.json").write_text(json.dumps({"started_at": 1795795200.0, "wall_s": 590.0}))
    device = {"platform": "cuda", "frameworks": {"jax": {"cuda_driver": "13.0"}, "torch": {"cuda_runtime": "13.0"}}}
    (tmp_path / "results" / "device.json").write_text(json.dumps(device))
    text = module.block(tmp_path / "results")
    assert "on NVIDIA H100 80GB HBM3" in text and "(driver CUDA API 13.0, CUDA 13.0), PyTorch 2.11.0+cu130" in text
    assert "in each framework's default arithmetic; study wall time 9 min 50 s" in text
    assert "| resnet50 | 128 | jax | 1.98 | 1.50 [1.40, 1.60] | different | 1.20 [1.10, 1.30] |" in text


def test_a_pair_published_against_eager_pytorch_is_also_set_against_compiled_pytorch(tmp_path):
    """The published baseline ran eagerly: its ratio is set beside ours against eager PyTorch and, where the study
    compiles PyTorch too, against compiled PyTorch, each with its paired interval."""
    sources = _sources(
        tmp_path,
        [_published_row("resnet50", "pytorch", 128, 5915.0), _published_row("resnet50", "jax", 128, 11739.0)],
        precision="default",
    )
    inference = pd.DataFrame(
        [
            _gpu_cell("torch", "resnet50", 128, 3000.0, "default") | {"mode": "eager"},
            _gpu_cell("torch", "resnet50", 128, 3600.0, "default") | {"mode": "compile"},
            _gpu_cell("jax", "resnet50", 128, 4500.0, "default") | {"mode": "jit"},
        ]
    )
    speedups = pd.DataFrame(
        [
            _ratio_at("default", "resnet50", 128, 1.5, 1.4, 1.6) | {"numerator_mode": "jit", "denominator_mode": m, **v}
            for m, v in (("eager", {}), ("compile", {"ratio": 1.25, "ci_low": 1.2, "ci_high": 1.3}))
        ]
    )
    rows = compare(sources, inference=inference, speedups=speedups, training=None, image_size=224)
    [row] = rows.itertuples()
    assert (row.ours_torch_mode, row.ratio) == ("eager", pytest.approx(1.5))
    assert (row.ratio_vs_compiled, row.ci_low_vs_compiled, row.ci_high_vs_compiled) == pytest.approx((1.25, 1.2, 1.3))
    assert r"1.50 [1.40, 1.60]\newline 1.25 [1.20, 1.30]$^{c}$ &" in comparison_table(rows, sources[0])


@needs_latex
@pytest.mark.parametrize(("value", "batches"), [(0.264, (1, 8, 32, 128)), (0.000555, (1, 128))])
def test_the_published_table_fits_the_page_with_every_column_at_its_widest(tmp_path, value, batches):
    """Every published batch size of the four models (16 rows) with three-digit ratios and both of this study's
    intervals, or the widest plain numbers (eight characters) in every column at two batch sizes, the verdict and
    the intervals wrapping: the table stays on its page, as the paper check reads it."""
    row = {c: None for c in PUBLISHED_COLUMNS} | {
        "source": "gpu-inference",
        "suite": "inference",
        "framework": "jax",
        "precision": "default",
        "our_precision": "default",
        "arithmetic_match": True,
        "published_torch": 55555.5,
        "published_other": 55555.5,
        "published_ratio": value,
        "ours_torch": 55555.5,
        "ours_other": 55555.5,
        "ratio": value,
        "ci_low": value,
        "ci_high": value,
        "ratio_vs_compiled": value,
        "ci_low_vs_compiled": value,
        "ci_high_vs_compiled": value,
        "verdict": INCONCLUSIVE,
        "tost_p": 0.555,
        "published_torch_mode": "eager",
        "published_other_mode": "jit",
        "ours_torch_mode": "eager",
        "ours_other_mode": "jit",
        "modes_match": True,
        "modes_stated": False,
        "margin": DEFAULT_MARGIN,
        "absolute_comparable": False,
        "absolute_note": "not comparable: NVIDIA H100 NVL there, NVIDIA H200 (GPU) here",
        "published_device_kind": "gpu",
        "ours_device_kind": "gpu",
        "ours_device": "NVIDIA H200",
    }
    rows = pd.DataFrame(
        [
            row | {"model": m, "batch_size": b}
            for m in ("mobilenet_v3_small", "efficientnet_b0", "resnet50", "vit_b_16")
            for b in batches
        ]
    )
    sources = _sources(tmp_path, [_published_row("resnet50", "pytorch", 1, 1.0)], precision="default")
    body = comparison_table(rows, sources[0]) + r"Table~\ref{tab:published-gpu-inference}. " + TEXT
    pdf, log, tex = _build(tmp_path, body)
    report = _check(tmp_path, pdf, log, tex)
    assert report["problems"] == [], report["problems"]


# --- the section's prose on every kind of study -----------------------------------------------------------------

_FLOATS = re.compile(r"\\begin\{(table\*?|figure\*?)\}.*?\\end\{\1\}", re.S)


def _prose(text: str) -> str:
    """The section without its tables and figure: the sentences the template writes."""
    return _FLOATS.sub(" ", text)


def _longest(text: str) -> int:
    """The longest sentence of the section's prose in words, as the paper check counts them."""
    return max(words(sentence) for sentence in sentences(_prose(text)))


def _leaked(text: str) -> list[str]:
    """Configuration identifiers (resnet50, vit_b_16, ...) in the section's prose."""
    prose = _prose(text).replace("\\_", "_")
    return sorted(name for name in identifiers() if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", prose))


def _study(kind: str, tmp_path):
    """(the matched rows, the sources) of a study of `kind`."""
    published = [_published_row("resnet50", "pytorch", 1, 500.0), _published_row("resnet50", "jax", 1, 750.0)]
    if kind == "gpu":
        return _default_arithmetic_beside_true_fp32(tmp_path)[::-1]
    sources = _sources(tmp_path, published)
    inference = pd.DataFrame([_cell("torch", "resnet50", 1, 80.0), _cell("jax", "resnet50", 1, 100.0)])
    speedups = {
        "one framework": pd.DataFrame(),
        "no rows": pd.DataFrame(),
        "nothing resolved": pd.DataFrame([_ratio("resnet50", 1, 1.4, 0.7, 2.8, df=2)]),
        "failed cell": pd.DataFrame(),
    }[kind]
    if kind == "one framework":
        inference = inference[inference["framework"] == "torch"]
    if kind == "no rows":
        inference = pd.DataFrame([_cell("torch", "small_cnn", 1, 1.0), _cell("jax", "small_cnn", 1, 1.0)])
    if kind == "failed cell":
        inference = pd.DataFrame([_cell("torch", "resnet50", 1, 80.0), _cell("jax", "resnet50", 1, None, "failed")])
    rows = compare(sources, inference=inference, speedups=speedups, training=None, image_size=32)
    return rows, sources


@pytest.mark.parametrize("kind", ["one framework", "no rows", "nothing resolved", "failed cell", "gpu"])
def test_the_section_renders_short_sentences_for_every_kind_of_study(kind, tmp_path):
    rows, sources = _study(kind, tmp_path)
    values = section_values(rows, sources, "published_vs_reproduced")
    text = published_section(rows, sources, "published_vs_reproduced")
    assert text.startswith("\\section{Published vs reproduced}") and r"\label{sec:published}" in text
    assert _longest(text) <= MAX_SENTENCE_WORDS, [s for s in sentences(_prose(text)) if words(s) > 35]
    assert _leaked(text) == []
    counts = values["counts"]
    if kind in ("one framework", "no rows"):
        assert counts.total == 0 and "No published figure matches a cell of this study" in text
        assert r"\begin{table" not in text and values["sources"][0].matched == 0
    elif kind == "nothing resolved":
        # 1.4 [0.7, 2.8] around the published 1.5: inconclusive, on neither side of 1, and no departure to name
        assert (counts.inconclusive, counts.different, values["departures"]) == (1, 0, ())
        assert values["sides"] == Sides(same=0, other=0, unresolved=1)
        assert "matches cells of this study is inconclusive." in text and "This study's interval contains 1." in text
        assert "largest departure" not in text and "Figure~\\ref{fig:published}" in text
    elif kind == "failed cell":
        assert (counts.failed, counts.total, values["sides"]) == (1, 1, Sides(0, 0, 0))
        assert "matches cells of this study met a failed cell here." in text and "lies" not in text
    else:
        assert values["machine"].gpu and values["true_fp32"].shifts == 1
        assert "TB/s" in text and "compare ratios across device classes" not in text


def test_the_section_names_the_largest_departures_and_the_sides_of_one(tmp_path):
    """Three ratios that differ from the published ones: the two farthest on the log scale are named, the
    framework once; the sides of 1 are counted; the source's notes are listed one item each, flags as typed."""
    published, cells, ratios = [], [], []
    for model, (theirs, ours) in {"resnet50": (1.5, 0.5), "vit_b_16": (1.2, 1.5), "small_cnn": (0.5, 2.0)}.items():
        published += [_published_row(model, "pytorch", 1, 100.0), _published_row(model, "jax", 1, 100.0 * theirs)]
        cells += [_cell("torch", model, 1, 10.0), _cell("jax", model, 1, 10.0 * ours)]
        ratios.append(_ratio(model, 1, ours, ours * 0.95, ours * 1.05, df=4))
    sources = _sources(
        tmp_path, published, notes="Warm-up first; JAX ran with --flag=0 (after a crash). TF32 not pinned."
    )
    rows = compare(sources, inference=pd.DataFrame(cells), speedups=pd.DataFrame(ratios), training=None, image_size=32)
    values = section_values(rows, sources, None)
    assert [(d.model, d.ours, d.published) for d in values["departures"]] == [
        ("the small CNN", 2.0, 0.5),
        ("ResNet-50", 0.5, 1.5),
    ]
    assert values["sides"] == Sides(same=1, other=2, unresolved=0)
    assert values["sources"][0].notes == ("Warm-up first", "JAX ran with --flag=0 (after a crash)", "TF32 not pinned")
    text = published_section(rows, sources, None)
    assert (
        "The largest departures are JAX on the small CNN at batch 1 (2.0$\\times$ here, 0.50$\\times$ published) and "
        "on ResNet-50 at batch 1 (0.50$\\times$ here, 1.5$\\times$ published)." in text
    )
    assert "This study's ratio lies on the published side of 1 in one and on the other side in two." in text
    assert r"\item JAX ran with -{}-flag=0 (after a crash);" in text
    assert "ViT-B/16 at batch 1 (" not in text, "the nearest difference is left to the table"


def test_the_sentence_check_catches_a_long_sentence(tmp_path):
    """The negative control: a source whose name runs long makes a sentence over the limit, and the count says so."""
    rows, sources = _study("nothing resolved", tmp_path)
    long_name = "a study " + " ".join(["of many things"] * 12)
    text = published_section(rows, [dataclasses.replace(sources[0], source=long_name)], None)
    assert _longest(text) > MAX_SENTENCE_WORDS
    assert _leaked("resnet50 beside ResNet-50") == ["resnet50"], "an identifier in the prose is caught"


def test_a_value_the_template_is_not_handed_stops_the_build_naming_the_template(tmp_path, monkeypatch):
    """The negative control of the values: a section handed no `sides` fails naming published.tex.j2 and the value,
    never a gap in the paper; handed them, the same rows render."""
    from fwbench.analysis.paper import published_section as module
    from fwbench.analysis.paper.templates import TemplateValueError

    rows, sources = _study("nothing resolved", tmp_path)
    assert "This study's interval contains 1." in published_section(rows, sources, None)
    monkeypatch.setattr(
        module, "section_values", lambda *args: {k: v for k, v in section_values(*args).items() if k != "sides"}
    )
    with pytest.raises(TemplateValueError, match=r"published\.tex\.j2.*sides"):
        published_section(rows, sources, None)
