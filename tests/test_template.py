"""The Flax variable template a JAX process reads from the study's cache is the one it would trace."""

import json

import jax
import pytest

from fwbench.models import flax_model
from fwbench.models.template import flax_template


def _shapes(tree):
    flat, structure = jax.tree_util.tree_flatten_with_path(tree)
    return structure, [(jax.tree_util.keystr(path), tuple(leaf.shape), str(leaf.dtype)) for path, leaf in flat]


@pytest.mark.parametrize("name", ["small_cnn", "mobilenet_v3_small"])
def test_cached_template_equals_the_traced_one(tmp_path, name):
    module = flax_model(name, num_classes=10, image_size=32)
    traced, how = flax_template(module, name, num_classes=10, image_size=32)
    assert how == "traced"
    first, how_first = flax_template(module, name, num_classes=10, image_size=32, cache_dir=tmp_path)
    again, how_again = flax_template(module, name, num_classes=10, image_size=32, cache_dir=tmp_path)
    assert how_first.startswith("traced (stored as") and how_again.startswith("read from")
    assert _shapes(first) == _shapes(traced)
    assert _shapes(again) == _shapes(traced)


def test_another_configuration_gets_its_own_template(tmp_path):
    for size in (32, 64):
        module = flax_model("small_cnn", num_classes=10, image_size=size)
        _, how = flax_template(module, "small_cnn", num_classes=10, image_size=size, cache_dir=tmp_path)
        assert how.startswith("traced")
    assert len(list(tmp_path.glob("small_cnn.flax-template-*.json"))) == 2


def test_a_foreign_file_under_a_templates_name_is_named(tmp_path):
    module = flax_model("small_cnn", num_classes=10, image_size=32)
    _, how = flax_template(module, "small_cnn", num_classes=10, image_size=32, cache_dir=tmp_path)
    (path,) = tmp_path.glob("small_cnn.flax-template-*.json")
    record = json.loads(path.read_text())
    record["key"]["image_size"] = 224
    path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match=str(path)):
        flax_template(module, "small_cnn", num_classes=10, image_size=32, cache_dir=tmp_path)
