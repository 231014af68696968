"""The training scenario: the recipe run for its epochs on the shared loader, identically for every framework.

Per step the loop times three things apart: waiting for the loader's batch, the host-to-device transfer, and the
step itself up to a synchronised loss. The loader's background threads hand each framework its batch in the layout
it asks for (`Trainer.input_layout`: NCHW for PyTorch, NHWC for JAX), so no layout change falls inside a timed step.
Before the first epoch every framework prepares every function the cell runs, and that compile/first-call time is
reported apart, defined once for both (fwbench.training.firstcall). With `loader.drop_last: false` an epoch's last,
partial batch is padded to the full batch and its loss is the mean over its real rows, identically in every
framework. Each completed epoch leaves a checkpoint, so a killed cell resumes from its last completed epoch; host RSS
is measured with the checkpoint writes left out (TrainingRss).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from fwbench.backends.base import Backend
from fwbench.data.inputs import normalize
from fwbench.data.loader import Loader, pad_rows, to_layout
from fwbench.data.store import load_split
from fwbench.io import atomic_write_json, read_json
from fwbench.scenarios.inference import load_weights
from fwbench.scenarios.operations import digest
from fwbench.study.grid import Cell
from fwbench.trackers.energy import energy_meter, idle_baseline
from fwbench.trackers.memory import LOAD_INTERVAL_S, TIMED_INTERVAL_S, RssSampler, peak_rss_mb, rss_mb
from fwbench.trackers.nvml import NvmlDevice, open_device
from fwbench.training import checkpoint
from fwbench.training.recipe import Recipe, learning_rates
from fwbench.training.trainer import Trainer

WAIT_FLAG = 0.05  # a cell that spends more than this fraction of its step time waiting for data is flagged
SKIP_STEPS = 2  # steps at the start of each epoch left out of the steady-state rate (pipeline fill, first call)
CHECKPOINT, PROGRESS = "checkpoint-epoch{epoch}.bin", "progress.json"


class TrainingRss:
    """Peak host RSS of a training cell's window, from before the data and model load to the last evaluation, with
    the checkpoint writes left out: their transient depends on each framework's serialiser, not on training. One
    RssSampler per stretch between checkpoints, each stopped before a write starts, so no sample taken during a
    write reaches the training peak; the writes' own peak is kept apart. Sampling is every LOAD_INTERVAL_S, and every
    TIMED_INTERVAL_S inside the epochs' step loops, as in inference's timed loop (a 10 ms sampler measurably slows
    JAX steps on a 2-core machine)."""

    def __init__(self) -> None:
        self.peak_mb, self.samples = 0.0, 0
        self.checkpoint_peak_mb: float | None = None
        self._sampler: RssSampler | None = None

    def __enter__(self) -> TrainingRss:
        self._sampler = RssSampler(LOAD_INTERVAL_S).__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._stop()

    def _stop(self) -> None:
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.__exit__(None, None, None)
            self.peak_mb, self.samples = max(self.peak_mb, sampler.peak_mb), self.samples + sampler.samples

    @property
    def current_peak_mb(self) -> float:
        return max(self.peak_mb, self._sampler.peak_mb if self._sampler is not None else 0.0)

    @property
    def interval_s(self) -> float | None:
        return self._sampler.interval_s if self._sampler is not None else None

    def set_interval(self, interval_s: float) -> None:
        """TIMED_INTERVAL_S for the step loop, LOAD_INTERVAL_S around it (as RssSampler.set_interval)."""
        self._sampler.set_interval(interval_s)

    @contextmanager
    def outside(self) -> Iterator[None]:
        """A stretch (a checkpoint write) left out of the training peak; its own peak is kept apart."""
        self._stop()
        try:
            with RssSampler(LOAD_INTERVAL_S) as sampler:
                yield
            self.checkpoint_peak_mb = max(self.checkpoint_peak_mb or 0.0, sampler.peak_mb)
        finally:
            self._sampler = RssSampler(LOAD_INTERVAL_S).__enter__()


def evaluate(trainer: Trainer, images, labels, batch_size: int, *, recalibrated: bool) -> dict[str, float]:
    """Validation loss and top-1/top-5 over the whole split, in batches of the training shape (the last one padded,
    so no new shape is ever compiled). The headline figures use the statistics the recipe delivers: recalibrated
    when the recipe recalibrates BatchNorm, otherwise the running ones. Beside them: top-1 with the running
    statistics, and top-1 with each batch's own statistics, the diagnostic that tells a model that has not learned
    from one whose running statistics have not caught up (MobileNetV3's momentum is 0.01)."""
    primary = "recalibrated" if recalibrated else "running"
    loss_sum, top1, top5, top1_running, top1_batch = 0.0, 0, 0, 0, 0
    for start in range(0, len(labels), batch_size):
        index = np.arange(start, min(start + batch_size, len(labels)))
        valid = len(index)
        padded = np.concatenate([index, np.full(batch_size - valid, index[-1])]) if valid < batch_size else index
        x, y = trainer.to_device(to_layout(normalize(images[padded]), trainer.input_layout), labels[padded])
        batch_loss, hit1, hit5 = trainer.evaluate(x, y, valid, statistics=primary)
        loss_sum, top1, top5 = loss_sum + batch_loss, top1 + hit1, top5 + hit5
        top1_running += trainer.evaluate(x, y, valid)[1] if recalibrated else hit1
        top1_batch += trainer.evaluate(x, y, valid, statistics="batch")[1]
    count = len(labels)
    return {
        "val_loss": loss_sum / count,
        "top1": top1 / count,
        "top5": top5 / count,
        "top1_running_statistics": top1_running / count,
        "top1_batch_statistics": top1_batch / count,
    }


def recalibrate(trainer: Trainer, loader: Loader, epoch: int, batches: int) -> float | None:
    """The recipe's BatchNorm recalibration on the first `batches` batches of `epoch`'s order as training saw them
    (a partial last batch padded; the same batches in every framework); its seconds, or None when the recipe has
    none or the model has no BatchNorm."""
    if batches == 0:
        return None
    chosen = loader.batch_indices(epoch, padded=True)[:batches]
    start = time.perf_counter()
    applied = trainer.recalibrate(trainer.to_device(*loader.make(i))[0] for i in chosen)
    return time.perf_counter() - start if applied else None


def _steady_rate(images_per_step: list[int], seconds_per_step: list[float]) -> float:
    skip = SKIP_STEPS if len(seconds_per_step) > SKIP_STEPS else 0
    return float(sum(images_per_step[skip:]) / sum(seconds_per_step[skip:]))


def _fingerprint(cell: Cell, recipe: Recipe, settings: Mapping[str, Any], steps_per_epoch: int) -> dict[str, Any]:
    return {
        "cell": cell.label(),
        "recipe": recipe.describe(),
        "settings": dict(settings),
        "steps": steps_per_epoch,
        "checkpoint_format": checkpoint.FORMAT,
    }


def run(
    backend: Backend,
    cell: Cell,
    settings: Mapping[str, Any],
    *,
    data_dir: str | Path,
    weights_path: str | Path,
    num_classes: int,
    state_dir: str | Path,
) -> dict[str, Any]:
    """Train one cell; returns the `metrics` and `samples_ms` (every step's wait + transfer + compute) parts of its
    result."""
    recipe = Recipe.from_config(settings, settings["seed"])
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    missing: dict[str, str] = {}
    rss_initial = rss_mb()
    gpu = open_device(backend.device_identity())  # by UUID or PCI bus id, never by CUDA ordinal
    idle = None
    with TrainingRss() as rss:
        train_images, train_labels = load_split(data_dir, "train")
        val_images, val_labels = load_split(data_dir, "val")
        trainer = backend.trainer(
            cell.model, load_weights(weights_path), num_classes=num_classes, image_size=cell.image_size, recipe=recipe
        )
        loader_cfg = settings["loader"]
        loader = Loader(
            train_images,
            train_labels,
            cell.batch_size,
            seed=recipe.seed,
            drop_last=loader_cfg["drop_last"],
            prefetch=loader_cfg["prefetch"],
            workers=loader_cfg["workers"],
            layout=trainer.input_layout,  # the transpose PyTorch needs happens in the loader's threads
            pad_last=True,  # a partial last batch (drop_last: false) keeps the compiled shape; steps mask it
        )
        steps_per_epoch = len(loader)
        partial_batches = len(train_labels) % cell.batch_size != 0 and not loader.drop_last
        lrs = learning_rates(recipe, recipe.epochs * steps_per_epoch)
        device_memory_initial = backend.device_memory()
        fingerprint = _fingerprint(cell, recipe, settings, steps_per_epoch)
        epochs: list[dict[str, Any]] = []
        step0: dict[str, Any] | None = None
        resumed_from = None
        progress_path = state_dir / PROGRESS
        progress = read_json(progress_path) if progress_path.exists() else {}
        # The record names the checkpoint of the epochs it lists: a kill between writing a checkpoint and the
        # record leaves the previous pair intact, never weights of k+1 epochs with a record of k.
        saved = state_dir / progress["checkpoint"] if progress.get("checkpoint") else None
        if saved is not None and progress["fingerprint"] == fingerprint and saved.exists():
            trainer.load(saved)
            epochs, step0, resumed_from = progress["epochs"], progress["step0"], len(progress["epochs"])

        first = loader.batch_indices(0)[0]
        x0, y0 = trainer.to_device(*loader.make(pad_rows(first, cell.batch_size)))
        valid0 = {"valid": len(first)} if len(first) < cell.batch_size else {}  # a split smaller than one batch
        if isinstance(gpu, NvmlDevice):  # as in inference: weights and a batch on the device, nothing running
            trainer.synchronize(x0)
            idle = idle_baseline(gpu)
        compile_start = time.perf_counter()
        compile_breakdown = trainer.compile(x0, y0, **({"partial_batches": True} if partial_batches else {}))
        compile_wall_s = time.perf_counter() - compile_start
        compile_s = sum(compile_breakdown.values()) if compile_breakdown else None
        recalibration_batches = min(recipe.bn_recalibration_batches, steps_per_epoch)
        step0_start = time.perf_counter()
        if step0 is None:
            step0 = trainer.probe(x0, y0, float(lrs[0]), **valid0)
            step0["batch_size"] = cell.batch_size
            # The starting point of the time-to-accuracy line, measured rather than assumed to be chance, and
            # evaluated as every epoch end is.
            recalibrated = recalibrate(trainer, loader, 0, recalibration_batches)
            step0["initial_eval"] = evaluate(
                trainer, val_images, val_labels, cell.batch_size, recalibrated=recalibrated is not None
            )
        step0_s = time.perf_counter() - step0_start
        compilations_before = backend.compilations
        trainer.synchronize(x0)
        # Device memory of the epochs apart from load, compilation and autotuning scratch, as inference does after
        # its warm-up (a no-op on the CPU).
        backend.reset_device_memory_peak()

        for epoch in range(len(epochs), recipe.epochs):
            meter = energy_meter(gpu, idle)
            if not isinstance(meter, str):
                meter.start()
            waits, transfers, computes, sizes, losses = [], [], [], [], []
            first_step = epoch * steps_per_epoch
            rss.set_interval(TIMED_INTERVAL_S)
            epoch_start = time.perf_counter()
            for batch in loader.epoch(epoch):
                t0 = time.perf_counter()
                x, y = trainer.to_device(batch.images, batch.labels)
                trainer.synchronize(x)
                t1 = time.perf_counter()
                step = first_step + batch.number
                masked = {"valid": batch.valid} if batch.valid < cell.batch_size else {}  # the padded last batch
                loss = trainer.value(trainer.step(x, y, float(lrs[step]), step, **masked))
                t2 = time.perf_counter()
                waits.append(batch.wait_s)
                transfers.append(t1 - t0)
                computes.append(t2 - t1)
                sizes.append(batch.valid)
                losses.append(loss)
            time_s = time.perf_counter() - epoch_start
            rss.set_interval(LOAD_INTERVAL_S)
            energy = meter.stop() if not isinstance(meter, str) else None
            if energy is None:
                missing["energy"] = meter
            elif energy.get("joules") is None:  # NVML refused a reading the window needed
                missing["energy"], energy = energy["missing"], None
            recalibration_s = recalibrate(trainer, loader, epoch, recalibration_batches)
            eval_start = time.perf_counter()
            val = evaluate(trainer, val_images, val_labels, cell.batch_size, recalibrated=recalibration_s is not None)
            totals = [w + t + c for w, t, c in zip(waits, transfers, computes, strict=True)]
            first_step_s = computes[0] if epoch == 0 else None
            epochs.append(
                {
                    "epoch": epoch,
                    "time_s": time_s,
                    "img_s": _steady_rate(sizes, totals),
                    "compile_s": (compile_s if compile_s is not None else first_step_s) if epoch == 0 else 0.0,
                    "first_step_s": first_step_s,
                    "train_loss": float(np.mean(losses)),
                    "loss_curve": losses,
                    "lr_first_last": [float(lrs[first_step]), float(lrs[first_step + len(losses) - 1])],
                    **val,
                    "eval_s": time.perf_counter() - eval_start,
                    "bn_recalibration_s": recalibration_s,
                    "data_wait_frac": float(sum(waits) / sum(totals)),
                    "transfer_frac": float(sum(transfers) / sum(totals)),
                    "steps": len(losses),
                    "step_ms": {"p50": float(np.median(computes) * 1000), "mean": float(np.mean(computes) * 1000)},
                    "step_samples_ms": [t * 1000.0 for t in totals],
                    "energy": energy,
                    "rss_peak_mb": rss.current_peak_mb,
                    "resumed": resumed_from is not None and epoch == resumed_from,
                }
            )
            with rss.outside():  # the serialiser's transient is not training's memory
                checkpoint_start = time.perf_counter()
                name = CHECKPOINT.format(epoch=len(epochs))
                trainer.save(state_dir / name)
                epochs[-1]["checkpoint_s"] = time.perf_counter() - checkpoint_start
                atomic_write_json(
                    progress_path, {"fingerprint": fingerprint, "epochs": epochs, "step0": step0, "checkpoint": name}
                )
                for old in state_dir.glob(CHECKPOINT.format(epoch="*")):
                    if old.name != name:
                        old.unlink(missing_ok=True)
        recompilations = backend.compilations - compilations_before
    device_memory = backend.device_memory()
    if "missing" in device_memory:
        missing["device_memory"] = device_memory.pop("missing")
        device_memory_initial = None
    if compile_breakdown is None:
        missing["compile_s"] = (
            f"{backend.name}'s trainer measures no first calls: epoch 0's compile_s is its first step"
        )
    optimizer = getattr(trainer, "optimizer_implementation", None)
    if optimizer is not None:  # recorded with the framework's settings in the cell's provenance too
        backend.effective_settings["optimizer_implementation"] = optimizer
    if scope := getattr(trainer, "compiled_scope", None):  # what a compiled PyTorch step compiles, and what not
        backend.effective_settings["compiled_scope"] = scope
    if not all(np.isfinite(e["train_loss"]) for e in epochs):
        raise FloatingPointError(f"non-finite training loss in {cell.label()}")
    target = settings.get("target_top1")
    elapsed = 0.0
    for e in epochs:  # training time plus the recalibration the accuracy depends on; evaluation excluded
        elapsed += e["time_s"] + (e["bn_recalibration_s"] or 0.0)
        e["elapsed_s"] = elapsed
    time_to_target = next((e["elapsed_s"] for e in epochs if target is not None and e["top1"] >= target), None)
    wait_max = max(e["data_wait_frac"] for e in epochs)
    samples_ms = [t for e in epochs for t in e["step_samples_ms"]]
    metrics = {
        "epochs": epochs,
        "step0": step0,
        "recipe": recipe.describe(),
        "steps_per_epoch": steps_per_epoch,
        # Every epoch's order (the permutation drawn from the seed and the epoch): equal across the frameworks' cells
        # when they were fed the same batches in the same order (fairness ledger).
        "loader_order_sha256": digest(np.concatenate([loader.order(e) for e in range(recipe.epochs)])),
        "num_classes": num_classes,
        "compile_breakdown_s": compile_breakdown,
        "compile_wall_s": compile_wall_s,
        "compile_definition": "compile/first-call time: for every function the cell runs (train step, evaluation, "
        "BatchNorm recalibration, step-0 probe), its ahead-of-time trace/lower/compile (JAX; none in eager PyTorch) "
        "plus its first call's time beyond a steady-state call, on throwaway state before the first timed step; "
        "compile_wall_s also counts the steady-state reference calls",
        "optimizer_implementation": optimizer,
        "input_layout": trainer.input_layout,
        "partial_last_batch": (
            {"valid": len(train_labels) % cell.batch_size, "padded_to": cell.batch_size} if partial_batches else None
        ),
        "bn_recalibration": {
            "batches_requested": recipe.bn_recalibration_batches,
            "batches": recalibration_batches,
            "applied": any(e.get("bn_recalibration_s") is not None for e in epochs),
            "note": "BatchNorm statistics averaged over the first batches of each epoch's order (train mode, "
            "randomness off, no gradients) before each evaluation; not applied when the recipe asks for none or "
            "the model has no BatchNorm. The running statistics stay untouched for training; "
            "top1_running_statistics evaluates with them.",
        },
        "resumed_from_epoch": resumed_from,
        "train_time_s": float(sum(e["time_s"] for e in epochs)),
        "final_top1": epochs[-1]["top1"],
        "final_top5": epochs[-1]["top5"],
        "target_top1": target,
        "time_to_target_s": time_to_target,
        "recompilations_in_training": recompilations,
        # torch.compile: graphs and graph breaks Dynamo saw since the backend was made (fwbench.backends.torch_compile)
        "compile_report": backend.compile_report(),
        "flags": {
            "data_wait": wait_max > WAIT_FLAG,
            "recompiled": recompilations > 0,
            "resumed": resumed_from is not None,
        },
        "rss_mb": {
            "initial": rss_initial,
            "max": rss.peak_mb,
            "increase": rss.peak_mb - rss_initial,
            "checkpoint_max": rss.checkpoint_peak_mb,
            "peak_process_lifetime": peak_rss_mb(),
            "samples": rss.samples,
            "source": (
                f"psutil rss from before the data and model load to the last evaluation, sampled every "
                f"{LOAD_INTERVAL_S * 1000:g} ms and every {TIMED_INTERVAL_S * 1000:g} ms inside the epochs' step "
                "loops; checkpoint writes left out (their peak is checkpoint_max); lifetime peak = ru_maxrss"
            ),
        },
        "device_memory": {"initial": device_memory_initial, "max": device_memory} if device_memory else None,
        "missing": missing,
        "phases_s": _phases(epochs[resumed_from or 0 :], compile_start - start, compile_wall_s, step0_s, start),
    }
    return {"metrics": metrics, "samples_ms": samples_ms}


def _phases(run_here: list[dict[str, Any]], load_s: float, compile_wall_s: float, step0_s: float, start: float):
    """Where this process's scenario time went (the worker adds start-up and imports), counting only the epochs it
    ran itself (not those a resumed cell inherited): loading data, model and loader; compiling every function;
    the step-0 probe with its initial evaluation; the timed epochs; evaluation with BatchNorm recalibration; and
    checkpoint writes."""
    return {
        "load_s": load_s,
        "compile_s": compile_wall_s,
        "step0_s": step0_s,
        "timed_s": float(sum(e["time_s"] for e in run_here)),
        "evaluation_s": float(sum(e["eval_s"] + (e["bn_recalibration_s"] or 0.0) for e in run_here)),
        "checkpoint_s": float(sum(e.get("checkpoint_s") or 0.0 for e in run_here)),
        "scenario_s": time.perf_counter() - start,
    }
