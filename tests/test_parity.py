"""The Flax twin is the same function as the torch model when given converted weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fwbench.models import jax_forward, torch_model, torch_state_dict_numpy
from fwbench.models.convert import ConversionError, flax_to_torch, torch_to_flax


def _randomised(name, num_classes, image_size, seed):
    """A model with random weights *and* random BatchNorm statistics, so eval-mode BN is not an identity."""
    torch.manual_seed(seed)
    model = torch_model(name, num_classes=num_classes, image_size=image_size)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.3, 0.3)
    return model.eval()


@pytest.fixture(autouse=True)
def highest_precision():
    import jax

    previous = jax.config.jax_default_matmul_precision
    jax.config.update("jax_default_matmul_precision", "highest")
    yield
    jax.config.update("jax_default_matmul_precision", previous)


@pytest.mark.parametrize("image_size", [32, 64])
def test_small_cnn_logit_parity_fp32(image_size):
    seed = int(np.random.default_rng().integers(1 << 30))  # fresh weights and inputs every run
    model = _randomised("small_cnn", 10, image_size, seed)
    images = np.random.default_rng(seed).standard_normal((4, 3, image_size, image_size)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(images)).numpy()
    logits = jax_forward("small_cnn", torch_state_dict_numpy(model), images, num_classes=10, image_size=image_size)
    relative = np.abs(logits - expected).max() / np.abs(expected).max()
    assert relative <= 1e-5, f"seed {seed}: max|Δ|/max|ref| = {relative:.3g}"


def test_small_cnn_train_mode_forward_parity():
    seed = int(np.random.default_rng().integers(1 << 30))
    model = _randomised("small_cnn", 7, 32, seed).train()
    images = np.random.default_rng(seed).standard_normal((8, 3, 32, 32)).astype(np.float32)
    state = torch_state_dict_numpy(model)
    with torch.no_grad():
        expected = model(torch.from_numpy(images)).numpy()
    logits = jax_forward("small_cnn", state, images, num_classes=7, image_size=32, train=True)
    assert np.abs(logits - expected).max() / np.abs(expected).max() <= 1e-5


def test_conversion_round_trip_is_exact():
    import jax

    from fwbench.models import flax_variables

    model = _randomised("small_cnn", 5, 32, 0)
    state = torch_state_dict_numpy(model)
    _, variables = flax_variables("small_cnn", state, num_classes=5, image_size=32)
    back = flax_to_torch(jax.tree_util.tree_map(np.asarray, variables), state)
    assert set(back) == set(state)
    for key in state:
        np.testing.assert_array_equal(back[key], state[key], err_msg=key)


def _template(num_classes=5):
    import jax
    import jax.numpy as jnp

    from fwbench.models import flax_model

    module = flax_model("small_cnn", num_classes=num_classes, image_size=16)
    return jax.eval_shape(lambda: module.init(jax.random.PRNGKey(0), jnp.zeros((1, 16, 16, 3))))


def test_conversion_names_missing_unmapped_and_mismatched_keys():
    state = torch_state_dict_numpy(_randomised("small_cnn", 5, 16, 0))
    template = _template()
    missing = {k: v for k, v in state.items() if k != "features.1.1.running_var"}
    with pytest.raises(ConversionError, match=r"missing torch keys: features\.1\.1\.running_var"):
        torch_to_flax(missing, template)
    extra = {**state, "head.weight": np.zeros((2, 2), np.float32)}
    with pytest.raises(ConversionError, match=r"unmapped torch keys: head\.weight"):
        torch_to_flax(extra, template)
    wrong = {**state, "classifier.weight": np.zeros((6, 128), np.float32)}
    with pytest.raises(ConversionError, match=r"shape mismatches: classifier\.weight"):
        torch_to_flax(wrong, template)
