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
    head: tuple[str, ...]  # torch keys of the classification head (replaced when a file's class count differs)
    keras_builder: str  # "module:function" returning a built Keras 3 model (fwbench.models.keras_layers.Twin)
    # Which kind of op does most of the model's arithmetic: where TF32 covers one kind only (PyTorch's own default on
    # a GPU: convolutions, not matmuls), the model's MFU divides by the peak of that kind's arithmetic.
    compute: str = "convolutions"
    # How the paper and the README name the model in prose ("ResNet-50", not `resnet50`), and the kind of model a
    # finding generalises over ("on every CNN"): the identifier stays in file paths, tables' keys and the CLI.
    display: str = ""
    family: str = "CNN"


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "small_cnn",
            "fwbench.models.small_cnn_torch:small_cnn",
            "fwbench.models.small_cnn_flax:small_cnn",
            "3x (conv3x3-BN-ReLU), global average pool, linear",
            ("classifier.weight", "classifier.bias"),
            keras_builder="fwbench.models.small_cnn_keras:small_cnn",
            display="small CNN",
        ),
        ModelSpec(
            "resnet50",
            "fwbench.models.torchvision_defs:resnet50",
            "fwbench.models.resnet_flax:resnet50",
            "torchvision ResNet-50 (v1.5)",
            ("fc.weight", "fc.bias"),
            keras_builder="fwbench.models.resnet_keras:resnet50",
            display="ResNet-50",
        ),
        ModelSpec(
            "vit_b_16",
            "fwbench.models.torchvision_defs:vit_b_16",
            "fwbench.models.vit_flax:vit_b_16",
            "torchvision ViT-B/16",
            ("heads.head.weight", "heads.head.bias"),
            keras_builder="fwbench.models.vit_keras:vit_b_16",
            compute="matmuls",
            display="ViT-B/16",
            family="transformer",
        ),
        ModelSpec(
            "mobilenet_v3_small",
            "fwbench.models.torchvision_defs:mobilenet_v3_small",
            "fwbench.models.mobilenet_flax:mobilenet_v3_small",
            "torchvision MobileNetV3-Small",
            ("classifier.3.weight", "classifier.3.bias"),
            keras_builder="fwbench.models.mobilenet_keras:mobilenet_v3_small",
            display="MobileNetV3-Small",
        ),
        ModelSpec(
            "efficientnet_b0",
            "fwbench.models.torchvision_defs:efficientnet_b0",
            "fwbench.models.efficientnet_flax:efficientnet_b0",
            "torchvision EfficientNet-B0",
            ("classifier.1.weight", "classifier.1.bias"),
            keras_builder="fwbench.models.efficientnet_keras:efficientnet_b0",
            display="EfficientNet-B0",
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
