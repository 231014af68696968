"""Weight conversion between torch state_dicts and Flax variables, driven by the Flax module tree.

Flax twins name their modules exactly like the torch modules, so a Flax leaf `params/features/0/1/scale` is the
torch key `features.0.1.weight`. The mapping is therefore mechanical; anything left over on either side, or any
shape that disagrees, is an error naming the key, never a silent partial load.

One torch layout packs several Flax modules into one tensor: nn.MultiheadAttention's `in_proj_weight` and
`in_proj_bias` hold query, key and value stacked on axis 0. A Flax module named `in_proj_q`, `in_proj_k` or
`in_proj_v` is that slice of its parent's packed tensor.
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
PACKED_PARTS = {"in_proj_q": 0, "in_proj_k": 1, "in_proj_v": 2}


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


def torch_source(flax_path: tuple[str, ...]) -> tuple[str, int | None]:
    """(torch key, slice index along axis 0 of a packed tensor, or None) for one Flax leaf."""
    collection, *modules, leaf = flax_path
    torch_leaf = LEAF_NAMES.get((collection, leaf), leaf)
    if modules and modules[-1] in PACKED_PARTS:
        return ".".join([*modules[:-1], f"in_proj_{torch_leaf}"]), PACKED_PARTS[modules[-1]]
    return ".".join([*modules, torch_leaf]), None


def _take_part(array: np.ndarray, part: int | None) -> np.ndarray:
    if part is None:
        return array
    size = array.shape[0] // len(PACKED_PARTS)
    return array[part * size : (part + 1) * size]


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
    used, missing, mismatched, converted = set(), [], [], {}
    for path, leaf in _flatten(template).items():
        key, part = torch_source(path)
        if key not in source:
            missing.append(f"{key} (for Flax {'/'.join(path)})")
            continue
        value = _to_flax_layout(path[-1], _take_part(source[key], part))
        if tuple(value.shape) != tuple(np.shape(leaf)):
            where = key if part is None else f"{key}[part {part}]"
            mismatched.append(
                f"{where}: torch {tuple(source[key].shape)} -> {tuple(value.shape)}, "
                f"Flax expects {tuple(np.shape(leaf))}"
            )
        used.add(key)
        converted[path] = np.ascontiguousarray(value, dtype=leaf.dtype)
    problems = []
    if missing:
        problems.append("missing torch keys: " + ", ".join(missing))
    unmapped = sorted(set(source) - used)
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
    packed: dict[str, dict[int, np.ndarray]] = {}
    for path, leaf in _flatten(variables).items():
        key, part = torch_source(path)
        if key not in template:
            raise ConversionError(f"Flax -> torch conversion failed: no torch key {key} for Flax {'/'.join(path)}")
        value = _to_torch_layout(path[-1], np.asarray(leaf))
        if part is None:
            out[key] = value
        else:
            packed.setdefault(key, {})[part] = value
    for key, parts in packed.items():
        if sorted(parts) != sorted(PACKED_PARTS.values()):
            raise ConversionError(f"Flax -> torch conversion failed: {key} needs q, k and v, has {sorted(parts)}")
        out[key] = np.concatenate([parts[i] for i in sorted(parts)], axis=0)
    for key, value in out.items():
        if tuple(value.shape) != tuple(np.shape(template[key])):
            raise ConversionError(
                f"Flax -> torch conversion failed: {key} has shape {tuple(value.shape)}, "
                f"torch expects {tuple(np.shape(template[key]))}"
            )
    for key, value in template.items():
        if key.endswith(TORCH_ONLY_SUFFIXES):
            out[key] = np.asarray(value)
    absent = sorted(set(template) - set(out))
    if absent:
        raise ConversionError("Flax -> torch conversion failed: no Flax value for torch keys " + ", ".join(absent))
    return out
