"""Execution modes as a cell axis: the grid and paths, the config's errors, torch.compile measured honestly (compile
time apart, outputs equal to eager, recompilations and graph breaks in the timed loop flagged), and autotuning
decided alike for every framework (fakes stand in for the GPU switches)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from fwbench.study import autotune, grid
from fwbench.study.config import ConfigError, validate_config
from fwbench.study.grid import Cell, comparison_rules, parse_cell_path
from tests.conftest import TINY_CONFIG


def _config(**overrides):
    config = copy.deepcopy(TINY_CONFIG)
    config.update(overrides)
    return validate_config(config)


def test_modes_are_a_grid_axis_in_every_cell_path():
    config = _config(
        frameworks=["torch", "jax"],
        models=["small_cnn", "mobilenet_v3_small"],
        suites=["inference", "training"],
        modes={"torch": ["eager", "compile"]},
        mode_scope={"suites": ["inference", "training"], "models": ["small_cnn"]},
    )
    inference = [c for c in grid.cells(config) if c.suite == "inference"]
    variants = {(c.framework, c.mode, c.model) for c in inference}
    assert ("torch", "compile", "small_cnn") in variants and ("jax", "jit", "small_cnn") in variants
    # out of mode_scope.models: each framework's first mode only
    assert ("torch", "compile", "mobilenet_v3_small") not in variants
    assert ("torch", "eager", "mobilenet_v3_small") in variants
    compiled = Cell("inference", "torch", "small_cnn", "fp32", 2, 16, "compile")
    assert compiled.relpath() == "cells/inference/torch/compile/small_cnn/fp32/bs2.json"
    assert compiled.label() == "inference/torch/compile/small_cnn/fp32/bs2"
    assert parse_cell_path("results/" + compiled.relpath(), 16) == compiled
    for cell in grid.cells(config):
        assert parse_cell_path(cell.path(), cell.image_size) == cell
    # a cell without a mode is its framework's primary one
    assert Cell("inference", "jax", "small_cnn", "fp32", 2, 16).mode == "jit"
    # models whose comparisons hold different modes are measured by rules of their own (Snakemake outputs are
    # fixed per rule): every configured mode for the models in scope, the first modes for the others
    assert comparison_rules(config, "inference", "inference_group") == {
        "inference_group": ["small_cnn"],
        "inference_group_primary": ["mobilenet_v3_small"],
    }
    assert grid.group_variants(config, "inference", "small_cnn") == [
        ("torch", "eager"),
        ("torch", "compile"),
        ("jax", "jit"),
    ]


def test_one_rule_when_every_comparison_has_the_same_modes():
    config = _config(modes={"torch": ["eager", "compile"]})
    assert list(comparison_rules(config, "inference", "inference_group")) == ["inference_group"]
    # the micro suite follows mode_scope.suites alone
    micro = _config(suites=["micro"], modes={"torch": ["compile"]}, mode_scope={"suites": ["inference"]})
    assert {c.mode for c in grid.cells(micro) if c.framework == "torch"} == {"compile"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"modes": {"torch": ["eager", "compiled"]}}, "config error: modes.torch[1] = 'compiled': unknown value"),
        ({"modes": {"jax": ["eager"]}}, "config error: modes.jax[0] = 'eager': unknown value, expected one of"),
        ({"modes": {"mxnet": ["eager"]}}, "config error: unknown key 'modes.mxnet'"),
        ({"ratio_modes": {"torch": "graph"}}, "config error: ratio_modes.torch = 'graph': unknown value"),
        ({"autotune": "sometimes"}, "config error: autotune = 'sometimes': unknown value"),
        (
            {"autotune": False, "compile": {"torch_mode": "max-autotune"}},
            "config error: compile.torch_mode = 'max-autotune': autotunes kernels",
        ),
    ],
)
def test_a_bad_mode_setting_is_a_one_line_config_error(overrides, message):
    with pytest.raises(ConfigError) as error:
        _config(**overrides)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_yaml_on_and_off_are_the_autotune_setting():
    assert _config(autotune=True)["autotune"] == "on"
    assert _config(autotune=False)["autotune"] == "off"
    assert _config()["autotune"] == "on"


@pytest.mark.parametrize("setting", ["on", "off"])
def test_autotune_is_decided_alike_for_every_framework(setting):
    """On a (faked) GPU the same study setting switches cuDNN's benchmark mode and XLA's autotuning alike; on the
    CPU every framework records it as not applicable."""
    flags = autotune.xla_flags("--xla_dump_to=/tmp/x", setting)
    assert "--xla_dump_to=/tmp/x" in flags and flags.count("autotune_level") == (setting == "off")
    # off replaces a level set before; on keeps the flags as they are (the fallback ladder's rung may have set one)
    assert autotune.xla_flags("--xla_gpu_autotune_level=4", "off") == "--xla_gpu_autotune_level=0"
    assert autotune.xla_flags("--xla_gpu_autotune_level=0", "on") == "--xla_gpu_autotune_level=0"
    xla = autotune.xla_switches(setting, flags)
    torch_eager = autotune.torch_switches(setting, "eager", None, None)
    torch_compiled = autotune.torch_switches(setting, "compile", "default", None)
    assert torch_eager["cudnn_benchmark"] is (setting == "on") and torch_compiled["inductor_autotune"] is False
    assert (xla["xla_gpu_autotune_level"] == "0") is (setting == "off")
    records = {
        framework: autotune.record(framework, mode, setting, on_gpu=True, **switches)
        for framework, mode, switches in (
            ("torch", "eager", torch_eager),
            ("torch", "compile", torch_compiled),
            ("jax", "jit", xla),
            ("tensorflow", "xla", xla),
        )
    }
    assert {(r["setting"], r["in_effect"]) for r in records.values()} == {(setting, setting == "on")}
    cpu = autotune.record("jax", "jit", setting, on_gpu=False, **xla)
    assert cpu["in_effect"] is None and "not applicable" in cpu["note"]
    # the fallback ladder's cudnn_benchmark_off rung wins over the study's setting, as its deviation says
    assert autotune.torch_switches("on", "eager", None, "0")["cudnn_benchmark"] is False
    assert autotune.torch_switches("on", "compile", "max-autotune", None)["inductor_autotune"] is True


@pytest.mark.parametrize("framework", ["torch", "jax", "tensorflow"])
def test_every_backend_records_the_autotune_setting(framework, monkeypatch):
    from fwbench.backends import get_backend

    monkeypatch.setenv("XLA_FLAGS", autotune.xla_flags("", "off"))
    backend = get_backend(framework, threads=1, precision="fp32", autotune="off")
    record = backend.effective_settings["autotune"]
    assert record["setting"] == "off" and record["in_effect"] is None and "not applicable" in record["note"]
    assert backend.effective_settings["mode"] in {"eager", "jit", "xla"}
    with pytest.raises(ValueError, match="has no execution mode 'compile'") if framework != "torch" else _nothing():
        get_backend(framework, threads=1, precision="fp32", mode="compile")


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture(scope="module")
def study(tiny_study):
    return tiny_study


def _inference(study, backend, cell, patch=None):
    from fwbench.scenarios import inference

    root, _, settings = study
    if patch:
        patch(backend)
    return inference.run(
        backend, cell, settings, data_dir=root / "data", weights_path=root / "weights.npz", num_classes=4
    )["metrics"]


def _torch(mode):
    from fwbench.backends import get_backend

    return get_backend("torch", threads=1, precision="fp32", mode=mode, compile_options={"torch_mode": "default"})


# The in-process torch.compile tests: one worker runs them all, so Dynamo and Inductor warm up once (each first
# compile in a process took 8-12 s in the suite's two workers) (tests/background.py: group_by_mark)
TORCH_COMPILE = pytest.mark.xdist_group("test_modes.torch_compile")


@TORCH_COMPILE
def test_a_compiled_cell_reports_compile_time_apart_and_agrees_with_eager(study):
    eager_cell = Cell("inference", "torch", "small_cnn", "fp32", 2, 16, "eager")
    compiled_cell = Cell("inference", "torch", "small_cnn", "fp32", 2, 16, "compile")
    eager, compiled = _torch("eager"), _torch("compile")
    eager_metrics = _inference(study, eager, eager_cell)
    metrics = _inference(study, compiled, compiled_cell)
    assert eager_metrics["compile_s"] is None and "eager" in eager_metrics["missing"]["compile_s"]
    assert metrics["compile_s"] > 0 and set(metrics["compile_breakdown_s"]) == {"dynamo_inductor_first_call_s"}
    # the first call after compilation runs compiled code: far below the compile time
    assert metrics["first_call_s"] < metrics["compile_s"]
    assert metrics["flags"]["recompiled"] is False and metrics["recompilations_in_timed_loop"] == 0
    assert metrics["compile_report"]["graphs"] >= 1 and metrics["compile_report"]["graph_breaks"] == 0
    assert compiled.effective_settings["compile_mode"] == "default"
    assert compiled.effective_settings["mode_detail"].startswith("torch.compile")
    # same weights, same inputs: the outputs agree within fp32 tolerance
    inputs = np.random.default_rng(0).normal(size=(2, 16, 16, 3)).astype(np.float32)
    reference = eager.to_numpy(eager.forward(eager.to_device(inputs)))
    ours = compiled.to_numpy(compiled.forward(compiled.to_device(inputs)))
    assert np.abs(ours - reference).max() <= 1e-4 * max(1.0, np.abs(reference).max())
    assert np.isclose(metrics["logits_checksum"], eager_metrics["logits_checksum"], rtol=1e-4, atol=1e-4)


def _shape_change_in_timed_loop(backend):
    """From the timed loop on (the scenario resets the memory peak right before it), every step gets one row less:
    a new shape, which static-shape compilation must recompile."""
    forward, reset = backend.forward, backend.reset_device_memory_peak

    def start_timing():
        reset()
        backend.forward = lambda inputs: forward(inputs[:-1])

    backend.reset_device_memory_peak = start_timing


def _graph_break_in_timed_loop(backend):
    """From the timed loop on, the step is a function with a graph break in it, compiled on its first call there."""
    import torch

    reset = backend.reset_device_memory_peak

    def broken(inputs):
        hidden = backend.module(inputs)
        torch._dynamo.graph_break()
        return hidden + 0

    def start_timing():
        reset()
        backend.step_function = backend._compile(broken)

    backend.reset_device_memory_peak = start_timing


@TORCH_COMPILE
@pytest.mark.parametrize("inject", [_shape_change_in_timed_loop, _graph_break_in_timed_loop])
def test_a_recompilation_or_graph_break_in_the_timed_loop_flags_the_cell(study, inject):
    cell = Cell("inference", "torch", "small_cnn", "fp32", 2, 16, "compile")
    metrics = _inference(study, _torch("compile"), cell, patch=inject)
    assert metrics["flags"]["recompiled"] is True and metrics["recompilations_in_timed_loop"] >= 1
    if inject is _graph_break_in_timed_loop:
        assert metrics["compile_report"]["graph_breaks"] >= 1


def test_a_compiled_training_cell_agrees_with_eager_at_step_0_and_never_recompiles_while_timed(training_setup):
    from fwbench.backends import get_backend
    from fwbench.scenarios import training

    work, settings = training_setup
    kwargs = {"data_dir": work / "data", "weights_path": work / "w.npz", "num_classes": 4}
    metrics, settings_of = {}, {}
    for mode in ("eager", "compile"):
        backend = get_backend("torch", threads=2, precision="fp32", mode=mode)
        cell = Cell("training", "torch", "small_cnn", "fp32", 8, 16, mode)
        metrics[mode] = training.run(backend, cell, settings, state_dir=work / mode, **kwargs)["metrics"]
        settings_of[mode] = backend.effective_settings
    eager, compiled = metrics["eager"], metrics["compile"]
    assert compiled["flags"]["recompiled"] is False and compiled["recompilations_in_training"] == 0
    # every model call of the cell compiled whole (BatchNorm recalibration, which would break the graph, is eager)
    assert compiled["compile_report"]["graph_breaks"] == 0 and eager["compile_report"] is None
    # epoch 0's compile time holds Dynamo's tracing of the step (graphs compiled in the cell), beyond the first-call
    # cost that eager pays too. Not a ratio: with Inductor's cache warm the compile took 1.7 s, and eager's first
    # call 0.56 s while other processes loaded the machine (5x was asked, 2026-11-26).
    assert compiled["compile_report"]["graphs"] >= 1
    assert compiled["epochs"][0]["compile_s"] > eager["epochs"][0]["compile_s"]
    assert "compiled_scope" in settings_of["compile"]
    assert "compiled_scope" not in settings_of["eager"]
    for key in ("loss", "grad_norm", "loss_after_step"):
        assert compiled["step0"][key] == pytest.approx(eager["step0"][key], rel=1e-4), key
