"""The small CNN as a Flax Linen twin of small_cnn_torch: same module tree names (features/0/0 = conv,
features/0/1 = batch norm, classifier), explicit symmetric padding and torch's BatchNorm conventions, so that a
converted state_dict gives the same function."""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from fwbench.models.small_cnn_torch import STRIDES, WIDTHS

TORCH_BN_MOMENTUM = 0.1


class ConvBNReLU(nn.Module):
    features: int
    stride: int

    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.Conv(self.features, (3, 3), strides=self.stride, padding=((1, 1), (1, 1)), use_bias=False, name="0")(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=1.0 - TORCH_BN_MOMENTUM, epsilon=1e-5, name="1")(x)
        return nn.relu(x)


class Features(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        for index, (width, stride) in enumerate(zip(WIDTHS, STRIDES, strict=True)):
            x = ConvBNReLU(width, stride, name=str(index))(x, train)
        return x


class SmallCNN(nn.Module):
    num_classes: int

    @nn.compact
    def __call__(self, x, train: bool = False):
        x = Features(name="features")(x, train)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes, name="classifier")(x)


def small_cnn(*, num_classes: int, image_size: int) -> SmallCNN:
    del image_size
    return SmallCNN(num_classes)
