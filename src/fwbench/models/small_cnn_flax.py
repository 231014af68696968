"""The small CNN as a Flax Linen twin of small_cnn_torch: same module tree names (features/0/0 = conv,
features/0/1 = batch norm, classifier) and torch's conv padding and BatchNorm semantics, so that a converted
state_dict gives the same function."""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from fwbench.models.layers import ConvNormActivation
from fwbench.models.small_cnn_shape import STRIDES, WIDTHS


class Features(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        for index, (width, stride) in enumerate(zip(WIDTHS, STRIDES, strict=True)):
            x = ConvNormActivation(width, 3, stride, activation=nn.relu, name=str(index))(x, train)
        return x


class SmallCNN(nn.Module):
    num_classes: int

    @nn.compact
    def __call__(self, x, train: bool = False, deterministic: bool | None = None):
        del deterministic  # no dropout
        x = Features(name="features")(x, train)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes, name="classifier")(x)


def small_cnn(*, num_classes: int, image_size: int) -> SmallCNN:
    del image_size
    return SmallCNN(num_classes)
