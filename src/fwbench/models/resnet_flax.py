"""ResNet-50 as a Flax twin of torchvision.models.resnet50 (v1.5: stride on the 3x3 conv), module names mirroring
torchvision's (conv1, bn1, layer1/0/conv1, layer1/0/downsample/0, ..., fc)."""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from fwbench.models.layers import BatchNorm, conv
from fwbench.models.resnet_shape import BN_EPS, BN_MOMENTUM, EXPANSION, PLANES, RESNET50_BLOCKS


class Downsample(nn.Module):
    features: int
    stride: int

    @nn.compact
    def __call__(self, x, train: bool):
        x = conv(self.features, 1, stride=self.stride, name="0")(x)
        return BatchNorm(BN_EPS, BN_MOMENTUM, name="1")(x, train)


class Bottleneck(nn.Module):
    planes: int
    stride: int
    downsample: bool

    @nn.compact
    def __call__(self, x, train: bool):
        identity = x
        out = nn.relu(BatchNorm(BN_EPS, BN_MOMENTUM, name="bn1")(conv(self.planes, 1, name="conv1")(x), train))
        out = conv(self.planes, 3, stride=self.stride, name="conv2")(out)
        out = nn.relu(BatchNorm(BN_EPS, BN_MOMENTUM, name="bn2")(out, train))
        out = BatchNorm(BN_EPS, BN_MOMENTUM, name="bn3")(conv(self.planes * EXPANSION, 1, name="conv3")(out), train)
        if self.downsample:
            identity = Downsample(self.planes * EXPANSION, self.stride, name="downsample")(x, train)
        return nn.relu(out + identity)


class Stage(nn.Module):
    planes: int
    blocks: int
    stride: int

    @nn.compact
    def __call__(self, x, train: bool):
        for index in range(self.blocks):
            stride = self.stride if index == 0 else 1
            downsample = index == 0 and (stride != 1 or x.shape[-1] != self.planes * EXPANSION)
            x = Bottleneck(self.planes, stride, downsample, name=str(index))(x, train)
        return x


class ResNet(nn.Module):
    layers: tuple[int, ...]
    num_classes: int

    @nn.compact
    def __call__(self, x, train: bool = False, deterministic: bool | None = None):
        del deterministic  # no dropout in ResNet
        x = conv(64, 7, stride=2, name="conv1")(x)
        x = nn.relu(BatchNorm(BN_EPS, BN_MOMENTUM, name="bn1")(x, train))
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
        for index, (planes, blocks) in enumerate(zip(PLANES, self.layers, strict=True)):
            x = Stage(planes, blocks, 1 if index == 0 else 2, name=f"layer{index + 1}")(x, train)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes, name="fc")(x)


def resnet50(*, num_classes: int, image_size: int) -> ResNet:
    del image_size  # global average pooling makes the network resolution-agnostic
    return ResNet(RESNET50_BLOCKS, num_classes)
