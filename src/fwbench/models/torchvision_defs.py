"""The study's torch models: torchvision's own definitions, untouched, built without pretrained weights (weights
come from the study's shared initialisation or a local file, never a hub).

`import torchvision` runs its package `__init__`, which imports every model, dataset and operator; its
`torchvision.ops.roi_align` imports `torch._dynamo` (and with it sympy). On this study's 2-core machine that is
~2.3 s per process on top of `import torch`, spent by every torch cell, weights and facts job for code none of them
runs (eager model definitions never touch Dynamo). So where torchvision is not imported yet, the four model modules
are loaded from torchvision's own files under bare parent packages, which skip those `__init__`s; the classes and
functions are torchvision's, byte for byte (`tests/test_models.py` compares the module trees with a plain
`import torchvision`). The bare parents are removed again afterwards, so a later `import torchvision` in the same
process runs the real package (it reuses the model modules already loaded).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

MODEL_MODULES = ("resnet", "vision_transformer", "mobilenetv3", "efficientnet")
# torchvision's packages whose __init__ the model modules do not need; torchvision.transforms is light and loads as is.
BARE_PACKAGES = ("torchvision", "torchvision.models", "torchvision.ops")
IMPORT_PATH = {"full": "import torchvision", "models_only": "torchvision's model modules without its package __init__"}


def _model_modules() -> dict[str, ModuleType]:
    if "torchvision" in sys.modules:  # already imported (tests, notebooks): use it as it is
        return {name: importlib.import_module(f"torchvision.models.{name}") for name in MODEL_MODULES}
    root = importlib.util.find_spec("torchvision").submodule_search_locations[0]
    bare = {}
    for name in BARE_PACKAGES:
        package = importlib.util.module_from_spec(importlib.machinery.ModuleSpec(name, None, is_package=True))
        package.__path__ = [root + name.removeprefix("torchvision").replace(".", "/")]
        sys.modules[name] = bare[name] = package
    try:
        # efficientnet.py imports StochasticDepth from the torchvision.ops package itself.
        bare["torchvision.ops"].StochasticDepth = importlib.import_module(
            "torchvision.ops.stochastic_depth"
        ).StochasticDepth
        return {name: importlib.import_module(f"torchvision.models.{name}") for name in MODEL_MODULES}
    finally:
        for name, package in bare.items():
            if sys.modules.get(name) is package:
                del sys.modules[name]


def import_path() -> str | None:
    """How this process got torchvision's models (recorded in every torch cell's settings); None before any."""
    return _LOADED["path"]


def _models() -> dict[str, ModuleType]:
    if _LOADED["modules"] is None:
        _LOADED["path"] = IMPORT_PATH["full" if "torchvision" in sys.modules else "models_only"]
        _LOADED["modules"] = _model_modules()
    return _LOADED["modules"]


_LOADED: dict = {"modules": None, "path": None}


def resnet50(*, num_classes: int, image_size: int):
    del image_size
    return _models()["resnet"].resnet50(weights=None, num_classes=num_classes)


def vit_b_16(*, num_classes: int, image_size: int):
    return _models()["vision_transformer"].vit_b_16(weights=None, num_classes=num_classes, image_size=image_size)


def mobilenet_v3_small(*, num_classes: int, image_size: int):
    del image_size
    return _models()["mobilenetv3"].mobilenet_v3_small(weights=None, num_classes=num_classes)


def efficientnet_b0(*, num_classes: int, image_size: int):
    del image_size
    return _models()["efficientnet"].efficientnet_b0(weights=None, num_classes=num_classes)
