"""The interface every framework implements, so that scenarios (inference, training, micro) are written once.

A scenario never touches a framework API directly: it asks the backend to build a model from shared weights, move
a host batch to the device, run a step and synchronise, or (micro) for array primitives the operations are written
in. Timing and statistics then stay identical across frameworks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from fwbench.study.modes import DESCRIPTIONS, MODES, autotune_setting, primary

if TYPE_CHECKING:  # the training interface sits below the backends that build it
    from fwbench.training.trainer import Trainer

# fp32: true fp32 everywhere (no TF32). tf32: TF32 matmuls/convolutions where the device has them (a no-op on CPUs,
# recorded as such). bf16: parameters and activations in bfloat16. default: float32 tensors in each framework's own
# default arithmetic, touched by nothing: how published comparisons that "ran in FP32" measured, which on an NVIDIA
# GPU since Ampere is not one arithmetic (PyTorch: TF32 convolutions, true FP32 matmuls; JAX and TensorFlow: TF32
# for both). Each cell records what was in effect (`tf32_scope`), and the ledger names the difference.
PRECISIONS = ("fp32", "tf32", "bf16", "default")
# What `tf32_scope` says: where TF32 computes float32 inputs in a cell.
TF32_NONE, TF32_CONVOLUTIONS, TF32_MATMULS, TF32_BOTH = "none", "convolutions", "matmuls", "matmuls and convolutions"


def tf32_scope(on_gpu: bool, matmuls: bool, convolutions: bool) -> str:
    """Where TF32 is in effect: nowhere off a GPU (TF32 exists only on NVIDIA GPUs), else as the switches say."""
    if not on_gpu:
        return TF32_NONE
    return {(True, True): TF32_BOTH, (True, False): TF32_MATMULS, (False, True): TF32_CONVOLUTIONS}.get(
        (matmuls, convolutions), TF32_NONE
    )


class Arrays(ABC):
    """A framework's array primitives at one precision: what the micro suite's operations are written in once
    (fwbench.scenarios.operations), so that NumPy, PyTorch and JAX run the same expression. `+` between two arrays is
    the framework's own broadcasting add in all of them."""

    dtype: str  # the dtype the framework computes in, as numpy names it (bfloat16 where it has one)
    put_function: str  # what `put` calls, for the record

    @abstractmethod
    def put(self, host: np.ndarray) -> Any:
        """Copy a float32 host array to the device in `dtype` (cast on the host first, as the models' inputs are)."""

    @abstractmethod
    def matmul(self, a: Any, b: Any) -> Any: ...

    @abstractmethod
    def relu(self, a: Any) -> Any: ...

    @abstractmethod
    def compile(self, function: Callable[..., Any], *args: Any) -> tuple[Callable[..., Any], dict[str, float] | None]:
        """`function` ready to call on arguments like `args` (same shapes, dtypes, device): ahead-of-time compiled
        with its timings in seconds, or itself and None where the framework runs eagerly."""

    @abstractmethod
    def synchronize(self, outputs: Any) -> None:
        """Block until `outputs` (and the work producing them) is complete on the device."""

    @abstractmethod
    def to_numpy(self, outputs: Any) -> np.ndarray:
        """The values on the host, as float64 (the agreement check's precision)."""


class Framework(ABC):
    """What every framework of the study has, models or not: pinned threads and precision, versions, where it
    computes, and array primitives for the micro suite. NumPy, the micro suite's baseline, is only this; the
    frameworks with models are Backends."""

    name: str
    compilations: int = 0  # compile events seen so far; a change during the timed loop flags the cell
    host_only = False  # computes on the host whatever the study's device (NumPy): no device check, nothing to copy
    # Where a backend may keep what it derives from a model's definition alone across the study's processes (the
    # worker sets it to the weights' directory; JAX keeps its Flax variable templates there). None: nowhere.
    model_cache_dir = None

    def __init__(
        self,
        *,
        threads: int,
        precision: str,
        mode: str | None = None,
        autotune: str = "on",
        compile_options: Mapping[str, Any] | None = None,
        memory_format: Mapping[str, str] | None = None,
    ):
        """`mode`: the execution mode (fwbench.study.modes; None: the framework's primary one). `autotune` and
        `compile_options` (the config's `compile`) are the study's settings for every framework alike;
        `memory_format` (the config's) names a layout per framework that has a choice (PyTorch)."""
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} is not supported; supported: {PRECISIONS}")
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        known = MODES.get(self.name, (primary(self.name),))
        mode = mode or known[0]
        if mode not in known:
            raise ValueError(f"{self.name} has no execution mode {mode!r}; its modes: {', '.join(known)}")
        self.threads = threads
        self.precision = precision
        self.mode = mode
        self.autotune = autotune_setting(autotune)
        self.compile_options = dict(compile_options or {})
        self.memory_format_options = dict(memory_format or {})
        self.effective_settings: dict[str, Any] = self._apply_settings()
        self.effective_settings["mode"] = mode
        self.effective_settings["mode_detail"] = DESCRIPTIONS.get((self.name, mode), mode)
        self.effective_settings["process_blas"] = self._process_blas()

    @staticmethod
    def _process_blas() -> dict[str, Any]:
        """The BLAS and OpenMP libraries this framework's process loaded, the kernels they chose and their threads,
        read once its thread pools are pinned: each framework links its own, and the host's NumPy BLAS does not say
        which kernels a framework ran (fwbench.trackers.hardware.process_blas)."""
        from fwbench.trackers.hardware import process_blas

        return process_blas()

    @abstractmethod
    def _apply_settings(self) -> dict[str, Any]:
        """Pin thread counts and precision; return the settings as the framework now reports them."""

    def activate(self) -> None:  # noqa: B027 (a framework with nothing process-wide to set keeps this no-op)
        """Set again what this instance's precision sets process-wide (a framework's TF32 switches, JAX's matmul
        precision): a worker serving cells of several precisions holds one instance per precision and activates
        each before its cells' compiles and calls (fwbench.scenarios.served). Nothing to set: a no-op."""

    @classmethod
    def describe_devices(cls) -> dict[str, Any]:
        """What this framework can compute on, as seen from a fresh process: {"platform": "cuda"|"cpu"|..., "count",
        "devices": [{"index", "name", "compute_capability", "uuid", "memory_bytes"}], versions of the CUDA stack it
        uses}. The study's device check compares these across frameworks before any cell runs, so a framework that
        silently fell back to the CPU is caught; it needs no instance (no precision, no threads)."""
        raise NotImplementedError(f"{cls.__name__} does not describe its devices")

    @abstractmethod
    def versions(self) -> dict[str, str | None]: ...

    @abstractmethod
    def device_info(self) -> dict[str, Any]: ...

    @abstractmethod
    def arrays(self) -> Arrays:
        """Array primitives at this framework's precision, on the device it computes on."""

    @abstractmethod
    def gpu_index(self) -> int | None:
        """The CUDA device index the backend computes on, or None when it runs on the CPU."""


class Backend(Framework):
    """A framework with models: everything the inference and training scenarios ask of it."""

    @abstractmethod
    def build(self, model: str, state_dict: Mapping[str, np.ndarray], *, num_classes: int, image_size: int) -> None:
        """Instantiate `model` with exactly these (torch-layout) weights, in eval mode."""

    @abstractmethod
    def to_device(self, batch_nhwc: np.ndarray) -> Any:
        """Move a normalised float32 NHWC host batch to the device in the framework's layout."""

    @abstractmethod
    def fed_nhwc(self, inputs: Any) -> np.ndarray:
        """The values a device batch holds, read back from the device as float32 NHWC: what the framework was fed,
        whose digest the fairness ledger compares across frameworks (an input digest taken before `to_device` would
        not see a transfer, cast or layout that changed the bytes)."""

    @abstractmethod
    def compile(self, inputs: Any) -> dict[str, float] | None:
        """Ahead-of-time compilation for these exact inputs; timings in seconds, or None when eager."""

    @abstractmethod
    def forward(self, inputs: Any) -> Any:
        """One inference step; may return before the device has finished (see synchronize)."""

    @abstractmethod
    def synchronize(self, outputs: Any) -> None:
        """Block until `outputs` (and the work producing them) is complete on the device."""

    @abstractmethod
    def to_numpy(self, outputs: Any) -> np.ndarray: ...

    def compile_report(self) -> dict[str, Any] | None:
        """What a compiler that traces Python saw (torch.compile: graphs, graph breaks and why), or None."""
        return None

    def compiled_hlo_text(self, inputs: Any = None) -> str | None:
        """The compiled step's optimised HLO text, for the op profile to read what each fusion fuses
        (fwbench.trackers.op_profile.xla_ops); None where the framework does not compile to XLA. `inputs`: the
        compiled inputs (None: those `compile` saw)."""
        return None

    @abstractmethod
    def device_identity(self) -> dict[str, Any] | None:
        """Which physical device the backend computes on, for NVML to find it without trusting ordinals:
        {"ordinal", "uuid", "pci_bus_id", "source"} (uuid/pci_bus_id None where unknown, then "reason"), or None when
        it runs on the CPU. See fwbench.trackers.nvml.open_device."""

    @abstractmethod
    def device_cache_bytes(self) -> tuple[int, str] | None:
        """(bytes, source) of the device's last-level cache (a GPU's L2), which cold inputs must overflow; None on
        the CPU, where the scenario reads the host's last-level cache."""

    @abstractmethod
    def device_memory(self) -> dict[str, Any]:
        """Peak device memory as the framework reports it, each figure with its source; or {"missing": reason}.
        `peak_allocated_bytes` is the peak including load and compilation; after `reset_device_memory_peak` the
        result also holds `steady_state_peak_bytes` (with `steady_state_source`) and `in_use_after_warmup_bytes`."""

    @abstractmethod
    def reset_device_memory_peak(self) -> None:
        """Start the steady-state peak window (called after warm-up, device idle): from here on device_memory()
        reports the peak since this call apart from the peak including load/compile, or, for a framework with no
        reset (JAX), how it bounds or estimates the steady-state peak instead. A no-op on the CPU."""

    @abstractmethod
    def trainer(
        self, model: str, state_dict: Mapping[str, np.ndarray], *, num_classes: int, image_size: int, recipe
    ) -> Trainer:
        """A Trainer starting from exactly these (torch-layout) weights, with the recipe's optimizer."""
