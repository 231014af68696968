from __future__ import annotations

import re

import pytest

from fwbench.study.config import validate_config
from fwbench.study.grid import WILDCARD_PATTERNS, Cell, cell_paths, cells, parse_cell_path


def test_cells_are_the_product_of_the_axes(tiny_config):
    config = validate_config(tiny_config)
    grid = cells(config)
    assert len(grid) == 2 * 1 * 1 * 2
    assert {(c.framework, c.batch_size) for c in grid} == {("torch", 1), ("torch", 2), ("jax", 1), ("jax", 2)}
    assert all(c.image_size == 16 and c.suite == "inference" for c in grid)


def test_paths_follow_the_layout_and_parse_back(tiny_config):
    config = validate_config(tiny_config)
    paths = cell_paths(config, "results")
    assert "results/cells/inference/jax/jit/small_cnn/fp32/bs2.json" in paths
    assert len(set(paths)) == len(paths)
    for cell, path in zip(cells(config), paths, strict=True):
        assert parse_cell_path(path, image_size=16) == cell


@pytest.mark.parametrize(
    "bad",
    [
        "results/cells/inference/jax/jit/small_cnn/fp32/bs0.json",
        "results/cells/inference/jax/jit/small_cnn/fp32.json",
        "results/cells/training2/jax/small_cnn/fp32/bs1.json",
        "results/tables/inference.csv",
    ],
)
def test_non_cell_paths_are_rejected(bad):
    with pytest.raises(ValueError, match="not a cell result path"):
        parse_cell_path(bad, image_size=16)


def test_wildcard_patterns_reject_path_separators_and_leading_zero():
    assert not re.fullmatch(WILDCARD_PATTERNS["model"], "small_cnn/fp32")
    assert not re.fullmatch(WILDCARD_PATTERNS["batch"], "08")
    assert re.fullmatch(WILDCARD_PATTERNS["batch"], "128")


def test_cell_label():
    assert Cell("inference", "torch", "small_cnn", "fp32", 8, 32).label() == "inference/torch/eager/small_cnn/fp32/bs8"
