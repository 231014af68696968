"""EfficientNet-B0 as a Flax twin of torchvision.models.efficientnet_b0.

Module names mirror torchvision (features/0 stem, features/1..7 stages of MBConv blocks features/S/I/block/M,
features/8 head conv, classifier/1). BatchNorm is eps 1e-5 with torch momentum 0.1; SE squeezes to
max(1, block input // 4) with SiLU and a sigmoid gate; stochastic depth grows linearly to 0.2 over the 16 blocks
and, like dropout, is the identity in eval.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from fwbench.models.efficientnet_shape import (
    B0,
    BN_EPS,
    BN_MOMENTUM,
    DROPOUT,
    STOCHASTIC_DEPTH_PROB,
    StageConfig,
    stochastic_depth_rate,
)
from fwbench.models.layers import ConvNormActivation, SqueezeExcitation, StochasticDepth, make_divisible


def _cna(features, kernel, activation, *, stride=1, groups=1, name):
    return ConvNormActivation(features, kernel, stride, groups, activation, BN_EPS, BN_MOMENTUM, name=name)


class MBBlock(nn.Module):
    """The Sequential `block` of torchvision's MBConv."""

    expand_ratio: int
    kernel: int
    stride: int
    input_channels: int
    out_channels: int

    @nn.compact
    def __call__(self, x, train: bool):
        expanded, index = make_divisible(self.input_channels * self.expand_ratio, 8), 0
        if expanded != self.input_channels:
            x = _cna(expanded, 1, nn.silu, name=str(index))(x, train)
            index += 1
        x = _cna(expanded, self.kernel, nn.silu, stride=self.stride, groups=expanded, name=str(index))(x, train)
        x = SqueezeExcitation(max(1, self.input_channels // 4), nn.silu, nn.sigmoid, name=str(index + 1))(x)
        return _cna(self.out_channels, 1, None, name=str(index + 2))(x, train)


class MBConv(nn.Module):
    expand_ratio: int
    kernel: int
    stride: int
    input_channels: int
    out_channels: int
    stochastic_depth: float

    @nn.compact
    def __call__(self, x, train: bool, deterministic: bool):
        block = MBBlock(
            self.expand_ratio, self.kernel, self.stride, self.input_channels, self.out_channels, name="block"
        )
        out = block(x, train)
        if self.stride == 1 and self.input_channels == self.out_channels:
            out = StochasticDepth(self.stochastic_depth)(out, deterministic) + x
        return out


class Stage(nn.Module):
    cnf: StageConfig
    first_block_id: int
    total_blocks: int
    stochastic_depth_prob: float

    @nn.compact
    def __call__(self, x, train: bool, deterministic: bool):
        cnf = self.cnf
        for index in range(cnf.num_layers):
            rate = stochastic_depth_rate(self.first_block_id + index, self.total_blocks, self.stochastic_depth_prob)
            x = MBConv(
                cnf.expand_ratio,
                cnf.kernel,
                cnf.stride if index == 0 else 1,
                cnf.input_channels if index == 0 else cnf.out_channels,
                cnf.out_channels,
                rate,
                name=str(index),
            )(x, train, deterministic)
        return x


class Features(nn.Module):
    stages: tuple[StageConfig, ...]
    stochastic_depth_prob: float

    @nn.compact
    def __call__(self, x, train: bool, deterministic: bool):
        x = _cna(self.stages[0].input_channels, 3, nn.silu, stride=2, name="0")(x, train)
        total, block_id = sum(s.num_layers for s in self.stages), 0
        for index, cnf in enumerate(self.stages, start=1):
            x = Stage(cnf, block_id, total, self.stochastic_depth_prob, name=str(index))(x, train, deterministic)
            block_id += cnf.num_layers
        last = 4 * self.stages[-1].out_channels
        return _cna(last, 1, nn.silu, name=str(len(self.stages) + 1))(x, train)


class Classifier(nn.Module):
    num_classes: int
    dropout: float

    @nn.compact
    def __call__(self, x, deterministic: bool):
        x = nn.Dropout(self.dropout)(x, deterministic=deterministic)
        return nn.Dense(self.num_classes, name="1")(x)


class EfficientNet(nn.Module):
    stages: tuple[StageConfig, ...]
    num_classes: int
    dropout: float = DROPOUT
    stochastic_depth_prob: float = STOCHASTIC_DEPTH_PROB

    @nn.compact
    def __call__(self, x, train: bool = False, deterministic: bool | None = None):
        deterministic = not train if deterministic is None else deterministic
        x = Features(self.stages, self.stochastic_depth_prob, name="features")(x, train, deterministic)
        x = jnp.mean(x, axis=(1, 2))
        return Classifier(self.num_classes, self.dropout, name="classifier")(x, deterministic)


def efficientnet_b0(*, num_classes: int, image_size: int) -> EfficientNet:
    del image_size
    return EfficientNet(B0, num_classes)
