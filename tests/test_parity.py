"""Every Flax twin is the same function as its torch model when given converted weights: eval logits, train-mode
logits here; the training step (gradients of every parameter, the BatchNorm running statistics) in
tests/test_train_step_parity.py beside the Keras twin.

Weights (BatchNorm statistics included) and inputs are random and fresh on every run; the seed is in the message.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fwbench.models import MODELS, flax_variables, torch_model, torch_state_dict_numpy
from fwbench.models.convert import ConversionError, flax_to_torch, torch_to_flax
from fwbench.models.layers import normalised
from fwbench.models.parity import eval_parity, geometric_mean, randomised
from fwbench.models.parity_core import bfloat16_batch_norm_case, bfloat16_mismatch

DEFAULT_RESOLUTION = 32  # the default study's dataset.image_size
NUM_CLASSES = 10
EVAL_TOLERANCE = {"small_cnn": 1e-5}  # the spine's bar; the study models' is 1e-4


def _fresh_seed() -> int:
    return int(np.random.default_rng().integers(1 << 30))


@pytest.mark.parametrize("image_size", [224, DEFAULT_RESOLUTION])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_eval_logit_parity(name, image_size):
    seed = _fresh_seed()
    error = eval_parity(name, image_size, seed)
    assert error <= EVAL_TOLERANCE.get(name, 1e-4), f"{name}@{image_size}px seed {seed}: max|Δ|/max|ref| = {error:.3g}"


def test_bfloat16_batch_norm_rounds_once_as_torch():
    """The Flax twins' bfloat16 BatchNorm computes in float32 and rounds once, as torch's kernels do (the same check
    as the Keras twin's in tests/test_tf_parity.py); rounded after every operation, 20-34% differ."""
    arrays, expected = bfloat16_batch_norm_case(_fresh_seed())
    bf16 = {k: jnp.asarray(v, jnp.bfloat16) for k, v in arrays.items()}
    args = (bf16["x"], bf16["mean"], bf16["var"], bf16["scale"], bf16["bias"])
    out = jax.jit(normalised, static_argnums=5)(*args, 1e-5)
    share, steps = bfloat16_mismatch(out, expected)
    assert out.dtype == jnp.bfloat16 and share <= 0.01 and steps <= 1, f"{share:.1%} differ, up to {steps:.3g} steps"
    per_operation = (args[0] - args[1]) * jax.lax.rsqrt(args[2] + 1e-5) * args[3] + args[4]
    assert bfloat16_mismatch(per_operation, expected)[0] > 0.05


def test_geometric_mean_of_errors():
    assert geometric_mean([1e-2, 1e-4]) == pytest.approx(1e-3)
    assert geometric_mean([0.0, 1.0]) > 0.0  # an exact zero does not make the mean vanish or fail


def test_conversion_round_trip_is_exact():
    state = torch_state_dict_numpy(randomised("vit_b_16", 32, 0))
    _, variables = flax_variables("vit_b_16", state, num_classes=NUM_CLASSES, image_size=32)
    back = flax_to_torch(jax.tree_util.tree_map(np.asarray, variables), state)
    assert set(back) == set(state)
    for key in state:
        np.testing.assert_array_equal(back[key], state[key], err_msg=key)


def _template(name="small_cnn", num_classes=5, size=32):
    from fwbench.models import flax_model

    module = flax_model(name, num_classes=num_classes, image_size=size)
    return jax.eval_shape(lambda: module.init(jax.random.PRNGKey(0), jnp.zeros((1, size, size, 3))))


def test_conversion_names_missing_unmapped_and_mismatched_keys():
    state = torch_state_dict_numpy(randomised("small_cnn", 32, 0, num_classes=5))
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


def test_packed_attention_mismatch_names_the_part():
    state = torch_state_dict_numpy(randomised("vit_b_16", 32, 0))
    key = "encoder.layers.encoder_layer_3.self_attention.in_proj_weight"
    state[key] = state[key][:, :700]
    with pytest.raises(ConversionError, match=rf"{key}\[part 0\]"):
        torch_to_flax(state, _template("vit_b_16", NUM_CLASSES))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("resnet50", 25_557_032),
        ("vit_b_16", 86_567_656),
        ("mobilenet_v3_small", 2_542_856),
        ("efficientnet_b0", 5_288_548),
    ],
)
def test_parameter_counts_equal_torchvision(name, expected):
    torch_count = sum(p.numel() for p in torch_model(name, num_classes=1000, image_size=224).parameters())
    flax_count = sum(
        int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(_template(name, 1000, 224)["params"])
    )
    assert torch_count == flax_count == expected


def test_eval_parity_fails_a_twin_fed_permuted_images_or_blind_to_its_input():
    """Negative controls of the eval parity check: with calibrated statistics the logits vary with the image, so a
    twin that sees the images in another order, or ignores them, is far outside the bar; and a reference whose logits
    do not vary (the initialisation's statistics in MobileNetV3-Small) is refused rather than passed."""
    import torch

    from fwbench.models import parity_core

    def torch_forward(name, state, images, *, num_classes, image_size):
        model = torch_model(name, num_classes=num_classes, image_size=image_size)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
        with torch.no_grad():
            return model.eval()(torch.from_numpy(images)).numpy()

    def permuted(name, state, images, **kw):
        return torch_forward(name, state, images[::-1].copy(), **kw)

    def blind(name, state, images, **kw):
        return torch_forward(name, state, np.zeros_like(images), **kw)

    args = ("mobilenet_v3_small", DEFAULT_RESOLUTION, 3)
    assert parity_core.eval_parity_of(torch_forward, *args, batch=4) < 1e-6
    assert parity_core.eval_parity_of(permuted, *args, batch=4) > 1e-2
    assert parity_core.eval_parity_of(blind, *args, batch=4) > 1e-2
    uncalibrated = parity_core.calibrate_batchnorm
    try:  # the old random-statistics protocol's failure: logits that do not depend on the input are refused
        parity_core.calibrate_batchnorm = lambda model, batches: 0
        with pytest.raises(AssertionError, match="barely depend on the input"):
            parity_core.eval_parity_of(torch_forward, "efficientnet_b0", DEFAULT_RESOLUTION, 3, batch=4)
    finally:
        parity_core.calibrate_batchnorm = uncalibrated
