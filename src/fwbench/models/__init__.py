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
    "torch_model",
    "torch_state_dict_numpy",
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
    """(Flax module, Flax variables converted from a torch state_dict, as JAX arrays)."""
    import jax
    import jax.numpy as jnp

    module, variables, _ = flax_host_variables(name, state_dict, num_classes=num_classes, image_size=image_size)
    return module, jax.tree_util.tree_map(jnp.asarray, variables)


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
    import jax.numpy as jnp

    module, variables = flax_variables(name, state_dict, num_classes=num_classes, image_size=image_size)
    images = jnp.asarray(np.asarray(images_nchw, dtype=np.float32).transpose(0, 2, 3, 1))
    if train:
        logits, _ = jax.jit(lambda v, x: module.apply(v, x, train=True, mutable=["batch_stats"]))(variables, images)
    else:
        logits = jax.jit(lambda v, x: module.apply(v, x, train=False))(variables, images)
    return np.asarray(logits)
