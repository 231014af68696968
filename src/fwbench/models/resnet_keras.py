"""ResNet-50 as a Keras twin of torchvision.models.resnet50 (v1.5: stride on the 3x3 conv), module names mirroring
torchvision's (conv1, bn1, layer1/0/conv1, layer1/0/downsample/0, ..., fc)."""

from __future__ import annotations

import math

from fwbench.models.keras_layers import (
    BatchNorm,
    Conv2d,
    Dense,
    Module,
    Sequential,
    Twin,
    build_twin,
    global_average_pool,
)
from fwbench.models.resnet_shape import BN_EPS, BN_MOMENTUM, EXPANSION, PLANES, RESNET50_BLOCKS
from fwbench.models.tensorflow_import import tf


def _bn(name: str, features: int) -> BatchNorm:
    return BatchNorm(name, features, eps=BN_EPS, momentum=BN_MOMENTUM)


class Bottleneck(Module):
    def __init__(self, name: str, in_channels: int, planes: int, stride: int):
        super().__init__(name)
        out = planes * EXPANSION
        self.conv1 = self.add(Conv2d("conv1", in_channels, planes, 1))
        self.bn1 = self.add(_bn("bn1", planes))
        self.conv2 = self.add(Conv2d("conv2", planes, planes, 3, stride=stride))
        self.bn2 = self.add(_bn("bn2", planes))
        self.conv3 = self.add(Conv2d("conv3", planes, out, 1))
        self.bn3 = self.add(_bn("bn3", out))
        self.downsample = None
        if stride != 1 or in_channels != out:
            conv = Conv2d("0", in_channels, out, 1, stride=stride)
            self.downsample = self.add(Sequential("downsample", conv, _bn("1", out)))

    def call(self, x, training=False, seed=None):
        out = tf.nn.relu(self.bn1(self.conv1(x), training=training))
        out = tf.nn.relu(self.bn2(self.conv2(out), training=training))
        out = self.bn3(self.conv3(out), training=training)
        identity = x if self.downsample is None else self.downsample(x, training=training)
        return tf.nn.relu(out + identity)


class ResNet(Module):
    def __init__(self, blocks: tuple[int, ...], num_classes: int):
        super().__init__("resnet50")
        self.conv1 = self.add(Conv2d("conv1", 3, 64, 7, stride=2))
        self.bn1 = self.add(_bn("bn1", 64))
        cin, stages = 64, []
        for index, (planes, count) in enumerate(zip(PLANES, blocks, strict=True)):
            layer = []
            for block in range(count):
                stride = 2 if index > 0 and block == 0 else 1
                layer.append(Bottleneck(str(block), cin, planes, stride))
                cin = planes * EXPANSION
            stages.append(self.add(Sequential(f"layer{index + 1}", *layer)))
        self.stages = stages
        self.fc = self.add(Dense("fc", cin, num_classes))

    def call(self, x, training=False, seed=None):
        x = tf.nn.relu(self.bn1(self.conv1(x), training=training))
        # torch pads with -inf on both sides; XLA rejects pooling with explicit padding, so pad first
        x = tf.nn.max_pool2d(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], constant_values=-math.inf), 3, 2, "VALID")
        for stage in self.stages:
            x = stage(x, training=training)
        return self.fc(global_average_pool(x))


def resnet50(*, num_classes: int, image_size: int, dtype: str = "float32") -> Twin:
    del image_size  # global average pooling makes the network resolution-agnostic
    return build_twin(lambda: ResNet(RESNET50_BLOCKS, num_classes), dtype)
