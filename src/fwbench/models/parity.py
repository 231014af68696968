"""Measuring how closely a Flax twin reproduces its torch model (used by the tests and benchmarks/parity_report.py).

The torch reference, the error statistics and the protocols are framework-neutral and shared with the Keras twins
(fwbench.models.parity_core, whose docstring explains why train steps are judged against PyTorch float64); this
module plugs the Flax twin into them and keeps the names the tests and the report import.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from fwbench.models import flax_host_variables, jax_forward
from fwbench.models.convert import flax_to_torch
from fwbench.models.parity_core import (  # noqa: F401  (re-exported: this module's public names before the split)
    GRAD_FLOOR,
    eval_parity_of,
    geometric_mean,
    global_error,
    grad_errors,
    randomised,
    relative,
    torch_train_mode,
    train_step_parity_of,
)
from fwbench.models.parity_core import torch_step as _torch_step  # noqa: F401


def _highest_precision_forward(*args, **kwargs) -> np.ndarray:
    with jax.default_matmul_precision("highest"):
        return jax_forward(*args, **kwargs)


def eval_parity(name: str, image_size: int, seed: int, *, batch: int = 2, num_classes: int = 10) -> float:
    """Relative max error of the twin's eval logits (fp32, highest matmul precision)."""
    return eval_parity_of(_highest_precision_forward, name, image_size, seed, batch=batch, num_classes=num_classes)


# The float64 step checks, on one batch, that the twin is PyTorch's function: its program is compiled without LLVM's
# optimisations, which moved its logits by at most 1.4e-12 relative (the bar is 1e-9) and took 1.5-6 s off each
# large model's compile on the Zen 3 VM. The float32 steps, which judge XLA's arithmetic, compile as the study's do.
FLOAT64_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0}
# Except where the unoptimised program runs longer than the optimisations take to compile: EfficientNet-B0's float64
# step compiled in 14 s and ran 23 s unoptimised, against 25 s and 4 s optimised (one pinned core of the Zen 3 VM,
# 2026-11-29; ResNet-50 alike either way, ViT-B/16 and MobileNetV3-Small 8 s and 7 s faster unoptimised).
FLOAT64_OPTIMISED = frozenset({"efficientnet_b0"})


def float64_compiler_options(name: str) -> dict | None:
    """The compiler options of `name`'s float64 step (FLOAT64_COMPILER_OPTIONS, or XLA's own for FLOAT64_OPTIMISED)."""
    return None if name in FLOAT64_OPTIMISED else FLOAT64_COMPILER_OPTIONS


def _jax_stepper(name, state, dtype, num_classes, image_size, compiler_options=None):
    """One compiled train-mode forward/backward of the twin (with `compiler_options`), reusable across batches of the
    same shape."""
    module, host, _ = flax_host_variables(name, state, num_classes=num_classes, image_size=image_size)
    # cast on the host and place with device_put: jnp.asarray compiles an XLA program per distinct shape, a convert
    # given a dtype (182 on MobileNetV3-Small, 12 s of its test) and in JAX 0.10 a lax.stage without one (69 per
    # dtype on EfficientNet-B0)
    variables = jax.device_put(jax.tree_util.tree_map(lambda a: np.asarray(a, np.dtype(dtype)), host))

    def loss_fn(params, x, labels):
        logits, updates = module.apply(
            {**variables, "params": params}, x, train=True, deterministic=True, mutable=["batch_stats"]
        )
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        return loss, (logits, updates)

    grad_fn = jax.jit(jax.value_and_grad(loss_fn, has_aux=True), compiler_options=compiler_options)

    def step(images, labels):
        x = jax.device_put(np.asarray(images.transpose(0, 2, 3, 1), np.dtype(dtype)))
        with jax.default_matmul_precision("highest"):
            (loss, (logits, updates)), grads = grad_fn(variables["params"], x, jax.device_put(labels))
        tree = jax.tree_util.tree_map(np.asarray, {"params": grads, **updates})
        return np.asarray(logits, np.float64), float(loss), flax_to_torch(tree, state)

    return step


def step_maker(name: str, num_classes: int, image_size: int):
    """make_step for parity_core.train_step_parity_of: the Flax twin's train step (float64 built with 64-bit JAX)."""

    def make_step(state, dtype: str):
        if dtype == "float32":
            return _jax_stepper(name, state, jnp.float32, num_classes, image_size)

        def step64(images, labels):  # built and run with 64-bit JAX
            with jax.enable_x64(True):
                return _jax_stepper(name, state, jnp.float64, num_classes, image_size, float64_compiler_options(name))(
                    images, labels
                )

        return step64

    return make_step


def train_step_parity(
    name: str, image_size: int, seed: int, *, batch: int = 4, num_classes: int = 10, fp32_draws: int = 8
) -> dict:
    """Errors of one train-mode forward/backward of the Flax twin against PyTorch float64
    (fwbench.models.parity_core.train_step_parity_of describes the result)."""
    return train_step_parity_of(
        step_maker(name, num_classes, image_size),
        name,
        image_size,
        seed,
        batch=batch,
        num_classes=num_classes,
        fp32_draws=fp32_draws,
    )
