"""The micro suite's measuring side: operations defined once and agreeing across frameworks, the agreement check
failing a wrong computation, NumPy's pinned BLAS pool, the grid and config of the suite, and real cells through the
runner."""

from __future__ import annotations

import jsonschema
import numpy as np
import pytest

from fwbench.results import validate_result
from fwbench.running.faults import INJECT_FAULT_ENV
from fwbench.scenarios.operations import (
    AGREEMENT_BOUNDS,
    OPERATIONS,
    OutputMismatch,
    check_agreement,
    input_rows,
    load_operands,
    make_operands,
    reference,
    relative_error,
    write_operands,
)
from fwbench.study.config import ConfigError, validate_config
from fwbench.study.grid import Cell, cells, parse_cell_path
from tests.conftest import TINY_CONFIG

SIZES = {"dim": 16, "hidden": 64, "classes": 5}


def _outputs(framework: str, precision: str, batch: int = 8) -> dict[str, np.ndarray]:
    from fwbench.backends import get_backend

    backend = get_backend(framework, threads=1, precision=precision)
    arrays = backend.arrays()
    operands = make_operands(3, **SIZES)
    x = input_rows(3, batch, SIZES["dim"])
    out = {}
    for name, op in OPERATIONS.items():
        params = {key: arrays.put(operands[key]) for key in op.params}
        call, _ = arrays.compile(op.function, arrays.put(x), params)
        result = call(arrays.put(x), params)
        arrays.synchronize(result)
        out[name] = arrays.to_numpy(result)
    return out


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_operations_agree_across_frameworks(precision):
    operands, x = make_operands(3, **SIZES), input_rows(3, 8, SIZES["dim"])
    expected = {name: reference(op, x, operands) for name, op in OPERATIONS.items()}
    assert expected["matmul"].shape == (8, 16) and expected["mlp"].shape == (8, 5)
    outputs = {framework: _outputs(framework, precision) for framework in ("numpy", "torch", "jax")}
    bound = AGREEMENT_BOUNDS["float32" if precision == "fp32" else "bfloat16"]
    for name in OPERATIONS:
        # NumPy has no bf16: it computes in float32 at every precision label, so it meets the float32 bound.
        assert relative_error(outputs["numpy"][name], expected[name]) <= AGREEMENT_BOUNDS["float32"]
        for framework in ("torch", "jax"):
            error = relative_error(outputs[framework][name], expected[name])
            assert error <= bound, (framework, name, error)
            if precision == "bf16":  # really computed in bfloat16, not silently in float32
                assert error > AGREEMENT_BOUNDS["float32"] / 10, (framework, name, error)
        assert relative_error(outputs["torch"][name], outputs["jax"][name]) <= 2 * bound


def test_the_agreement_check_names_the_cell_the_error_and_the_bound():
    expected = np.array([[1.0, -2.0], [0.5, 4.0]])
    record = check_agreement("micro/torch/mlp/fp32/bs2", expected * (1 + 1e-6), expected, "float32", tf32=False)
    assert record["max_rel_error"] < 1e-5 and record["bound"] == 1e-4
    with pytest.raises(OutputMismatch, match=r"micro/torch/mlp/fp32/bs2: .* max relative error 0\.01 > bound 0\.0001"):
        check_agreement("micro/torch/mlp/fp32/bs2", expected * 1.01, expected, "float32", tf32=False)
    # TF32 and bfloat16 have wider bounds; a wrong shape or a NaN never agrees.
    assert check_agreement("c", expected * 1.005, expected, "float32", tf32=True)["bound"] == 1e-2
    with pytest.raises(OutputMismatch, match=r"output shape \(2, 1\), expected \(2, 2\)"):
        check_agreement("c", expected[:, :1], expected, "bfloat16", tf32=False)
    with pytest.raises(OutputMismatch, match="inf"):
        check_agreement("c", expected * np.nan, expected, "bfloat16", tf32=False)


def test_numpy_blas_threads_are_pinned_and_recorded():
    from threadpoolctl import threadpool_info

    from fwbench.backends.numpy import NumpyBackend

    backend = NumpyBackend(threads=1, precision="bf16")
    try:
        settings = backend.effective_settings
        assert settings["blas"], "threadpoolctl found no BLAS pool to pin"
        assert all(pool["num_threads"] == 1 for pool in settings["blas"])
        assert all(pool["num_threads"] == 1 for pool in threadpool_info() if pool["user_api"] == "blas")
        assert settings["intra_op_threads"] == 1 and settings["threadpoolctl"]
        assert settings["dtype"] == "float32" and "bf16" in settings["precision_note"]
        assert backend.arrays().dtype == "float32" and backend.host_only
    finally:
        backend._limits.restore_original_limits()


def test_input_rows_of_a_smaller_batch_are_a_prefix_and_operands_are_checked(tmp_path):
    assert np.array_equal(input_rows(0, 4, 8), input_rows(0, 4096, 8)[:4])
    assert not np.array_equal(input_rows(0, 4, 8), input_rows(1, 4, 8))
    first, again = make_operands(0, 8, 32, 3), make_operands(0, 8, 32, 3)
    assert all(np.array_equal(first[k], again[k]) and first[k].dtype == np.float32 for k in first)
    record = write_operands(tmp_path / "ops.npz", seed=0, dim=8, hidden=32, classes=3)
    assert (tmp_path / "ops.json").exists() and record["shapes"]["w1"] == [8, 32]
    assert load_operands(tmp_path / "ops.npz", {"dim": 8, "hidden": 32, "classes": 3})["w3"].shape == (8, 3)
    with pytest.raises(ValueError, match=r"ops\.npz: operands of shapes .* do not match micro\.dim=16"):
        load_operands(tmp_path / "ops.npz", {"dim": 16, "hidden": 32, "classes": 3})


def test_micro_grid_puts_numpy_first_and_has_no_image_size():
    config = validate_config({**TINY_CONFIG, "suites": ["micro"], "micro": {"batch_sizes": [1, 64]}})
    grid = cells(config)
    assert len(grid) == 3 * 2 * 1 * 2  # (numpy, torch, jax) x operations x precisions x batch sizes
    assert [c.framework for c in grid[:4]] == ["numpy"] * 4 and {c.image_size for c in grid} == {None}
    cell = Cell("micro", "jax", "mlp", "fp32", 64, None)
    assert cell.relpath() == "cells/micro/jax/jit/mlp/fp32/bs64.json"
    assert parse_cell_path(f"results/{cell.relpath()}", image_size=16) == cell
    assert config["micro"]["hidden"] == 4 * config["micro"]["dim"]


@pytest.mark.parametrize(
    ("micro", "message"),
    [
        ({"operations": ["conv"]}, r"micro\.operations\[0\] = 'conv': unknown value"),
        ({"min_seconds": 0.5}, r"unknown key 'micro\.min_seconds'"),
        ({"sample_ms": 0}, r"micro\.sample_ms = 0: must be > 0"),
        ({"batch_sizes": [0]}, r"micro\.batch_sizes\[0\] = 0: must be > 0"),
        ({"width": 3}, r"unknown key 'micro\.width'"),
    ],
)
def test_micro_config_errors_name_the_key(micro, message):
    with pytest.raises(ConfigError, match=message):
        validate_config({**TINY_CONFIG, "suites": ["micro"], "micro": micro})


def test_result_schema_allows_no_image_size_only_in_the_micro_suite():
    from tests.test_analysis import BASE

    failure = {"kind": "exception", "reason": "x", "exit_code": 1, "signal": None, "trial": 1, "workarounds_tried": []}
    result = {**BASE, "status": "failed", "reason": "x", "failure": failure, "metrics": None, "samples_ms": []}
    result["cell"] = {"suite": "micro", "framework": "numpy", "model": "mlp", "precision": "fp32"}
    validate_result({**result, "cell": {**result["cell"], "batch_size": 1, "image_size": None}})
    inference = {**result["cell"], "suite": "inference", "batch_size": 1, "image_size": None}
    with pytest.raises(jsonschema.ValidationError, match="cell/image_size: None is not of type 'integer'"):
        validate_result({**result, "cell": inference})


@pytest.fixture(scope="module")
def micro_group(tmp_path_factory):
    """One real comparison group through the runner: NumPy, PyTorch and JAX at mlp/fp32/bs4, PyTorch's operation made
    wrong by fault injection (its cell must fail before timing, the others measure)."""
    from fwbench.running.runner import run_group

    root = tmp_path_factory.mktemp("micro")
    write_operands(root / "operands.npz", seed=0, **SIZES)
    config = validate_config({**TINY_CONFIG, "suites": ["micro"], "micro": SIZES})
    settings = {k: v for k, v in config["micro"].items() if k != "batch_sizes"}
    settings.update(seed=0, warmup_iters=2, trials=2, blocks=2, burst_s=0.01, burst_discard=1, timeout_s=120)
    settings.update(repeat_disturbed=0)  # the other test worker is load here (conftest.TINY_CONFIG)
    group = [Cell("micro", framework, "mlp", "fp32", 4, None) for framework in ("numpy", "torch", "jax")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(INJECT_FAULT_ENV, "wrong_operation@micro/torch/*")
        results = run_group(
            group,
            settings,
            data_dir=None,
            weights_path=root / "operands.npz",
            num_classes=SIZES["classes"],
            threads=1,
            out_paths=[root / f"{cell.framework}.json" for cell in group],
            log_path=root / "group.log",
        )
    return dict(zip(("numpy", "torch", "jax"), results, strict=True))


# the tests that read `micro_group`: one worker runs them all, and the group once (tests/background.py: group_by_mark)
MICRO_GROUP = pytest.mark.xdist_group("test_micro.micro_group")


@MICRO_GROUP
def test_a_wrong_operation_fails_its_cell_with_a_clear_reason(micro_group):
    torch_cell = micro_group["torch"]
    assert torch_cell["status"] == "failed" and torch_cell["failure"]["kind"] == "exception"
    assert "trial 1 of 2" in torch_cell["reason"] and "OutputMismatch" in torch_cell["reason"]
    assert "micro/torch/eager/mlp/fp32/bs4: output disagrees with the NumPy float64 reference" in torch_cell["reason"]
    assert "bound 0.0001 for float32" in torch_cell["reason"]


@MICRO_GROUP
def test_micro_cells_record_both_variants_their_inputs_and_agreement(micro_group):
    numpy_cell, jax_cell = micro_group["numpy"], micro_group["jax"]
    for result in (numpy_cell, jax_cell):
        validate_result(result)
        metrics = result["metrics"]
        assert result["status"] == "ok" and result["cell"]["image_size"] is None
        assert [len(trial) >= 5 for trial in metrics["variants"]["resident"]["trial_samples_ms"]] == [True, True]
        assert metrics["agreement"]["max_rel_error"] <= 1e-4 and metrics["operation"]["flops_per_row"] > 0
        assert result["inputs"]["dataset_manifest_sha256"] is None and result["inputs"]["weights_sha256"]
        assert metrics["phases_s"]["timed_s"] > 0 and len(metrics["trials"]) == 2
    # Byte-identical inputs in both processes; the transfer variant only where there is a device to copy to.
    assert numpy_cell["metrics"]["operation"]["input_sha256"] == jax_cell["metrics"]["operation"]["input_sha256"]
    assert (
        "transfer" not in numpy_cell["metrics"]["variants"] and "host" in numpy_cell["metrics"]["missing"]["transfer"]
    )
    assert len(jax_cell["metrics"]["variants"]["transfer"]["trial_samples_ms"]) == 2
    assert jax_cell["metrics"]["compile_s"] > 0 and numpy_cell["metrics"]["compile_s"] is None
    blas = numpy_cell["provenance"]["framework"]["settings"]["blas"]
    assert blas and all(pool["num_threads"] == 1 for pool in blas)


def test_micro_trials_default_to_three_processes_per_cell():
    config = validate_config({**TINY_CONFIG, "suites": ["micro"]})
    assert config["micro"]["trials"] == 3, "intervals over processes by default (issue 32)"


@MICRO_GROUP
def test_the_analysis_pairs_real_cells_by_the_round_each_trial_ran_in(micro_group, tmp_path):
    """NumPy's and JAX's trials of the runner's group, paired round by round: a t interval over 2 rounds (1 df)."""
    import json

    from fwbench.analysis.micro.cells import load_micro_cells
    from fwbench.analysis.micro.speedups import micro_speedups
    from fwbench.analysis.micro.vocabulary import PAIRED

    paths = []
    for name in ("numpy", "jax"):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(micro_group[name]))
    cells = load_micro_cells(paths)
    assert [sorted(cell.rounds("resident")) for cell in cells] == [[1, 2], [1, 2]]
    speedups = micro_speedups(cells, resamples=50)
    assert set(speedups["ci_scope"]) == {PAIRED} and (speedups["pairs"] == 2).all() and (speedups["df"] == 1).all()
    assert speedups["se_log"].notna().all() and speedups["p_value"].between(0, 1).all()
