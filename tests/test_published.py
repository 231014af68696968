"""Published vs reproduced: matching, ratios, verdicts, the refusal of misread reference files, the section."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from fwbench.analysis import published as pub
from tests.conftest import REPO


@pytest.mark.parametrize(
    ("published", "ratio", "lo", "hi", "scope", "expected"),
    [
        (1.5, 1.4, 1.2, 1.6, "paired_rounds", pub.WITHIN),
        (1.5, 3.0, 2.5, 3.5, "paired_rounds", pub.SAME),
        (1.5, 0.5, 0.4, 0.6, "paired_rounds", pub.OPPOSITE),
        (0.5, 2.0, 1.5, 2.5, "paired_rounds", pub.OPPOSITE),
        (2.5, 1.1, 0.9, 1.3, "paired_rounds", pub.UNRESOLVED),
        (1.5, 1.2, 1.0, 1.4, "within_process", f"{pub.SAME} ({pub.NO_PAIRED_CI})"),
        (1.5, 0.8, None, None, None, f"{pub.OPPOSITE} ({pub.NO_PAIRED_CI})"),
        (1.5, None, None, None, None, pub.FAILED),
    ],
)
def test_verdict(published, ratio, lo, hi, scope, expected):
    assert pub.verdict(published, ratio, lo, hi, scope) == expected


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
    return pub.read_sources(tmp_path / "sources.yaml")


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


def _ratio(model, batch, ratio, lo, hi, numerator="jax"):
    return {
        "model": model,
        "precision": "fp32",
        "batch_size": batch,
        "ratio": ratio,
        "ci_low": lo,
        "ci_high": hi,
        "ci_scope": "paired_rounds",
        "resolved": lo > 1 or hi < 1,
        "numerator": numerator,
        "denominator": "torch",
    }


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
    speedups = pd.DataFrame([_ratio("resnet50", 1, 1.25, 1.1, 1.4)])
    rows = pub.compare(sources, inference=inference, speedups=speedups, training=None, image_size=32)
    assert list(zip(rows["model"], rows["batch_size"], strict=True)) == [("resnet50", 1), ("vit_b_16", 1)]
    resnet, vit = rows.iloc[0], rows.iloc[1]
    assert resnet["published_ratio"] == pytest.approx(1.5)
    assert resnet["verdict"] == pub.SAME and bool(resnet["agrees"])
    assert vit["verdict"] == pub.FAILED and "boom" in vit["reason"]
    assert not resnet["absolute_comparable"]
    assert "NVIDIA H100 NVL there, AMD EPYC (CPU) here" in resnet["absolute_note"]
    assert "224 px there, 32 px here" in resnet["absolute_note"]
    sentence = pub.summary_sentence(rows)
    assert sentence.startswith("Of the 2 published ratios") and "1 differs from it but agrees" in sentence
    assert "1 has a failed cell here" in sentence
    table = pub.comparison_table(rows, sources[0])
    assert r"\label{tab:published-gpu-inference}" in table and "not comparable" in table


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
    rows = pub.compare(sources[1:], inference=inference, speedups=pd.DataFrame(), training=epochs, image_size=224)
    assert len(rows) == 1
    row = rows.iloc[0]
    assert row["published_ratio"] == pytest.approx(0.5)
    assert row["ratio"] == pytest.approx(0.5)  # 2 s of PyTorch's epochs over JAX's 4 s
    assert row["verdict"] == f"{pub.SAME} ({pub.NO_PAIRED_CI})"


def test_a_misread_reference_is_refused_with_its_file(tmp_path):
    (tmp_path / "sources.yaml").write_text(yaml.safe_dump({"x": {"file": "x.csv", "suite": "inference"}}))
    with pytest.raises(ValueError, match=r"sources\.yaml: source 'x' lacks .*device"):
        pub.read_sources(tmp_path / "sources.yaml")
    sources = _sources(tmp_path, [{"model": "resnet50", "framework": "jax", "batch_size": 1, "img_s": 1.0}])
    with pytest.raises(ValueError, match=r"inf\.csv: expected the columns"):
        pub.read_published(sources[0])
    sources = _sources(tmp_path, [_published_row("resnet50", "mxnet", 1, 1.0)])
    with pytest.raises(ValueError, match=r"inf\.csv: unknown framework\(s\) mxnet"):
        pub.read_published(sources[0])


def test_the_repository_references_are_read_and_noted():
    """Every listed file is in reference/ (never ../shared/), readable, and named in reference/README.md."""
    sources = pub.read_sources(REPO / "reference" / "sources.yaml")
    readme = (REPO / "reference" / "README.md").read_text()
    assert {s.suite for s in sources} == {"inference", "training"}
    for source in sources:
        assert source.path.parent == REPO / "reference"
        assert len(pub.read_published(source)) > 0
        assert source.path.name in readme


def test_the_section_says_what_matches_and_what_does_not(tmp_path):
    sources = _sources(
        tmp_path, [_published_row("resnet50", "pytorch", 1, 1.0), _published_row("resnet50", "jax", 1, 2.0)]
    )
    empty = pub.compare(
        sources,
        inference=pd.DataFrame([_cell("torch", "small_cnn", 1, 1.0)]),
        speedups=pd.DataFrame(),
        training=None,
        image_size=32,
    )
    text = pub.section(empty, sources, "published_vs_reproduced")
    assert "none of it is shown" in text and r"\begin{table" not in text and "includegraphics" not in text
    assert "No published figure matches" in text
