"""The training recipe, identical in both frameworks: optimizer, schedule, step-0 agreement, resume, a real cell."""

from __future__ import annotations

import numpy as np
import pytest

from fwbench.data.loader import to_layout
from fwbench.training.recipe import Recipe, learning_rates
from tests import background


def _recipe(**overrides) -> Recipe:
    base = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "schedule": "cosine", "epochs": 2}
    return Recipe(**{**base, "seed": 0, **overrides})


@pytest.mark.parametrize("implementation", ["fused", "foreach", "single-tensor"])
@pytest.mark.parametrize("weight_decay", [0.0, 0.05])
def test_adam_steps_agree_between_optax_and_torch(weight_decay, implementation):
    import jax.numpy as jnp
    import torch

    from fwbench.training.jax_trainer import adam as optax_adam
    from fwbench.training.torch_trainer import adam as torch_adam

    rng = np.random.default_rng(0)
    start = rng.normal(size=(7, 5)).astype(np.float32)
    grads = [rng.normal(scale=10.0**-k, size=(7, 5)).astype(np.float32) for k in range(4)]
    recipe = _recipe(weight_decay=weight_decay)
    lrs = learning_rates(recipe, len(grads))

    param = torch.nn.Parameter(torch.from_numpy(start.copy()))
    optimizer = torch_adam([param], recipe, implementation)
    for lr, grad in zip(lrs, grads, strict=True):
        optimizer.param_groups[0]["lr"] = float(lr)
        param.grad = torch.from_numpy(grad.copy())
        optimizer.step()

    tx = optax_adam(recipe)
    params = {"w": jnp.asarray(start)}
    state = tx.init(params)
    for lr, grad in zip(lrs, grads, strict=True):
        updates, state = tx.update({"w": jnp.asarray(grad)}, state, params)
        params = {"w": params["w"] - jnp.float32(lr) * updates["w"]}
    moved = np.abs(param.detach().numpy() - start).max()
    assert moved > 1e-4  # the steps did something
    np.testing.assert_allclose(np.asarray(params["w"]), param.detach().numpy(), rtol=0, atol=2e-7)


def test_schedule_equals_optax_cosine_decay():
    import optax

    recipe = _recipe(lr=3e-4)
    ours = learning_rates(recipe, 50)
    theirs = np.array([float(optax.cosine_decay_schedule(3e-4, 50)(step)) for step in range(50)])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=3e-4 * 1e-6)  # optax computes in float32
    assert ours[0] == 3e-4 and ours[-1] < 1e-6 and np.all(np.diff(ours) < 0)
    np.testing.assert_array_equal(learning_rates(_recipe(schedule="constant"), 4), np.full(4, 1e-3))


FRAMEWORKS = ("torch", "jax", "tensorflow")


def _start(model: str, image_size: int, num_classes: int = 10) -> dict[str, np.ndarray]:
    """The seeded torchvision start with BatchNorm statistics calibrated on random batches, as the study calibrates
    its weights on its images: with the initialisation's statistics MobileNetV3-Small's eval logits are the same for
    every image (~1e-10 apart), and an evaluation that ignored its input would agree."""
    import torch

    from fwbench.models import torch_model, torch_state_dict_numpy
    from fwbench.models.calibration import calibrate_batchnorm

    torch.manual_seed(0)
    module = torch_model(model, num_classes=num_classes, image_size=image_size)
    rng = np.random.default_rng(0)
    calibrate_batchnorm(module, [rng.standard_normal((8, 3, image_size, image_size)).astype(np.float32)] * 2)
    return torch_state_dict_numpy(module)


def _trainers(
    model: str,
    image_size: int,
    num_classes: int = 10,
    recipe: Recipe | None = None,
    precision="fp32",
    frameworks=("torch", "jax"),
):
    """One trainer per framework, in this order, all from the same torch weights (`_start`)."""
    from fwbench.backends import get_backend

    weights = _start(model, image_size, num_classes)
    recipe = recipe or _recipe(lr=1e-4)
    return [
        get_backend(framework, threads=2, precision=precision).trainer(
            model, weights, num_classes=num_classes, image_size=image_size, recipe=recipe
        )
        for framework in frameworks
    ]


def _on_device(trainer, images_nhwc, labels):
    """A normalised NHWC host batch in the trainer's input layout (as the loader prepares it), on its device."""
    return trainer.to_device(to_layout(images_nhwc, trainer.input_layout), labels)


MOBILENET_BATCH = (8, 32, 32, 3)  # every MobileNetV3-Small trainer test's batch: one compiled shape for all


# The three tests of the MobileNetV3-Small trainers (and their compiles, over a minute of XLA) run in a child pytest
# (tests/background.py): on their xdist worker's core, or in a serial run in the background beside the other tests;
# each reports here what it did there.
MOBILENET_TESTS = background.in_a_child_process(
    "mobilenet_trainers",
    [
        "tests/test_training.py::test_step0_agrees_between_frameworks[mobilenet_v3_small-32]",
        "tests/test_training.py::test_trainers_evaluate_identically",
        "tests/test_training.py::test_bn_recalibration_averages_batch_statistics_identically",
    ],
)


@pytest.fixture(scope="module")
def compiled_mobilenet():
    """MobileNetV3-Small trainers of all three frameworks, compiled once for MOBILENET_BATCH and shared by the tests
    below: each compile costs up to half a minute of XLA on this CPU, and the tests only probe, evaluate and
    recalibrate, none of which changes a trainer's parameters or running statistics (each test checks what it
    relies on). So the train steps, which none of them runs, are not compiled (`train=False`: 70 s of XLA in JAX and
    TensorFlow on the Zen 3 VM, a third of these tests' time): the probe is the train step's loss, gradient and Adam
    update without its randomness (the small CNN's trainers train for real in the tests below; JAX's dropout on
    this twin is checked in the step-0 test, TensorFlow's compiled dropout on EfficientNet-B0's in test_tf_parity)."""
    from fwbench.data.inputs import normalize

    rng = np.random.default_rng(0)
    images = normalize(rng.integers(0, 256, MOBILENET_BATCH, dtype=np.uint8))
    labels = rng.integers(0, 10, MOBILENET_BATCH[0])
    trainers = dict(zip(FRAMEWORKS, _trainers("mobilenet_v3_small", 32, frameworks=FRAMEWORKS), strict=True))
    for trainer in trainers.values():
        trainer.compile(*_on_device(trainer, images, labels), train=False)
    return trainers


@pytest.fixture
def mobilenet_trainers(compiled_mobilenet):
    """The shared trainers, each as a fresh one is before recalibration (what a test of recalibration relies on)."""
    for trainer in compiled_mobilenet.values():
        trainer.recalibrated = None
    return compiled_mobilenet


@pytest.mark.parametrize(("model", "image_size"), [("small_cnn", 16), ("mobilenet_v3_small", 32)])
def test_step0_agrees_between_frameworks(model, image_size, request):
    from fwbench.data.inputs import normalize

    if model == "mobilenet_v3_small" and background.ran_in_child(request, MOBILENET_TESTS):
        return

    rng = np.random.default_rng(1)
    images = normalize(rng.integers(0, 256, (8, image_size, image_size, 3), dtype=np.uint8))
    labels = rng.integers(0, 10, 8)
    if model == "mobilenet_v3_small":
        trainers = request.getfixturevalue("mobilenet_trainers")
    else:
        trainers = dict(zip(FRAMEWORKS, _trainers(model, image_size, frameworks=FRAMEWORKS), strict=True))
    probes = {}
    for framework, trainer in trainers.items():
        x, y = _on_device(trainer, images, labels)
        if model != "mobilenet_v3_small":
            trainer.compile(x, y)
        probes[framework] = trainer.probe(x, y, 1e-4)
    torch_probe = probes.pop("torch")
    change = abs(torch_probe["loss_after_step"] - torch_probe["loss"])
    assert change > 0, "one Adam step must change the loss"
    for framework, probe in probes.items():
        assert abs(probe["loss"] - torch_probe["loss"]) / torch_probe["loss"] < 1e-5, framework
        assert abs(probe["grad_norm"] - torch_probe["grad_norm"]) / torch_probe["grad_norm"] < 1e-3, framework
        assert abs(probe["loss_after_step"] - torch_probe["loss_after_step"]) / torch_probe["loss"] < 1e-3, framework
    if model == "mobilenet_v3_small":
        _jax_train_forward_draws_dropout_from_its_key(trainers["jax"], images)


def _jax_train_forward_draws_dropout_from_its_key(trainer, images) -> None:
    """What the JAX train step adds to the probe (which is randomness-off): the twin's train-mode forward under
    jit with the step's dropout key, whose masks are a function of the key (the fixture compiles no train step)."""
    import jax

    x = jax.device_put(to_layout(images, trainer.input_layout))
    forward = jax.jit(lambda key: trainer._forward(trainer.params, trainer.batch_stats, x, True, key)[0])
    first, second = (np.asarray(forward(jax.random.fold_in(trainer.key, step))) for step in (0, 1))
    plain = np.asarray(trainer._forward(trainer.params, trainer.batch_stats, x, True)[0])
    np.testing.assert_array_equal(np.asarray(forward(jax.random.fold_in(trainer.key, 0))), first)
    assert not np.allclose(first, second) and not np.allclose(first, plain), "dropout must follow the step's key"


def test_trainers_evaluate_identically(request):
    import torch

    from fwbench.data.inputs import normalize

    if background.ran_in_child(request, MOBILENET_TESTS):
        return
    mobilenet_trainers = request.getfixturevalue("mobilenet_trainers")

    rng = np.random.default_rng(2)
    labels = rng.integers(0, 10, 8)
    results, batch_stats = [], []
    torch_trainer, jax_trainer = mobilenet_trainers["torch"], mobilenet_trainers["jax"]
    images = normalize(rng.integers(0, 256, MOBILENET_BATCH, dtype=np.uint8))
    before = {k: v.clone() for k, v in torch_trainer.model.state_dict().items()}
    for trainer in (torch_trainer, jax_trainer):
        x, y = _on_device(trainer, images, labels)
        results.append(trainer.evaluate(x, y, valid=6))
        batch_stats.append(trainer.evaluate(x, y, valid=6, statistics="batch"))
    (torch_loss, torch_top1, torch_top5), (jax_loss, jax_top1, jax_top5) = results
    from fwbench.models import torch_model
    from fwbench.models.calibration import MIN_INPUT_DEPENDENCE, input_dependence

    reference = torch_model("mobilenet_v3_small", num_classes=10, image_size=32)
    reference.load_state_dict({k: torch.from_numpy(v) for k, v in _start("mobilenet_v3_small", 32).items()})
    with torch.no_grad():
        logits = reference.eval()(torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))).numpy()
    assert input_dependence(logits) > 10 * MIN_INPUT_DEPENDENCE, "the evaluation compared logits that vary"
    assert abs(torch_loss - jax_loss) / torch_loss < 1e-5
    assert (torch_top1, torch_top5) == (jax_top1, jax_top5) and torch_top5 <= 6
    assert abs(batch_stats[0][0] - batch_stats[1][0]) / batch_stats[0][0] < 1e-4
    assert batch_stats[0][0] != torch_loss, "batch statistics must change the result"
    after = torch_trainer.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before), "evaluation must not touch the model's state"
    assert torch_trainer.model.training, "the trainer goes back to train mode"


def test_bn_recalibration_averages_batch_statistics_identically(request):
    """Both frameworks' recalibrated statistics are the plain average of the batches' own statistics (checked
    against a hand computation on the stem's BatchNorm), agree with each other, change evaluation, and leave the
    running statistics that training uses untouched."""
    import jax
    import torch

    from fwbench.data.inputs import normalize

    if background.ran_in_child(request, MOBILENET_TESTS):
        return
    mobilenet_trainers = request.getfixturevalue("mobilenet_trainers")
    rng = np.random.default_rng(3)
    batches = [normalize(rng.integers(0, 256, MOBILENET_BATCH, dtype=np.uint8)) for _ in range(3)]
    labels = rng.integers(0, 10, 8)
    torch_trainer, jax_trainer = mobilenet_trainers["torch"], mobilenet_trainers["jax"]
    running_before = {k: v.clone() for k, v in torch_trainer.model.state_dict().items() if "running" in k}
    evaluations = []
    for trainer in (torch_trainer, jax_trainer):
        devices = [_on_device(trainer, images, labels) for images in batches]
        with pytest.raises(RuntimeError, match="before recalibrate"):
            trainer.evaluate(*devices[0], 8, statistics="recalibrated")
        assert trainer.recalibrate(x for x, _ in devices) is True
        evaluations.append({s: trainer.evaluate(*devices[0], 8, statistics=s) for s in ("running", "recalibrated")})

    # The stem's BatchNorm sees the stem convolution's output: its statistics can be computed by hand.
    stem = torch_trainer.model.features[0][0]
    with torch.no_grad():
        outputs = [stem(torch.from_numpy(b.transpose(0, 3, 1, 2).copy())).double() for b in batches]
    mean = np.mean([o.mean(dim=(0, 2, 3)).numpy() for o in outputs], axis=0)
    var = np.mean([o.var(dim=(0, 2, 3), unbiased=True).numpy() for o in outputs], axis=0)
    jax_stem = jax_trainer.recalibrated["features"]["0"]["1"]
    for got in (torch_trainer.recalibrated["features.0.1.running_mean"].numpy(), np.asarray(jax_stem["mean"])):
        np.testing.assert_allclose(got, mean, rtol=1e-4, atol=1e-6)
    for got in (torch_trainer.recalibrated["features.0.1.running_var"].numpy(), np.asarray(jax_stem["var"])):
        np.testing.assert_allclose(got, var, rtol=1e-4)

    # Every layer agrees between the frameworks (Flax path features/0/1/mean is torch's features.0.1.running_mean).
    jax_stats = {
        ".".join(str(p.key) for p in path[:-1]) + ".running_" + path[-1].key: np.asarray(leaf)
        for path, leaf in jax.tree_util.tree_leaves_with_path(jax_trainer.recalibrated)
    }
    torch_stats = {k: v.numpy() for k, v in torch_trainer.recalibrated.items() if "running" in k}
    assert sorted(jax_stats) == sorted(torch_stats) and len(torch_stats) == 2 * 34
    for key, value in torch_stats.items():  # some means are zero up to rounding (~1e-8): hence the atol
        np.testing.assert_allclose(jax_stats[key], value, rtol=1e-4, atol=1e-6, err_msg=key)
    torch_eval, jax_eval = evaluations
    assert torch_eval["recalibrated"] != torch_eval["running"]
    assert abs(torch_eval["recalibrated"][0] - jax_eval["recalibrated"][0]) / torch_eval["recalibrated"][0] < 1e-4
    after = torch_trainer.model.state_dict()
    assert all(torch.equal(running_before[k], after[k]) for k in running_before), "running statistics untouched"
    assert torch_trainer.model.features[0][1].momentum == 0.01, "momentum restored"


def test_bn_recalibration_is_skipped_without_batch_norm():
    """A model without BatchNorm has nothing to recalibrate and says so: the check comes before any compiled function
    is used, so compiling ViT-B/16's train step first (a minute of XLA on this CPU) would test nothing more."""
    from fwbench.data.inputs import normalize

    images = normalize(np.random.default_rng(4).integers(0, 256, (2, 16, 16, 3), dtype=np.uint8))
    for trainer in _trainers("vit_b_16", 16):
        x, _ = _on_device(trainer, images, np.array([1, 2]))
        assert trainer.recalibrate([x]) is False


def test_a_compiled_jax_trainer_compiles_nothing_when_it_recalibrates_or_evaluates(caplog):
    """What compiles there is timed (bn_recalibration_s, the evaluation): compile() builds it all. Run op by op, the
    recalibration's average compiled one program per distinct statistics shape, timed in the first epoch only."""
    import jax

    from fwbench.data.inputs import normalize

    rng = np.random.default_rng(5)
    images = normalize(rng.integers(0, 256, (4, 16, 16, 3), dtype=np.uint8))
    labels = rng.integers(0, 10, 4)
    [trainer] = _trainers("small_cnn", 16, frameworks=("jax",))
    x, y = _on_device(trainer, images, labels)
    trainer.compile(x, y, train=False)
    with caplog.at_level("WARNING", logger="jax"), jax.log_compiles():
        assert trainer.recalibrate([x, x, x]) is True
        trainer.evaluate(x, y, 4, statistics="recalibrated")
    compiled = [r.getMessage() for r in caplog.records if "Finished XLA compilation" in r.getMessage()]
    assert not compiled, compiled


def _train(work, settings, backend, batch_size: int = 8, state: str = "state") -> dict:
    """One training cell of the small CNN at 16 px on `training_setup`'s data, in this process."""
    from fwbench.scenarios import training
    from fwbench.study.grid import Cell

    cell = Cell("training", backend.name, "small_cnn", "fp32", batch_size, 16)
    kwargs = {"data_dir": work / "data", "weights_path": work / "w.npz", "num_classes": 4}
    return training.run(backend, cell, settings, state_dir=work / state, **kwargs)["metrics"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_killed_training_resumes_from_last_epoch(training_setup, framework, monkeypatch):
    from fwbench.backends import get_backend
    from fwbench.scenarios import training
    from fwbench.study.grid import Cell

    work, settings = training_setup
    cell = Cell("training", framework, "small_cnn", "fp32", 8, 16)
    kwargs = {"data_dir": work / "data", "weights_path": work / "w.npz", "num_classes": 4}

    def run(state_dir):
        backend = get_backend(framework, threads=2, precision="fp32")
        return training.run(backend, cell, settings, state_dir=state_dir, **kwargs)["metrics"]

    straight = run(work / "straight")
    real_evaluate, calls = training.evaluate, []

    def dies_in_second_epoch(*args, **kw):
        calls.append(1)
        if len(calls) == 3:  # the initial evaluation, epoch 0's, then epoch 1's
            raise KeyboardInterrupt("simulated kill")
        return real_evaluate(*args, **kw)

    monkeypatch.setattr(training, "evaluate", dies_in_second_epoch)
    with pytest.raises(KeyboardInterrupt):
        run(work / "killed")
    monkeypatch.setattr(training, "evaluate", real_evaluate)
    resumed = run(work / "killed")
    assert straight["resumed_from_epoch"] is None and resumed["resumed_from_epoch"] == 1
    assert [e["resumed"] for e in resumed["epochs"]] == [False, True]
    learned = ("train_loss", "loss_curve", "val_loss", "top1", "top5", "top1_running_statistics", "lr_first_last")
    assert {k: resumed["epochs"][0][k] for k in learned} == {k: straight["epochs"][0][k] for k in learned}
    # Same batches, same dropout seeds, same optimizer state: the resumed epoch trains exactly as the straight one.
    np.testing.assert_allclose(resumed["epochs"][1]["loss_curve"], straight["epochs"][1]["loss_curve"], rtol=1e-5)
    assert resumed["step0"] == straight["step0"]


def test_training_cell_end_to_end(training_setup):
    from fwbench.results import load_result
    from fwbench.running.runner import run_cell
    from fwbench.study.grid import Cell

    work, settings = training_setup
    for framework in FRAMEWORKS:
        cell = Cell("training", framework, "small_cnn", "fp32", 8, 16)
        result = run_cell(
            cell,
            {**settings, "timeout_s": 300},
            data_dir=work / "data",
            weights_path=work / "w.npz",
            num_classes=4,
            threads=2,
            out_path=work / f"{framework}.json",
            state_dir=work / "state" / framework,
        )
        assert result["status"] == "ok", result["reason"]
        metrics = load_result(work / f"{framework}.json")["metrics"]
        assert [e["epoch"] for e in metrics["epochs"]] == [0, 1]
        for epoch in metrics["epochs"]:
            for key in ("time_s", "img_s", "compile_s", "train_loss", "val_loss", "top1", "top5", "data_wait_frac"):
                assert isinstance(epoch[key], float), key
            assert 0 <= epoch["top1"] <= epoch["top5"] <= 1 and 0 <= epoch["data_wait_frac"] < 1
        assert set(metrics["step0"]) >= {"loss", "loss_after_step", "grad_norm"}
        assert metrics["epochs"][0]["compile_s"] > 0 and len(result["samples_ms"]) == 2 * 4
        assert not (work / "state" / framework).exists(), "a finished cell leaves no checkpoint to resume from"
        assert metrics["resumed_from_epoch"] is None and "initial_eval" in metrics["step0"]
        assert metrics["bn_recalibration"]["applied"] and metrics["bn_recalibration"]["batches"] == 2
        assert all(e["bn_recalibration_s"] > 0 and 0 <= e["top1_running_statistics"] <= 1 for e in metrics["epochs"])
        # time to accuracy counts the recalibration the accuracy depends on
        elapsed = np.cumsum([e["time_s"] + e["bn_recalibration_s"] for e in metrics["epochs"]])
        reached = [t for t, e in zip(elapsed, metrics["epochs"], strict=True) if e["top1"] >= 0.3]
        assert metrics["time_to_target_s"] == pytest.approx(reached[0] if reached else None)


def test_trainers_take_their_layout_and_torch_does_no_transpose_in_its_step():
    """The layout change is the loader's: the torch trainer's to_device takes NCHW as is (no host copy in the
    timed step), JAX takes NHWC; both then compute the same loss on the same batch."""
    from fwbench.data.inputs import normalize

    rng = np.random.default_rng(7)
    images = normalize(rng.integers(0, 256, (4, 16, 16, 3), dtype=np.uint8))
    labels = rng.integers(0, 10, 4)
    torch_trainer, jax_trainer = _trainers("small_cnn", 16)
    assert (torch_trainer.input_layout, jax_trainer.input_layout) == ("NCHW", "NHWC")
    nchw = to_layout(images, "NCHW")
    x, _ = torch_trainer.to_device(nchw, labels)
    np.testing.assert_array_equal(x.numpy(), nchw)  # moved as it is
    losses = []
    for trainer in (torch_trainer, jax_trainer):
        xd, yd = _on_device(trainer, images, labels)
        trainer.compile(xd, yd)
        losses.append(trainer.probe(xd, yd, 1e-4)["loss"])
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_masked_step_equals_the_step_on_the_real_rows(framework):
    """A padded last batch (drop_last: false) trains on its real rows' mean loss, in every framework."""
    from fwbench.data.inputs import normalize

    rng = np.random.default_rng(8)
    images = normalize(rng.integers(0, 256, (8, 16, 16, 3), dtype=np.uint8))
    labels = rng.integers(0, 10, 8)
    [trainer] = _trainers("small_cnn", 16, frameworks=(framework,))
    x, y = _on_device(trainer, images, labels)
    trainer.compile(x, y, partial_batches=True)
    padded = np.resize(np.arange(5), 8)  # 5 real rows, then repeats of them
    xp, yp = _on_device(trainer, images[padded], labels[padded])
    probe = trainer.probe(xp, yp, 1e-4, valid=5)  # the probe leaves the state as it is
    full = trainer.probe(xp, yp, 1e-4)
    masked = trainer.value(trainer.step(xp, yp, 1e-4, 0, valid=5))
    assert masked == pytest.approx(probe["loss"], rel=1e-5)
    assert probe["loss"] != pytest.approx(full["loss"], rel=1e-6), "the padding rows must not count"


def test_partial_last_batch_trains_in_both_frameworks_alike(training_setup):
    """loader.drop_last: false used to break only JAX cells (one compiled batch shape)."""
    from fwbench.backends import get_backend

    work, settings = training_setup
    settings = {**settings, "epochs": 1, "loader": {**settings["loader"], "drop_last": False}}
    curves = {}
    for framework in FRAMEWORKS:
        metrics = _train(work, settings, get_backend(framework, threads=2, precision="fp32"), 6, f"state-{framework}")
        assert metrics["partial_last_batch"]["padded_to"] == 6 and metrics["partial_last_batch"]["valid"] > 0
        assert "train_masked_first_call_extra_s" in metrics["compile_breakdown_s"]
        curves[framework] = metrics["epochs"][0]["loss_curve"]
    for framework in ("jax", "tensorflow"):
        assert len(curves[framework]) == len(curves["torch"])
        np.testing.assert_allclose(curves[framework], curves["torch"], rtol=2e-3, err_msg=framework)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_training_rss_policy_and_checkpoints_outside_the_peak(training_setup, framework, monkeypatch):
    """The RSS sampler runs at the timed interval inside the step loop (as inference's timed loop), and a
    checkpoint's serialisation transient is kept out of the training peak (reported apart)."""
    from fwbench.backends import get_backend
    from fwbench.scenarios import training
    from fwbench.trackers.memory import LOAD_INTERVAL_S, TIMED_INTERVAL_S

    work, settings = training_setup
    samplers = []
    real_sampler = training.RssSampler

    class Recording(real_sampler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            samplers.append(self)

    monkeypatch.setattr(training, "RssSampler", Recording)
    intervals_in_steps, writes = [], []
    backend = get_backend(framework, threads=2, precision="fp32")
    real_trainer = backend.trainer

    def trainer(*args, **kwargs):
        made = real_trainer(*args, **kwargs)
        real_step, real_save = made.step, made.save

        def step(*a, **k):
            intervals_in_steps.append(samplers[-1].interval_s)
            return real_step(*a, **k)

        def save(path):
            import mmap
            import time

            from fwbench.trackers.memory import rss_mb

            # Which samplers run while the checkpoint is written: only the one whose peak is kept apart.
            running = [s for s in samplers if s._thread.is_alive() and not s._stop.is_set()]
            writes.append({"running": running})
            # 300 MB the serialiser "needs", held for a while: fresh pages (an anonymous mapping, every page
            # written), so they add to RSS even in a long-lived process whose allocator holds freed memory.
            with mmap.mmap(-1, 300 * 2**20) as transient:
                for offset in range(0, len(transient), mmap.PAGESIZE):
                    transient[offset] = 1
                writes[-1]["rss_mb"] = rss_mb()
                time.sleep(0.3)
            return real_save(path)

        made.step, made.save = step, save
        return made

    monkeypatch.setattr(backend, "trainer", trainer)
    metrics = _train(work, settings, backend)
    assert intervals_in_steps and set(intervals_in_steps) == {TIMED_INTERVAL_S} and TIMED_INTERVAL_S > LOAD_INTERVAL_S
    rss = metrics["rss_mb"]
    # The transient is measured apart (checkpoint_max saw it) and no training sampler ran while it existed. (Not
    # "max < checkpoint_max": in the test process, which holds all three frameworks, TensorFlow's steps after a
    # checkpoint have grown RSS by more than the transient.)
    assert writes and all(len(write["running"]) == 1 for write in writes), writes
    assert rss["checkpoint_max"] >= max(write["rss_mb"] for write in writes) - 1, "the checkpoint peak saw it"
    assert rss["increase"] == pytest.approx(rss["max"] - rss["initial"])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_one_compile_time_measure_for_both_frameworks(training_setup, framework):
    """compile_s is defined once: every function's preparation + first call beyond a steady call, before the first
    timed step, for both frameworks (PyTorch's used to be an ordinary, already warm step; JAX's probe was left out)."""
    from fwbench.backends import get_backend

    work, settings = training_setup
    metrics = _train(work, {**settings, "epochs": 1}, get_backend(framework, threads=2, precision="fp32"))
    breakdown = metrics["compile_breakdown_s"]
    for function in ("train", "eval", "eval_batch_statistics", "recalibration", "probe"):
        assert f"{function}_first_call_extra_s" in breakdown, function
    if framework == "jax":
        assert {"train_compile_s", "probe_compile_s"} <= set(breakdown)
    if framework == "tensorflow":  # traced ahead; XLA compiles in the first call, which the extra holds
        assert {"train_trace_lower_s", "probe_trace_lower_s"} <= set(breakdown)
    assert metrics["epochs"][0]["compile_s"] == pytest.approx(sum(breakdown.values()))
    assert "compile_s" not in metrics["missing"] and "first call" in metrics["compile_definition"]
