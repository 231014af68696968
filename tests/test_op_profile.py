"""The op profile (issue 35): recorded traces of every framework reduce to categories whose shares sum to 1, the
mapping tables know every name those traces hold, an unknown name lands in "other" and is listed, the GPU paths
(recorded CUDA traces, a fake XLA device plane) attribute kernels, and `profile_steps` runs for real in each
framework. The traces and where they came from: tests/data/op_traces/README.md."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from fwbench.trackers.op_profile import CATEGORIES, reduce_trace, reduce_xspace, summarise, torch_ops, xla_ops
from fwbench.trackers.op_profile.categories import Totals, shares

DATA = Path(__file__).parent / "data" / "op_traces"
RECORDED = json.loads((DATA / "recorded.json").read_text())


def _text(name: str) -> str:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as handle:
        return handle.read()


def _reduce(entry: dict) -> dict:
    path = DATA / entry["file"]
    if path.name.endswith(".trace.json.gz"):
        return reduce_trace(path, steps=entry["steps"])
    hlo = _text(entry["hlo_file"]) if entry.get("hlo_file") else None
    return reduce_xspace(path, framework=entry["framework"], steps=entry["steps"], hlo_text=hlo)


def _check(record: dict) -> None:
    assert [row["category"] for row in record["categories"]] == list(CATEGORIES)
    assert sum(row["share"] for row in record["categories"]) == pytest.approx(1.0)
    assert record["attributed_ms"] == pytest.approx(sum(row["ms_per_step"] for row in record["categories"]), abs=1e-5)
    assert 0 < len(record["top"]) <= 10
    assert [t["ms_per_step"] for t in record["top"]] == sorted((t["ms_per_step"] for t in record["top"]), reverse=True)
    json.dumps(record)


@pytest.mark.parametrize("entry", RECORDED, ids=[entry["file"] for entry in RECORDED])
def test_recorded_trace_reduces_to_shares_that_sum_to_one(entry):
    record = _reduce(entry)
    _check(record)
    assert record["platform"] == entry["device"]["platform"]
    # Conv nets: convolution leads, and "other" (overhead, unknown names) does not dominate.
    share = shares(record)
    assert share["convolution"] == max(share.values()), share
    assert share["other"] < 0.25, share
    # Every name the recorded traces hold is in a table (a new name: add it where its category is clear).
    assert record["unmapped"] == [], record["unmapped"]


def test_resnet_gpu_trace_puts_most_time_in_convolution():
    entry = next(e for e in RECORDED if e["file"].startswith("gpu-torch-compile-resnet50"))
    record = _reduce(entry)
    assert record["platform"] == "cuda" and record["time_basis"].startswith("device kernel time")
    assert shares(record)["convolution"] > 0.5
    # cuDNN's layout transposes inside aten::cudnn_convolution count as data movement, under their kernel's name.
    assert any(
        t["name"].startswith("aten::cudnn_convolution/") and t["category"] == "data_movement" for t in record["top"]
    )


def test_gpu_kernels_are_attributed_to_their_aten_op():
    entry = next(e for e in RECORDED if e["file"].startswith("gpu-torch-eager-small_cnn"))
    top = {t["name"]: t for t in _reduce(entry)["top"]}
    assert top["aten::cudnn_convolution"]["category"] == "convolution"
    assert top["aten::cudnn_convolution"]["calls_per_step"] == 3
    assert top["aten::cudnn_batch_norm"]["category"] == "normalization"


def test_unknown_name_lands_in_other_and_is_listed():
    totals = Totals()
    totals.add("aten::mkldnn_convolution", torch_ops.op_category("aten::mkldnn_convolution"), 3000.0)
    totals.add("aten::made_up_op", torch_ops.op_category("aten::made_up_op"), 1000.0)
    record = summarise(totals, steps=2, profiler="torch.profiler", platform="cpu", time_basis="test")
    assert record["unmapped"] == ["aten::made_up_op"]
    assert shares(record) == pytest.approx({**dict.fromkeys(CATEGORIES, 0.0), "convolution": 0.75, "other": 0.25})
    assert {"name": "aten::made_up_op", "category": "other", "ms_per_step": 0.5, "calls_per_step": 0.5} in record["top"]
    # Wall time no op accounts for is overhead: in other, not in top.
    record = summarise(totals, steps=2, profiler="torch.profiler", platform="cpu", time_basis="t", profiled_step_ms=4.0)
    assert record["attributed_ms"] == pytest.approx(4.0) and shares(record)["other"] == pytest.approx(2.5 / 4.0)
    assert len(record["top"]) == 2


def test_tables_map_the_named_ops():
    expect = {
        "aten::convolution": "convolution",
        "aten::mkldnn_convolution": "convolution",
        "aten::addmm": "matmul",
        "aten::linear": "matmul",
        "aten::scaled_dot_product_attention": "attention",
        # eager ViT-B/16's fast path for multi-head attention (the default study's one unmapped name, 2026-11-26)
        "aten::_transform_bias_rescale_qkv": "attention",
        "aten::_native_batch_norm_legit_no_training": "normalization",
        "aten::relu_": "elementwise",
        "aten::hardswish": "elementwise",
        "aten::adaptive_avg_pool2d": "pooling_reduction",
        "aten::copy_": "data_movement",
        "aten::permute": "data_movement",
        "aten::contiguous": "data_movement",
        "triton_poi_fused__native_batch_norm_legit_no_training_relu_3": "normalization",
        "triton_tem_fused_addmm_relu_0": "matmul",
        "triton_poi_fused_addmm_gelu_view_8": "elementwise",  # a pointwise kernel holds only the GEMM's epilogue
        "graph_0_cpp_fused_hardsigmoid_hardswish_mul_14": "elementwise",
        "Torch-Compiled Region: 0/0": "other",
    }
    assert {name: torch_ops.op_category(name) for name in expect} == expect
    xla = {
        "convolution.12": "convolution",
        "dot.3": "matmul",
        "add_rsqrt_fusion.1": "elementwise",
        "reduce-window.2": "pooling_reduction",
        "transpose.1": "data_movement",
        "cudnn-conv-bias-activation.4": "convolution",
        "input_reduce_fusion": "pooling_reduction",
    }
    assert {name: xla_ops.name_category(name) for name in xla} == xla
    assert xla_ops.name_category("fusion.3") is None  # says nothing: the HLO text must
    assert xla_ops.target_category("__onednn$matmul") == "matmul"
    assert xla_ops.target_category("__cudnn$convBiasActivationForward") == "convolution"


def test_hlo_text_says_what_a_fusion_fuses():
    index = xla_ops.HloIndex(_text("jax-jit-small_cnn-bs2-32px.hlo.txt.gz"))
    assert xla_ops.name_category("ynn_fusion.1") is None
    assert index.category("ynn_fusion.1") == "convolution"  # XNNPACK's fusion of the convolutions, found by its body
    assert index.category("ynn_fusion") == "matmul"
    hlo = """HloModule m
%fused_computation.1 (p0: f32[8,64]) -> f32[8] {
  %p0 = f32[8,64]{1,0} parameter(0)
  %c = f32[] constant(0)
  ROOT %r = f32[8]{0} reduce(%p0, %c), dimensions={1}, to_apply=%add
}
ENTRY %main (a: f32[8,64]) -> f32[8] {
  %a = f32[8,64]{1,0} parameter(0)
  %custom-call.3 = f32[8,64]{1,0} custom-call(%a), custom_call_target="__cublas$lt$matmul"
  ROOT %fusion.7 = f32[8]{0} fusion(%custom-call.3), kind=kInput, calls=%fused_computation.1
}
"""
    index = xla_ops.HloIndex(hlo)
    assert index.category("fusion.7") == "pooling_reduction"
    assert index.category("custom-call.3") == "matmul"


def _event(metadata: int, start_ms: int, ms: int, hlo_op: str) -> str:
    """A text-proto kernel event: `ms` long from `start_ms` on its line, launched by the HLO instruction `hlo_op`."""
    stats = f'stats {{ metadata_id: 10 str_value: "{hlo_op}" }}'
    return f"    events {{ metadata_id: {metadata} offset_ps: {start_ms * 10**9} duration_ps: {ms * 10**9} {stats} }}"


EVENTS = [
    (1, 0, 6, "custom-call.3"),
    (2, 7, 2, "loop_add_fusion"),
    (1, 10, 6, "custom-call.3"),
    (3, 17, 1, "wrapped_mystery"),
]
FAKE_GPU_XSPACE = """
planes {
  id: 1
  name: "/device:GPU:0"
  lines {
    id: 1
    name: "Stream #13(Compute)"
    timestamp_ns: 1000
{events}
  }
  lines {
    id: 2
    name: "XLA Ops"
    timestamp_ns: 1000
{xla_ops_line}
  }
  event_metadata { key: 1 value { id: 1 name: "sm90_xmma_fprop_implicit_gemm_f32" } }
  event_metadata { key: 2 value { id: 2 name: "loop_add_fusion" } }
  event_metadata { key: 3 value { id: 3 name: "mystery_kernel" } }
  stat_metadata { key: 10 value { id: 10 name: "hlo_op" } }
}
""".replace("{events}", "\n".join(_event(*event) for event in EVENTS)).replace(
    "{xla_ops_line}", _event(1, 0, 6, "custom-call.3")
)


def test_xla_gpu_kernels_are_attributed_to_their_hlo_op():
    from jax.profiler import ProfileData

    hlo = 'ENTRY %main {\n  %custom-call.3 = f32[8]{0} custom-call(%a), custom_call_target="__cudnn$convForward"\n}\n'
    xspace = ProfileData.text_proto_to_serialized_xspace(FAKE_GPU_XSPACE)
    record = reduce_xspace(xspace, framework="jax", steps=2, hlo_text=hlo, profiled_step_ms=10.0)
    _check(record)
    assert record["platform"] == "cuda" and record["time_basis"].startswith("device kernel time")
    ms = {row["category"]: row["ms_per_step"] for row in record["categories"]}
    assert ms["convolution"] == pytest.approx(6.0) and ms["elementwise"] == pytest.approx(1.0)
    assert ms["other"] == pytest.approx(0.5 + (10.0 - 7.5))  # the unknown instruction, then the idle device
    assert record["unmapped"] == ["wrapped_mystery"]
    assert record["top"][0] == {
        "name": "custom-call.3",
        "category": "convolution",
        "ms_per_step": 6.0,
        "calls_per_step": 1.0,
    }


def test_kernels_in_an_xla_command_buffer_are_read_by_their_own_names():
    """XLA:GPU replays several instructions as one CUDA graph whose kernels all carry `hlo_op` command_buffer_N (seen
    in the default GPU cell's profiling pass on an H200): each kernel is read by its own name, a cuDNN convolution
    kernel as convolution, a fusion's kernel by its fusion's name, never as an unmapped command buffer."""
    from jax.profiler import ProfileData

    events = [(1, 0, 6, "command_buffer_1"), (2, 7, 2, "command_buffer_1"), (3, 10, 1, "command_buffer_2")]
    text = FAKE_GPU_XSPACE.replace(
        "\n".join(_event(*event) for event in EVENTS), "\n".join(_event(*event) for event in events)
    )
    record = reduce_xspace(ProfileData.text_proto_to_serialized_xspace(text), framework="jax", steps=1)
    ms = {row["category"]: row["ms_per_step"] for row in record["categories"]}
    assert ms["convolution"] == pytest.approx(6.0) and ms["elementwise"] == pytest.approx(2.0)
    assert record["unmapped"] == ["mystery_kernel"]
    assert {row["name"] for row in record["top"]} == {
        "sm90_xmma_fprop_implicit_gemm_f32",
        "loop_add_fusion",
        "mystery_kernel",
    }


def _backend(framework: str, mode: str):
    from fwbench.backends import get_backend
    from fwbench.models import torch_model, torch_state_dict_numpy

    backend = get_backend(framework, threads=1, precision="fp32", mode=mode)
    backend.build(
        "small_cnn",
        torch_state_dict_numpy(torch_model("small_cnn", num_classes=4, image_size=16)),
        num_classes=4,
        image_size=16,
    )
    inputs = backend.to_device(np.random.default_rng(0).standard_normal((2, 16, 16, 3), dtype=np.float32))
    backend.compile(inputs)
    for _ in range(2):
        backend.synchronize(backend.forward(inputs))
    return backend, lambda: backend.synchronize(backend.forward(inputs))


@pytest.mark.parametrize(
    ("framework", "mode", "profiler"),
    [("torch", "eager", "torch.profiler"), ("jax", "jit", "jax.profiler"), ("tensorflow", "xla", "tf.profiler")],
)
def test_profile_steps_runs_for_real(framework, mode, profiler):
    if framework == "tensorflow":
        pytest.importorskip("tensorflow")
    from fwbench.trackers.op_profile import profile_steps

    backend, step = _backend(framework, mode)
    record = profile_steps(backend, step, 3)
    _check(record)
    assert record["profiler"] == profiler and record["platform"] == "cpu" and record["steps"] == 3
    assert record["profiled_step_ms"] > 0 and record["attributed_ms"] >= record["op_ms"] > 0
    assert shares(record)["convolution"] > 0
    assert record["unmapped"] == []
    if framework != "torch":
        assert record["hlo_text"] is True
