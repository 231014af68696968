"""MobileNetV3-Small as a Keras twin of torchvision.models.mobilenet_v3_small.

Module names mirror torchvision (features/N/0|1 for Conv2dNormActivation, features/N/block/M for inverted
residuals, block/M/fc1|fc2 for squeeze-excitation, classifier/0 and classifier/3). BatchNorm is eps 1e-3 with torch
momentum 0.01; SE squeezes to _make_divisible(expanded // 4, 8) with a Hardsigmoid gate; the block table is shared
with the Flax twin (fwbench.models.mobilenet_shape). Depthwise convolutions run as tf.nn.depthwise_conv2d.
"""

from __future__ import annotations

from fwbench.models.channels import make_divisible
from fwbench.models.keras_layers import (
    Dense,
    Dropout,
    Module,
    Sequential,
    SqueezeExcitation,
    Twin,
    build_twin,
    conv_norm_activation,
    global_average_pool,
    hardsigmoid,
    hardswish,
    relu,
)
from fwbench.models.mobilenet_shape import BN_EPS, BN_MOMENTUM, DROPOUT, LAST_CHANNEL, SMALL, BlockConfig


def _cna(name, cin, cout, kernel, activation, *, stride=1, groups=1):
    return conv_norm_activation(
        name, cin, cout, kernel, activation, stride=stride, groups=groups, bn_eps=BN_EPS, bn_momentum=BN_MOMENTUM
    )


class InvertedResidual(Module):
    def __init__(self, name: str, cnf: BlockConfig):
        super().__init__(name)
        activation = hardswish if cnf.use_hs else relu
        layers = []
        if cnf.expanded_channels != cnf.input_channels:
            layers.append(_cna(str(len(layers)), cnf.input_channels, cnf.expanded_channels, 1, activation))
        expanded = cnf.expanded_channels
        depthwise = _cna(
            str(len(layers)), expanded, expanded, cnf.kernel, activation, stride=cnf.stride, groups=expanded
        )
        layers.append(depthwise)
        if cnf.use_se:
            squeeze = make_divisible(expanded // 4, 8)
            layers.append(SqueezeExcitation(str(len(layers)), expanded, squeeze, relu, hardsigmoid))
        layers.append(_cna(str(len(layers)), expanded, cnf.out_channels, 1, None))
        self.block = self.add(Sequential("block", *layers))
        self.residual = cnf.stride == 1 and cnf.input_channels == cnf.out_channels

    def call(self, x, training=False, seed=None):
        out = self.block(x, training=training)
        return out + x if self.residual else out


class MobileNetV3(Module):
    def __init__(self, blocks: tuple[BlockConfig, ...], last_channel: int, num_classes: int, dropout: float):
        super().__init__("mobilenet_v3_small")
        first = blocks[0].input_channels
        layers = [_cna("0", 3, first, 3, hardswish, stride=2)]
        layers += [InvertedResidual(str(index), cnf) for index, cnf in enumerate(blocks, start=1)]
        last_conv = 6 * blocks[-1].out_channels
        layers.append(_cna(str(len(blocks) + 1), blocks[-1].out_channels, last_conv, 1, hardswish))
        self.features = self.add(Sequential("features", *layers))
        self.classifier = self.add(
            Sequential(
                "classifier",
                Dense("0", last_conv, last_channel),
                hardswish,
                Dropout("2", dropout),
                Dense("3", last_channel, num_classes),
            )
        )

    def call(self, x, training=False, seed=None):
        x = global_average_pool(self.features(x, training=training))
        return self.classifier(x, training=training, seed=seed)


def mobilenet_v3_small(*, num_classes: int, image_size: int, dtype: str = "float32") -> Twin:
    del image_size
    return build_twin(lambda: MobileNetV3(SMALL, LAST_CHANNEL, num_classes, DROPOUT), dtype)
