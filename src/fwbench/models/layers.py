"""Flax layers with PyTorch's exact semantics, shared by every twin.

Flax's own BatchNorm differs from torch's in two ways that break training parity: its momentum is the weight of the
old statistic (torch's m is the weight of the new batch, so Flax needs 1-m), and it updates the running variance
with the biased batch variance where torch uses the unbiased one. This BatchNorm takes torch's arguments verbatim.

In train mode it also sows the batch's own statistics (mean and the unbiased variance torch stores) into the
`batch_moments` collection, mirroring `batch_stats` key for key. Sowing costs nothing unless that collection is
mutable; the trainer's BatchNorm recalibration makes it mutable to average the statistics over batches, which is
what torch's cumulative mode (momentum=None) computes.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from fwbench.models.channels import make_divisible  # noqa: F401  (re-exported: framework-free since the Keras twins)

MOMENTS = "batch_moments"


def _latest(_previous, value):
    return value


def _nothing():
    return None


class BatchNorm(nn.Module):
    """torch.nn.BatchNorm2d over the last (channel) axis: params scale/bias, batch_stats mean/var."""

    epsilon: float = 1e-5
    momentum: float = 0.1  # torch convention: running = (1 - momentum) * running + momentum * batch

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        features = x.shape[-1]
        scale = self.param("scale", nn.initializers.ones, (features,), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (features,), jnp.float32)
        running_mean = self.variable("batch_stats", "mean", lambda: jnp.zeros((features,), jnp.float32))
        running_var = self.variable("batch_stats", "var", lambda: jnp.ones((features,), jnp.float32))
        if train:
            axes = tuple(range(x.ndim - 1))
            mean = jnp.mean(x, axis=axes)
            var = jnp.mean(jnp.square(x - mean), axis=axes)  # biased: what torch normalises with
            if not self.is_initializing():
                count = x.size // features
                unbiased = var * (count / max(count - 1, 1))  # what torch stores
                m = self.momentum
                running_mean.value = (1.0 - m) * running_mean.value + m * jax.lax.stop_gradient(mean)
                running_var.value = (1.0 - m) * running_var.value + m * jax.lax.stop_gradient(unbiased)
                self.sow(MOMENTS, "mean", jax.lax.stop_gradient(mean), reduce_fn=_latest, init_fn=_nothing)
                self.sow(MOMENTS, "var", jax.lax.stop_gradient(unbiased), reduce_fn=_latest, init_fn=_nothing)
        else:
            mean, var = running_mean.value, running_var.value
        return normalised(x, mean, var, scale, bias, self.epsilon)


def normalised(x: jax.Array, mean, var, scale, bias, epsilon: float) -> jax.Array:
    """(x - mean) / sqrt(var + epsilon) * scale + bias computed in at least float32 and returned in x's dtype, as
    torch's CPU and CUDA kernels compute a bfloat16 BatchNorm: in bfloat16, `x - mean` loses the input-dependent part
    wherever the mean dwarfs it (the Keras twin's bf16 logits were up to 10 times less accurate than PyTorch's)."""
    wide = jnp.promote_types(x.dtype, jnp.float32)
    y = (x.astype(wide) - mean.astype(wide)) * jax.lax.rsqrt(var.astype(wide) + epsilon)
    return (y * scale.astype(wide) + bias.astype(wide)).astype(x.dtype)


def conv(
    features: int,
    kernel: int,
    *,
    stride: int = 1,
    groups: int = 1,
    dilation: int = 1,
    bias: bool = False,
    name: str | None = None,
) -> nn.Conv:
    """nn.Conv with torch's symmetric padding (k-1)//2*d, never 'SAME' (which pads asymmetrically at stride 2)."""
    pad = (kernel - 1) // 2 * dilation
    return nn.Conv(
        features,
        (kernel, kernel),
        strides=stride,
        padding=((pad, pad), (pad, pad)),
        kernel_dilation=dilation,
        feature_group_count=groups,
        use_bias=bias,
        name=name,
    )


class ConvNormActivation(nn.Module):
    """torchvision.ops.Conv2dNormActivation: Sequential(0 = conv, 1 = BatchNorm, 2 = activation)."""

    features: int
    kernel: int
    stride: int = 1
    groups: int = 1
    activation: object = None  # a function such as nn.relu, or None
    bn_eps: float = 1e-5
    bn_momentum: float = 0.1

    @nn.compact
    def __call__(self, x, train: bool):
        x = conv(self.features, self.kernel, stride=self.stride, groups=self.groups, name="0")(x)
        x = BatchNorm(self.bn_eps, self.bn_momentum, name="1")(x, train)
        return x if self.activation is None else self.activation(x)


class SqueezeExcitation(nn.Module):
    """torchvision.ops.SqueezeExcitation: fc1/fc2 are 1x1 convs with bias."""

    squeeze: int
    activation: object = nn.relu
    scale_activation: object = nn.sigmoid

    @nn.compact
    def __call__(self, x):
        scale = jnp.mean(x, axis=(1, 2), keepdims=True)
        scale = self.activation(conv(self.squeeze, 1, bias=True, name="fc1")(scale))
        scale = self.scale_activation(conv(x.shape[-1], 1, bias=True, name="fc2")(scale))
        return x * scale


class StochasticDepth(nn.Module):
    """torchvision.ops.StochasticDepth in 'row' mode: drop whole samples of a residual branch while training."""

    rate: float

    @nn.compact
    def __call__(self, x, deterministic: bool):
        if deterministic or self.rate == 0.0:
            return x
        survival = 1.0 - self.rate
        keep = jax.random.bernoulli(self.make_rng("dropout"), survival, (x.shape[0],) + (1,) * (x.ndim - 1))
        return x * keep / survival if survival > 0.0 else x * keep
