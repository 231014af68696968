"""Names of the study's models and where each framework's definition lives (imported lazily, so a JAX cell
never imports PyTorch and vice versa)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    name: str
    torch_builder: str  # "module:function" returning a torch.nn.Module
    flax_builder: str  # "module:function" returning a flax.linen.Module
    description: str


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "small_cnn",
            "fwbench.models.small_cnn_torch:small_cnn",
            "fwbench.models.small_cnn_flax:small_cnn",
            "3x (conv3x3-BN-ReLU), global average pool, linear",
        ),
    )
}


def spec(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known models: {sorted(MODELS)}") from None


def load_builder(ref: str):
    import importlib

    module, _, function = ref.partition(":")
    return getattr(importlib.import_module(module), function)
