"""What a cell computed in is read from what ran: JAX's TF32 scope from the compiled program's HLO (each float32 matmul
and convolution's operand precision), PyTorch's from the switches its kernels read when they run."""

from __future__ import annotations

import numpy as np
import pytest

from fwbench.backends.arithmetic import xla_arithmetic, xla_precisions

# Lines as XLA prints them on a GPU after its rewrites: a cuBLAS GEMM with its precision in the backend config, a
# cuDNN convolution with it as an attribute, a Triton GEMM fusion's dot, and a bfloat16 dot (not float32 work).
GPU_HLO = "\n".join(
    [
        "%gemm = (f32[128,768]{1,0}, s8[4194304]{0}) custom-call(f32[128,768]{1,0} %a, f32[768,768]{1,0} %b), "
        'custom_call_target="__cublas$gemm", backend_config={"gemm_backend_config":{"precision_config":'
        '{"operand_precision":["HIGHEST","HIGHEST"],"algorithm":"ALG_UNSET"}}}',
        "%conv = (f32[128,64,56,56]{3,2,1,0}, u8[0]{0}) custom-call(f32[128,3,224,224]{3,2,1,0} %x, "
        "f32[64,3,7,7]{3,2,1,0} %w), window={size=7x7 stride=2x2 pad=3_3x3_3}, dim_labels=bf01_oi01->bf01, "
        'operand_precision={highest,highest}, custom_call_target="__cudnn$convForward"',
        "%dot.1 = f32[128,10]{1,0} dot(f32[128,768]{1,0} %p0, f32[768,10]{1,0} %p1), lhs_contracting_dims={1}, "
        "rhs_contracting_dims={0}, operand_precision={highest,highest}",
        "%dot.2 = bf16[128,10]{1,0} dot(bf16[128,768]{1,0} %q0, bf16[768,10]{1,0} %q1), lhs_contracting_dims={1}, "
        "rhs_contracting_dims={0}",
    ]
)


def test_true_fp32_programs_read_as_no_tf32_and_default_ones_as_tf32_on_a_gpu():
    assert xla_precisions(GPU_HLO) == {"matmuls": {"highest": 2}, "convolutions": {"highest": 1}}
    read = xla_arithmetic(GPU_HLO, on_gpu=True, configured_scope="matmuls and convolutions")
    assert read["tf32_scope"] == "none" and not read["tf32_in_effect"], "the program, not the setting, decides"
    # Negative control: the same program with the GEMM left at DEFAULT precision (TF32 on Ampere and later).
    tf32_gemm = GPU_HLO.replace('["HIGHEST","HIGHEST"]', '["DEFAULT","DEFAULT"]')
    assert xla_arithmetic(tf32_gemm, on_gpu=True, configured_scope="none")["tf32_scope"] == "matmuls"
    tf32_conv = GPU_HLO.replace("operand_precision={highest,highest}, custom_call", "custom_call")
    assert xla_arithmetic(tf32_conv, on_gpu=True, configured_scope="none")["tf32_scope"] == "convolutions"
    assert xla_arithmetic(tf32_gemm, on_gpu=False, configured_scope="none")["tf32_scope"] == "none", "no TF32 on CPUs"


def test_a_program_without_recognised_ops_keeps_the_setting_and_says_so():
    read = xla_arithmetic("%add = f32[4]{0} add(%a, %b)", on_gpu=True, configured_scope="matmuls and convolutions")
    assert read["tf32_scope"] == "matmuls and convolutions" and read["source"].startswith("the precision setting")


@pytest.mark.parametrize(("precision", "read"), [("fp32", "highest"), ("tf32", "high"), ("default", "default")])
def test_a_jax_cell_records_the_precision_its_compiled_program_has(precision, read):
    from fwbench.backends import get_backend
    from fwbench.models import torch_model, torch_state_dict_numpy

    backend = get_backend("jax", threads=1, precision=precision)
    state = torch_state_dict_numpy(torch_model("small_cnn", num_classes=4, image_size=16))
    backend.build("small_cnn", state, num_classes=4, image_size=16)
    backend.compile(backend.to_device(np.zeros((2, 16, 16, 3), np.float32)))
    arithmetic = backend.effective_settings["arithmetic"]
    assert arithmetic["source"].startswith("the compiled program's HLO")
    counted = {p for kind in arithmetic["precisions"].values() for p in kind}
    assert counted == {read}, arithmetic
    assert backend.effective_settings["tf32_scope"] == "none", "on a CPU nothing computes in TF32"


def test_a_torch_cell_reads_its_tf32_switches_when_it_runs(monkeypatch):
    """The switches are read again when the cell compiles: a change after the backend was made is what ran."""
    import torch

    from fwbench.backends import get_backend
    from fwbench.models import torch_model, torch_state_dict_numpy

    backend = get_backend("torch", threads=1, precision="fp32")
    state = torch_state_dict_numpy(torch_model("small_cnn", num_classes=4, image_size=16))
    backend.build("small_cnn", state, num_classes=4, image_size=16)
    monkeypatch.setattr(backend, "device", torch.device("cuda"), raising=False)  # as on a GPU: TF32 is possible
    monkeypatch.setattr(backend, "compile_mode", None)
    assert backend.effective_settings["tf32_scope"] == "none"
    switches = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = True, False
        backend.compile(None)
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = switches
    assert backend.effective_settings["tf32_scope"] == "convolutions"
