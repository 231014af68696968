"""JAX/Flax trainer: a pure train step (value_and_grad, optax Adam, BatchNorm statistics as mutable state), compiled
ahead of time for the exact batch shape, so compilation is measured once and never falls inside an epoch. Every
executable the cell runs (train step, evaluation, recalibration, step-0 probe) is compiled in `compile`. Batches
arrive in NHWC (`input_layout`), the Flax twins' layout, exactly as the shared loader prepares them."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from fwbench.io import atomic_stream
from fwbench.models import flax_host_variables
from fwbench.models.layers import MOMENTS
from fwbench.training.checkpoint import read_arrays, write_arrays
from fwbench.training.firstcall import first_call_extra
from fwbench.training.recipe import Recipe
from fwbench.training.trainer import STATISTICS, Trainer


def adam(recipe: Recipe) -> optax.GradientTransformation:
    """torch.optim.Adam's update direction (L2 weight decay folded into the gradient first); the learning rate is
    applied by the step, so the schedule lives in one place (fwbench.training.recipe)."""
    b1, b2 = recipe.betas
    parts = [optax.add_decayed_weights(recipe.weight_decay)] if recipe.weight_decay else []
    return optax.chain(*parts, optax.scale_by_adam(b1=b1, b2=b2, eps=recipe.eps, eps_root=0.0))


def _loss(logits, labels, valid=None):
    """Cross-entropy, the mean over the batch, or over its first `valid` rows when the rest pads a partial batch."""
    losses = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels)
    if valid is None:
        return losses.mean()
    return jnp.where(jnp.arange(labels.shape[0]) < valid, losses, 0.0).sum() / valid


class JaxTrainer(Trainer):
    input_layout = "NHWC"
    optimizer_implementation = "optax add_decayed_weights + scale_by_adam, inside the compiled train step"

    def __init__(self, backend, model: str, state_dict: Mapping[str, np.ndarray], *, num_classes, image_size, recipe):
        self.backend, self.recipe = backend, recipe
        module, variables, how = flax_host_variables(
            model, state_dict, num_classes=num_classes, image_size=image_size, template_cache=backend.model_cache_dir
        )
        backend.effective_settings["flax_template"] = how
        # Cast on the host, as inference does; device_put below places each leaf once.
        variables = jax.tree_util.tree_map(lambda a: np.asarray(a).astype(np.dtype(backend.dtype)), variables)
        self.module = module
        self.params = jax.device_put(variables["params"], backend.device)
        self.batch_stats = jax.device_put(variables.get("batch_stats", {}), backend.device)
        self.tx = adam(recipe)
        # compiled as one program: run op by op, Adam's zeros compile one XLA program per distinct parameter shape
        # (59 on MobileNetV3-Small, 2.8 s of its trainer's build on the Zen 3 VM)
        self.opt_state = jax.jit(self.tx.init)(self.params)
        self.key = jax.random.PRNGKey(recipe.seed)
        self._train = jax.jit(self._train_step, donate_argnums=(0, 1, 2))
        self._eval = jax.jit(self._eval_step, static_argnames="batch_statistics")
        self._probe = jax.jit(self._probe_step)
        self._moments = jax.jit(self._moments_step)
        self._average = jax.jit(_running_average)
        self.train_executable, self.eval_executables, self.moments_executable = None, {}, None
        self.masked_train_executable, self.probe_executable = None, None
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

    def _train_step(self, params, batch_stats, opt_state, images, labels, lr, step, valid=None):
        key = jax.random.fold_in(self.key, step)  # the step's dropout key, derived in the program (step())

        def loss_fn(p):
            logits, stats = self._forward(p, batch_stats, images, True, key)
            return _loss(logits, labels, valid), stats

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

    def _probe_step(self, params, batch_stats, opt_state, images, labels, lr, valid):
        def loss_fn(p):
            logits, stats = self._forward(p, batch_stats, images, True)  # randomness off
            return _loss(logits, labels, valid), stats

        (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        norm = optax.tree.norm(grads)
        updates, _ = self.tx.update(grads, opt_state, params)
        stepped = jax.tree_util.tree_map(lambda p, u: (p - lr * u).astype(p.dtype), params, updates)
        after, _ = loss_fn(stepped)
        return loss, norm, after

    # Trainer interface ----------------------------------------------------------------------------------------------
    def to_device(self, images, labels):
        """`images`: a normalised float32 NHWC batch (input_layout), as the shared loader prepares it."""
        host = np.asarray(images, np.float32).astype(np.dtype(self.backend.dtype), copy=False)  # cast on the host
        return jax.device_put(host, self.backend.device), jax.device_put(
            np.asarray(labels, np.int32), self.backend.device
        )

    def synchronize(self, handle) -> None:
        jax.block_until_ready(handle)

    def _lr(self, lr: float):
        return np.float32(lr)

    def compile(self, images, labels, *, partial_batches: bool = False, train: bool = True) -> dict[str, float]:
        """Every executable the cell runs, ahead of time for these shapes, each followed by its first call and
        steady-state calls on throwaway copies of the state (fwbench.training.firstcall): the train step (and, with
        `partial_batches`, its masked variant for a padded last batch), evaluation with running and with batch
        statistics, BatchNorm recalibration's moments (models with BatchNorm) and the step-0 probe. `train=False`
        leaves out the train steps (for a check that only probes, evaluates and recalibrates)."""
        rows = int(labels.shape[0])
        lr, step, valid = self._lr(self.recipe.lr), np.uint32(0), np.int32(rows)
        timings: dict[str, float] = {}

        def ahead_of_time(name, jitted, *args, **static):
            t0 = time.perf_counter()
            lowered = jitted.lower(*args, **static)
            t1 = time.perf_counter()
            executable = lowered.compile()
            timings[f"{name}_trace_lower_s"], timings[f"{name}_compile_s"] = t1 - t0, time.perf_counter() - t1
            return executable

        def first_calls(name, call, finish=jax.block_until_ready):
            timings[f"{name}_first_call_extra_s"] = first_call_extra(call, finish)

        state = (self.params, self.batch_stats, self.opt_state)
        if train:
            self.train_executable = ahead_of_time("train", self._train, *state, images, labels, lr, step)
            self.backend.read_arithmetic(self.train_executable.as_text())  # the cell's TF32 scope as the step computes
            timings["train_first_call_extra_s"] = self._train_first_calls(
                self.train_executable, images, labels, lr, step
            )
        if train and partial_batches:
            masked = np.int32(max(1, rows - 1))
            self.masked_train_executable = ahead_of_time(
                "train_masked", self._train, *state, images, labels, lr, step, masked
            )
            timings["train_masked_first_call_extra_s"] = self._train_first_calls(
                self.masked_train_executable, images, labels, lr, step, masked
            )
        for name, batch_statistics in (("eval", False), ("eval_batch_statistics", True)):
            executable = ahead_of_time(
                name,
                self._eval,
                self.params,
                self.batch_stats,
                images,
                labels,
                valid,
                batch_statistics=batch_statistics,
            )
            self.eval_executables[batch_statistics] = executable
            first_calls(name, lambda e=executable: e(self.params, self.batch_stats, images, labels, valid))
        if self._has_batch_norm():
            self.moments_executable = ahead_of_time(
                "recalibration", self._moments, self.params, self.batch_stats, images
            )
            # the averaging is warmed here too: run op by op, it compiled a program per distinct statistics shape in
            # the first recalibration, timed (MobileNetV3-Small: 1.66 s against 0.07 s for the next, on the Zen 3 VM)
            first_calls(
                "recalibration",
                lambda: self._average(
                    *2 * [self.moments_executable(self.params, self.batch_stats, images)], np.float32(0.5)
                ),
            )
        self.probe_executable = ahead_of_time("probe", self._probe, *state, images, labels, lr, valid)
        first_calls("probe", lambda: self.probe_executable(*state, images, labels, lr, valid))
        return timings

    def _train_first_calls(self, executable, images, labels, lr, step, *extra) -> float:
        """The train step's first-call extra, on copies of the state (the step donates it), each call on the state
        the previous one returned."""
        # device_put copies without compiling (jnp.copy, leaf by leaf, compiles a program per distinct shape)
        state = jax.device_put((self.params, self.batch_stats, self.opt_state), may_alias=False)

        def call():
            nonlocal state
            *state, loss = executable(*state, images, labels, lr, step, *extra)
            return loss

        return first_call_extra(call, self.value)

    def _has_batch_norm(self) -> bool:
        return bool(jax.tree_util.tree_leaves(self.batch_stats))

    def step(self, images, labels, lr: float, step_index: int, valid: int | None = None):
        masked = valid is not None and valid < labels.shape[0]
        executable = self.masked_train_executable if masked else self.train_executable
        if executable is None:
            raise RuntimeError(f"JaxTrainer.step before compile({'partial_batches=True' if masked else ''})")
        # Host scalars go in as NumPy scalars and the dropout key is folded in the program: a jnp.asarray and a
        # fold_in here cost 0.1 and 0.4 ms of host time per step on the Zen 3 VM, which no other framework's step
        # paid (torch sets a float; TensorFlow's constants cost microseconds)
        extra = (np.int32(valid),) if masked else ()
        self.params, self.batch_stats, self.opt_state, loss = executable(
            self.params, self.batch_stats, self.opt_state, images, labels, self._lr(lr), np.uint32(step_index), *extra
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
            self.params, batch_stats, images, labels, np.int32(valid)
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
            weight = np.float32(1.0 / count)  # an argument of the compiled average, not a constant of it
            average = moments if average is None else self._average(average, moments, weight)
        if average is None:
            raise ValueError("recalibrate() needs at least one batch")
        self.recalibrated = jax.block_until_ready(average)
        return True

    def probe(self, images, labels, lr: float, valid: int | None = None) -> dict[str, float]:
        if self.probe_executable is None:
            raise RuntimeError("JaxTrainer.probe before compile()")
        rows = np.int32(labels.shape[0] if valid is None else valid)
        loss, norm, after = self.probe_executable(
            self.params, self.batch_stats, self.opt_state, images, labels, self._lr(lr), rows
        )
        return {"loss": float(loss), "grad_norm": float(norm), "loss_after_step": float(after)}

    def _state(self) -> dict[str, Any]:
        return {"params": self.params, "batch_stats": self.batch_stats, "opt_state": self.opt_state}

    def _leaves(self) -> tuple[list[str], list[Any], Any]:
        flat, treedef = jax.tree_util.tree_flatten_with_path(self._state())
        return [jax.tree_util.keystr(path) for path, _ in flat], [leaf for _, leaf in flat], treedef

    def save(self, path) -> None:
        names, leaves, _ = self._leaves()  # one leaf at a time to the host and into the file
        atomic_stream(path, lambda handle: write_arrays(handle, zip(names, leaves, strict=True), jax.device_get))

    def load(self, path) -> None:
        names, leaves, treedef = self._leaves()
        arrays = read_arrays(path, names, leaves)
        state = jax.device_put(jax.tree_util.tree_unflatten(treedef, arrays), self.backend.device)
        self.params, self.batch_stats, self.opt_state = state["params"], state["batch_stats"], state["opt_state"]


def _running_average(average, moments, weight):
    """torch's cumulative update of BatchNorm statistics, weight * batch + (1 - weight) * running, over the tree of
    every layer's: one compiled program for all of them."""
    return jax.tree_util.tree_map(lambda a, m: weight * m + (1.0 - weight) * a, average, moments)
