"""GPU settings in the paper: the setup table's CUDA rows from the cells' provenance, and partners (the same cell in
each framework) that ran under different comparable settings flagged in the tidy table and the inference table."""

from __future__ import annotations

import pandas as pd

from fwbench import HARNESS_VERSION
from fwbench.analysis.inference.tables import inference_table
from fwbench.analysis.inference.tidy import tidy
from fwbench.analysis.setup.provenance import study_environment
from fwbench.io import atomic_write_json

H100 = "NVIDIA H100 80GB HBM3"


def _result(framework, *, platform="cuda", name=H100, tf32=False, cuda="13.0", precision="fp32", batch=8):
    if framework == "torch":
        versions = {"torch": "2.14.1", "cuda": cuda, "cudnn": "92400"}
        settings = {"cudnn_benchmark": False, "tf32_in_effect": tf32, "dtype": "float32", "intra_op_threads": 16}
    else:
        versions = {"jax": "0.10.2", "cuda": cuda, "cudnn": "92400", "plugins": "jax-cuda13-plugin==0.10.2"}
        versions["cuda_driver"] = "13.0"
        settings = {"tf32_in_effect": tf32, "dtype": "float32", "xla_flags": "", "preallocate": "false"}
    device = {"platform": platform, "name": name if platform == "cuda" else "cpu", "compute_capability": "9.0"}
    return {
        "schema_version": 2,
        "status": "ok",
        "reason": None,
        "failure": None,
        "deviations": [],
        "cell": {
            "suite": "inference",
            "framework": framework,
            "model": "resnet50",
            "precision": precision,
            "batch_size": batch,
            "image_size": 224,
        },
        "metrics": {
            "throughput_img_s": 1000.0,
            "latency_ms": {"p50": 8.0, "p95": 9.0, "p99": 9.5, "mean": 8.2},
            "compile_s": None,
            "rss_mb": {"before": 1.0, "peak": 2.0},
            "first_call_s": 0.5,
            "missing": {},
            "flags": {},
        },
        "samples_ms": [8.0, 8.1],
        "settings": {},
        "inputs": {},
        "provenance": {
            "python": "3.11.7",
            "harness_version": HARNESS_VERSION,
            "cpu_model": "test cpu",
            "git": {"commit": None},
            "env": {},
            "libraries": {},
            "placement": {"slot": 0, "slots": 2, "gpu_index": 0} if platform == "cuda" else None,
            "framework": {"name": framework, "versions": versions, "settings": settings, "device": device},
        },
    }


def _write(tmp_path, results):
    paths = []
    for i, result in enumerate(results):
        path = tmp_path / f"cell{i}.json"
        atomic_write_json(path, result)
        paths.append(path)
    return paths


def test_setup_table_lists_the_cuda_stack_of_each_framework(tmp_path):
    env = study_environment(_write(tmp_path, [_result("torch"), _result("jax", tf32=False)]))
    assert env["Device"] == H100 and env["Compute capability"] == "9.0"
    assert env["CUDA runtime (PyTorch)"] == "13.0" and env["CUDA runtime (JAX)"] == "13.0"
    assert env["JAX CUDA plugin"] == "jax-cuda13-plugin==0.10.2" and env["GPU driver (CUDA API)"] == "13.0"
    assert env["PyTorch cuDNN benchmark"] is False and env["JAX preallocation"] == "false"
    assert env["TF32 in effect"] == "fp32: off" and env["GPU slots"] == "2 (one cell per GPU)"
    cpu = study_environment(_write(tmp_path, [_result("torch", platform="cpu"), _result("jax", platform="cpu")]))
    assert "CUDA runtime (PyTorch)" not in cpu, "a CPU study's setup table has no CUDA rows"


def test_partners_with_different_settings_are_flagged(tmp_path):
    results = [
        _result("torch", tf32=True),
        _result("jax", tf32=False),
        _result("torch", batch=1),
        _result("jax", batch=1),
        _result("torch", platform="cpu", batch=2),
        _result("jax", platform="cpu", batch=2, tf32=True),
    ]
    frame = tidy(_write(tmp_path, results))
    flagged = frame.set_index(["batch_size", "framework"])["settings_differ"]
    assert flagged[(8, "torch")] and flagged[(8, "jax")]
    assert not flagged[(1, "torch")] and not flagged[(2, "jax")], "same settings, or the CPU: never flagged"
    detail = frame.loc[frame["batch_size"] == 8, "settings_differ_detail"].iloc[0]
    assert detail == "TF32: jax none, torch matmuls and convolutions"
    other_gpu = tidy(_write(tmp_path, [_result("torch"), _result("jax", name="NVIDIA A100", cuda="12.8")]))
    assert other_gpu["settings_differ_detail"].iloc[0] == (
        f"GPU: jax NVIDIA A100, torch {H100}; CUDA major: jax 12, torch 13"
    )

    ratios = pd.DataFrame(columns=["model", "precision", "batch_size", "ratio", "ci_low", "ci_high"])
    table = inference_table(frame, ["torch", "jax"], ratios)
    rows = [line.split("&") for line in table.splitlines() if line.count("&") > 3]
    row8 = next("&".join(cols) for cols in rows if cols[2].strip() == "8")
    row1 = next("&".join(cols) for cols in rows if cols[2].strip() == "1")
    assert row8.count("$^{s}$") == 2 and "$^{s}$" not in row1


def test_each_frameworks_default_arithmetic_differs_on_a_gpu_and_the_partners_are_flagged(tmp_path):
    """Precision `default`: on an NVIDIA GPU since Ampere PyTorch computes convolutions in TF32 and matmuls in true
    FP32, JAX and TensorFlow both in TF32 (fwbench.backends.base.tf32_scope): a ratio between them measures
    arithmetic too, and the table marks it."""
    from fwbench.backends.base import TF32_BOTH, TF32_CONVOLUTIONS, TF32_NONE, tf32_scope

    assert tf32_scope(True, False, True) == TF32_CONVOLUTIONS and tf32_scope(True, True, True) == TF32_BOTH
    assert tf32_scope(False, True, True) == TF32_NONE, "no TF32 off a GPU"
    torch_cell, jax_cell = _result("torch", tf32=True), _result("jax", tf32=True)
    torch_cell["provenance"]["framework"]["settings"]["tf32_scope"] = TF32_CONVOLUTIONS
    jax_cell["provenance"]["framework"]["settings"]["tf32_scope"] = TF32_BOTH
    for cell in (torch_cell, jax_cell):
        cell["cell"]["precision"] = "default"
    frame = tidy(_write(tmp_path, [torch_cell, jax_cell]))
    assert frame["settings_differ"].all()
    assert frame["settings_differ_detail"].iloc[0] == "TF32: jax matmuls and convolutions, torch convolutions"
