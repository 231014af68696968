"""The torch cells' light import of torchvision's models (fwbench.models.torchvision_defs) builds exactly the
modules a plain `import torchvision` builds, without loading torch._dynamo, and leaves torchvision importable."""

import json
import subprocess
import sys

import pytest

MODELS = ("resnet50", "vit_b_16", "mobilenet_v3_small", "efficientnet_b0")

CHILD = """
import json, sys
from fwbench.models import torch_model, torchvision_defs
out = {}
for name in %r:
    module = torch_model(name, num_classes=10, image_size=32)
    out[name] = {
        "state": {k: list(v.shape) for k, v in module.state_dict().items()},
        "types": [type(m).__module__ + "." + type(m).__name__ for m in module.modules()],
    }
out["dynamo_loaded"] = "torch._dynamo" in sys.modules
out["import_path"] = torchvision_defs.import_path()
import torchvision  # the real package still imports afterwards, and its models are the ones already loaded
out["later_import"] = torchvision.models.resnet50 is torchvision_defs._models()["resnet"].resnet50
print(json.dumps(out))
"""


def _tree(module):
    return {
        "state": {k: list(v.shape) for k, v in module.state_dict().items()},
        "types": [type(m).__module__ + "." + type(m).__name__ for m in module.modules()],
    }


@pytest.fixture(scope="module")
def light():
    done = subprocess.run([sys.executable, "-c", CHILD % (MODELS,)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_light_import_skips_dynamo_and_is_recorded(light):
    assert light["dynamo_loaded"] is False
    assert light["import_path"] == "torchvision's model modules without its package __init__"
    assert light["later_import"] is True


@pytest.mark.parametrize("name", MODELS)
def test_light_import_builds_torchvisions_module_tree(light, name):
    import torchvision

    reference = _tree(
        getattr(torchvision.models, name)(
            weights=None, num_classes=10, **({"image_size": 32} if name == "vit_b_16" else {})
        )
    )
    assert light[name]["state"] == reference["state"]
    assert light[name]["types"] == reference["types"]


def test_a_model_built_in_this_process_has_torchvisions_module_tree():
    """This module's fast test: MobileNetV3-Small through fwbench's import of torchvision's models, in the test
    process (the fresh process above also checks what that import leaves out)."""
    import torchvision

    from fwbench.models import torch_model

    built = _tree(torch_model("mobilenet_v3_small", num_classes=10, image_size=32))
    assert built == _tree(torchvision.models.mobilenet_v3_small(weights=None, num_classes=10))
