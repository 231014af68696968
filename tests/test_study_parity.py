"""The study's own weights-identical measurement: each framework's logits on the study's weights, compared with
PyTorch's; a model a framework cannot run is recorded as missing, never as zero error."""

from __future__ import annotations

import numpy as np

from fwbench.scenarios import parity as study_parity
from tests.conftest import prepare_tiny_study


def _logits(tmp_path, framework, models=("small_cnn",)):
    root, config, _ = prepare_tiny_study(tmp_path)
    weights = [root / "weights.npz"] * len(models)
    return study_parity.framework_logits(
        framework, list(models), weights, root / "data", num_classes=4, image_size=16, threads=1
    )


def test_the_frameworks_agree_on_the_study_weights(tmp_path):
    torch_record, torch_logits = _logits(tmp_path / "t", "torch")
    jax_record, jax_logits = _logits(tmp_path / "j", "jax")
    assert torch_logits["small_cnn"].shape == (8, 4)
    assert torch_record["input_sha256"] == jax_record["input_sha256"]
    table = study_parity.compare({"torch": torch_record, "jax": jax_record}, {"torch": torch_logits, "jax": jax_logits})
    row = table.iloc[0]
    assert row["framework"] == "jax" and bool(row["holds"]) and row["relative_error"] < 1e-5
    assert row["top1_agreement"] == 1.0

    # The statistic is the parity tests' one: a perturbation beyond the bound makes the control fail.
    shifted = {"small_cnn": jax_logits["small_cnn"] + 1e-2 * np.abs(torch_logits["small_cnn"]).max()}
    table = study_parity.compare({"torch": torch_record, "jax": jax_record}, {"torch": torch_logits, "jax": shifted})
    assert not bool(table.iloc[0]["holds"]) and table.iloc[0]["relative_error"] > study_parity.TOLERANCE


def test_a_model_that_cannot_run_is_missing_with_its_error(tmp_path):
    record, logits = _logits(tmp_path, "torch", models=("small_cnn", "resnet50"))  # small_cnn weights for resnet50
    assert "small_cnn" in logits and "resnet50" not in logits
    assert record["models"]["resnet50"]["missing"]
    other = {**record, "framework": "jax"}
    table = study_parity.compare({"torch": record, "jax": other}, {"torch": logits, "jax": logits})
    broken = table[table["model"] == "resnet50"].iloc[0]
    assert not bool(broken["holds"]) and np.isnan(broken["relative_error"]) and broken["missing"].startswith("jax")
