"""Weight conversion between torch state_dicts and Flax variables, driven by the Flax module tree.

Flax twins name their modules exactly like the torch modules, so a Flax leaf `params/features/0/1/scale` is the
torch key `features.0.1.weight`. The mapping is therefore mechanical; anything left over on either side, or any
shape that disagrees, is an error naming the key, never a silent partial load.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

# (collection, flax leaf name) -> torch parameter/buffer name
LEAF_NAMES = {
    ("params", "kernel"): "weight",
    ("params", "bias"): "bias",
    ("params", "scale"): "weight",
    ("batch_stats", "mean"): "running_mean",
    ("batch_stats", "var"): "running_var",
}
# torch buffers with no Flax counterpart; dropped on the way in, rebuilt from a template on the way out.
TORCH_ONLY_SUFFIXES = (".num_batches_tracked",)


class ConversionError(ValueError):
    pass


def _flatten(tree: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    flat = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, (*prefix, key)))
        else:
            flat[(*prefix, key)] = value
    return flat


def _unflatten(flat: Mapping[tuple[str, ...], Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path, value in flat.items():
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return tree


def torch_key(flax_path: tuple[str, ...]) -> str:
    collection, *modules, leaf = flax_path
    return ".".join([*modules, LEAF_NAMES.get((collection, leaf), leaf)])


def _to_flax_layout(flax_leaf: str, array: np.ndarray) -> np.ndarray:
    if flax_leaf == "kernel" and array.ndim == 4:  # conv OIHW -> HWIO (grouped convs included)
        return array.transpose(2, 3, 1, 0)
    if flax_leaf == "kernel" and array.ndim == 2:  # linear (out, in) -> (in, out)
        return array.T
    return array


def _to_torch_layout(flax_leaf: str, array: np.ndarray) -> np.ndarray:
    if flax_leaf == "kernel" and array.ndim == 4:
        return array.transpose(3, 2, 0, 1)
    if flax_leaf == "kernel" and array.ndim == 2:
        return array.T
    return array


def torch_to_flax(state_dict: Mapping[str, Any], template: Mapping[str, Any]) -> dict[str, Any]:
    """Map a torch state_dict (arrays or tensors) onto the structure of Flax `template` variables."""
    source = {k: np.asarray(v) for k, v in state_dict.items() if not k.endswith(TORCH_ONLY_SUFFIXES)}
    flat_template = _flatten(template)
    used, missing, mismatched, converted = set(), [], [], {}
    for path, leaf in flat_template.items():
        key = torch_key(path)
        if key not in source:
            missing.append(f"{key} (for Flax {'/'.join(path)})")
            continue
        value = _to_flax_layout(path[-1], source[key])
        if tuple(value.shape) != tuple(np.shape(leaf)):
            mismatched.append(
                f"{key}: torch {tuple(source[key].shape)} -> {tuple(value.shape)}, Flax expects {tuple(np.shape(leaf))}"
            )
        used.add(key)
        converted[path] = np.ascontiguousarray(value, dtype=leaf.dtype)
    unmapped = sorted(set(source) - used)
    problems = []
    if missing:
        problems.append("missing torch keys: " + ", ".join(missing))
    if unmapped:
        problems.append("unmapped torch keys: " + ", ".join(unmapped))
    if mismatched:
        problems.append("shape mismatches: " + "; ".join(mismatched))
    if problems:
        raise ConversionError("torch -> Flax conversion failed: " + " | ".join(problems))
    return _unflatten(converted)


def flax_to_torch(variables: Mapping[str, Any], template: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Inverse of torch_to_flax; `template` (a torch state_dict) supplies torch-only buffers and checks keys."""
    out: dict[str, np.ndarray] = {}
    for path, leaf in _flatten(variables).items():
        key = torch_key(path)
        if key not in template:
            raise ConversionError(f"Flax -> torch conversion failed: no torch key {key} for Flax {'/'.join(path)}")
        value = _to_torch_layout(path[-1], np.asarray(leaf))
        if tuple(value.shape) != tuple(np.shape(template[key])):
            raise ConversionError(
                f"Flax -> torch conversion failed: {key} has shape {tuple(value.shape)}, "
                f"torch expects {tuple(np.shape(template[key]))}"
            )
        out[key] = value
    for key, value in template.items():
        if key.endswith(TORCH_ONLY_SUFFIXES):
            out[key] = np.asarray(value)
    absent = sorted(set(template) - set(out))
    if absent:
        raise ConversionError("Flax -> torch conversion failed: no Flax value for torch keys " + ", ".join(absent))
    return out
