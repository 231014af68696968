"""Model definitions in every framework, and the public API that external checks call.

Framework imports happen inside the functions, so importing fwbench.models costs nothing and a benchmark process
loads only the framework it measures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fwbench.models.registry import MODELS, load_builder, spec

__all__ = [
    "MODELS",
    "flax_host_variables",
    "flax_model",
    "flax_variables",
    "jax_forward",
    "keras_arrays_to_torch",
    "keras_model",
    "keras_to_torch",
    "keras_variables",
    "load_torch_weights",
    "tf_forward",
    "tf_model",
    "torch_model",
    "torch_state_dict_numpy",
    "variable_names",
]


def torch_model(name: str, *, num_classes: int, image_size: int):
    """The torch definition of `name` (random init from the current torch RNG)."""
    return load_builder(spec(name).torch_builder)(num_classes=num_classes, image_size=image_size)


def flax_model(name: str, *, num_classes: int, image_size: int):
    return load_builder(spec(name).flax_builder)(num_classes=num_classes, image_size=image_size)


def torch_state_dict_numpy(module) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()}


def flax_host_variables(
    name: str, state_dict: Mapping[str, Any], *, num_classes: int, image_size: int, template_cache=None
):
    """(Flax module, Flax variables converted from a torch state_dict as host numpy arrays, how the variable template
    was obtained). The backends cast and place the arrays themselves: making each of a model's hundreds of leaves a
    JAX array first (one dispatch each) cost a measuring process up to a second before it was converted back. With
    `template_cache` (a directory) the template is traced once and reused (fwbench.models.template)."""
    from fwbench.models.convert import torch_to_flax
    from fwbench.models.template import flax_template

    module = flax_model(name, num_classes=num_classes, image_size=image_size)
    template, how = flax_template(
        module, name, num_classes=num_classes, image_size=image_size, cache_dir=template_cache
    )
    return module, torch_to_flax(state_dict, template), how


def flax_variables(name: str, state_dict: Mapping[str, Any], *, num_classes: int, image_size: int):
    """(Flax module, Flax variables converted from a torch state_dict, as JAX arrays). Placed with device_put, which
    copies: JAX 0.10's jnp.asarray of a NumPy array compiles an XLA program per distinct shape (lax.stage), 69 of
    them for EfficientNet-B0's parameters."""
    import jax

    module, variables, _ = flax_host_variables(name, state_dict, num_classes=num_classes, image_size=image_size)
    return module, jax.device_put(variables)


def jax_forward(
    name: str,
    state_dict: Mapping[str, Any],
    images_nchw: np.ndarray,
    *,
    num_classes: int,
    image_size: int,
    train: bool = False,
) -> np.ndarray:
    """Logits of the Flax twin with the given torch weights on an NCHW float32 batch."""
    import jax

    module, variables = flax_variables(name, state_dict, num_classes=num_classes, image_size=image_size)
    images = jax.device_put(np.asarray(images_nchw, dtype=np.float32).transpose(0, 2, 3, 1))
    if train:
        logits, _ = jax.jit(lambda v, x: module.apply(v, x, train=True, mutable=["batch_stats"]))(variables, images)
    else:
        logits = jax.jit(lambda v, x: module.apply(v, x, train=False))(variables, images)
    return np.asarray(logits)


def keras_model(name: str, *, num_classes: int, image_size: int, dtype: str = "float32"):
    """The Keras 3 (TensorFlow backend) twin of `name`, built (variables created), taking NHWC images; `dtype` is
    its Keras dtype policy ("float32", "float64", or "bfloat16": bf16 parameters, activations and BatchNorm
    statistics). Call it as described in fwbench.models.keras_layers.Twin."""
    return load_builder(spec(name).keras_builder)(num_classes=num_classes, image_size=image_size, dtype=dtype)


def keras_variables(model) -> dict[str, Any]:
    """The Keras twin's variables as the Flax-shaped tree {"params": ..., "batch_stats": ...} keyed by torch
    module path, so fwbench.models.convert applies to it."""
    from fwbench.models.keras_convert import keras_variables as variables

    return variables(model)


def load_torch_weights(model, state_dict: Mapping[str, Any]) -> None:
    """Assign a torch state_dict to the Keras twin (cast to its variables' dtype); anything missing, unmapped or
    mis-shaped raises convert.ConversionError naming the key."""
    from fwbench.models.keras_convert import load_torch_weights as load

    load(model, state_dict)


def keras_to_torch(model, template_state_dict: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The Keras twin's variables as a torch state_dict (the inverse of load_torch_weights)."""
    from fwbench.models.keras_convert import keras_to_torch as to_torch

    return to_torch(model, template_state_dict)


def keras_arrays_to_torch(
    model, arrays, template_state_dict: Mapping[str, Any], variables=None
) -> dict[str, np.ndarray]:
    """Per-variable arrays (e.g. gradients) aligned with `variables` (default: model.trainable_variables, the order
    tape.gradient returns) keyed by torch key in torch layout."""
    from fwbench.models.keras_convert import arrays_to_torch

    return arrays_to_torch(model, arrays, template_state_dict, variables)


def variable_names(model, variables=None) -> list[str]:
    """A stable, unique torch-derived name for each of `variables` (default: model.variables), for checkpoints."""
    from fwbench.models.keras_convert import variable_names as names

    return names(model, variables)


def tf_model(name: str, state_dict: Mapping[str, Any], *, num_classes: int, image_size: int):
    """The float32 Keras twin with the given torch weights, taking NCHW float32 arrays (as jax_forward does)."""
    from fwbench.models.keras_layers import channels_first

    model = keras_model(name, num_classes=num_classes, image_size=image_size)
    load_torch_weights(model, state_dict)
    return channels_first(model)


def tf_forward(
    name: str,
    state_dict: Mapping[str, Any],
    images_nchw: np.ndarray,
    *,
    num_classes: int,
    image_size: int,
    train: bool = False,
) -> np.ndarray:
    """Logits of the Keras twin with the given torch weights on an NCHW float32 batch, compiled with XLA as the study
    runs it; train=True is train mode with batch statistics and no randomness (running statistics untouched)."""
    from fwbench.models.tensorflow_import import tf

    model = tf_model(name, state_dict, num_classes=num_classes, image_size=image_size)
    forward = tf.function(lambda x: model(x, training=train), jit_compile=True)
    return forward(tf.constant(np.asarray(images_nchw, dtype=np.float32))).numpy()
