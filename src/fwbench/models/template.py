"""A Flax twin's variable template (every leaf's path, shape and dtype), traced once per study and reused.

Converting the shared torch weights needs the Flax variable tree, which Flax only gives by tracing the model's
`init` (`jax.eval_shape`): 0.5-1 s of every JAX process for the larger models, most of what a JAX cell spends
beside its import. The template depends only on the twin's code, the model's configuration and the JAX/Flax
versions, so the first process that traces it stores it beside the study's weights, keyed by all of those (the
twins' source files hashed), and later processes read it. Whether a process traced or read its template is recorded
(settings `flax_template`). A file that is not such a template, or whose key does not match its name, is an error
naming it; a stale one cannot be read, because its key is its file name.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from pathlib import Path
from typing import Any

from fwbench.io import atomic_write_json, read_json

KIND = "fwbench flax variable template"


def _source_digest() -> str:
    """The twins' code: every module of fwbench.models (definitions, layers, conversion)."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def template_key(name: str, *, num_classes: int, image_size: int) -> dict[str, Any]:
    return {
        "model": name,
        "num_classes": int(num_classes),
        "image_size": int(image_size),
        "jax": importlib.metadata.version("jax"),
        "flax": importlib.metadata.version("flax"),
        "models_source_sha256": _source_digest(),
    }


def _path_for(cache_dir: str | os.PathLike, key: dict[str, Any]) -> Path:
    short = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return Path(cache_dir) / f"{key['model']}.flax-template-{short}.json"


def _trace(module, image_size: int):
    import jax
    import jax.numpy as jnp

    return jax.eval_shape(
        lambda: module.init(jax.random.PRNGKey(0), jnp.zeros((1, image_size, image_size, 3), jnp.float32))
    )


def _leaves(template) -> list[list[Any]]:
    import jax

    flat, _ = jax.tree_util.tree_flatten_with_path(template)
    return [[[entry.key for entry in path], list(leaf.shape), str(leaf.dtype)] for path, leaf in flat]


def _rebuild(leaves: list[list[Any]]) -> dict[str, Any]:
    import jax
    import numpy as np

    tree: dict[str, Any] = {}
    for path, shape, dtype in leaves:
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype))
    return tree


def flax_template(module, name: str, *, num_classes: int, image_size: int, cache_dir=None) -> tuple[Any, str]:
    """(template, how it was obtained: "traced" or "read from PATH"). Without `cache_dir`, always traced."""
    if cache_dir is None:
        return _trace(module, image_size), "traced"
    key = template_key(name, num_classes=num_classes, image_size=image_size)
    path = _path_for(cache_dir, key)
    if path.exists():
        record = read_json(path)
        if not isinstance(record, dict) or record.get("kind") != KIND or record.get("key") != key:
            raise ValueError(f"{path}: not the Flax template of {name} it is named for; delete it to retrace")
        return _rebuild(record["leaves"]), f"read from {path}"
    template = _trace(module, image_size)
    atomic_write_json(path, {"kind": KIND, "key": key, "leaves": _leaves(template)})
    return template, f"traced (stored as {path})"
