"""Keras 3 layers (TensorFlow backend) with PyTorch's exact semantics, shared by every Keras twin.

Keras's own layers differ from torch's where training parity needs them equal: Conv2D's padding="same" pads
asymmetrically at stride 2 (torch pads (k-1)//2*d on both sides); BatchNormalization's momentum weighs the old
statistic, it stores the biased batch variance and it assigns its moving statistics inside every training call;
grouped Conv2D does not run on TensorFlow's CPU outside XLA. So the twins use these layers instead.

Every layer carries its torch module name and registers its children in torch's order, so a twin's variables form
the Flax-shaped tree keyed by torch module paths that fwbench.models.convert maps to and from torch state_dicts
(fwbench.models.keras_convert). Input widths are given at construction, as in torch, so every variable exists as
soon as a twin is built, and nothing is shape-inferred while tracing.

BatchNorm in training mode normalises with the batch's statistics and records them (`batch_mean`,
`batch_var_unbiased`, tensors of the current call or trace) without assigning its running statistics: the caller
decides, by calling `update_running_statistics(model)` in the same tf.function, so a train step moves the
statistics, a probe does not, and BatchNorm recalibration can read every layer's batch moments.

Randomness is stateless: dropout and stochastic depth act only when a twin is called with training=True and an
int32 seed tensor of shape (2,); each such layer folds its own fixed index into that seed, so a compiled train step
is a pure function of its seed and the same seed draws the same masks. (XLA's Philox kernels draw a different
stream from TensorFlow's own for the same seed: a seed reproduces its masks within one mode, compiled or not.)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import NamedTuple

from fwbench.models.tensorflow_import import keras, tf

# Counter-based RNG named explicitly: "auto_select" leaves the choice to the device, and a seed should draw the same
# masks wherever a twin runs.
RNG_ALG = "philox"


def torch_default_init() -> keras.initializers.Initializer:
    """torch's default weight init, kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)). The study loads
    torch weights into every twin, so this only keeps a freshly built twin's outputs in a sensible range. A new
    instance per variable: an unseeded Keras initializer fixes its seed when created, so a shared one would give
    every kernel of a shape the same values."""
    return keras.initializers.VarianceScaling(1.0 / 3.0, "fan_in", "uniform")


def normal_init(stddev: float) -> keras.initializers.Initializer:
    return keras.initializers.RandomNormal(stddev=stddev)


@contextlib.contextmanager
def dtype_policy(name: str) -> Iterator[None]:
    """Every layer built inside gets Keras dtype policy `name` (Keras keeps the policy per thread)."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


class Leaf(NamedTuple):
    collection: str  # "params" (trainable) or "batch_stats" (not trainable), as in Flax
    variable: keras.Variable


class Module(keras.layers.Layer):
    """A layer named like its torch module, whose children and variables are registered in torch's order.

    Every module is called as `module(x, training=..., seed=...)` so that containers need not know their children.
    """

    def __init__(self, name: str):
        super().__init__(name=name)
        self.torch_children: dict[str, Module] = {}
        self.leaves: dict[str, Leaf] = {}
        self.built = True  # variables are created here, not in build()

    def add(self, child: Module) -> Module:
        if child.name in self.torch_children:
            raise ValueError(f"{self.name} already has a child named {child.name}")
        self.torch_children[child.name] = child
        return child

    def variable(self, leaf: str, shape: tuple[int, ...], initializer, collection: str = "params") -> keras.Variable:
        variable = self.add_weight(shape=shape, initializer=initializer, trainable=collection == "params", name=leaf)
        self.leaves[leaf] = Leaf(collection, variable)
        return variable

    def call(self, x, training=False, seed=None):
        raise NotImplementedError


def modules(root: Module, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Module]]:
    """(torch module path, module) for `root` and every module below it, parents first, children in torch's order
    (torch's `model.modules()` order)."""
    yield prefix, root
    for name, child in root.torch_children.items():
        yield from modules(child, (*prefix, name))


def average(x: tf.Tensor, axis, keepdims: bool = False) -> tf.Tensor:
    """Mean accumulated in at least float32 and returned in x's dtype, as jnp.mean and torch's CPU kernels do for
    bfloat16 (a bfloat16 running sum over a feature map loses everything past ~256 terms)."""
    if x.dtype in (tf.bfloat16, tf.float16):
        return tf.cast(tf.reduce_mean(tf.cast(x, tf.float32), axis, keepdims), x.dtype)
    return tf.reduce_mean(x, axis, keepdims)


def relu(x):
    return tf.nn.relu(x)


def hardsigmoid(x):
    """torch.nn.Hardsigmoid: relu6(x + 3) / 6."""
    return tf.nn.relu6(x + 3.0) / 6.0


def hardswish(x):
    """torch.nn.Hardswish: x * relu6(x + 3) / 6."""
    return x * hardsigmoid(x)


def silu(x):
    return tf.nn.silu(x)


def sigmoid(x):
    return tf.sigmoid(x)


def gelu(x):
    """torch.nn.GELU's default, the exact form x * 0.5 * (1 + erf(x / sqrt(2))), written as torch computes it.
    Not tf.nn.gelu(approximate=False): its erfc form is off by ~5e-9 in float64, which the parity bar (1e-9) sees."""
    return x * 0.5 * (1.0 + tf.math.erf(x * math.sqrt(0.5)))


class Conv2d(Module):
    """torch.nn.Conv2d with a square kernel, kept in Flax's HWIO layout (H, W, in/groups, out) so that the shared
    conversion applies unchanged. Padding is torch's symmetric (k-1)//2*d unless given, never TensorFlow's 'SAME'.
    groups == in_channels (depthwise, MobileNetV3 and EfficientNet) runs as tf.nn.depthwise_conv2d, whose filter
    (H, W, in, out/in) is the same array reshaped: torch's output channel c*m+j is group c's j-th filter, as is
    depthwise_conv2d's."""

    def __init__(
        self,
        name: str,
        in_channels: int,
        out_channels: int,
        kernel: int,
        *,
        stride: int = 1,
        groups: int = 1,
        dilation: int = 1,
        padding: int | None = None,
        bias: bool = False,
    ):
        super().__init__(name)
        if groups not in (1, in_channels) or out_channels % groups:
            raise NotImplementedError(f"{name}: only plain (groups=1) and depthwise convolutions, got groups={groups}")
        self.depthwise = groups > 1
        self.stride, self.dilation, self.in_channels = stride, dilation, in_channels
        pad = (kernel - 1) // 2 * dilation if padding is None else padding
        self.padding = [[0, 0], [pad, pad], [pad, pad], [0, 0]] if pad else "VALID"
        shape = (kernel, kernel, in_channels // groups, out_channels)
        self.kernel = self.variable("kernel", shape, torch_default_init())
        self.bias = self.variable("bias", (out_channels,), "zeros") if bias else None

    def call(self, x, training=False, seed=None):
        if self.depthwise:
            height, width, _, out = self.kernel.shape
            kernel = tf.reshape(self.kernel, (height, width, self.in_channels, out // self.in_channels))
            strides = (1, self.stride, self.stride, 1)
            y = tf.nn.depthwise_conv2d(x, kernel, strides, self.padding, dilations=(self.dilation, self.dilation))
        else:
            y = tf.nn.conv2d(x, self.kernel, self.stride, self.padding, dilations=self.dilation)
        return y if self.bias is None else y + self.bias


class Dense(Module):
    """torch.nn.Linear over the last axis, kernel (in, out) as Flax keeps it."""

    def __init__(self, name: str, in_features: int, out_features: int, *, bias: bool = True):
        super().__init__(name)
        self.kernel = self.variable("kernel", (in_features, out_features), torch_default_init())
        self.bias = self.variable("bias", (out_features,), "zeros") if bias else None

    def call(self, x, training=False, seed=None):
        y = tf.matmul(x, self.kernel) if len(x.shape) == 2 else tf.tensordot(x, self.kernel, axes=1)
        return y if self.bias is None else y + self.bias


class BatchNorm(Module):
    """torch.nn.BatchNorm2d over the last axis: momentum is the weight of the new batch, the running variance takes
    the unbiased batch variance, normalisation uses the biased one. In training mode the running statistics are
    left alone and the batch moments recorded (see the module docstring and `update_running_statistics`)."""

    def __init__(self, name: str, features: int, *, eps: float = 1e-5, momentum: float = 0.1):
        super().__init__(name)
        self.eps, self.momentum = eps, momentum
        self.scale = self.variable("scale", (features,), "ones")
        self.bias = self.variable("bias", (features,), "zeros")
        self.mean = self.variable("mean", (features,), "zeros", "batch_stats")
        self.var = self.variable("var", (features,), "ones", "batch_stats")
        self.batch_mean: tf.Tensor | None = None
        self.batch_var_unbiased: tf.Tensor | None = None

    def call(self, x, training=False, seed=None):
        if not training:
            return self._normalise(x, self.mean, self.var)
        axes = list(range(len(x.shape) - 1))
        mean = average(x, axes)
        var = average(tf.square(x - mean), axes)  # two-pass and biased: what torch normalises with
        count = x.shape[:-1].num_elements()
        if count is None:  # a dynamic batch size
            count = tf.cast(tf.size(x) // tf.shape(x)[-1], tf.float32)
            factor = tf.cast(count / tf.maximum(count - 1.0, 1.0), x.dtype)
        else:
            factor = count / max(count - 1, 1)
        self.batch_mean = tf.stop_gradient(mean)
        self.batch_var_unbiased = tf.stop_gradient(var * factor)  # what torch stores
        return self._normalise(x, mean, var)

    def _normalise(self, x, mean, var):
        """In at least float32 and returned in x's dtype, as torch's CPU and CUDA kernels compute a bfloat16
        BatchNorm: rounding `x - mean` to bfloat16 where the mean dwarfs the input-dependent part made the bf16 twin
        up to 10 times less accurate than PyTorch in bfloat16 on the same weights (MobileNetV3-Small, 2026-11-28)."""
        if x.dtype in (tf.bfloat16, tf.float16):
            wide = [tf.cast(t, tf.float32) for t in (x, mean, var, self.scale, self.bias)]
            return tf.cast(_normalised(*wide, self.eps), x.dtype)
        return _normalised(x, mean, var, self.scale, self.bias, self.eps)

    def update_running_statistics(self) -> None:
        """running = (1 - momentum) * running + momentum * batch, from the moments of the last training call."""
        if self.batch_mean is None:
            raise RuntimeError(f"BatchNorm {self.name}: no training-mode forward has recorded batch moments")
        m = self.momentum
        self.mean.assign((1.0 - m) * self.mean.value + m * self.batch_mean)
        self.var.assign((1.0 - m) * self.var.value + m * self.batch_var_unbiased)


def _normalised(x, mean, var, scale, bias, eps):
    return (x - mean) * tf.math.rsqrt(var + eps) * scale + bias


class LayerNorm(Module):
    """torch.nn.LayerNorm over the last axis with the two-pass (biased) variance; leaves scale/bias as Flax's."""

    def __init__(self, name: str, features: int, *, eps: float = 1e-5):
        super().__init__(name)
        self.eps = eps
        self.scale = self.variable("scale", (features,), "ones")
        self.bias = self.variable("bias", (features,), "zeros")

    def call(self, x, training=False, seed=None):
        """In at least float32 and returned in x's dtype, as torch's kernels and Flax's LayerNorm compute bfloat16."""
        wide = tf.float32 if x.dtype in (tf.bfloat16, tf.float16) else x.dtype
        y = tf.cast(x, wide)
        mean = tf.reduce_mean(y, -1, keepdims=True)
        var = tf.reduce_mean(tf.square(y - mean), -1, keepdims=True)
        scale, bias = tf.cast(self.scale, wide), tf.cast(self.bias, wide)
        return tf.cast(_normalised(y, mean, var, scale, bias, self.eps), x.dtype)


class Stochastic(Module):
    """A layer that draws randomness: only in training mode with a seed, from that seed folded with `rng_index`
    (assigned by Twin, one per stochastic layer in torch module order)."""

    def __init__(self, name: str, rate: float):
        super().__init__(name)
        self.rate = float(rate)
        self.rng_index: int | None = None

    def active(self, training, seed) -> bool:
        return bool(training) and seed is not None and self.rate > 0.0

    def uniform(self, shape, seed) -> tf.Tensor:
        if self.rng_index is None:
            raise RuntimeError(f"{self.name}: stochastic layer outside a Twin has no RNG index")
        layer_seed = tf.random.experimental.stateless_fold_in(seed, self.rng_index, alg=RNG_ALG)
        return tf.random.stateless_uniform(shape, layer_seed, dtype=tf.float32, alg=RNG_ALG)


class Dropout(Stochastic):
    """torch.nn.Dropout: zero each element with probability `rate`, scale the rest by 1 / (1 - rate)."""

    def call(self, x, training=False, seed=None):
        if not self.active(training, seed):
            return x
        keep = tf.cast(self.uniform(tf.shape(x), seed) >= self.rate, x.dtype)
        return x * keep / (1.0 - self.rate) if self.rate < 1.0 else x * keep


class StochasticDepth(Stochastic):
    """torchvision.ops.StochasticDepth in 'row' mode: drop whole samples of a residual branch with probability
    `rate`, scale the kept ones by 1 / (1 - rate)."""

    def call(self, x, training=False, seed=None):
        if not self.active(training, seed):
            return x
        survival = 1.0 - self.rate
        shape = tf.concat([tf.shape(x)[:1], tf.ones([len(x.shape) - 1], tf.int32)], axis=0)
        keep = tf.cast(self.uniform(shape, seed) < survival, x.dtype)
        return x * keep / survival if survival > 0.0 else x * keep


class Sequential(Module):
    """torch.nn.Sequential: modules (children, named by their torch index) and parameter-free functions (an
    activation, which takes an index in torch but holds nothing) applied in order."""

    def __init__(self, name: str, *steps: Module | Callable):
        super().__init__(name)
        self.steps = [self.add(step) if isinstance(step, Module) else step for step in steps]

    def call(self, x, training=False, seed=None):
        for step in self.steps:
            x = step(x, training=training, seed=seed) if isinstance(step, Module) else step(x)
        return x


def conv_norm_activation(
    name: str,
    in_channels: int,
    out_channels: int,
    kernel: int,
    activation: Callable | None,
    *,
    stride: int = 1,
    groups: int = 1,
    bn_eps: float = 1e-5,
    bn_momentum: float = 0.1,
) -> Sequential:
    """torchvision.ops.Conv2dNormActivation: Sequential(0 = conv, 1 = BatchNorm, 2 = activation)."""
    conv = Conv2d("0", in_channels, out_channels, kernel, stride=stride, groups=groups)
    norm = BatchNorm("1", out_channels, eps=bn_eps, momentum=bn_momentum)
    return Sequential(name, conv, norm, *([activation] if activation else []))


class SqueezeExcitation(Module):
    """torchvision.ops.SqueezeExcitation: fc1/fc2 are 1x1 convs with bias."""

    def __init__(self, name: str, channels: int, squeeze: int, activation: Callable, scale_activation: Callable):
        super().__init__(name)
        self.fc1 = self.add(Conv2d("fc1", channels, squeeze, 1, bias=True))
        self.fc2 = self.add(Conv2d("fc2", squeeze, channels, 1, bias=True))
        self.activation, self.scale_activation = activation, scale_activation

    def call(self, x, training=False, seed=None):
        scale = self.activation(self.fc1(average(x, (1, 2), keepdims=True)))
        return x * self.scale_activation(self.fc2(scale))


class Twin(keras.Model):
    """A Keras twin as the study calls it: `model(x, training=False)` for eval, `model(x, training=True)` for train
    mode with batch statistics and no randomness, `model(x, training=True, seed=s)` with dropout and stochastic depth
    drawn from the int32 (2,) seed `s`. `net` is the torch module tree; inputs are NHWC, or NCHW with
    channels_first (transposed on the way in, as jax_forward does)."""

    def __init__(self, net: Module, *, channels_first: bool = False):
        super().__init__(name=net.name, dtype=net.dtype_policy)
        self.net = net
        self.channels_first = channels_first
        for index, layer in enumerate(m for _, m in modules(net) if isinstance(m, Stochastic)):
            layer.rng_index = index
        self.built = True

    def call(self, x, training=False, seed=None):
        if self.channels_first:
            x = tf.transpose(x, (0, 2, 3, 1))
        if seed is not None:
            seed = tf.convert_to_tensor(seed)
            if seed.shape != (2,) or not seed.dtype.is_integer:
                raise ValueError(f"seed must be an integer tensor of shape (2,), got {seed.dtype.name}{seed.shape}")
        return self.net(x, training=training, seed=seed)


def build_twin(make_net: Callable[[], Module], dtype: str) -> Twin:
    """A twin whose every variable and computation has Keras dtype policy `dtype` ("float32", "float64" or
    "bfloat16": bfloat16 parameters, activations and BatchNorm statistics)."""
    with dtype_policy(dtype):
        return Twin(make_net())


def channels_first(twin: Twin) -> Twin:
    """The same twin (shared variables) taking NCHW inputs."""
    return Twin(twin.net, channels_first=True)


def root(model: Twin | Module) -> Module:
    return model.net if isinstance(model, Twin) else model


# The two functions a train step calls inside its tf.function run as the plain Python they are: AutoGraph would only
# re-parse their source (their control flow is static) and, with the file edited under a live process, mis-convert.
@tf.autograph.experimental.do_not_convert
def batch_norms(model: Twin | Module) -> list[BatchNorm]:
    """Every BatchNorm of the model, in torch's module order (the order of its BatchNorm2d modules)."""
    return [module for _, module in modules(root(model)) if isinstance(module, BatchNorm)]


@tf.autograph.experimental.do_not_convert
def update_running_statistics(model: Twin | Module) -> None:
    """Fold every BatchNorm's last recorded batch moments into its running statistics (torch's update). Call it in
    the tf.function that ran the training-mode forward, after that forward: the moments are tensors of its trace."""
    for norm in batch_norms(model):
        norm.update_running_statistics()


def global_average_pool(x: tf.Tensor) -> tf.Tensor:
    """torch's AdaptiveAvgPool2d(1) + flatten on NHWC."""
    return average(x, (1, 2))
