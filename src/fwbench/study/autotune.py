"""Kernel autotuning, one study-level setting applied to every framework alike.

On a GPU each framework can either pick kernels by heuristics or time candidates and keep the fastest: PyTorch's
cudnn.benchmark (and, compiled, Inductor's max-autotune modes), XLA's GEMM/convolution autotuning (JAX and
TensorFlow, on by default). Leaving one framework tuned and another not is a confound, so `autotune: on|off`
decides for all of them, and every cell records what it applied. This module holds the decisions as plain data (no
framework import), so the backends apply them and the tests check them without a GPU.
"""

from __future__ import annotations

from typing import Any

from fwbench.study.modes import TORCH_AUTOTUNING_COMPILE_MODES, TORCH_COMPILED_MODES

XLA_AUTOTUNE_OFF = "--xla_gpu_autotune_level=0"
NOT_APPLICABLE = "not applicable on the CPU: no framework autotunes kernels there (recorded, not applied)"


def xla_flags(existing: str, setting: str) -> str:
    """XLA_FLAGS for a JAX or TensorFlow process: with autotune off, XLA's GPU autotuning at level 0 (heuristic
    kernel choice), replacing any other level; with it on, the flags as they are: XLA's default, unless the fallback
    ladder's xla_autotune_off rung turned it off for a cell whose autotuning crashed (its deviation says so). The
    record reads the flags the process ran with (xla_switches)."""
    if setting != "off":
        return existing
    kept = [flag for flag in existing.split() if not flag.startswith("--xla_gpu_autotune_level")]
    return " ".join([*kept, XLA_AUTOTUNE_OFF])


def record(framework: str, mode: str, setting: str, *, on_gpu: bool, **applied: Any) -> dict[str, Any]:
    """What a cell records: the study's setting, whether it is in effect (None on the CPU, where nothing
    autotunes), and the framework's own switches as it applied them."""
    out: dict[str, Any] = {"setting": setting, "in_effect": (setting == "on") if on_gpu else None}
    out["applied"] = applied
    if not on_gpu:
        out["note"] = NOT_APPLICABLE
    return out


def torch_switches(setting: str, mode: str, compile_mode: str | None, cudnn_override: str | None) -> dict[str, Any]:
    """PyTorch's switches for the setting: cudnn.benchmark (eager kernels, and the convolutions Inductor leaves to
    cuDNN), and whether Inductor autotunes (its max-autotune modes; the config refuses those with autotune off).
    `cudnn_override` is the fallback ladder's FWBENCH_CUDNN_BENCHMARK ("0" for a cell whose cuDNN autotuning
    crashed): it wins, and the cell's deviation records why."""
    benchmark = setting == "on" if cudnn_override is None else cudnn_override == "1"
    compiled = mode in TORCH_COMPILED_MODES
    inductor = compiled and compile_mode in TORCH_AUTOTUNING_COMPILE_MODES
    return {"cudnn_benchmark": benchmark, "inductor_autotune": inductor if compiled else None}


def xla_switches(setting: str, flags: str) -> dict[str, Any]:
    """JAX's and TensorFlow's switch: XLA's GPU autotune level, as XLA_FLAGS holds it in the process."""
    level = next(
        (flag.split("=", 1)[1] for flag in flags.split() if flag.startswith("--xla_gpu_autotune_level=")),
        None,
    )
    return {"xla_gpu_autotune_level": level or "XLA's default (autotuning on)"}
