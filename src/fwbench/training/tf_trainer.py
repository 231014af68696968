"""TensorFlow/Keras trainer: the Keras twin trained by XLA-compiled functions (`tf.function(jit_compile=True)`), one
per thing the cell runs (train step, evaluation with running and with batch statistics, BatchNorm moments for
recalibration, the step-0 probe), each traced and compiled before the first timed step.

The optimizer is torch.optim.Adam's update written in TensorFlow ops inside the train step, in optax's arrangement
(L2 weight decay added to the gradient, bias-corrected moments, epsilon added after the square root), because
Keras's own Adam is a different function: it decays weights decoupled (AdamW-style) and folds the bias correction
into the step size, which moves epsilon. The learning rate of each step comes from the shared schedule
(fwbench.training.recipe) as a number, as in the other frameworks. Batches arrive in NHWC (`input_layout`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import SimpleNamespace

import numpy as np

from fwbench.io import atomic_stream
from fwbench.models.tensorflow_import import tf
from fwbench.training.checkpoint import read_arrays, write_arrays
from fwbench.training.firstcall import first_call_extra
from fwbench.training.recipe import Recipe
from fwbench.training.trainer import STATISTICS, Trainer

OPTIMIZER = (
    "torch.optim.Adam's update in TensorFlow ops inside the XLA train step (L2 weight decay into the gradient, "
    "bias-corrected moments, eps after the square root; Keras's Adam differs)"
)


def adam_update(recipe: Recipe, grad, param, m, v, count):
    """(update direction, new m, new v) of torch.optim.Adam at step `count` (1-based, float32), in the parameter's
    dtype; the parameter then moves by -lr * direction (optax's scale_by_adam after add_decayed_weights)."""
    b1, b2 = recipe.betas
    if recipe.weight_decay:
        grad = grad + tf.cast(recipe.weight_decay, grad.dtype) * param
    m = tf.cast(b1, m.dtype) * m + tf.cast(1.0 - b1, m.dtype) * grad
    v = tf.cast(b2, v.dtype) * v + tf.cast(1.0 - b2, v.dtype) * tf.square(grad)
    m_hat = m / tf.cast(1.0 - tf.pow(tf.constant(b1, tf.float32), count), m.dtype)
    v_hat = v / tf.cast(1.0 - tf.pow(tf.constant(b2, tf.float32), count), v.dtype)
    return m_hat / (tf.sqrt(v_hat) + tf.cast(recipe.eps, v.dtype)), m, v


def _losses(logits, labels):
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=tf.cast(logits, tf.float32))


def _masked_mean(losses, valid):
    """The mean over the first `valid` rows (the rest pads a partial batch); over all rows when valid = rows."""
    mask = tf.range(tf.shape(losses)[0]) < valid
    return tf.reduce_sum(tf.where(mask, losses, 0.0)) / tf.cast(valid, tf.float32)


class TfTrainer(Trainer):
    input_layout = "NHWC"
    optimizer_implementation = OPTIMIZER

    def __init__(self, backend, model: str, state_dict: Mapping[str, np.ndarray], *, num_classes, image_size, recipe):
        from fwbench.models import keras_model, load_torch_weights
        from fwbench.models.keras_layers import batch_norms

        self.backend, self.recipe = backend, recipe
        with tf.device(backend.device):
            self.model = keras_model(model, num_classes=num_classes, image_size=image_size, dtype=backend.policy)
            load_torch_weights(self.model, state_dict)
            self.params = list(self.model.trainable_variables)
            self.m = [tf.Variable(tf.zeros_like(p), trainable=False, name="adam_m") for p in self.params]
            self.v = [tf.Variable(tf.zeros_like(p), trainable=False, name="adam_v") for p in self.params]
            self.count = tf.Variable(0.0, dtype=tf.float32, trainable=False, name="adam_count")
        self.norms = batch_norms(self.model)
        track = backend.traces.track
        self._train = track(tf.function(self._train_step, jit_compile=True))
        self._eval = {
            False: track(tf.function(lambda x, y, n: self._eval_step(x, y, n, False), jit_compile=True)),
            True: track(tf.function(lambda x, y, n: self._eval_step(x, y, n, True), jit_compile=True)),
        }
        self._moments = track(tf.function(self._moments_step, jit_compile=True))
        self._probe = track(tf.function(self._probe_step, jit_compile=True))
        self.compiled = False
        self.recalibrated: list[tuple[tf.Tensor, tf.Tensor]] | None = None

    # Compiled functions ---------------------------------------------------------------------------------------------
    def _loss_and_grads(self, images, labels, valid, seed):
        with tf.GradientTape() as tape:
            logits = self.model(images, training=True, seed=seed)
            loss = _masked_mean(_losses(logits, labels), valid)
        return loss, tape.gradient(loss, self.params)

    def _train_step(self, images, labels, lr, seed, valid):
        from fwbench.models.keras_layers import update_running_statistics

        loss, grads = self._loss_and_grads(images, labels, valid, seed)
        update_running_statistics(self.model)
        count = self.count.assign_add(1.0)
        for param, grad, m, v in zip(self.params, grads, self.m, self.v, strict=True):
            direction, new_m, new_v = adam_update(self.recipe, grad, param, m, v, count)
            m.assign(new_m)
            v.assign(new_v)
            param.assign(param - tf.cast(lr, param.dtype) * direction)
        return loss

    def _eval_step(self, images, labels, valid, batch_statistics: bool):
        logits = tf.cast(self.model(images, training=batch_statistics), tf.float32)
        mask = tf.range(tf.shape(labels)[0]) < valid
        losses = _losses(logits, labels)
        k = min(5, int(logits.shape[-1]))
        top = tf.math.top_k(logits, k=k).indices
        hit1 = tf.cast(tf.equal(top[:, 0], labels), tf.int32)
        hit5 = tf.cast(tf.reduce_any(tf.equal(top, labels[:, None]), axis=1), tf.int32)
        return (
            tf.reduce_sum(tf.where(mask, losses, 0.0)),
            tf.reduce_sum(tf.where(mask, hit1, 0)),
            tf.reduce_sum(tf.where(mask, hit5, 0)),
        )

    def _moments_step(self, images):
        """Each BatchNorm's statistics of this batch (mean, unbiased variance), randomness off, nothing updated."""
        self.model(images, training=True, seed=None)
        return [(norm.batch_mean, norm.batch_var_unbiased) for norm in self.norms]

    def _probe_step(self, images, labels, lr, valid):
        """Loss, global gradient norm and the loss after one Adam step, on the current state with randomness off;
        the parameters are stepped in place for the second forward and put back, statistics and moments untouched."""
        loss, grads = self._loss_and_grads(images, labels, valid, None)
        norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in grads]))
        saved = [tf.identity(p) for p in self.params]
        count = self.count + 1.0
        for param, grad, m, v in zip(self.params, grads, self.m, self.v, strict=True):
            direction, _, _ = adam_update(self.recipe, grad, param, m, v, count)
            param.assign(param - tf.cast(lr, param.dtype) * direction)
        logits = self.model(images, training=True, seed=None)
        after = _masked_mean(_losses(logits, labels), valid)
        with tf.control_dependencies([after]):
            for param, value in zip(self.params, saved, strict=True):
                param.assign(value)
        return loss, norm, after

    # Trainer interface ----------------------------------------------------------------------------------------------
    def to_device(self, images, labels):
        """`images`: a normalised float32 NHWC batch (input_layout), as the shared loader prepares it."""
        host = np.asarray(images, np.float32).astype(self.backend.dtype.as_numpy_dtype, copy=False)  # cast on host
        with tf.device(self.backend.device):
            return tf.identity(tf.constant(host)), tf.identity(tf.constant(np.asarray(labels, np.int32)))

    def synchronize(self, handle) -> None:
        self.backend.synchronize(handle)

    def _rows(self, count: int) -> tf.Tensor:
        return tf.constant(count, tf.int32)

    def _seed(self, step_index: int) -> tf.Tensor:
        """Dropout masks depend only on (seed, step), so a run resumed at an epoch boundary draws what it would have."""
        return tf.constant([self.recipe.seed, step_index], tf.int32)

    def _lr(self, lr: float) -> tf.Tensor:
        return tf.constant(lr, tf.float32)

    def _variables(self) -> list[tf.Variable]:
        return [*self.model.variables, *self.m, *self.v, self.count]

    def compile(self, images, labels, *, partial_batches: bool = False, train: bool = True) -> dict[str, float]:
        """Every function the cell runs traced for these shapes (timed as `{name}_trace_lower_s`), then its first
        call beyond a steady-state call, which holds XLA's compilation (fwbench.training.firstcall). The state is
        restored afterwards, so the calls change nothing the cell then trains. One train-step program serves full
        and padded partial batches (the valid row count is an argument): with `partial_batches` the masked call's
        first-call extra is measured too, and is what a second program would have cost (none: no retrace).
        `train=False` leaves out the train step (for a check that only probes, evaluates and recalibrates)."""
        rows = int(labels.shape[0])
        lr, valid, seed = self._lr(self.recipe.lr), self._rows(rows), self._seed(0)
        timings: dict[str, float] = {}
        saved = [tf.identity(v) for v in self._variables()]

        def prepare(name, function, *args, finish=self.synchronize):
            t0 = time.perf_counter()
            function.get_concrete_function(*args)
            timings[f"{name}_trace_lower_s"] = time.perf_counter() - t0
            timings[f"{name}_first_call_extra_s"] = first_call_extra(lambda: function(*args), finish)

        with tf.device(self.backend.device):
            if train:
                prepare("train", self._train, images, labels, lr, seed, valid, finish=self.value)
            if train and partial_batches:
                masked = self._rows(max(1, rows - 1))
                prepare("train_masked", self._train, images, labels, lr, seed, masked, finish=self.value)
            prepare("eval", self._eval[False], images, labels, valid)
            prepare("eval_batch_statistics", self._eval[True], images, labels, valid)
            if self.norms:
                prepare("recalibration", self._moments, images)
            prepare("probe", self._probe, images, labels, lr, valid)
        for variable, value in zip(self._variables(), saved, strict=True):
            variable.assign(value)
        self.compiled = True
        return timings

    def _require_compiled(self, what: str) -> None:
        if not self.compiled:
            raise RuntimeError(f"TfTrainer.{what} before compile()")

    def step(self, images, labels, lr: float, step_index: int, valid: int | None = None):
        self._require_compiled("step")
        rows = int(labels.shape[0]) if valid is None else int(valid)
        return self._train(images, labels, self._lr(lr), self._seed(step_index), self._rows(rows))

    def value(self, loss) -> float:
        return float(loss.numpy())

    def evaluate(self, images, labels, valid: int, *, statistics: str = "running") -> tuple[float, int, int]:
        if statistics not in STATISTICS:
            raise ValueError(f"statistics = {statistics!r}: not one of {STATISTICS}")
        self._require_compiled("evaluate")
        if statistics == "recalibrated":
            if self.recalibrated is None:
                raise RuntimeError("evaluate(statistics='recalibrated') before recalibrate()")
            running = self._swap_statistics(self.recalibrated)
            try:
                loss, top1, top5 = self._eval[False](images, labels, self._rows(valid))
            finally:
                self._swap_statistics(running)
        else:
            loss, top1, top5 = self._eval[statistics == "batch"](images, labels, self._rows(valid))
        return float(loss.numpy()), int(top1.numpy()), int(top5.numpy())

    def _swap_statistics(self, values) -> list[tuple[tf.Tensor, tf.Tensor]]:
        """Put `values` into the BatchNorm running statistics; returns what they held."""
        before = [(tf.identity(norm.mean), tf.identity(norm.var)) for norm in self.norms]
        for norm, (mean, var) in zip(self.norms, values, strict=True):
            norm.mean.assign(mean)
            norm.var.assign(var)
        return before

    def recalibrate(self, batches) -> bool:
        if not self.norms:
            return False
        self._require_compiled("recalibrate")
        average = None
        for count, images in enumerate(batches, start=1):
            moments = self._moments(images)
            weight = 1.0 / count  # torch's cumulative update: weight * batch + (1 - weight) * running
            average = (
                list(moments)
                if average is None
                else [
                    tuple(weight * b + (1.0 - weight) * a for a, b in zip(old, new, strict=True))
                    for old, new in zip(average, moments, strict=True)
                ]
            )
        if average is None:
            raise ValueError("recalibrate() needs at least one batch")
        self.recalibrated = [(tf.identity(mean), tf.identity(var)) for mean, var in average]
        return True

    def probe(self, images, labels, lr: float, valid: int | None = None) -> dict[str, float]:
        self._require_compiled("probe")
        rows = int(labels.shape[0]) if valid is None else int(valid)
        loss, norm, after = self._probe(images, labels, self._lr(lr), self._rows(rows))
        return {"loss": float(loss.numpy()), "grad_norm": float(norm.numpy()), "loss_after_step": float(after.numpy())}

    def _names(self) -> list[str]:
        from fwbench.models import variable_names

        params = variable_names(self.model, self.params)
        names = [*variable_names(self.model), *(f"adam_m/{n}" for n in params), *(f"adam_v/{n}" for n in params)]
        return [*names, "adam_count"]

    def save(self, path) -> None:
        named = zip(self._names(), self._variables(), strict=True)  # one variable at a time to the host
        atomic_stream(path, lambda handle: write_arrays(handle, named, lambda v: v.numpy()))

    def load(self, path) -> None:
        variables = self._variables()
        like = [SimpleNamespace(dtype=tf.as_dtype(v.dtype).as_numpy_dtype, shape=tuple(v.shape)) for v in variables]
        for variable, array in zip(variables, read_arrays(path, self._names(), like), strict=True):
            variable.assign(array)
