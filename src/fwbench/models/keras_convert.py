"""A Keras twin's variables as the Flax-shaped tree that fwbench.models.convert maps to and from torch state_dicts.

Keras twins register their modules under torch's names (fwbench.models.keras_layers), so each variable has the path
a Flax twin's leaf would have, (collection, *torch module names, leaf); torch <-> Keras conversion is then
torch <-> Flax conversion on that tree, and the layout rules (OIHW -> HWIO kernels, transposed linear weights, the
packed attention in-projection) live in convert.py alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from fwbench.models.convert import PACKED_PARTS, _flatten, _unflatten, flax_to_torch, torch_source, torch_to_flax
from fwbench.models.keras_layers import Module, Twin, modules, root
from fwbench.models.tensorflow_import import tf

Path = tuple[str, ...]
PART_NAMES = {index: name.removeprefix("in_proj_") for name, index in PACKED_PARTS.items()}


class Spec(NamedTuple):
    """What torch_to_flax needs of a template leaf: its shape and numpy dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype


def variable_paths(model: Twin | Module) -> list[tuple[Path, Any]]:
    """(Flax path, Keras variable) for every variable of the model, in torch's module order."""
    return [
        ((leaf.collection, *modules_path, name), leaf.variable)
        for modules_path, module in modules(root(model))
        for name, leaf in module.leaves.items()
    ]


def keras_variables(model: Twin | Module) -> dict[str, Any]:
    """{"params": {...}, "batch_stats": {...}} of the model's Keras variables (backed by tf.Variables), keyed by
    torch module path exactly as a Flax twin's variables are."""
    return _unflatten(dict(variable_paths(model)))


def numpy_variables(model: Twin | Module) -> dict[str, Any]:
    """keras_variables with each variable's current value as a numpy array."""
    return _unflatten({path: variable.numpy() for path, variable in variable_paths(model)})


def _numpy_dtype(variable) -> np.dtype:
    return np.dtype(tf.as_dtype(variable.dtype).as_numpy_dtype)


def load_torch_weights(model: Twin | Module, state_dict: Mapping[str, Any]) -> None:
    """Assign a torch state_dict (numpy arrays or tensors) to the model's variables, cast to each variable's dtype.
    A missing, unmapped or mis-shaped key raises convert.ConversionError naming it, before anything is assigned."""
    paths = variable_paths(model)
    template = _unflatten({path: Spec(tuple(v.shape), _numpy_dtype(v)) for path, v in paths})
    converted = _flatten(torch_to_flax(state_dict, template))
    for path, variable in paths:
        variable.assign(converted[path])


def keras_to_torch(model: Twin | Module, template: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The model's variables as a torch state_dict; `template` (a torch state_dict) supplies the torch-only buffers
    (num_batches_tracked) and checks keys and shapes."""
    return flax_to_torch(numpy_variables(model), template)


def _path_of(model: Twin | Module) -> dict[int, Path]:
    return {id(variable): path for path, variable in variable_paths(model)}


def _paths(model: Twin | Module, variables: Sequence[Any] | None) -> list[Path]:
    path_of = _path_of(model)
    chosen = model.trainable_variables if variables is None else variables
    missing = [getattr(v, "path", repr(v)) for v in chosen if id(v) not in path_of]
    if missing:
        raise KeyError(f"variables that are not the model's: {missing}")
    return [path_of[id(v)] for v in chosen]


def arrays_to_torch(
    model: Twin | Module,
    arrays: Sequence[Any],
    template: Mapping[str, Any],
    variables: Sequence[Any] | None = None,
) -> dict[str, np.ndarray]:
    """Per-variable arrays (gradients, optimizer slots) aligned with `variables` (default: the model's
    trainable_variables, the order tape.gradient returns) as a dict keyed by torch key in torch layout. Only the
    keys those variables map to are returned; the three parts of a packed attention projection must all be there."""
    paths = _paths(model, variables)
    if len(paths) != len(arrays):
        raise ValueError(f"{len(arrays)} arrays for {len(paths)} variables")
    keys = {torch_source(path)[0] for path in paths}
    tree = _unflatten({path: np.asarray(array) for path, array in zip(paths, arrays, strict=True)})
    return flax_to_torch(tree, {key: template[key] for key in keys if key in template})


def variable_names(model: Twin | Module, variables: Sequence[Any] | None = None) -> list[str]:
    """A stable name per variable (default: model.variables, in that order): its torch key, with the slice of a
    packed attention projection marked ("...self_attention.in_proj_weight[q]"), so names are unique."""
    names = []
    for path in _paths(model, model.variables if variables is None else variables):
        key, part = torch_source(path)
        names.append(key if part is None else f"{key}[{PART_NAMES[part]}]")
    return names
