"""The study's own weights-identical measurement: each framework's logits on the study's weights, in every precision
the study times, compared with PyTorch's; a model a framework cannot run is recorded as missing, never as zero error;
and the comparison records the evidence that it could fail (logits that vary with the image, a permuted batch that
would not pass), with a negative control for each way it must fail."""

from __future__ import annotations

import numpy as np
import pytest

from fwbench.scenarios import parity as study_parity
from tests.conftest import READS_TINY_GROUP, prepare_tiny_study

KEY = study_parity.logits_key("small_cnn", "fp32")
KEY64 = study_parity.logits_key("small_cnn", study_parity.FLOAT64)


def _logits(tmp_path, framework, models=("small_cnn",), precisions=("fp32",)):
    root, config, _ = prepare_tiny_study(tmp_path)
    weights = [root / "weights.npz"] * len(models)
    return study_parity.framework_logits(
        framework, list(models), weights, root / "data", num_classes=4, image_size=16, threads=1, precisions=precisions
    )


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """PyTorch's and JAX's logits of the tiny study's weights, measured once for the tests that vary them."""
    root = tmp_path_factory.mktemp("parity")
    return {framework: _logits(root / framework, framework) for framework in ("torch", "jax")}


def _compare(measured, jax_logits=None, jax_record=None, torch_logits=None):
    (torch_record, torch_arrays), (record, arrays) = measured["torch"], measured["jax"]
    return study_parity.compare(
        {"torch": torch_record, "jax": jax_record or record},
        {
            "torch": torch_arrays if torch_logits is None else torch_logits,
            "jax": arrays if jax_logits is None else jax_logits,
        },
    ).iloc[0]


def test_the_frameworks_agree_on_the_study_weights_and_the_check_could_fail(measured):
    (torch_record, torch_logits), (jax_record, _) = measured["torch"], measured["jax"]
    assert torch_logits[KEY].shape == (8, 4)
    fed = [r["precisions"]["fp32"]["models"]["small_cnn"]["input_sha256"] for r in (torch_record, jax_record)]
    assert fed[0] == fed[1] == torch_record["input_sha256"], "both were fed the host batch's bytes"
    row = _compare(measured)
    assert row["framework"] == "jax" and row["precision"] == "fp32" and row["arithmetic"] == "fp32"
    assert bool(row["holds"]) and row["relative_error"] < 1e-5 and row["top1_agreement"] == 1.0
    assert bool(row["can_fail"]) and row["input_dependence"] > 1e-2 and row["permuted_error"] > 100 * row["tolerance"]


def test_beyond_the_bound_a_permuted_twin_or_other_bytes_fail(measured):
    (_, torch_logits), (jax_record, jax_logits) = measured["torch"], measured["jax"]
    # The statistic is the parity tests' one: a perturbation beyond the bound makes the control fail.
    shifted = {KEY: jax_logits[KEY] + 1e-2 * np.abs(torch_logits[KEY]).max()}
    row = _compare(measured, jax_logits=shifted)
    assert not bool(row["holds"]) and row["relative_error"] > study_parity.TOLERANCE
    # Negative control: a twin fed the images in another order.
    permuted = {KEY: jax_logits[KEY][np.roll(np.arange(8), 3)]}
    assert not bool(_compare(measured, jax_logits=permuted)["holds"])
    # Negative control: a framework fed other bytes (its device buffer read back to another digest).
    entry = jax_record["precisions"]["fp32"]["models"]["small_cnn"]
    other = {
        **jax_record,
        "precisions": {"fp32": {"settings": {}, "models": {"small_cnn": {**entry, "input_sha256": "0" * 64}}}},
    }
    row = _compare(measured, jax_record=other)
    assert not bool(row["same_inputs"]) and not bool(row["holds"])


def test_logits_that_do_not_depend_on_the_image_cannot_pass(measured):
    """What MobileNetV3-Small's and EfficientNet-B0's uncalibrated study weights gave: the same logits for every image.
    Both frameworks agree exactly, and the control still does not hold: a twin that ignored its input would pass."""
    blind = np.repeat(measured["torch"][1][KEY][:1], 8, axis=0)
    row = _compare(measured, jax_logits={KEY: blind}, torch_logits={KEY: blind})
    assert row["relative_error"] == 0.0 and row["input_dependence"] == 0.0
    assert not bool(row["can_fail"]) and not bool(row["holds"])


def test_the_float32_bound_follows_pytorchs_own_rounding(measured):
    """With PyTorch's float64 logits beside its float32 ones, the float32 bound is at least REFERENCE_FACTOR times
    PyTorch's own error against them, so a model whose weights amplify rounding is judged against that rounding; beyond
    it the control still fails, and without the float64 logits the bound is the fixed one."""
    (torch_record, torch_logits), (jax_record, _) = measured["torch"], measured["jax"]
    theirs = torch_logits[KEY]
    scale = float(np.abs(theirs.astype(np.float64)).max())
    one = np.zeros(theirs.shape)
    one[1, 2] = 1.0  # a single logit moved, so the largest difference is exactly the offset
    truth = theirs.astype(np.float64) + 5e-5 * scale * one  # PyTorch's float32 logits 5e-5 of their scale off
    with_truth = {KEY: theirs, KEY64: truth}

    def row(offset, torch_arrays=with_truth):
        ours = {KEY: (theirs.astype(np.float64) + offset * scale * one).astype(np.float32)}
        return study_parity.compare({"torch": torch_record, "jax": jax_record}, {"torch": torch_arrays, "jax": ours})

    within = row(1.2e-4).iloc[0]
    assert within["reference_error"] == pytest.approx(5e-5, rel=1e-3)
    assert within["tolerance"] == pytest.approx(study_parity.REFERENCE_FACTOR * 5e-5, rel=1e-3)
    assert bool(within["holds"]) and bool(within["can_fail"]), within.to_dict()
    # negative controls: beyond three times PyTorch's own error, and the same offset without the float64 logits
    assert not bool(row(2e-4).iloc[0]["holds"])
    fixed = row(1.2e-4, torch_arrays={KEY: theirs}).iloc[0]
    assert not bool(fixed["holds"]) and fixed["tolerance"] == study_parity.TOLERANCE
    assert np.isnan(fixed["reference_error"])
    # PyTorch's own rounding below the fixed bound's third leaves the fixed bound
    assert row(0.0, torch_arrays={KEY: theirs, KEY64: theirs.astype(np.float64)}).iloc[0]["tolerance"] == (
        study_parity.TOLERANCE
    )


def test_the_float64_reference_is_pytorchs_model_in_float64(tmp_path, measured):
    """PyTorch's float64 logits of the study's weights on the images every framework's logits are of: its float32
    logits within float32 rounding of them (and not equal), a model it cannot load left out."""
    root, _, _ = prepare_tiny_study(tmp_path)
    reference = study_parity.reference_float64(
        ["small_cnn", "resnet50"],
        [root / "weights.npz"] * 2,  # small_cnn's weights do not load into ResNet-50
        root / "data",
        images=8,
        num_classes=4,
        image_size=16,
        threads=1,
    )
    assert set(reference) == {KEY64} and reference[KEY64].dtype == np.float64
    theirs = measured["torch"][1][KEY].astype(np.float64)
    error = float(np.abs(theirs - reference[KEY64]).max() / np.abs(theirs).max())
    assert 0 < error < 1e-5, error


def test_tolerance_follows_the_arithmetic_that_ran():
    tf32 = {"dtype": "float32", "tf32_scope": "matmuls and convolutions"}
    assert study_parity.arithmetic({"dtype": "float32", "tf32_scope": "none"}, {}) == "fp32"
    assert study_parity.arithmetic(tf32, {"dtype": "float32", "tf32_scope": "none"}) == "tf32"
    assert study_parity.arithmetic({"dtype": "bfloat16"}, tf32) == "bf16"
    assert study_parity.TOLERANCES["tf32"] > study_parity.TOLERANCES["fp32"]


def test_every_timed_precision_is_measured(tmp_path):
    record, logits = _logits(tmp_path, "torch", precisions=("fp32", "bf16"))
    assert set(record["precisions"]) == {"fp32", "bf16"}
    assert record["precisions"]["bf16"]["settings"]["dtype"].endswith("bfloat16")
    assert not np.array_equal(logits[KEY], logits[study_parity.logits_key("small_cnn", "bf16")])
    table = study_parity.compare({"torch": record, "jax": record}, {"torch": logits, "jax": logits})
    assert list(table["precision"]) == ["fp32", "bf16"] and list(table["arithmetic"]) == ["fp32", "bf16"]
    assert list(table["tolerance"]) == [study_parity.TOLERANCES["fp32"], study_parity.TOLERANCES["bf16"]]


def test_a_model_that_cannot_run_is_missing_with_its_error(tmp_path):
    record, logits = _logits(tmp_path, "torch", models=("small_cnn", "resnet50"))  # small_cnn weights for resnet50
    assert KEY in logits and study_parity.logits_key("resnet50", "fp32") not in logits
    assert record["precisions"]["fp32"]["models"]["resnet50"]["missing"]
    other = {**record, "framework": "jax"}
    table = study_parity.compare({"torch": record, "jax": other}, {"torch": logits, "jax": logits})
    broken = table[table["model"] == "resnet50"].iloc[0]
    assert not bool(broken["holds"]) and np.isnan(broken["relative_error"]) and broken["missing"].startswith("jax")


def test_a_record_from_before_precisions_reads_as_fp32(measured):
    """An archive's parity files from before parity ran per precision (one fp32 record, logits under the model)."""
    (torch_record, torch_logits), (jax_record, jax_logits) = measured["torch"], measured["jax"]

    def old(record):
        part = record["precisions"]["fp32"]
        models = {
            m: {k: v for k, v in e.items() if k not in ("settings", "input_sha256")} for m, e in part["models"].items()
        }
        return {k: v for k, v in record.items() if k != "precisions"} | {"settings": part["settings"], "models": models}

    table = study_parity.compare(
        {"torch": old(torch_record), "jax": old(jax_record)},
        {"torch": {"small_cnn": torch_logits[KEY]}, "jax": {"small_cnn": jax_logits[KEY]}},
    )
    assert table.iloc[0]["precision"] == "fp32" and bool(table.iloc[0]["holds"])


@READS_TINY_GROUP
def test_parity_from_the_timed_cells_agrees_and_a_cell_without_logits_is_missing(tiny_group):
    """The frameworks' logits taken from their inference cells (the first call of each timed program,
    fwbench.scenarios.logits): the same check, from the programs that were timed, with no job of its own; a model
    whose cell failed or kept no logits is missing with the reason, never compared. The cells are the session's tiny
    group (tests/conftest.py: tiny_group): PyTorch and JAX at batch sizes 1 and 2, in two launches."""
    from fwbench.scenarios import logits as kept

    cells, results = tiny_group["cells"], tiny_group["results"]
    assert [(c.framework, c.batch_size) for c in cells] == [("torch", 1), ("torch", 2), ("jax", 1), ("jax", 2)]
    assert all(r["status"] == "ok" for r in results), [r["reason"] for r in results]
    records = {f: study_parity.framework_logits_from_cells(f, results, image_size=16) for f in ("torch", "jax")}
    torch_record, torch_arrays = records["torch"]
    entry = torch_record["precisions"]["fp32"]["models"]["small_cnn"]
    assert torch_record["images"] == 2 and entry["cell"] == "torch/eager bs2", "the largest batch size measured"
    assert torch_arrays[KEY].shape == (2, 4)
    row = study_parity.compare({f: r for f, (r, _) in records.items()}, {f: a for f, (_, a) in records.items()}).iloc[0]
    assert bool(row["holds"]) and bool(row["same_inputs"]) and bool(row["same_weights"]), row.to_dict()
    assert row["relative_error"] < 1e-4 and bool(row["can_fail"])
    # the rows a cell keeps are exactly its first call's: packed and unpacked without loss
    rows = kept.unpack(results[1]["metrics"]["parity_logits"])
    assert np.array_equal(rows, torch_arrays[KEY])
    # negative controls: a JAX cell that failed, and one measured before cells kept their logits
    failed = [
        dict(r, status="failed", reason="trial 1 of 1: crashed") if r["cell"]["framework"] == "jax" else r
        for r in results
    ]
    record, arrays = study_parity.framework_logits_from_cells("jax", failed, image_size=16)
    assert KEY not in arrays and "crashed" in record["precisions"]["fp32"]["models"]["small_cnn"]["missing"]
    old = [dict(r, metrics={k: v for k, v in r["metrics"].items() if k != "parity_logits"}) for r in results]
    record, arrays = study_parity.framework_logits_from_cells("jax", old, image_size=16)
    assert "kept no logits" in record["precisions"]["fp32"]["models"]["small_cnn"]["missing"]
    row = study_parity.compare({"torch": torch_record, "jax": record}, {"torch": torch_arrays, "jax": arrays}).iloc[0]
    assert not bool(row["holds"]) and "jax: no measured cell" in row["missing"]
