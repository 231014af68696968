"""Measuring how closely a Keras (TensorFlow) twin reproduces its torch model, with the protocols and statistics the
Flax twins are judged by (fwbench.models.parity_core). Every float32 twin step runs compiled with XLA
(`tf.function(jit_compile=True)`), as the study runs it; the float64 train step runs as a graph (step_maker says
why). TF32 is off, so float32 is true float32 (a no-op on the CPU, where TensorFlow never uses it).
"""

from __future__ import annotations

import numpy as np

from fwbench.models import keras_model, load_torch_weights, tf_forward
from fwbench.models.keras_convert import arrays_to_torch, variable_paths
from fwbench.models.keras_layers import update_running_statistics
from fwbench.models.parity_core import eval_parity_of, train_step_parity_of
from fwbench.models.tensorflow_import import tf

tf.config.experimental.enable_tensor_float_32_execution(False)


def eval_parity(name: str, image_size: int, seed: int, *, batch: int = 2, num_classes: int = 10) -> float:
    """Relative max error of the Keras twin's eval logits (fp32, XLA) against torch's."""
    return eval_parity_of(tf_forward, name, image_size, seed, batch=batch, num_classes=num_classes)


MODES = ("xla", "graph", "eager")  # tf.function(jit_compile=True), tf.function without XLA, plain eager ops


def train_step(model, *, mode: str = "xla"):
    """The study's train step minus the optimizer: a training-mode forward (batch statistics, no randomness), the
    mean cross-entropy's gradients w.r.t. model.trainable_variables, and the running-statistics update, compiled
    with XLA unless `mode` says otherwise. Returns (logits, loss, gradients)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    variables = model.trainable_variables

    def step(images, labels):
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        grads = tape.gradient(loss, variables)
        update_running_statistics(model)
        return logits, loss, grads

    return step if mode == "eager" else tf.function(step, jit_compile=mode == "xla")


def step_maker(name: str, num_classes: int, image_size: int, mode: str = "xla"):
    """make_step for parity_core.train_step_parity_of: the Keras twin's train step (`mode` as in train_step).

    With XLA, the float32 step is compiled as the study compiles it, and the float64 step, which checks that the
    twin is PyTorch's function (one batch), runs as a TensorFlow graph of the same ops: XLA's float64 programs took
    three times as long to build (EfficientNet-B0: 14.8 s against 4.9 s), and the float32 steps, compared with the
    float64 truth on every batch, are what checks XLA's arithmetic."""
    float64_mode = "graph" if mode == "xla" else mode

    def make_step(state, dtype: str):
        model = keras_model(name, num_classes=num_classes, image_size=image_size, dtype=dtype)
        step = train_step(model, mode=float64_mode if dtype == "float64" else mode)
        load_torch_weights(model, state)
        # a step changes only the running statistics (the gradients are returned, never applied): each batch starts
        # from their loaded values, and only they and the gradients go back to torch keys (converting all of
        # ViT-B/16's weights per batch cost more than its step)
        statistics = [variable for _, variable in variable_paths(model) if not variable.trainable]
        loaded = [variable.numpy() for variable in statistics]

        def run(images, labels):
            for variable, value in zip(statistics, loaded, strict=True):
                variable.assign(value)
            x = tf.constant(images.transpose(0, 2, 3, 1).astype(dtype))
            logits, loss, grads = step(x, tf.constant(labels, tf.int32))
            named = {
                **arrays_to_torch(model, [v.numpy() for v in statistics], state, statistics),
                # np.asarray views each gradient's buffer; .numpy() would copy it (3.4 GB over ViT-B/16's test)
                **arrays_to_torch(model, [np.asarray(g) for g in grads], state),
            }
            return np.asarray(logits, np.float64), float(loss), named

        return run

    return make_step


def train_step_parity(
    name: str,
    image_size: int,
    seed: int,
    *,
    batch: int = 4,
    num_classes: int = 10,
    fp32_draws: int = 8,
    mode: str = "xla",
) -> dict:
    """Errors of one train-mode forward/backward of the Keras twin against PyTorch float64
    (fwbench.models.parity_core.train_step_parity_of describes the result); `mode` as in train_step."""
    return train_step_parity_of(
        step_maker(name, num_classes, image_size, mode),
        name,
        image_size,
        seed,
        batch=batch,
        num_classes=num_classes,
        fp32_draws=fp32_draws,
    )
