"""PyTorch's mapping table: ATen (and mkldnn/mkl/inductor) op names, Inductor's fused kernel names and, where no op
launched a CUDA kernel, the kernel's own name, to the categories (fwbench.trackers.op_profile.categories).

One table, keyed by the op's name without its namespace (`aten::addmm` and `mkldnn::_linear_pointwise` are looked
up as `addmm` and `_linear_pointwise`), so that eager, compiled and GPU traces share it. Wrapper ops
(`aten::conv2d` over `aten::convolution` over `aten::mkldnn_convolution`) all map to the category of what they
wrap: the reducer takes self time, so each wrapper counts only its own dispatch cost, in that category.
"""

from __future__ import annotations

import re
from functools import cache

from fwbench.trackers.op_profile.categories import COMPUTE_HEAVY, heaviest


def _names(category: str, text: str) -> dict[str, str]:
    return dict.fromkeys(text.split(), category)


TORCH_OPS: dict[str, str] = {
    **_names(
        "convolution",
        """conv1d conv2d conv3d convolution _convolution convolution_overrideable conv_transpose1d conv_transpose2d
        conv_transpose3d mkldnn_convolution cudnn_convolution cudnn_convolution_relu cudnn_convolution_add_relu
        cudnn_convolution_transpose miopen_convolution miopen_depthwise_convolution thnn_conv2d _slow_conv2d_forward
        slow_conv_dilated2d slow_conv3d _conv_depthwise2d conv_depthwise3d _nnpack_spatial_convolution
        _convolution_pointwise _convolution_transpose_pointwise _mkldnn_convolution conv_tbc""",
    ),
    **_names(
        "matmul",
        """linear addmm mm bmm matmul baddbmm addbmm addmv mv dot vdot einsum _addmm_activation _linear_pointwise
        _mkl_linear mkldnn_linear _scaled_mm _int_mm outer bilinear _weight_int8pack_mm tensordot""",
    ),
    **_names(
        "attention",
        """scaled_dot_product_attention _scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention
        _scaled_dot_product_cudnn_attention _scaled_dot_product_flash_attention_for_cpu
        _scaled_dot_product_attention_math _scaled_dot_product_fused_attention_overrideable
        _efficient_attention_forward _flash_attention_forward _native_multi_head_attention
        multi_head_attention_forward _transformer_encoder_layer_fwd
        _masked_softmax _fused_sdp_choice _triton_multi_head_attention _transform_bias_rescale_qkv""",
    ),
    **_names(
        "normalization",
        """batch_norm _batch_norm_impl_index native_batch_norm _native_batch_norm_legit
        _native_batch_norm_legit_no_training _native_batch_norm_legit_functional _batch_norm_with_update
        _batch_norm_no_update cudnn_batch_norm miopen_batch_norm layer_norm native_layer_norm group_norm
        native_group_norm instance_norm rms_norm _fused_rms_norm local_response_norm mkldnn_batch_norm
        batch_norm_elemt _native_batch_norm_legit_no_stats""",
    ),
    **_names(
        "elementwise",
        """relu relu_ relu6 hardswish hardswish_ hardsigmoid hardsigmoid_ hardtanh hardtanh_ gelu gelu_ silu silu_
        mish sigmoid sigmoid_ tanh tanh_ clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_ threshold threshold_
        leaky_relu leaky_relu_ elu elu_ selu softplus add add_ sub sub_ mul mul_ div div_ rsqrt rsqrt_ sqrt exp exp_
        dropout_ feature_dropout_ alpha_dropout_
        log pow neg abs reciprocal maximum minimum where erf dropout native_dropout feature_dropout alpha_dropout
        fill_ zero_ masked_fill masked_fill_ addcmul addcdiv lerp sign fmod remainder bitwise_and logical_and eq ne
        lt gt le ge square rsub scalar_tensor""",
    ),
    **_names(
        "pooling_reduction",
        """adaptive_avg_pool1d adaptive_avg_pool2d _adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool2d
        max_pool1d max_pool2d max_pool2d_with_indices max_pool3d avg_pool1d avg_pool2d avg_pool3d mkldnn_max_pool2d
        mkldnn_adaptive_avg_pool2d mean sum amax amin max min argmax argmin softmax _softmax log_softmax _log_softmax
        cumsum var std var_mean std_mean norm linalg_vector_norm prod logsumexp topk sort all any""",
    ),
    **_names(
        "data_movement",
        """copy_ contiguous clone to _to_copy permute transpose t view reshape _reshape_alias flatten as_strided
        as_strided_ expand expand_as squeeze squeeze_ unsqueeze unsqueeze_ select slice index_select cat _cat stack
        split split_with_sizes chunk narrow pad constant_pad_nd _unsafe_view unbind unflatten repeat index gather
        embedding pixel_shuffle roll flip channel_shuffle native_channel_shuffle to_mkldnn to_dense
        _pad_circular reflection_pad2d replication_pad2d detach alias lift_fresh resolve_conj resolve_neg view_as
        _to_dense copy _copy_from _copy_from_and_resize movedim swapaxes numpy_T mT""",
    ),
    # Mapped, so not "unmapped": allocation, synchronisation and the compiled region's own bookkeeping.
    **_names(
        "other",
        """empty empty_like empty_strided zeros zeros_like ones ones_like full full_like new_empty new_empty_strided
        new_zeros new_ones resize_ set_ item _local_scalar_dense is_nonzero record_stream lift detach_ result_type
        _assert_async _assert_tensor_metadata _nested_tensor_from_mask_left_aligned _has_compatible_shallow_copy_type
        _is_any_true is_same_size _shape_as_tensor""",
    ),
}

# Host-side spans that are not ops but the framework's own work (torch.compile's guards and wrappers, the
# profiler's markers): framework overhead, mapped, by prefix.
OVERHEAD_PREFIXES: tuple[str, ...] = (
    "Torch-Compiled Region",
    "TorchDynamo Cache Lookup",
    "Pregraph bytecode",
    "## Call CompiledFxGraph",
    "## ",
    "AOTDispatcher",
    "CompiledFunction",
    "ProfilerStep",
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "Activity Buffer Request",
    "inductor_",
)

# CUDA kernels whose own name says what they do better than the op that launched them: cuDNN's layout transposes
# inside `aten::cudnn_convolution` are data movement (XLA shows its transposes as their own ops), and copies/sets.
KERNEL_OVERRIDES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"nchwToNhwc|nhwcToNchw|nchwToNchwc|nchwcToNchw|transpose_readWrite", re.I), "data_movement"),
    (re.compile(r"^Memcpy|^Memset|memcpy|memset", re.I), "data_movement"),
)

# Fallback for a kernel no op launched (a CUDA graph replay, say): its name's usual vocabulary. First match wins.
KERNEL_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"fmha|flash|attention|_sdpa", re.I), "attention"),
    (re.compile(r"fprop|dgrad|wgrad|conv|winograd|implicit_gemm", re.I), "convolution"),
    (re.compile(r"gemm|gemv|cublas|cutlass|matmul|_mm_", re.I), "matmul"),
    (re.compile(r"bn_fw|batch_norm|layer_norm|group_norm|rms_norm|batchnorm|layernorm", re.I), "normalization"),
    (re.compile(r"pool|reduce_kernel|softmax|reduction", re.I), "pooling_reduction"),
    (re.compile(r"elementwise|unrolled|activation|relu|clamp", re.I), "elementwise"),
    (re.compile(r"copy|transpose|permute|cat_|gather|index", re.I), "data_movement"),
)

# `graph_0_cpp_fused_relu_3`: C++ kernels as the profiler records them (TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE=1).
_FUSED = re.compile(r"^(?:graph_\d+_)?(?:triton_(?P<kind>[a-z]+)|cpp)_fused_(?P<ops>.*?)(?:_\d+)?$")
# Inductor's kernel kinds that are loops over elements (pointwise, reductions, C++ loops), never a GEMM.
_LOOP_KINDS = frozenset({"poi", "red", "per", "cpp"})
_VOCABULARY = sorted(TORCH_OPS, key=len, reverse=True)


def bare(name: str) -> str:
    """`aten::addmm` -> `addmm` (any namespace: aten, mkldnn, mkl, inductor, ...)."""
    return name.rsplit("::", 1)[-1].strip()


def fused_ops(name: str) -> tuple[str, list[str]] | None:
    """(kind, op names) of an Inductor kernel name such as
    `triton_poi_fused__native_batch_norm_legit_no_training_relu_3` or `cpp_fused_add_relu_5` (kind: poi pointwise,
    red/per reduction, tem template, cpp a C++ loop); None for any other name. Op names are read greedily with the
    longest known name first; a word no name starts is kept as an unknown op."""
    match = _FUSED.match(name)
    if not match:
        return None
    text, ops = match["ops"], []
    while text:
        found = next(
            (op for op in _VOCABULARY if text.startswith(op) and text[len(op) : len(op) + 1] in ("", "_")), None
        )
        if found is None:
            found, _, _ = text.partition("_")
        ops.append(found)
        text = text[len(found) :]
        text = text[1:] if text.startswith("_") else text
    return match["kind"] or "cpp", [op for op in ops if op]


@cache
def fused_category(name: str) -> str | None:
    """The category of an Inductor fused kernel by the ops its name lists, the heaviest winning; None if it names
    none known. A pointwise, reduction or C++ loop kernel (`poi`, `red`, `per`, `cpp_fused`) never holds a
    convolution's or matmul's arithmetic (Inductor calls those as extern kernels or templates): such a name there
    means its epilogue or layout copy, so it counts as elementwise unless the kernel names lighter ops too."""
    parsed = fused_ops(name)
    if parsed is None:
        return None
    kind, ops = parsed
    categories = [TORCH_OPS[op] for op in ops if op in TORCH_OPS]
    if kind in _LOOP_KINDS:
        light = [category for category in categories if category not in COMPUTE_HEAVY]
        if not light and categories:
            return "elementwise"
        categories = light
    return heaviest(categories)


@cache
def op_category(name: str) -> str | None:
    """The category of a host op or span by its name; None when the table does not know it."""
    if name.startswith(OVERHEAD_PREFIXES):
        return "other"
    fused = fused_category(name)
    if fused is not None:
        return fused
    return TORCH_OPS.get(bare(name))


def kernel_override(kernel: str) -> str | None:
    """A category a CUDA kernel's own name imposes over its launching op's (layout transposes, copies)."""
    return next((category for pattern, category in KERNEL_OVERRIDES if pattern.search(kernel)), None)


@cache
def kernel_category(kernel: str) -> str | None:
    """A CUDA kernel's category from its own name, for a kernel no op launched; None when nothing matches."""
    fused = fused_category(kernel)
    if fused is not None:
        return fused
    return kernel_override(kernel) or next((c for pattern, c in KERNEL_PATTERNS if pattern.search(kernel)), None)


def short_kernel(kernel: str) -> str:
    """A CUDA kernel's name without its template arguments and signature, for `top`."""
    text = kernel.removeprefix("void ").split("(")[0].split("<")[0]
    return text.rsplit("::", 1)[-1][:80]
