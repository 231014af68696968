"""PyTorch backend: eager or torch.compile (the cell's mode: compile, or cudagraphs with Inductor's CUDA graphs),
inference under torch.inference_mode, NCHW tensors on the device, laid out in memory as the study's
`memory_format.torch` decides (channels_last or contiguous, fwbench.study.modes.torch_memory_format) and recorded as
read from the tensors that ran."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from fwbench.backends.base import TF32_NONE, Arrays, Backend, tf32_scope
from fwbench.models import torch_model, torchvision_defs
from fwbench.study import autotune
from fwbench.study.modes import torch_compile_mode, torch_memory_format

CUDNN_BENCHMARK_ENV = "FWBENCH_CUDNN_BENCHMARK"
MEMORY_FORMATS = {"channels_last": torch.channels_last, "contiguous": torch.contiguous_format}


def layout(tensor: torch.Tensor) -> str:
    """How a 4-D tensor is laid out in memory, read from its strides: channels_last (NHWC in memory), contiguous
    (NCHW), either (a shape both describe, e.g. a 1x1 convolution's weight) or strided (neither)."""
    last, nchw = tensor.is_contiguous(memory_format=torch.channels_last), tensor.is_contiguous()
    if last and nchw:
        return "either"
    return "channels_last" if last else ("contiguous" if nchw else "strided")


def weights_layout(module: torch.nn.Module) -> str | None:
    """The layout of a model's convolution weights: the one every 4-D one whose shape tells has, "mixed" where they
    differ, None without such a weight."""
    found = {
        layout(m.weight)
        for m in module.modules()
        if isinstance(m, torch.nn.modules.conv._ConvNd) and m.weight.dim() == 4
    } - {"either"}
    return (found.pop() if len(found) == 1 else "mixed") if found else None


def cpu_kernels(build_config: str | None = None) -> dict[str, str | None]:
    """Which CPU kernels PyTorch runs: the ATen capability it dispatches to (AVX2, AVX512; ATEN_CPU_CAPABILITY may
    lower it) and the MKL and oneDNN it was built with, linked statically, so threadpoolctl cannot see them.
    `build_config`: torch.__config__.show()'s text (read here when None; about 2 ms)."""
    text = torch.__config__.show() if build_config is None else build_config
    mkl = re.search(r"Math Kernel Library Version ([0-9][0-9.]*)", text)
    onednn = re.search(r"(?:MKL-DNN|oneDNN) v(\S+)", text)
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):
        capability = None
    return {
        "cpu_capability": capability,
        "mkl": mkl.group(1) if mkl else None,
        "onednn": onednn.group(1) if onednn else None,
    }


class TorchArrays(Arrays):
    """PyTorch's primitives for the micro suite: calls under inference_mode, as the models run, eager or (mode
    compile) through torch.compile, whose first call is timed apart as JAX's compilation is."""

    put_function = "torch.from_numpy(host).to(dtype).to(device)"

    def __init__(self, device: torch.device, dtype: torch.dtype, compile_mode: str | None = None):
        self.device, self.torch_dtype = device, dtype
        self.dtype = str(dtype).removeprefix("torch.")
        self.compile_mode = compile_mode

    def put(self, host: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.asarray(host, dtype=np.float32)).to(dtype=self.torch_dtype).to(self.device)

    def matmul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)

    def relu(self, a: torch.Tensor) -> torch.Tensor:
        return torch.relu(a)

    def compile(self, function, *args):
        if self.compile_mode is None:

            def eager(*call_args):
                with torch.inference_mode():
                    return function(self, *call_args)

            return eager, None
        from fwbench.backends import torch_compile

        compiled = torch_compile.compiler(self.compile_mode)(lambda *call_args: function(self, *call_args))

        def run(*call_args):
            with torch.inference_mode():
                return compiled(*call_args)

        return run, {"dynamo_inductor_first_call_s": torch_compile.first_call(lambda: run(*args), self.synchronize)}

    def synchronize(self, outputs: torch.Tensor) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def to_numpy(self, outputs: torch.Tensor) -> np.ndarray:
        return outputs.detach().to(torch.float64).cpu().numpy()


class TorchBackend(Backend):
    name = "torch"

    def _apply_settings(self) -> dict[str, Any]:
        torch.set_num_threads(self.threads)
        # Only settable before the first parallel op; a fresh cell process has not run one yet.
        with contextlib.suppress(RuntimeError):
            torch.set_num_interop_threads(self.threads)
        # cuDNN's autotuning follows the study's `autotune` (fwbench.study.autotune); the fallback ladder's
        # cudnn_benchmark_off rung sets FWBENCH_CUDNN_BENCHMARK=0 for a cell whose cuDNN autotuning crashed
        # (recorded as that cell's deviation).
        self.compile_mode = torch_compile_mode(self.mode, self.compile_options.get("torch_mode", "default"))
        switches = autotune.torch_switches(
            self.autotune, self.mode, self.compile_mode, os.environ.get(CUDNN_BENCHMARK_ENV)
        )
        self._cudnn_benchmark = switches["cudnn_benchmark"]
        self.activate()
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = torch.bfloat16 if self.precision == "bf16" else torch.float32
        if self.compile_mode is not None:
            from fwbench.backends import torch_compile

            self._compile = torch_compile.compiler(self.compile_mode)
            self._dynamo_start = torch_compile.snapshot()
            cache = torch_compile.cache_state()
        else:
            cache = {"state": "not applicable (eager)"}
        scope = self._tf32_now()
        return {
            "intra_op_threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "tf32_scope": scope,
            "tf32_in_effect": scope != TF32_NONE,
            "compile_mode": self.compile_mode,
            "cuda_graphs": False,  # until a compiled model ran (`compile_report`)
            "cuda_graphs_detail": {"reason": "eager: no torch.compile" if self.compile_mode is None else "not run yet"},
            "memory_format": None,  # read from the model and its inputs once built (`record_layout`)
            "memory_format_detail": {"setting": self.memory_format_options.get("torch", "auto")},
            "compilation_cache": cache,
            "autotune": autotune.record(
                self.name, self.mode, self.autotune, on_gpu=self.device.type == "cuda", **switches
            ),
            "dtype": str(self.dtype).removeprefix("torch."),
            "bf16_policy": "parameters and activations" if self.precision == "bf16" else None,
        }

    @classmethod
    def describe_devices(cls, lib: Any = torch) -> dict[str, Any]:
        """`lib` is the torch module; tests pass a fake with the same attributes."""
        cudnn = lib.backends.cudnn.version() if lib.backends.cudnn.is_available() else None
        stack = {"cuda_runtime": lib.version.cuda, "cudnn": str(cudnn) if cudnn else None}
        if not lib.cuda.is_available():
            build = f"a CUDA {lib.version.cuda} build" if lib.version.cuda else "a CPU-only build"
            return {"platform": "cpu", "count": 0, "devices": [], **stack, "note": f"torch is {build}; no GPU"}
        devices = []
        for index in range(lib.cuda.device_count()):
            props = lib.cuda.get_device_properties(index)
            uuid = str(getattr(props, "uuid", "") or "")
            devices.append(
                {
                    "index": index,
                    "name": props.name,
                    "compute_capability": f"{props.major}.{props.minor}",
                    "uuid": uuid if not uuid or uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}",
                    "memory_bytes": int(props.total_memory),
                }
            )
        return {"platform": "cuda", "count": len(devices), "devices": devices, **stack}

    def versions(self) -> dict[str, str | None]:
        # From the installed distribution: importing torchvision (and with it torch._dynamo) only for its version
        # string cost a small model's cell ~2.5 s.
        import importlib.metadata

        return {
            "torch": torch.__version__,
            "torchvision": importlib.metadata.version("torchvision"),
            "cuda": torch.version.cuda,
            "cudnn": str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else None,
            **cpu_kernels(),
        }

    def device_info(self) -> dict[str, Any]:
        if self.device.type == "cuda":
            props = torch.cuda.get_device_properties(self.device)
            return {
                "platform": "cuda",
                "name": props.name,
                "memory_bytes": int(props.total_memory),
                "compute_capability": f"{props.major}.{props.minor}",
            }
        return {"platform": "cpu", "name": "cpu"}

    def arrays(self) -> TorchArrays:
        return TorchArrays(self.device, self.dtype, self.compile_mode)

    @property
    def compilations(self) -> int:
        """Compile events so far: Dynamo's graphs and graph breaks in a compiled mode; none in eager mode. Every
        scenario reads them after its timed work (as `compile_report`), which is when the effective settings record
        whether the compiled code ran as CUDA graphs (`_record_cuda_graphs`)."""
        if self.compile_mode is None:
            return 0
        from fwbench.backends import torch_compile

        self._record_cuda_graphs()
        return torch_compile.events()

    def _record_cuda_graphs(self) -> None:
        """`cuda_graphs` and its detail as torch._inductor's cudagraph trees and counters say now
        (fwbench.backends.torch_compile.cuda_graphs)."""
        from fwbench.backends import torch_compile

        graphs = torch_compile.cuda_graphs(self.compile_mode, self.device.type, self.gpu_index())
        self.effective_settings["cuda_graphs"] = graphs["in_effect"]
        self.effective_settings["cuda_graphs_detail"] = graphs

    def compile_report(self) -> dict[str, Any] | None:
        """What Dynamo compiled since the last `compile` (and, as `compilations`, the CUDA-graphs record)."""
        if self.compile_mode is None:
            return None
        from fwbench.backends import torch_compile

        self._record_cuda_graphs()
        return torch_compile.report(since=self._dynamo_start)

    memory_format: torch.memory_format = torch.contiguous_format  # chosen per model (`choose_memory_format`)

    def choose_memory_format(self, model: str) -> torch.memory_format:
        """The layout `model`'s weights and inputs get in this cell (the study's `memory_format.torch`)."""
        setting = self.memory_format_options.get("torch", "auto")
        chosen, why = torch_memory_format(setting, model, self.device.type)
        self.memory_format = MEMORY_FORMATS[chosen]
        self.effective_settings["memory_format_detail"] = {"setting": setting, "chosen": chosen, "reason": why}
        return self.memory_format

    def record_layout(self, module: torch.nn.Module | None = None, inputs: torch.Tensor | None = None) -> None:
        """Record the layout in effect as read from the model's convolution weights and the inputs it is called
        on: `memory_format` is channels_last or contiguous where what was read agrees, "mixed (...)" where not."""
        detail = self.effective_settings["memory_format_detail"]
        if module is not None:
            detail["weights"] = weights_layout(module)
        if inputs is not None:
            detail["inputs"] = layout(inputs)
        read = {detail.get(key) for key in ("weights", "inputs")} - {None, "either"}
        parts = ", ".join(f"{key} {detail.get(key)}" for key in ("weights", "inputs"))
        in_effect = read.pop() if len(read) == 1 else (f"mixed ({parts})" if read else None)
        self.effective_settings["memory_format"] = in_effect

    def new_model(self, model: str, *, num_classes: int, image_size: int) -> torch.nn.Module:
        """The torch definition of `model`, recording how torchvision's models were imported (torchvision_defs)."""
        module = torch_model(model, num_classes=num_classes, image_size=image_size)
        self.effective_settings["torchvision_import"] = torchvision_defs.import_path()
        return module

    def build(self, model: str, state_dict: Mapping[str, np.ndarray], *, num_classes: int, image_size: int) -> None:
        module = self.new_model(model, num_classes=num_classes, image_size=image_size)
        module.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in state_dict.items()}, strict=True)
        # Cast and lay out on the host, then move (strides kept): no float32 copy of the weights is ever alive on the
        # device (bf16).
        memory_format = self.choose_memory_format(model)
        self.module = module.to(dtype=self.dtype).to(memory_format=memory_format).to(self.device).eval()
        self.record_layout(module=self.module)
        self.step_function = self.module if self.compile_mode is None else self._compile(self.module)

    def to_device(self, batch_nhwc: np.ndarray) -> torch.Tensor:
        """NCHW on the device in the cell's layout: contiguous, or channels_last (the host's NHWC bytes as they are,
        seen through NCHW strides), cast on the host as build casts."""
        host = np.asarray(batch_nhwc, dtype=np.float32)
        if self.memory_format == torch.channels_last:
            nchw = torch.from_numpy(np.ascontiguousarray(host)).permute(0, 3, 1, 2)
        else:
            nchw = torch.from_numpy(np.ascontiguousarray(host.transpose(0, 3, 1, 2)))
        inputs = nchw.to(dtype=self.dtype).to(self.device).contiguous(memory_format=self.memory_format)
        self.record_layout(inputs=inputs)
        return inputs

    def fed_nhwc(self, inputs: torch.Tensor) -> np.ndarray:
        return np.ascontiguousarray(inputs.detach().float().permute(0, 2, 3, 1).cpu().numpy())

    def activate(self) -> None:
        """This cell's precision and cuDNN switches, which PyTorch keeps per process: set at start and again before
        each of its calls where a worker serves cells of several precisions. default: PyTorch's own defaults
        (true FP32 matmuls, TF32 convolutions), restored where another precision's cell set them."""
        tf32 = self.precision == "tf32"
        default = self.precision == "default"
        torch.set_float32_matmul_precision("high" if tf32 else "highest")
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32 or default
        torch.backends.cudnn.benchmark = self._cudnn_benchmark

    def _tf32_now(self) -> str:
        """Where TF32 computes float32 inputs now: cuBLAS and cuDNN (and Inductor's generated matmuls) read these
        switches when each kernel runs, so their state when the cell runs is what it computed in."""
        return tf32_scope(
            self.device.type == "cuda" and self.precision != "bf16",
            torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest",
            torch.backends.cudnn.allow_tf32,
        )

    def compile(self, inputs: torch.Tensor) -> dict[str, float] | None:
        """Eager: nothing. Compiled: the first call on these inputs, which is where torch.compile traces (Dynamo),
        lowers (AOTAutograd) and generates code (Inductor); later calls with the same shapes run the result. Either
        way the TF32 scope is read again here, as the kernels about to run will read it."""
        scope = self._tf32_now()
        self.effective_settings.update(tf32_scope=scope, tf32_in_effect=scope != TF32_NONE)
        if self.compile_mode is None:
            return None
        from fwbench.backends import torch_compile

        # compile_report counts from here: what Dynamo compiles for these shapes (a worker compiles one batch size
        # after another, fwbench.scenarios.inference.run_cells)
        self._dynamo_start = torch_compile.snapshot()
        seconds = torch_compile.first_call(lambda: self.forward(inputs), self.synchronize)
        return {"dynamo_inductor_first_call_s": seconds}

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self.step_function(inputs)

    def synchronize(self, outputs: torch.Tensor) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def gpu_index(self) -> int | None:
        return (self.device.index or 0) if self.device.type == "cuda" else None

    def _ordinal(self) -> int:
        return self.device.index if self.device.index is not None else torch.cuda.current_device()

    def device_identity(self) -> dict[str, Any] | None:
        if self.device.type != "cuda":
            return None
        props = torch.cuda.get_device_properties(self._ordinal())
        uuid = str(getattr(props, "uuid", "") or "") or None
        pci = [getattr(props, f"pci_{part}_id", None) for part in ("domain", "bus", "device")]
        return {
            "ordinal": self._ordinal(),
            "uuid": uuid,
            "pci_bus_id": None if None in pci else f"{pci[0]:04x}:{pci[1]:02x}:{pci[2]:02x}.0",
            "source": "torch.cuda.get_device_properties (uuid, pci_domain_id/pci_bus_id/pci_device_id)",
        }

    def device_cache_bytes(self) -> tuple[int, str] | None:
        if self.device.type != "cuda":
            return None
        size = int(torch.cuda.get_device_properties(self._ordinal()).L2_cache_size)
        return size, "torch.cuda.get_device_properties().L2_cache_size (device L2)"

    _load_peak: dict[str, int] | None = None  # allocator figures at the reset after warm-up

    def reset_device_memory_peak(self) -> None:
        if self.device.type != "cuda":
            return
        torch.cuda.synchronize(self.device)
        self._load_peak = {
            "allocated": int(torch.cuda.max_memory_allocated(self.device)),
            "reserved": int(torch.cuda.max_memory_reserved(self.device)),
            "in_use": int(torch.cuda.memory_allocated(self.device)),
        }
        torch.cuda.reset_peak_memory_stats(self.device)

    def device_memory(self) -> dict[str, Any]:
        if self.device.type != "cuda":
            return {"missing": "PyTorch on the CPU has no device allocator statistics (host RSS covers it)"}
        allocated = int(torch.cuda.max_memory_allocated(self.device))
        reserved = int(torch.cuda.max_memory_reserved(self.device))
        if self._load_peak is None:
            return {
                "peak_allocated_bytes": allocated,
                "peak_reserved_bytes": reserved,
                "source": "torch.cuda.max_memory_allocated / max_memory_reserved",
            }
        return {
            "peak_allocated_bytes": max(allocated, self._load_peak["allocated"]),
            "peak_reserved_bytes": max(reserved, self._load_peak["reserved"]),
            "source": "torch.cuda.max_memory_allocated / max_memory_reserved over the process (load included)",
            "steady_state_peak_bytes": allocated,
            "steady_state_peak_reserved_bytes": reserved,
            "steady_state_source": "torch.cuda.max_memory_allocated since reset_peak_memory_stats after warm-up",
            "in_use_after_warmup_bytes": self._load_peak["in_use"],
        }

    def to_numpy(self, outputs: torch.Tensor) -> np.ndarray:
        return outputs.detach().float().cpu().numpy()

    def trainer(self, model, state_dict, *, num_classes: int, image_size: int, recipe):
        from fwbench.training.torch_trainer import TorchTrainer

        return TorchTrainer(self, model, state_dict, num_classes=num_classes, image_size=image_size, recipe=recipe)
