"""Execution modes: how a framework runs a model (eagerly, or as a compiled program), a cell axis like precision.

Every JAX cell is an XLA program and every TensorFlow cell an XLA-compiled function, while PyTorch runs eagerly
unless it is compiled with torch.compile. A ratio between an eager and a compiled program measures the compiler as
much as the framework, so the mode is part of every cell's identity and path, and the analysis pairs modes
explicitly (fwbench.analysis.inference.ratios). This table is the registry the config schema, the grid and the
backends share; it imports no framework. A framework's first mode is its primary one: measured for every model and
suite; the others where `mode_scope` says (fwbench.study.grid).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# framework -> its modes, the primary one first. NumPy (the micro suite's baseline) only runs eagerly.
MODES: dict[str, tuple[str, ...]] = {
    "torch": ("eager", "compile", "cudagraphs"),
    "jax": ("jit",),
    "tensorflow": ("xla",),
    "numpy": ("eager",),
}
# Modes that run a compiled program (traced once, code generated for the measured shapes, then timed).
COMPILED = frozenset({"compile", "cudagraphs", "jit", "xla"})
# What each mode is, for tables and the paper.
DESCRIPTIONS = {
    ("torch", "eager"): "eager (operator by operator)",
    ("torch", "compile"): "torch.compile (Dynamo + Inductor)",
    ("torch", "cudagraphs"): "torch.compile with CUDA graphs (Dynamo + Inductor + cudagraph trees)",
    ("jax", "jit"): "jax.jit (XLA, ahead of time)",
    ("tensorflow", "xla"): "tf.function(jit_compile=True) (XLA)",
    ("numpy", "eager"): "eager (NumPy calls)",
}
# torch.compile's `mode` argument: what the study-level `compile.torch_mode` may name.
TORCH_COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# Compile modes that autotune kernels (Inductor benchmarks GEMM/convolution choices): only with `autotune: on`.
TORCH_AUTOTUNING_COMPILE_MODES = frozenset({"max-autotune", "max-autotune-no-cudagraphs"})
# PyTorch's compiled modes, each a cell of its own: `compile` is torch.compile in the study's `compile.torch_mode`
# (default: no CUDA graphs); `cudagraphs` is torch.compile in mode reduce-overhead, Inductor replaying its kernels as
# CUDA graphs (cudagraph trees), as XLA replays its own as command buffers: the like baseline for JAX on a GPU. On a
# CPU there are no CUDA graphs: the cell runs Inductor without them and records so (`cuda_graphs`).
TORCH_COMPILED_MODES = ("compile", "cudagraphs")
CUDA_GRAPHS_COMPILE_MODE = "reduce-overhead"
# How PyTorch lays out a CNN's images and convolution weights (the study's `memory_format.torch`): auto is
# channels_last (NHWC in memory) for the convolutional models on a CUDA GPU, as most GPU users of CNNs set it (timm's
# benchmark offers it), and contiguous NCHW otherwise. Every model but ViT-B/16 is convolutional (ViT's one
# convolution is its patch embedding; its body is matmuls).
MEMORY_FORMATS = ("auto", "channels_last", "contiguous")
NOT_CONVOLUTIONAL = frozenset({"vit_b_16"})


def primary(framework: str) -> str:
    """The framework's first mode in the registry (the one a config that names no modes measures); a framework the
    registry does not know (a test's fake backend) runs eagerly."""
    return MODES.get(framework, ("eager",))[0]


def is_compiled(mode: str) -> bool:
    return mode in COMPILED


def torch_compile_mode(mode: str, configured: str = "default") -> str | None:
    """torch.compile's `mode` argument for a PyTorch cell in `mode`: the study's `compile.torch_mode` (`configured`)
    in mode compile, reduce-overhead in mode cudagraphs, None (no torch.compile) in eager mode."""
    if mode == "cudagraphs":
        return CUDA_GRAPHS_COMPILE_MODE
    return configured if mode in TORCH_COMPILED_MODES else None


def torch_memory_format(setting: str, model: str, device_type: str) -> tuple[str, str]:
    """(channels_last or contiguous, why) for a PyTorch cell of `model` on `device_type` ("cuda", "cpu") under the
    study's `memory_format.torch` setting."""
    if setting not in MEMORY_FORMATS:
        raise ValueError(f"memory_format.torch = {setting!r}: expected one of {', '.join(MEMORY_FORMATS)}")
    if setting != "auto":
        return setting, f"memory_format.torch = {setting}"
    if model in NOT_CONVOLUTIONAL:
        return "contiguous", f"auto: {model} is not a convolutional model"
    if device_type != "cuda":
        return "contiguous", f"auto: {device_type} device, not a CUDA GPU"
    return "channels_last", f"auto: {model} is convolutional and the device is a CUDA GPU"


def framework_modes(config: Mapping[str, Any], framework: str) -> list[str]:
    """The modes a validated config measures for `framework`, its primary one first."""
    return list((config.get("modes") or {}).get(framework) or [primary(framework)])


def in_scope(config: Mapping[str, Any], suite: str, model: str) -> bool:
    """Whether the modes after each framework's first are measured for this suite and model (operation)."""
    scope = config.get("mode_scope") or {}
    suites = scope.get("suites")
    models = scope.get("models")
    if suites is not None and suite not in suites:
        return False
    return suite == "micro" or models is None or model in models


def cell_modes(config: Mapping[str, Any], suite: str, framework: str, model: str) -> list[str]:
    """The modes of `framework`'s cells of `model` in `suite`: every configured mode in scope, else the first."""
    modes = framework_modes(config, framework)
    return modes if in_scope(config, suite, model) else modes[:1]


def ratio_mode(config: Mapping[str, Any], framework: str) -> str:
    """The mode of `framework` that enters the cross-framework ratios (`ratio_modes`; its compiled mode unless the
    config says otherwise). Where a comparison has no cell in it, the analysis falls back to the framework's first
    configured mode and marks the ratio."""
    configured = (config.get("ratio_modes") or {}).get(framework)
    if configured:
        return configured
    compiled = [mode for mode in MODES[framework] if is_compiled(mode)]
    return compiled[0] if compiled else primary(framework)


def autotune_setting(value: Any) -> str:
    """`autotune` as "on" or "off" (YAML 1.1 reads a bare on/off as a boolean)."""
    if value is True or value == "on":
        return "on"
    if value is False or value == "off":
        return "off"
    raise ValueError(f"autotune = {value!r}: expected on or off")


def caches_programs(framework: str, mode: str) -> bool:
    """Whether a variant keeps compiled programs in a launch cache (fwbench.backends.launch_cache.apply):
    torch.compile's modes, JAX and TensorFlow; eager PyTorch and NumPy compile nothing, so a compile launch has
    nothing to fill for them (fwbench.running.compile_launch)."""
    return (framework == "torch" and mode in TORCH_COMPILED_MODES) or framework in ("jax", "tensorflow")
