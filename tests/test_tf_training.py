"""TensorFlow's trainer follows the recipe exactly as the other two: torch.optim.Adam step for step, the same
evaluation, the same BatchNorm recalibration, a probe that changes nothing, checkpoints that restore everything."""

from __future__ import annotations

import numpy as np
import pytest

from fwbench.training.recipe import learning_rates
from tests.test_training import _on_device, _recipe, _trainers

pytest.importorskip("tensorflow")


@pytest.mark.parametrize("weight_decay", [0.0, 0.05])
def test_adam_steps_agree_with_torch(weight_decay):
    import tensorflow as tf
    import torch

    from fwbench.training.tf_trainer import adam_update
    from fwbench.training.torch_trainer import adam as torch_adam

    rng = np.random.default_rng(0)
    start = rng.normal(size=(7, 5)).astype(np.float32)
    grads = [rng.normal(scale=10.0**-k, size=(7, 5)).astype(np.float32) for k in range(4)]
    recipe = _recipe(weight_decay=weight_decay)
    lrs = learning_rates(recipe, len(grads))

    param = torch.nn.Parameter(torch.from_numpy(start.copy()))
    optimizer = torch_adam([param], recipe, "single-tensor")
    for lr, grad in zip(lrs, grads, strict=True):
        optimizer.param_groups[0]["lr"] = float(lr)
        param.grad = torch.from_numpy(grad.copy())
        optimizer.step()

    p, m, v = tf.constant(start), tf.zeros_like(start), tf.zeros_like(start)
    for count, (lr, grad) in enumerate(zip(lrs, grads, strict=True), start=1):
        direction, m, v = adam_update(recipe, tf.constant(grad), p, m, v, tf.constant(float(count)))
        p = p - tf.constant(lr, tf.float32) * direction
    assert np.abs(param.detach().numpy() - start).max() > 1e-4  # the steps did something
    np.testing.assert_allclose(p.numpy(), param.detach().numpy(), rtol=0, atol=2e-7)


def _pair(model: str, image_size: int):
    return _trainers(model, image_size, frameworks=("torch", "tensorflow"))


def test_tensorflow_evaluates_like_torch_and_leaves_the_state_alone():
    from fwbench.data.inputs import normalize

    rng = np.random.default_rng(2)
    images = normalize(rng.integers(0, 256, (8, 16, 16, 3), dtype=np.uint8))
    labels = rng.integers(0, 10, 8)
    results = []
    torch_trainer, tf_trainer = _pair("small_cnn", 16)
    before = [v.numpy().copy() for v in tf_trainer.model.variables]
    for trainer in (torch_trainer, tf_trainer):
        x, y = _on_device(trainer, images, labels)
        trainer.compile(x, y)
        results.append({s: trainer.evaluate(x, y, valid=6, statistics=s) for s in ("running", "batch")})
        trainer.probe(x, y, 1e-3)
    torch_eval, tf_eval = results
    for statistics in ("running", "batch"):
        assert abs(torch_eval[statistics][0] - tf_eval[statistics][0]) / torch_eval[statistics][0] < 1e-5
        assert torch_eval[statistics][1:] == tf_eval[statistics][1:]
    assert tf_eval["batch"][0] != tf_eval["running"][0], "batch statistics must change the result"
    after = [v.numpy() for v in tf_trainer.model.variables]
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True)), "compile, evaluate, probe: no change"


def test_bn_recalibration_averages_batch_statistics_like_torch():
    from fwbench.data.inputs import normalize
    from fwbench.models import keras_to_torch

    rng = np.random.default_rng(3)
    batches = [normalize(rng.integers(0, 256, (8, 16, 16, 3), dtype=np.uint8)) for _ in range(3)]
    labels = rng.integers(0, 10, 8)
    torch_trainer, tf_trainer = _pair("small_cnn", 16)
    running_before = [n.mean.numpy().copy() for n in tf_trainer.norms]
    evaluations = []
    for trainer in (torch_trainer, tf_trainer):
        devices = [_on_device(trainer, images, labels) for images in batches]
        trainer.compile(*devices[0])
        with pytest.raises(RuntimeError, match="before recalibrate"):
            trainer.evaluate(*devices[0], 8, statistics="recalibrated")
        assert trainer.recalibrate(x for x, _ in devices) is True
        evaluations.append({s: trainer.evaluate(*devices[0], 8, statistics=s) for s in ("running", "recalibrated")})
    # The recalibrated statistics, by torch key, equal torch's cumulative average layer by layer.
    for norm, (mean, var) in zip(tf_trainer.norms, tf_trainer.recalibrated, strict=True):
        norm.mean.assign(mean)
        norm.var.assign(var)
    tf_state = keras_to_torch(tf_trainer.model, torch_trainer.model.state_dict())
    torch_stats = {k: v.numpy() for k, v in torch_trainer.recalibrated.items() if "running" in k}
    assert len(torch_stats) == 2 * len(tf_trainer.norms) > 0
    for key, value in torch_stats.items():
        np.testing.assert_allclose(tf_state[key], value, rtol=1e-4, atol=1e-6, err_msg=key)
    for norm, before in zip(tf_trainer.norms, running_before, strict=True):
        norm.mean.assign(before)
    torch_eval, tf_eval = evaluations
    assert tf_eval["recalibrated"] != tf_eval["running"]
    assert abs(torch_eval["recalibrated"][0] - tf_eval["recalibrated"][0]) / torch_eval["recalibrated"][0] < 1e-4


def test_a_trainer_runs_nothing_before_it_is_compiled():
    """A call before `compile` would trace and compile inside what the cell times (this module's fast test: the
    small CNN's trainer is built, nothing is compiled)."""
    from fwbench.data.inputs import normalize

    images = normalize(np.random.default_rng(5).integers(0, 256, (2, 16, 16, 3), dtype=np.uint8))
    [trainer] = _trainers("small_cnn", 16, frameworks=("tensorflow",))
    x, y = _on_device(trainer, images, np.array([1, 2]))
    calls = {
        "step": lambda: trainer.step(x, y, 1e-3, 0),
        "evaluate": lambda: trainer.evaluate(x, y, 2),
        "recalibrate": lambda: trainer.recalibrate([x]),
        "probe": lambda: trainer.probe(x, y, 1e-3),
    }
    assert trainer.norms, "the small CNN has BatchNorm: recalibrate reaches its check"
    for name, call in calls.items():
        with pytest.raises(RuntimeError, match=rf"TfTrainer\.{name} before compile\(\)"):
            call()
    assert not trainer.compiled


def test_bn_recalibration_is_skipped_without_batch_norm():
    """ViT has no BatchNorm: nothing to recalibrate (and nothing is compiled for it; compiling ViT's functions
    with XLA on this CPU takes minutes, which the study's cells pay and the test need not)."""
    from fwbench.data.inputs import normalize

    images = normalize(np.random.default_rng(4).integers(0, 256, (2, 16, 16, 3), dtype=np.uint8))
    [trainer] = _trainers("vit_b_16", 16, frameworks=("tensorflow",))
    assert trainer.norms == []
    assert trainer.recalibrate([_on_device(trainer, images, np.array([1, 2]))[0]]) is False


def test_steps_follow_torch_and_a_checkpoint_restores_everything(tmp_path):
    """Three steps at the schedule's rates give PyTorch's losses; saving after the first and loading into a fresh
    trainer continues exactly as the original (weights, BatchNorm statistics, Adam's moments and count)."""
    from fwbench.data.inputs import normalize

    rng = np.random.default_rng(5)
    batches = [normalize(rng.integers(0, 256, (8, 16, 16, 3), dtype=np.uint8)) for _ in range(3)]
    labels = [rng.integers(0, 10, 8) for _ in range(3)]
    recipe = _recipe(lr=1e-3, weight_decay=0.01)
    lrs = learning_rates(recipe, 3)
    torch_trainer, tf_trainer = _trainers("small_cnn", 16, recipe=recipe, frameworks=("torch", "tensorflow"))
    [resumed] = _trainers("small_cnn", 16, recipe=recipe, frameworks=("tensorflow",))
    losses = {}
    for name, trainer in (("torch", torch_trainer), ("tensorflow", tf_trainer)):
        data = [_on_device(trainer, b, y) for b, y in zip(batches, labels, strict=True)]
        trainer.compile(*data[0])
        losses[name] = []
        for step, (x, y) in enumerate(data):
            losses[name].append(trainer.value(trainer.step(x, y, float(lrs[step]), step)))
            if name == "tensorflow" and step == 0:
                trainer.save(tmp_path / "state.ckpt")
    np.testing.assert_allclose(losses["tensorflow"], losses["torch"], rtol=1e-4)
    data = [_on_device(resumed, b, y) for b, y in zip(batches, labels, strict=True)]
    resumed.compile(*data[0])
    resumed.load(tmp_path / "state.ckpt")
    again = [resumed.value(resumed.step(x, y, float(lrs[s]), s)) for s, (x, y) in list(enumerate(data))[1:]]
    np.testing.assert_allclose(again, losses["tensorflow"][1:], rtol=1e-6)
