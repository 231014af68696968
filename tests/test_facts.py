from __future__ import annotations

from fwbench.analysis.setup.tables import models_table
from fwbench.io import read_json
from fwbench.models.facts import compare, write_facts


def test_both_counters_count_the_small_cnn(tmp_path):
    rows = write_facts("small_cnn", num_classes=10, image_size=32, out=tmp_path / "facts.json")
    assert read_json(tmp_path / "facts.json") == rows
    study, reference = rows
    assert study["configuration"] == "study" and reference["configuration"] == "reference"
    assert reference["image_size"] == 224 and reference["num_classes"] == 1000
    assert study["params_torch"] == study["params_flax"] == 94_762
    # conv MACs: 3*32*9*32*32 + 32*64*9*16*16 + 64*128*9*8*8 plus the linear layer, times 2
    expected = 2 * (3 * 32 * 9 * 32 * 32 + 32 * 64 * 9 * 16 * 16 + 64 * 128 * 9 * 8 * 8 + 128 * 10)
    assert study["flops_torch"] == expected
    assert abs(study["flops_difference"]) <= 0.10 and study["note"] == "counters agree within 10%"


def test_vit_attention_is_counted_by_torch(tmp_path):
    """With gradients off, torch's fused attention path is invisible to FlopCounterMode; the count must include it."""
    row = compare("vit_b_16", num_classes=10, image_size=32)
    assert abs(row["flops_difference"]) <= 0.10, row


def test_models_table_explains_disagreements():
    rows = [
        {
            "model": "a",
            "configuration": "study",
            "image_size": 32,
            "num_classes": 10,
            "params_torch": 5,
            "params_flax": 5,
            "flops_torch": 1e9,
            "flops_xla": 1.02e9,
            "flops_difference": 0.02,
            "note": "counters agree within 10%",
        },
        {
            "model": "b",
            "configuration": "study",
            "image_size": 32,
            "num_classes": 10,
            "params_torch": 5,
            "params_flax": 6,
            "flops_torch": 1e9,
            "flops_xla": 0.5e9,
            "flops_difference": -0.5,
            "note": "XLA counts only",
        },
    ]
    table = models_table(rows, {"a": "seeded", "b": "seeded"})
    assert "(a) counters agree within 10\\%" in table and "(b) XLA counts only" in table
    assert "5 vs 6" in table and "all models: seeded" in table
