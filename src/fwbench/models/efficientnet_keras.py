"""EfficientNet-B0 as a Keras twin of torchvision.models.efficientnet_b0.

Module names mirror torchvision (features/0 stem, features/1..7 stages of MBConv blocks features/S/I/block/M,
features/8 head conv, classifier/1). BatchNorm is eps 1e-5 with torch momentum 0.1; SE squeezes to
max(1, block input // 4) with SiLU and a sigmoid gate; stochastic depth grows linearly to 0.2 over the 16 blocks
and, like dropout, acts only in training mode with a seed. The stage table is shared with the Flax twin
(fwbench.models.efficientnet_shape). Depthwise convolutions run as tf.nn.depthwise_conv2d.
"""

from __future__ import annotations

from fwbench.models.channels import make_divisible
from fwbench.models.efficientnet_shape import B0, BN_EPS, BN_MOMENTUM, DROPOUT, StageConfig, stochastic_depth_rate
from fwbench.models.keras_layers import (
    Dense,
    Dropout,
    Module,
    Sequential,
    SqueezeExcitation,
    StochasticDepth,
    Twin,
    build_twin,
    conv_norm_activation,
    global_average_pool,
    sigmoid,
    silu,
)


def _cna(name, cin, cout, kernel, activation, *, stride=1, groups=1):
    return conv_norm_activation(
        name, cin, cout, kernel, activation, stride=stride, groups=groups, bn_eps=BN_EPS, bn_momentum=BN_MOMENTUM
    )


class MBConv(Module):
    def __init__(self, name: str, cnf: StageConfig, stride: int, cin: int, rate: float):
        super().__init__(name)
        expanded = make_divisible(cin * cnf.expand_ratio, 8)
        layers = []
        if expanded != cin:
            layers.append(_cna("0", cin, expanded, 1, silu))
        layers.append(_cna(str(len(layers)), expanded, expanded, cnf.kernel, silu, stride=stride, groups=expanded))
        layers.append(SqueezeExcitation(str(len(layers)), expanded, max(1, cin // 4), silu, sigmoid))
        layers.append(_cna(str(len(layers)), expanded, cnf.out_channels, 1, None))
        self.block = self.add(Sequential("block", *layers))
        self.stochastic_depth = self.add(StochasticDepth("stochastic_depth", rate))
        self.residual = stride == 1 and cin == cnf.out_channels

    def call(self, x, training=False, seed=None):
        out = self.block(x, training=training)
        return self.stochastic_depth(out, training=training, seed=seed) + x if self.residual else out


class EfficientNet(Module):
    def __init__(self, stages: tuple[StageConfig, ...], num_classes: int, dropout: float):
        super().__init__("efficientnet_b0")
        layers = [_cna("0", 3, stages[0].input_channels, 3, silu, stride=2)]
        total, block_id = sum(s.num_layers for s in stages), 0
        for index, cnf in enumerate(stages, start=1):
            blocks = []
            for i in range(cnf.num_layers):
                cin, stride = (cnf.input_channels, cnf.stride) if i == 0 else (cnf.out_channels, 1)
                blocks.append(MBConv(str(i), cnf, stride, cin, stochastic_depth_rate(block_id, total)))
                block_id += 1
            layers.append(Sequential(str(index), *blocks))
        last = 4 * stages[-1].out_channels
        layers.append(_cna(str(len(stages) + 1), stages[-1].out_channels, last, 1, silu))
        self.features = self.add(Sequential("features", *layers))
        self.classifier = self.add(Sequential("classifier", Dropout("0", dropout), Dense("1", last, num_classes)))

    def call(self, x, training=False, seed=None):
        x = global_average_pool(self.features(x, training=training, seed=seed))
        return self.classifier(x, training=training, seed=seed)


def efficientnet_b0(*, num_classes: int, image_size: int, dtype: str = "float32") -> Twin:
    del image_size
    return build_twin(lambda: EfficientNet(B0, num_classes, DROPOUT), dtype)
