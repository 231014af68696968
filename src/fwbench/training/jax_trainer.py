"""JAX/Flax trainer: a pure train step (value_and_grad, optax Adam, BatchNorm statistics as mutable state), compiled
ahead of time for the exact batch shape, so compilation is measured once and never falls inside an epoch."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import serialization

from fwbench.backends.base import STATISTICS, Trainer
from fwbench.io import atomic_write_bytes
from fwbench.models import flax_variables
from fwbench.models.layers import MOMENTS
from fwbench.training.recipe import Recipe


def adam(recipe: Recipe) -> optax.GradientTransformation:
    """torch.optim.Adam's update direction (L2 weight decay folded into the gradient first); the learning rate is
    applied by the step, so the schedule lives in one place (fwbench.training.recipe)."""
    b1, b2 = recipe.betas
    parts = [optax.add_decayed_weights(recipe.weight_decay)] if recipe.weight_decay else []
    return optax.chain(*parts, optax.scale_by_adam(b1=b1, b2=b2, eps=recipe.eps, eps_root=0.0))


def _loss(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels).mean()


class JaxTrainer(Trainer):
    def __init__(self, backend, model: str, state_dict: Mapping[str, np.ndarray], *, num_classes, image_size, recipe):
        self.backend, self.recipe = backend, recipe
        module, variables = flax_variables(model, state_dict, num_classes=num_classes, image_size=image_size)
        variables = jax.tree_util.tree_map(lambda a: jnp.asarray(a, backend.dtype), variables)
        self.module = module
        self.params = jax.device_put(variables["params"], backend.device)
        self.batch_stats = jax.device_put(variables.get("batch_stats", {}), backend.device)
        self.tx = adam(recipe)
        self.opt_state = self.tx.init(self.params)
        self.key = jax.random.PRNGKey(recipe.seed)
        self._train = jax.jit(self._train_step, donate_argnums=(0, 1, 2))
        self._eval = jax.jit(self._eval_step, static_argnames="batch_statistics")
        self._probe = jax.jit(self._probe_step)
        self._moments = jax.jit(self._moments_step)
        self.train_executable, self.eval_executables, self.moments_executable = None, {}, None
        self.recalibrated = None

    # Pure functions (jitted above) -------------------------------------------------------------------------------
    def _forward(self, params, batch_stats, images, train: bool, key=None):
        variables = {"params": params, "batch_stats": batch_stats}
        if not train:
            return self.module.apply(variables, images, train=False), batch_stats
        rngs = {"dropout": key} if key is not None else None
        logits, updates = self.module.apply(
            variables, images, train=True, deterministic=key is None, mutable=["batch_stats"], rngs=rngs
        )
        return logits, updates.get("batch_stats", batch_stats)

    def _train_step(self, params, batch_stats, opt_state, images, labels, lr, key):
        def loss_fn(p):
            logits, stats = self._forward(p, batch_stats, images, True, key)
            return _loss(logits, labels), stats

        (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = self.tx.update(grads, opt_state, params)
        params = jax.tree_util.tree_map(lambda p, u: (p - lr * u).astype(p.dtype), params, updates)
        return params, stats, opt_state, loss

    def _eval_step(self, params, batch_stats, images, labels, valid, batch_statistics: bool = False):
        logits, _ = self._forward(params, batch_stats, images, batch_statistics)
        logits = logits.astype(jnp.float32)
        mask = jnp.arange(labels.shape[0]) < valid
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
        k = min(5, logits.shape[-1])
        top = jax.lax.top_k(logits, k)[1]
        hit1 = top[:, 0] == labels
        hit5 = (top == labels[:, None]).any(axis=1)
        return tuple(jnp.where(mask, values, 0).sum() for values in (losses, hit1, hit5))

    def _moments_step(self, params, batch_stats, images):
        """Each BatchNorm's statistics of this batch (mean, unbiased variance), in batch_stats' tree layout."""
        _, state = self.module.apply(
            {"params": params, "batch_stats": batch_stats},
            images,
            train=True,
            deterministic=True,
            mutable=["batch_stats", MOMENTS],
        )
        return state[MOMENTS]

    def _probe_step(self, params, batch_stats, opt_state, images, labels, lr):
        def loss_fn(p):
            logits, stats = self._forward(p, batch_stats, images, True)  # randomness off
            return _loss(logits, labels), stats

        (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        norm = optax.tree.norm(grads)
        updates, _ = self.tx.update(grads, opt_state, params)
        stepped = jax.tree_util.tree_map(lambda p, u: (p - lr * u).astype(p.dtype), params, updates)
        after, _ = loss_fn(stepped)
        return loss, norm, after

    # Trainer interface ----------------------------------------------------------------------------------------------
    def to_device(self, images_nhwc, labels):
        images = jnp.asarray(np.asarray(images_nhwc, np.float32), dtype=self.backend.dtype)
        return jax.device_put(images, self.backend.device), jax.device_put(np.asarray(labels, np.int32))

    def synchronize(self, handle) -> None:
        jax.block_until_ready(handle)

    def _lr(self, lr: float):
        return jnp.asarray(lr, jnp.float32)

    def compile(self, images, labels) -> dict[str, float]:
        key = jax.random.fold_in(self.key, 0)
        t0 = time.perf_counter()
        lowered = self._train.lower(
            self.params, self.batch_stats, self.opt_state, images, labels, self._lr(self.recipe.lr), key
        )
        t1 = time.perf_counter()
        self.train_executable = lowered.compile()
        t2 = time.perf_counter()
        for batch_statistics in (False, True):
            self.eval_executables[batch_statistics] = self._eval.lower(
                self.params,
                self.batch_stats,
                images,
                labels,
                jnp.asarray(labels.shape[0], jnp.int32),
                batch_statistics=batch_statistics,
            ).compile()
        t3 = time.perf_counter()
        timings = {"train_trace_lower_s": t1 - t0, "train_compile_s": t2 - t1, "eval_compile_s": t3 - t2}
        if self._has_batch_norm():
            self.moments_executable = self._moments.lower(self.params, self.batch_stats, images).compile()
            timings["recalibration_compile_s"] = time.perf_counter() - t3
        return timings

    def _has_batch_norm(self) -> bool:
        return bool(jax.tree_util.tree_leaves(self.batch_stats))

    def step(self, images, labels, lr: float, step_index: int):
        if self.train_executable is None:
            raise RuntimeError("JaxTrainer.step before compile()")
        key = jax.random.fold_in(self.key, step_index)
        self.params, self.batch_stats, self.opt_state, loss = self.train_executable(
            self.params, self.batch_stats, self.opt_state, images, labels, self._lr(lr), key
        )
        return loss

    def value(self, loss) -> float:
        return float(loss)

    def evaluate(self, images, labels, valid: int, *, statistics: str = "running") -> tuple[float, int, int]:
        if statistics not in STATISTICS:
            raise ValueError(f"statistics = {statistics!r}: not one of {STATISTICS}")
        batch_stats = self.batch_stats
        if statistics == "recalibrated":
            if self.recalibrated is None:
                raise RuntimeError("evaluate(statistics='recalibrated') before recalibrate()")
            batch_stats = self.recalibrated
        loss, top1, top5 = self.eval_executables[statistics == "batch"](
            self.params, batch_stats, images, labels, jnp.asarray(valid, jnp.int32)
        )
        return float(loss), int(top1), int(top5)

    def recalibrate(self, batches) -> bool:
        if not self._has_batch_norm():
            return False
        if self.moments_executable is None:
            raise RuntimeError("JaxTrainer.recalibrate before compile()")
        average = None
        for count, images in enumerate(batches, start=1):
            moments = self.moments_executable(self.params, self.batch_stats, images)
            weight = 1.0 / count  # torch's cumulative update: weight * batch + (1 - weight) * running
            average = (
                moments
                if average is None
                else jax.tree_util.tree_map(lambda a, m, w=weight: w * m + (1.0 - w) * a, average, moments)
            )
        if average is None:
            raise ValueError("recalibrate() needs at least one batch")
        self.recalibrated = jax.block_until_ready(average)
        return True

    def probe(self, images, labels, lr: float) -> dict[str, float]:
        loss, norm, after = self._probe(self.params, self.batch_stats, self.opt_state, images, labels, self._lr(lr))
        return {"loss": float(loss), "grad_norm": float(norm), "loss_after_step": float(after)}

    def _state(self) -> dict[str, Any]:
        return {"params": self.params, "batch_stats": self.batch_stats, "opt_state": self.opt_state}

    def save(self, path) -> None:
        atomic_write_bytes(path, serialization.to_bytes(jax.device_get(self._state())))

    def load(self, path) -> None:
        with open(path, "rb") as handle:
            state = serialization.from_bytes(jax.device_get(self._state()), handle.read())
        state = jax.device_put(state, self.backend.device)
        self.params, self.batch_stats, self.opt_state = state["params"], state["batch_stats"], state["opt_state"]
