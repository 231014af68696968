"""TensorFlow's mapping table: op types (`Conv2D`, `FusedBatchNormV3`, oneDNN's `_MklNative...` rewrites) to the
categories, for what runs outside XLA and for XLA instructions TensorFlow names after the op they came from.

The study's TensorFlow cells run one XLA cluster (`jit_compile=True`), whose instructions XLA's table maps
(fwbench.trackers.op_profile.xla_ops); TensorFlow's bridge names them after their TF op (`Conv2D.3`, `MatMul.2`),
so this table reads such a name when no HLO text is at hand. The launch and function-call ops that run a cluster
are framework overhead ("other").
"""

from __future__ import annotations

import re

_SUFFIX = re.compile(r"\.\d+$")


def _names(category: str, text: str) -> dict[str, str]:
    return dict.fromkeys(text.split(), category)


TF_OPS: dict[str, str] = {
    **_names(
        "convolution",
        """Conv2D Conv3D Conv1D DepthwiseConv2dNative _FusedConv2D _FusedDepthwiseConv2dNative Conv2DBackpropInput
        Conv3DBackpropInputV2 _MklConv2D _MklNativeConv2D _MklFusedConv2D _MklNativeFusedConv2D
        _MklDepthwiseConv2dNative _MklNativeDepthwiseConv2dNative _MklFusedDepthwiseConv2dNative
        _MklNativeFusedDepthwiseConv2dNative _MklConv2DWithBias _MklNativeConv2DWithBias Conv""",
    ),
    **_names(
        "matmul",
        """MatMul BatchMatMul BatchMatMulV2 BatchMatMulV3 _FusedMatMul _MklMatMul _MklNativeMatMul _MklFusedMatMul
        _MklNativeFusedMatMul _MklBatchMatMul _MklBatchMatMulV2 _MklNativeBatchMatMulV2 _MklFusedBatchMatMulV2
        Einsum _MklEinsum XlaDot XlaDotV2""",
    ),
    **_names("attention", "_FusedSoftmaxAttention MultiHeadAttention"),
    **_names(
        "normalization",
        """FusedBatchNorm FusedBatchNormV2 FusedBatchNormV3 _FusedBatchNormEx _MklFusedBatchNorm _MklFusedBatchNormV2
        _MklFusedBatchNormV3 _MklNativeFusedBatchNorm _MklNativeFusedBatchNormV2 _MklNativeFusedBatchNormV3
        _MklFusedBatchNormEx _MklNativeFusedBatchNormEx _MklLayerNorm LRN""",
    ),
    **_names(
        "elementwise",
        """Relu Relu6 Elu Selu LeakyRelu Gelu Sigmoid Tanh Softplus Softsign AddV2 Add AddN BiasAdd Mul Sub RealDiv
        Div DivNoNan Rsqrt Sqrt Square Exp Log Neg Abs Maximum Minimum Pow Erf Cast Select SelectV2 Less Greater
        Equal LogicalAnd Reciprocal SquaredDifference ClipByValue _MklRelu _MklNativeRelu _MklAdd _MklAddV2
        _MklMul _MklSwish _FusedAddV2 _MklLeakyRelu _MklNativeLeakyRelu _MklElu""",
    ),
    **_names(
        "pooling_reduction",
        """MaxPool MaxPoolV2 AvgPool MaxPool3D AvgPool3D _MklMaxPool _MklAvgPool _MklNativeMaxPool _MklNativeAvgPool
        _MklNativeMaxPool3D Mean Sum Max Min Prod ArgMax ArgMin Softmax LogSoftmax _MklSoftmax TopKV2 All Any""",
    ),
    **_names(
        "data_movement",
        """Transpose ConjugateTranspose _MklTranspose Reshape Pad PadV2 MirrorPad ConcatV2 Concat Pack Unpack
        Identity IdentityN StridedSlice Slice Split SplitV Squeeze ExpandDims GatherV2 GatherNd Tile Fill
        BroadcastTo _Send _Recv _HostSend _HostRecv _MklToTf _MklReshape _MklConcat _MklNativeConcatV2
        _MklTranspose _MklSlice CopyToDevice DeviceToHost HostToDevice MemcpyD2H MemcpyH2D MemcpyD2D Copy
        EagerCopyToDevice""",
    ),
    # Mapped, so not "unmapped": running a cluster or a function, variables and constants.
    **_names(
        "other",
        """XlaLaunch XlaLaunchV2 _XlaCompile _XlaRun _XlaMerge XlaCompile XlaRun PartitionedCall
        StatefulPartitionedCall ReadVariableOp VarHandleOp AssignVariableOp Const NoOp Placeholder _Arg _Retval
        Shape ShapeN Size Rank _Recv_ _ScopedAllocator""",
    ),
}


def op_category(name: str) -> str | None:
    """The category of a TF op type, of an event named `op_name:OpType`, or of an XLA instruction named after its
    TF op (`Conv2D.3`); None when the table does not know it. A function (`__inference_...`) is a call: other."""
    op_type = name.rsplit(":", 1)[-1].strip()
    if op_type.startswith(("__inference_", "__forward_", "__backward_")):
        return "other"
    return TF_OPS.get(_SUFFIX.sub("", op_type))
