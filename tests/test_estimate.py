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
    assert result.processes == 6  # three workers, two launches
    # torch.compile's workers import Dynamo and Inductor too: its start-up is its own (5 s), the others' the default
    assert result.parts["start-up, imports and loading"] == pytest.approx(4 * 3.0 + 2 * 6.0)
    assert result.parts["rest of the measuring processes and the runner"] == pytest.approx(6 * 0.5)
    # launch 1: two cold compiles (4 s) and torch.compile's (10 s); launch 2: three warm ones (1 s)
    assert result.parts["compiles and warm-up"] == pytest.approx(18 + 3 + 6 * warmup)
    assert result.parts["timed bursts (and discarded ones)"] == pytest.approx(2 * (6 + 2) * 3 * 0.5)
    assert result.parts["jobs side by side: device_check, init_weights, model_facts"] == 6.0
    # each framework's parity logits at its own price where the table has one (JAX's compiles every model)
    assert result.parts["job: parity_logits"] == 7.0 + 9.0 and "profiling passes" not in result.parts


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
    assert profiled.profiled_in_workers == 2 and profiled.processes == plain.processes == 4
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
