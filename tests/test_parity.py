"""Every Flax twin is the same function as its torch model when given converted weights: eval logits, train-mode
logits, gradients of every parameter and the BatchNorm running statistics after a step.

Weights (BatchNorm statistics included) and inputs are random and fresh on every run; the seed is in the message.
"""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import torch

from fwbench.models import MODELS, flax_variables, jax_forward, torch_model, torch_state_dict_numpy
from fwbench.models.convert import ConversionError, flax_to_torch, torch_to_flax

DEFAULT_RESOLUTION = 32  # the default study's dataset.image_size
NUM_CLASSES = 10
EVAL_TOLERANCE = {"small_cnn": 1e-5}  # the spine's bar; the study models' is 1e-4
GRAD_TOLERANCE = 1e-3
# Train-mode BatchNorm at the default resolution normalises over a few samples of 1x1 maps in the last stages,
# which amplifies float32 rounding (EfficientNet-B0 reaches ~1e-4); the bar is the gradients' 1e-3.
TRAIN_LOGIT_TOLERANCE = 1e-3


def _fresh_seed() -> int:
    return int(np.random.default_rng().integers(1 << 30))


def randomised(name, image_size, seed, num_classes=NUM_CLASSES):
    """Random weights everywhere (torchvision zero-inits some, e.g. ViT's head) and random BatchNorm statistics,
    so that no layer is an identity and eval-mode BatchNorm really normalises."""
    torch.manual_seed(seed)
    model = torch_model(name, num_classes=num_classes, image_size=image_size)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.3, 0.3)
        for param in model.parameters():
            if not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


def _relative(actual, expected) -> float:
    scale = float(np.abs(expected).max())
    return float(np.abs(np.asarray(actual) - np.asarray(expected)).max()) / (scale if scale > 0 else 1.0)


@pytest.fixture(autouse=True)
def highest_precision():
    previous = jax.config.jax_default_matmul_precision
    jax.config.update("jax_default_matmul_precision", "highest")
    yield
    jax.config.update("jax_default_matmul_precision", previous)


@pytest.mark.parametrize("image_size", [224, DEFAULT_RESOLUTION])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_eval_logit_parity(name, image_size):
    seed = _fresh_seed()
    model = randomised(name, image_size, seed)
    images = np.random.default_rng(seed).standard_normal((2, 3, image_size, image_size)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(images)).numpy()
    state = torch_state_dict_numpy(model)
    logits = jax_forward(name, state, images, num_classes=NUM_CLASSES, image_size=image_size)
    error = _relative(logits, expected)
    assert error <= EVAL_TOLERANCE.get(name, 1e-4), f"{name}@{image_size}px seed {seed}: max|Δ|/max|ref| = {error:.3g}"


def _torch_train_mode(model):
    """Batch statistics on, randomness off: dropout and stochastic depth draw different masks in each framework."""
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) or type(module).__name__ == "StochasticDepth":
            module.eval()
    return model


def _torch_step(model, images, labels):
    logits = model(torch.from_numpy(images).to(next(model.parameters()).dtype))
    loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(labels))
    loss.backward()
    grads = {key: p.grad.double().numpy() for key, p in model.named_parameters()}
    return logits.detach().double().numpy(), loss.item(), grads, torch_state_dict_numpy(model)


def _jax_step(name, state, images, labels, dtype):
    module, variables = flax_variables(name, state, num_classes=NUM_CLASSES, image_size=images.shape[-1])
    variables = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), variables)
    x = jnp.asarray(images.transpose(0, 2, 3, 1), dtype)

    def loss_fn(params):
        logits, updates = module.apply(
            {**variables, "params": params}, x, train=True, deterministic=True, mutable=["batch_stats"]
        )
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, jnp.asarray(labels)).mean()
        return loss, (logits, updates)

    (loss, (logits, updates)), grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(variables["params"])
    as_torch = flax_to_torch(
        jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), {"params": grads, **updates}), state
    )
    return np.asarray(logits, np.float64), float(loss), as_torch


def _grad_errors(grads, reference):
    # A few gradients vanish in exact arithmetic (e.g. the bias of a BatchNorm whose output only feeds train-mode
    # BatchNorms, which remove any per-channel shift) and are rounding noise ~1e-9 of the largest gradient, so
    # errors are taken relative to at least 1e-5 of the largest gradient in the model.
    floor = 1e-5 * max(float(np.abs(g).max()) for g in reference.values())
    return {
        key: float(np.abs(grads[key] - ref).max()) / max(float(np.abs(ref).max()), floor)
        for key, ref in reference.items()
    }


@pytest.mark.parametrize("name", sorted(MODELS))
def test_train_step_parity(name):
    """Train-mode logits, cross-entropy gradients of every parameter, and BatchNorm running statistics after one
    step. The reference is PyTorch in float64: at random init, train-mode BatchNorm networks make fp32 weight
    gradients ill-conditioned (BatchNorm makes the loss invariant to a conv's weight scale, so its gradient is a
    sum of nearly cancelling terms): PyTorch's own fp32 gradients of ResNet-50 differ from its fp64 ones by up to
    ~25% on some layer4 tensors. So (a) the twin in float64 must match PyTorch in float64 to 1e-3 per parameter
    (in practice ~1e-9), proving the backward passes are the same function, and (b) in float32 the twin must be as
    accurate as PyTorch itself: its error against the fp64 truth within 1e-3 or twice PyTorch's own fp32 error
    (running statistics likewise, within 1e-4 or twice PyTorch's own error).
    """
    seed = _fresh_seed()
    size, where = DEFAULT_RESOLUTION, f"{name} seed {seed}"
    model = _torch_train_mode(randomised(name, size, seed))
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((4, 3, size, size)).astype(np.float32)
    labels = rng.integers(0, NUM_CLASSES, 4)
    state = torch_state_dict_numpy(model)

    truth_logits, truth_loss, truth_grads, truth_state = _torch_step(copy.deepcopy(model).double(), images, labels)
    _, _, torch32_grads, torch32_state = _torch_step(model, images, labels)
    with jax.enable_x64(True):
        logits64, loss64, jax64 = _jax_step(name, state, images, labels, jnp.float64)
    assert _relative(logits64, truth_logits) <= 1e-9, where
    errors64 = _grad_errors(jax64, truth_grads)
    worst = max(errors64, key=errors64.get)
    assert errors64[worst] <= GRAD_TOLERANCE, f"{where} (float64): gradient of {worst} off by {errors64[worst]:.3g}"

    logits32, loss32, jax32 = _jax_step(name, state, images, labels, jnp.float32)
    assert _relative(logits32, truth_logits) <= TRAIN_LOGIT_TOLERANCE, where
    assert abs(loss32 - truth_loss) / abs(truth_loss) <= 1e-4, where
    errors32, torch_errors = _grad_errors(jax32, truth_grads), _grad_errors(torch32_grads, truth_grads)
    bad = {k: (e, torch_errors[k]) for k, e in errors32.items() if e > max(GRAD_TOLERANCE, 2 * torch_errors[k])}
    assert not bad, f"{where} (float32): twin gradient error vs fp64 (twin, PyTorch fp32): {bad}"
    for key, value in truth_state.items():
        if key.endswith(("running_mean", "running_var")):
            tolerance = max(1e-4, 2 * _relative(torch32_state[key], value))
            assert _relative(jax32[key], value) <= tolerance, f"{where}: {key} after one train step"
            assert _relative(jax64[key], value) <= 1e-9, f"{where}: {key} after one train step (float64)"


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
