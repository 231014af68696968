"""A study's time estimated before it runs (fwbench.study.estimate): each part from the cost table, and a table whose
every value says where it comes from."""

from __future__ import annotations

import pytest
import yaml

from fwbench.study.config import validate_config
from fwbench.study.estimate import CostError, estimate, read_costs
from tests.conftest import REPO

COSTS = {
    "host_cores": {"value": 16},
    "process_start_s": {"torch/compile": 5.0, "default": 2.0},
    "process_rest_s": {"value": 0.5},
    "load_s": {"default": 1.0},
    "compile_cold_s": {"torch/compile": 10.0, "default": 4.0},
    "compile_warm_s": {"default": 1.0},
    "throughput_img_s": {"default": 100.0},
    "profiler_s": {"jax": 3.0, "default": 2.0},
    "job_s": {
        "device_check": 1.0,
        "device_peak": 2.0,
        "prepare_dataset": 3.0,
        "loader_throughput": 4.0,
        "init_weights": 5.0,
        "model_facts": 6.0,
        "parity_logits": 7.0,
        "parity_logits/jax": 9.0,
        "parity_logits/cells": 0.5,
        "report": 8.0,
    },
}


def test_each_part_is_priced_from_the_table(tmp_path):
    path = tmp_path / "costs.yaml"
    path.write_text(yaml.safe_dump(COSTS))
    config = validate_config(
        {
            "frameworks": ["torch", "jax"],
            "models": ["resnet50"],
            "suites": ["inference"],
            "modes": {"torch": ["eager", "compile"], "jax": ["jit"]},
            "mode_scope": {"models": ["resnet50"]},
            "inference": {"batch_sizes": [10], "trials": 2, "blocks": 6, "burst_s": 0.5, "burst_discard": 2},
        }
    )
    result = estimate(config, read_costs(path))
    warmup = config["inference"]["warmup_iters"] * 10 / 100.0  # iterations x step time at batch 10
    # three workers in two measured launches, and the two that keep compiled programs (not eager PyTorch) in the
    # compile launch
    assert result.processes == 8 and result.compile_launches == 2
    # the compile launch, priced apart: each worker's start-up (torch.compile's workers import Dynamo and Inductor too:
    # 5 s, JAX's the default 2 s) and loading, JAX's cold compile (4 s) and torch.compile's (10 s), the warm-up, the
    # rest of the process, and no bursts
    assert result.parts["compile launches (start-up, loading, cold compiles, first calls)"] == pytest.approx(
        (5 + 2) + 2 * 1.0 + (10 + 4) + 2 * warmup + 2 * 0.5
    )
    assert result.parts["start-up, imports and loading"] == pytest.approx(4 * 3.0 + 2 * 6.0)
    assert result.parts["rest of the measuring processes and the runner"] == pytest.approx(6 * 0.5)
    # both measured launches load the cells' caches: three warm compiles (1 s) each
    assert result.parts["compiles and warm-up"] == pytest.approx(6 + 6 * warmup)
    assert result.parts["timed bursts (and discarded ones)"] == pytest.approx(2 * (6 + 2) * 3 * 0.5)
    assert result.parts["jobs side by side: device_check, init_weights, model_facts"] == 6.0
    # each framework's parity logits, read from its inference cells (no job compiles every model again)
    assert result.parts["job: parity_logits"] == 2 * 0.5 and "profiling passes" not in result.parts


def test_without_the_launch_cache_or_with_one_launch_every_launch_compiles_cold_and_none_is_extra(tmp_path):
    path = tmp_path / "costs.yaml"
    path.write_text(yaml.safe_dump(COSTS))
    study = {
        "frameworks": ["torch", "jax"],
        "models": ["resnet50"],
        "suites": ["inference"],
        "inference": {"batch_sizes": [10], "trials": 3, "warmup_iters": 1},
        "compile": {"launch_cache": False},
    }
    off = estimate(validate_config(study), read_costs(path))
    assert off.processes == 6 and off.compile_launches == 0 and not [p for p in off.parts if "compile launch" in p]
    assert off.parts["compiles and warm-up"] == pytest.approx(3 * (4.0 + 4.0) + 6 * 0.1)
    study["compile"]["launch_cache"] = True
    on = estimate(validate_config(study), read_costs(path))
    assert on.processes == 7 and on.compile_launches == 1, "eager PyTorch has nothing to compile ahead"
    study["inference"]["trials"] = 1
    single = estimate(validate_config(study), read_costs(path))
    assert single.processes == 2 and single.parts["compiles and warm-up"] == pytest.approx(8.0 + 2 * 0.1)


def test_a_profiled_cell_costs_its_steps_and_the_profiler_in_its_worker(tmp_path):
    """The pass runs in the cell's warm worker after the last launch's blocks: no process of its own, so it costs
    its warm-up and profiled steps and the profiler's own start and reduction (per framework), nothing else."""
    path = tmp_path / "costs.yaml"
    path.write_text(yaml.safe_dump(COSTS))
    study = {
        "frameworks": ["torch", "jax"],
        "models": ["resnet50"],
        "suites": ["inference"],
        "inference": {"batch_sizes": [10, 20], "trials": 2, "profile": {"batch_sizes": [20], "steps": 5}},
    }
    profiled = estimate(validate_config(study), read_costs(path))
    study["inference"]["profile"]["batch_sizes"] = []
    plain = estimate(validate_config(study), read_costs(path))
    warmup = validate_config(study)["inference"]["warmup_iters"]
    assert profiled.profiled_in_workers == 2 and profiled.processes == plain.processes == 5
    steps = (5 + warmup) * 20 / 100.0
    assert profiled.parts["profiling passes"] == pytest.approx(2 * steps + 2.0 + 3.0)
    assert profiled.total_s - plain.total_s == pytest.approx(profiled.parts["profiling passes"])


def test_the_shipped_cost_table_says_where_every_value_comes_from():
    table = yaml.safe_load((REPO / "benchmarks" / "costs" / "hopper.yaml").read_text())
    for key, entry in table.items():
        assert "basis" in entry and ("source" in entry or key == "host_cores"), key
        assert entry["basis"].startswith(("measured", "assumed", "the lent machines")), key


def test_a_missing_cost_is_named(tmp_path):
    path = tmp_path / "costs.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in COSTS.items() if k != "load_s"}))
    config = validate_config({"models": ["small_cnn"], "suites": ["inference"], "frameworks": ["torch"]})
    with pytest.raises(CostError, match=r"costs.yaml: no cost 'load_s'"):
        estimate(config, read_costs(path))
