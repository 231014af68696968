"""MobileNetV3-Small as a Flax twin of torchvision.models.mobilenet_v3_small.

Module names mirror torchvision (features/N/0|1 for Conv2dNormActivation, features/N/block/M for inverted
residuals, block/M/fc1|fc2 for squeeze-excitation, classifier/0 and classifier/3). BatchNorm is eps 1e-3 with torch
momentum 0.01; SE squeezes to _make_divisible(expanded // 4, 8) with a Hardsigmoid gate; the block table below is
torchvision's `_mobilenet_v3_conf("mobilenet_v3_small")` at width 1.0.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from fwbench.models.layers import ConvNormActivation, SqueezeExcitation, make_divisible
from fwbench.models.mobilenet_shape import BN_EPS, BN_MOMENTUM, DROPOUT, LAST_CHANNEL, SMALL, BlockConfig


def _cna(features, kernel, activation, *, stride=1, groups=1, name):
    return ConvNormActivation(features, kernel, stride, groups, activation, BN_EPS, BN_MOMENTUM, name=name)


class Block(nn.Module):
    """The Sequential `block` of torchvision's InvertedResidual; its indices depend on the config."""

    cnf: BlockConfig

    @nn.compact
    def __call__(self, x, train: bool):
        cnf, index = self.cnf, 0
        activation = jax.nn.hard_swish if cnf.use_hs else nn.relu
        if cnf.expanded_channels != cnf.input_channels:
            x = _cna(cnf.expanded_channels, 1, activation, name=str(index))(x, train)
            index += 1
        x = _cna(
            cnf.expanded_channels,
            cnf.kernel,
            activation,
            stride=cnf.stride,
            groups=cnf.expanded_channels,
            name=str(index),
        )(x, train)
        index += 1
        if cnf.use_se:
            squeeze = make_divisible(cnf.expanded_channels // 4, 8)
            x = SqueezeExcitation(squeeze, nn.relu, jax.nn.hard_sigmoid, name=str(index))(x)
            index += 1
        return _cna(cnf.out_channels, 1, None, name=str(index))(x, train)


class InvertedResidual(nn.Module):
    cnf: BlockConfig

    @nn.compact
    def __call__(self, x, train: bool):
        out = Block(self.cnf, name="block")(x, train)
        if self.cnf.stride == 1 and self.cnf.input_channels == self.cnf.out_channels:
            out = out + x
        return out


class Features(nn.Module):
    blocks: tuple[BlockConfig, ...]

    @nn.compact
    def __call__(self, x, train: bool):
        x = _cna(self.blocks[0].input_channels, 3, jax.nn.hard_swish, stride=2, name="0")(x, train)
        for index, cnf in enumerate(self.blocks, start=1):
            x = InvertedResidual(cnf, name=str(index))(x, train)
        return _cna(6 * self.blocks[-1].out_channels, 1, jax.nn.hard_swish, name=str(len(self.blocks) + 1))(x, train)


class Classifier(nn.Module):
    hidden: int
    num_classes: int
    dropout: float

    @nn.compact
    def __call__(self, x, deterministic: bool):
        x = jax.nn.hard_swish(nn.Dense(self.hidden, name="0")(x))
        x = nn.Dropout(self.dropout)(x, deterministic=deterministic)
        return nn.Dense(self.num_classes, name="3")(x)


class MobileNetV3(nn.Module):
    blocks: tuple[BlockConfig, ...]
    last_channel: int
    num_classes: int
    dropout: float = DROPOUT

    @nn.compact
    def __call__(self, x, train: bool = False, deterministic: bool | None = None):
        deterministic = not train if deterministic is None else deterministic
        x = Features(self.blocks, name="features")(x, train)
        x = jnp.mean(x, axis=(1, 2))
        return Classifier(self.last_channel, self.num_classes, self.dropout, name="classifier")(x, deterministic)


def mobilenet_v3_small(*, num_classes: int, image_size: int) -> MobileNetV3:
    del image_size
    return MobileNetV3(SMALL, LAST_CHANNEL, num_classes)
