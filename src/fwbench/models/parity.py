"""Measuring how closely a Flax twin reproduces its torch model (used by the tests and benchmarks/parity_report.py).

Weights are random everywhere, BatchNorm statistics included, so that no layer degenerates to an identity.
Train-step parity is measured against PyTorch in float64: at random init, train-mode BatchNorm networks make fp32
weight gradients ill-conditioned (BatchNorm makes the loss invariant to a conv's weight scale, so its gradient is a
sum of nearly cancelling terms), and PyTorch's own fp32 gradients of ResNet-50 differ from its fp64 ones by up to
~25% on some tensors. The twin is therefore compared (a) in float64 against PyTorch in float64, which tests that
the backward passes are the same function, and (b) in float32 against the same float64 truth, next to PyTorch's own
float32 error, which tests that the twin is as accurate as PyTorch itself.
"""

from __future__ import annotations

import copy
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch

from fwbench.models import flax_variables, jax_forward, torch_model, torch_state_dict_numpy
from fwbench.models.convert import flax_to_torch

# Gradients that vanish in exact arithmetic (e.g. the bias of a BatchNorm whose output only feeds train-mode
# BatchNorms, which remove any per-channel shift) are rounding noise ~1e-9 of the largest gradient; errors are taken
# relative to at least this fraction of the model's largest gradient.
GRAD_FLOOR = 1e-5


def randomised(name: str, image_size: int, seed: int, num_classes: int = 10) -> torch.nn.Module:
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
            if not param.any():  # torchvision zero-inits some heads (ViT's)
                param.normal_(0.0, 0.02)
    return model.eval()


def relative(actual, expected) -> float:
    """max|actual - expected| / max|expected|."""
    scale = float(np.abs(expected).max())
    return float(np.abs(np.asarray(actual) - np.asarray(expected)).max()) / (scale if scale > 0 else 1.0)


def torch_train_mode(model: torch.nn.Module) -> torch.nn.Module:
    """Batch statistics on, randomness off: dropout and stochastic depth draw different masks in each framework."""
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) or type(module).__name__ == "StochasticDepth":
            module.eval()
    return model


def eval_parity(name: str, image_size: int, seed: int, *, batch: int = 2, num_classes: int = 10) -> float:
    """Relative max error of the twin's eval logits (fp32, highest matmul precision)."""
    model = randomised(name, image_size, seed, num_classes)
    images = np.random.default_rng(seed).standard_normal((batch, 3, image_size, image_size)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(images)).numpy()
    with jax.default_matmul_precision("highest"):
        logits = jax_forward(
            name, torch_state_dict_numpy(model), images, num_classes=num_classes, image_size=image_size
        )
    return relative(logits, expected)


def _torch_step(model, images, labels):
    logits = model(torch.from_numpy(images).to(next(model.parameters()).dtype))
    loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(labels))
    loss.backward()
    grads = {key: p.grad.double().numpy() for key, p in model.named_parameters()}
    return logits.detach().double().numpy(), loss.item(), grads, torch_state_dict_numpy(model)


def _jax_stepper(name, state, dtype, num_classes, image_size):
    """One compiled train-mode forward/backward of the twin, reusable across batches of the same shape."""
    module, variables = flax_variables(name, state, num_classes=num_classes, image_size=image_size)
    variables = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), variables)

    def loss_fn(params, x, labels):
        logits, updates = module.apply(
            {**variables, "params": params}, x, train=True, deterministic=True, mutable=["batch_stats"]
        )
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        return loss, (logits, updates)

    grad_fn = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))

    def step(images, labels):
        x = jnp.asarray(images.transpose(0, 2, 3, 1), dtype)
        with jax.default_matmul_precision("highest"):
            (loss, (logits, updates)), grads = grad_fn(variables["params"], x, jnp.asarray(labels))
        tree = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), {"params": grads, **updates})
        return np.asarray(logits, np.float64), float(loss), flax_to_torch(tree, state)

    return step


def grad_errors(grads: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> dict[str, float]:
    floor = GRAD_FLOOR * max(float(np.abs(g).max()) for g in reference.values())
    return {
        key: float(np.abs(grads[key] - ref).max()) / max(float(np.abs(ref).max()), floor)
        for key, ref in reference.items()
    }


def global_error(grads: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> float:
    """||g - ref|| / ||ref|| over the whole gradient vector."""
    diff = sum(float(np.sum((grads[k] - ref) ** 2)) for k, ref in reference.items())
    norm = sum(float(np.sum(ref**2)) for ref in reference.values())
    return (diff / norm) ** 0.5 if norm else 0.0


def train_step_parity(
    name: str, image_size: int, seed: int, *, batch: int = 4, num_classes: int = 10, fp32_draws: int = 8
) -> dict:
    """Errors of one train-mode forward/backward of the twin against PyTorch float64 (see the module docstring).

    Returns per-parameter gradient errors (`grad64`, `grad32`, and PyTorch's own fp32 `torch_grad32`), logits and
    loss errors, and running-statistics errors after the step (`stats32`, `torch_stats32`, `stats64`).

    A single fp32 gradient error is one draw of rounding noise that the ill-conditioning amplifies: for ResNet-50 at
    32 px the ratio of the twin's error to PyTorch's ranged 0.29-6.5 over a dozen seeds, while the two frameworks'
    errors were alike on average. So the fp32 gradient errors are also measured on `fp32_draws` further batches
    (same weights, fresh inputs; one compiled twin step): `grad32_global_draws`/`torch_grad32_global_draws` and
    `grad32_worst_draws`/`torch_grad32_worst_draws`, whose geometric means compare the two frameworks' accuracy.
    """
    model = torch_train_mode(randomised(name, image_size, seed, num_classes))
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((batch, 3, image_size, image_size)).astype(np.float32)
    labels = rng.integers(0, num_classes, batch)
    state = torch_state_dict_numpy(model)
    model64 = copy.deepcopy(model).double()

    def torch_step(reference, images, labels):
        return _torch_step(copy.deepcopy(reference), images, labels)

    truth_logits, truth_loss, truth_grads, truth_state = torch_step(model64, images, labels)
    torch_logits, torch_loss, torch_grads, torch_state = torch_step(model, images, labels)
    with jax.enable_x64(True):
        logits64, _, jax64 = _jax_stepper(name, state, jnp.float64, num_classes, image_size)(images, labels)
    jax32_step = _jax_stepper(name, state, jnp.float32, num_classes, image_size)
    logits32, loss32, jax32 = jax32_step(images, labels)
    stats = [k for k in truth_state if k.endswith(("running_mean", "running_var"))]
    result: dict[str, Any] = {
        "logits64": relative(logits64, truth_logits),
        "logits32": relative(logits32, truth_logits),
        "loss32": abs(loss32 - truth_loss) / abs(truth_loss),
        "torch_logits32": relative(torch_logits, truth_logits),
        "torch_loss32": abs(torch_loss - truth_loss) / abs(truth_loss),
        "grad32_global": global_error(jax32, truth_grads),
        "torch_grad32_global": global_error(torch_grads, truth_grads),
        "grad64": grad_errors(jax64, truth_grads),
        "grad32": grad_errors(jax32, truth_grads),
        "torch_grad32": grad_errors(torch_grads, truth_grads),
        "stats64": {k: relative(jax64[k], truth_state[k]) for k in stats},
        "stats32": {k: relative(jax32[k], truth_state[k]) for k in stats},
        "torch_stats32": {k: relative(torch_state[k], truth_state[k]) for k in stats},
    }
    draws: dict[str, list[float]] = {
        key: [] for key in ("grad32_global", "torch_grad32_global", "grad32_worst", "torch_grad32_worst")
    }

    def record(ours, theirs, truth):
        draws["grad32_global"].append(global_error(ours, truth))
        draws["torch_grad32_global"].append(global_error(theirs, truth))
        draws["grad32_worst"].append(max(grad_errors(ours, truth).values()))
        draws["torch_grad32_worst"].append(max(grad_errors(theirs, truth).values()))

    record(jax32, torch_grads, truth_grads)
    for _ in range(fp32_draws):
        images = rng.standard_normal(images.shape).astype(np.float32)
        labels = rng.integers(0, num_classes, batch)
        _, _, truth, _ = torch_step(model64, images, labels)
        _, _, theirs, _ = torch_step(model, images, labels)
        _, _, ours = jax32_step(images, labels)
        record(ours, theirs, truth)
    result.update({f"{key}_draws": values for key, values in draws.items()})
    return result


def geometric_mean(values: list[float]) -> float:
    """Typical size of errors that span orders of magnitude (zeros count as the smallest float)."""
    return float(np.exp(np.mean(np.log(np.maximum(values, np.finfo(np.float64).tiny)))))
