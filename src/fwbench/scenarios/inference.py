"""The inference scenario: forward passes of one model at one batch size, timed in bursts (fwbench.scenarios.blocks)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fwbench.backends import torch_compile
from fwbench.backends.base import Backend
from fwbench.data.inputs import batch_of, normalize
from fwbench.data.store import load_split
from fwbench.scenarios import blocks, logits, profiled, served
from fwbench.scenarios.operations import digest
from fwbench.study.grid import Cell
from fwbench.trackers.energy import BurstWindows, energy_meter, launch_idle_baseline
from fwbench.trackers.latency import timing_metrics
from fwbench.trackers.memory import LOAD_INTERVAL_S, TIMED_INTERVAL_S, RssSampler, peak_rss_mb, rss_mb
from fwbench.trackers.nvml import NvmlDevice, open_device


def load_weights(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}


MAX_COLD_BUFFERS = 4096


def last_level_cache_bytes(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> tuple[int, str]:
    """Size of the largest CPU cache level, from sysfs; 64 MiB (larger than any current L2 or LLC) if unreadable."""
    best = (0, 0)
    for index in root.glob("index*"):
        try:
            level = int((index / "level").read_text())
            text = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        size = int(text[:-1]) * {"K": 1024, "M": 1024**2}[text[-1]] if text[-1] in "KM" else int(text)
        best = max(best, (level, size))
    return (best[1], f"sysfs L{best[0]} cache") if best[1] else (64 * 1024**2, "assumed 64 MiB")


def input_buffers(backend: Backend, images, batch_size: int, cold: bool):
    """One input batch (warm: it stays in cache), or enough distinct batches of the same shape to span twice the
    last-level cache of the device that computes (a GPU's L2, the host's LLC on the CPU), rotated through so that no
    timed step finds its inputs cached."""
    first = normalize(batch_of(images, batch_size))
    if not cold:
        return [backend.to_device(first)], None
    cache, source = backend.device_cache_bytes() or last_level_cache_bytes()
    count = int(min(MAX_COLD_BUFFERS, max(2, -(-2 * cache // first.nbytes))))
    buffers = [backend.to_device(first)]
    buffers += [
        backend.to_device(normalize(batch_of(images, batch_size, start=i * batch_size))) for i in range(1, count)
    ]
    return buffers, {"buffers": count, "bytes_each": int(first.nbytes), "cache_bytes": cache, "cache_source": source}


def build_cell(backend: Backend, cell: Cell, *, data_dir: str | Path, weights_path: str | Path, num_classes: int):
    """Build the cell's model from its shared starting weights and return the dataset's validation images the cell's
    inputs come from (the same for the timed cell and its profiling pass, fwbench.scenarios.profile)."""
    backend.build(cell.model, load_weights(weights_path), num_classes=num_classes, image_size=cell.image_size)
    images, _ = load_split(data_dir, "val")
    if images.shape[1] != cell.image_size:
        raise ValueError(f"dataset resolution {images.shape[1]} != cell image_size {cell.image_size}")
    return images


def run(
    backend: Backend,
    cell: Cell,
    settings: Mapping[str, Any],
    *,
    data_dir: str | Path,
    weights_path: str | Path,
    num_classes: int,
) -> dict[str, Any]:
    """Measure one inference cell; returns the `metrics` and `samples_ms` parts of a cell result."""
    (part,) = run_cells(
        backend, [cell], settings, data_dir=data_dir, weights_path=weights_path, num_classes=num_classes
    )
    return part


def step_name(cell: Cell) -> str:
    """The burst step that times `cell` in a worker that may serve many (fwbench.scenarios.blocks.step_name)."""
    return blocks.step_name(cell.model, cell.precision, cell.batch_size)


def run_cells(
    backend: Backend | served.BackendFor,
    cells: Sequence[Cell],
    settings: Mapping[str, Any],
    *,
    data_dir: str | Path,
    weights_path: str | Path | Mapping[str, str | Path],
    num_classes: int,
    keep: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure the inference cells a warm worker serves in this process (fwbench.running.launches): every model,
    precision and batch size its scope gives it (fwbench.scenarios.served). Each unit (a model at a precision) is
    built once on its own backend instance (`backend`: one instance for a worker of one model and precision, or a
    function giving each cell's) from its own weights (`weights_path`: one file, or one per model), then each batch
    size gets its inputs, its compile (on exactly its shapes), its first call and its warm-up, in the order given;
    the bursts of every cell then run in the same blocks, comparison by comparison. Returns one part (`metrics`,
    `samples_ms`) per cell, in order; a cell whose build, compile or first call raised gets a `failed` part instead
    (fwbench.scenarios.served.failed_part) and the others go on.

    Where the controller's finish command asks for it (a group's last launch), the cells the study profiles are
    profiled here, after the blocks (fwbench.scenarios.profiled.after_blocks): `keep` writes the timed parts first,
    the controller is told which cells follow, and each profiled part gains `metrics.op_profile` and the pass's time
    as `phases_s.profiling_s`.

    What the cells share is recorded as theirs alike: the process's memory (rss_mb: peak and lifetime peak are the
    process's, over every cell it built, compiled and ran), recompilations during the bursts, what else the worker
    held (`metrics.worker`), and the time the process waited for the other workers (phases_s.waiting_s, in the
    first measured cell's phases only, with the model builds in its load_s), so that a process's phases still add
    up once over its cells."""
    served.check_served(cells)
    backend_for, weights_for = served.backend_of(backend), served.weights_of(weights_path)
    activate = served.activation(cells)
    start = time.perf_counter()
    missing: dict[str, str] = {}
    rss_before = rss_mb()
    gpu = open_device(backend_for(cells[0]).device_identity())  # by UUID or PCI bus id, never by CUDA ordinal
    isolation, idle = None, None
    if not isinstance(gpu, NvmlDevice):
        missing["isolation"] = f"no NVML device: {gpu.reason}"
    failed: dict[Cell, dict[str, Any]] = {}

    with RssSampler() as sampler:
        prepared: list[_Prepared] = []
        for unit in served.units(cells, lambda c: (c.model, c.precision)):
            unit_backend = backend_for(unit[0])
            try:
                activate(unit_backend)
                images = build_cell(
                    unit_backend,
                    unit[0],
                    data_dir=data_dir,
                    weights_path=weights_for(unit[0].model),
                    num_classes=num_classes,
                )
            except Exception as exc:  # the model does not build in this framework: its cells fail, the others go on
                failed.update({cell: served.failed_part(cell, exc, "model build") for cell in unit})
                continue
            for cell in unit:
                try:
                    prepared.append(_Prepared(unit_backend, cell, images, settings))
                except Exception as exc:
                    failed[cell] = served.failed_part(cell, exc, "inputs")
        if isinstance(gpu, NvmlDevice) and prepared:
            # The same point for every framework: weights and inputs on the device (each holds its CUDA context),
            # nothing running. Who else computes here, and the board's idle power once NVML's average has settled.
            prepared[0].backend.synchronize(prepared[0].inputs)
            isolation = gpu.isolation("after the model build and input transfer, before compilation")
            idle = launch_idle_baseline(gpu)  # the launch's, where an earlier worker of the launch took it
            if idle.get("missing"):
                missing["idle_power"] = idle["missing"]
        loaded = time.perf_counter()
        for cell_prepared in list(prepared):
            try:
                activate(cell_prepared.backend)
                cell_prepared.compile(cell_prepared.backend, settings)
            except Exception as exc:  # this cell's compile or first call: the worker's other cells go on
                failed[cell_prepared.cell] = served.failed_part(cell_prepared.cell, exc, "compile or first call")
                prepared.remove(cell_prepared)
        holders = list({id(item.backend): item.backend for item in prepared}.values())
        for holder in holders:  # steady-state device memory from here (peaks of load/compile apart)
            holder.reset_device_memory_peak()

        meter = energy_meter(gpu, idle)
        windows = {item.step: BurstWindows(meter) for item in prepared} if not isinstance(meter, str) else None
        before = {id(h): (h.compilations, h.compile_report()) for h in holders}
        sampler.set_interval(TIMED_INTERVAL_S)
        measuring = blocks.session(blocks.BurstPlan.from_settings(settings))
        if idle is not None and not idle.get("reused") and idle.get("watts") is not None:
            measuring.announce["idle_baseline"] = idle  # for the launch's later workers (fwbench.running.launches)
        measuring.windows = windows or {}  # energy over each burst's timed iterations, which end with a synchronise
        if len(holders) > 1:  # each unit's process-wide switches before its bursts (a no-op for one precision)
            measuring.before = {item.step: (lambda b=item.backend: activate(b)) for item in prepared}
        waiting_from = time.perf_counter()
        measured = measuring.measure({item.step: item.timed_step(item.backend) for item in prepared})
        measuring_s = time.perf_counter() - waiting_from
        sampler.set_interval(LOAD_INTERVAL_S)
        # a recompilation anywhere in the process flags every cell it served (JAX and PyTorch count process-wide)
        recompilations = max((h.compilations - before[id(h)][0] for h in holders), default=0)
        timed_reports = {id(h): torch_compile.report_difference(h.compile_report(), before[id(h)][1]) for h in holders}
        timed = {item.step: blocks.summarise(measured, item.step, item.cell.batch_size) for item in prepared}
    own_work = sum(
        timed[item.step]["timed_s"] + measured["calibration_s"][item.step] + timed[item.step]["discard_s"]
        for item in prepared
    )
    shared = {
        "rss_mb": {
            "before": rss_before,
            "peak": sampler.peak_mb,
            "peak_process_lifetime": peak_rss_mb(),
            "samples": sampler.samples,
            "source": (
                f"psutil rss sampled every {LOAD_INTERVAL_S * 1000:g} ms from before the model load, every "
                f"{TIMED_INTERVAL_S * 1000:g} ms while measuring; lifetime peak = ru_maxrss"
                + (
                    f"; the process served {len(cells)} cells (models {sorted({c.model for c in cells})}, "
                    f"precisions {sorted({c.precision for c in cells})}, batch sizes "
                    f"{sorted({c.batch_size for c in cells})}), so its peaks cover all"
                    if len(cells) > 1
                    else ""
                )
            ),
        },
        "isolation": isolation,
        "recompilations": recompilations,
        "energy": {step: window.total() for step, window in windows.items()} if windows else None,
        "meter": meter,
        "missing": missing,
        "gpu": gpu,
    }
    order = [item.cell for item in prepared]
    by_cell: dict[Cell, dict[str, Any]] = dict(failed)
    for position, item in enumerate(prepared):
        phases = {
            # the first cell's load holds the model builds (and NVML's checks on a GPU), the others their inputs
            "load_s": loaded - start - sum(other.load_s for other in prepared[1:]) if position == 0 else item.load_s,
            "compile_s": None if item.compile_times is None else sum(item.compile_times.values()),
            "first_call_s": item.first_call_s,
            "warmup_s": item.warmup_s,
            "timed_s": timed[item.step]["timed_s"],
            # calibrating and discarded iterations are the worker's own work; the rest it waited for the others
            "calibration_s": measured["calibration_s"][item.step],
            "discard_s": timed[item.step]["discard_s"],
            "waiting_s": measuring_s - own_work if position == 0 else 0.0,
            "scenario_s": time.perf_counter() - start if position == 0 else 0.0,
        }
        each = {
            **shared,
            "device_memory": item.backend.device_memory(),
            "timed_report": timed_reports[id(item.backend)],
            "worker": served.worker_record(item.cell, cells, list(failed), order.index(item.cell)),
        }
        by_cell[item.cell] = _cell_part(item.backend, item, settings, timed[item.step], measured, each, phases)
    parts = [by_cell[cell] for cell in cells]
    if measuring.after.get("profile"):
        _profile_after_blocks(prepared, parts, [cells.index(item.cell) for item in prepared], settings, measuring, keep)
    return parts


def _profile_after_blocks(prepared, parts, positions, settings, measuring, keep) -> None:
    """The profiling pass of this worker's profiled cells, after its timed result is safe (`keep`); `positions`:
    each prepared cell's part among `parts`."""
    on_gpu = bool(prepared) and str(prepared[0].backend.device_info().get("platform", "cpu")) == "cuda"
    todo = [i for i, item in enumerate(prepared) if profiled.in_worker(item.cell, settings, on_gpu=on_gpu)]
    if keep is None:  # nowhere to keep the timed result first: no pass here
        todo = []
    if todo:
        keep(parts)
    measuring.reply({"profiling": [prepared[i].cell.label() for i in todo]})
    for i in todo:
        item = prepared[i]
        item.backend.activate()
        record = profiled.after_blocks(item.backend, item.inputs, settings)
        part = parts[positions[i]]
        part["metrics"]["op_profile"] = record
        part["metrics"]["phases_s"]["profiling_s"] = record.pop("profiling_s")


class _Prepared:
    """One batch size of a worker: its inputs, then (compile) its compile, first call and warm-up."""

    def __init__(self, backend: Backend, cell: Cell, images, settings: Mapping[str, Any]) -> None:
        started = time.perf_counter()
        self.backend, self.cell, self.step = backend, cell, step_name(cell)
        self.buffers, self.cold = input_buffers(backend, images, cell.batch_size, bool(settings.get("cold_inputs")))
        self.inputs = self.buffers[0]
        # The bytes the framework was fed in its first (warm) batch, read back from its device buffer as float32 NHWC:
        # equal across the frameworks' cells of a model and batch size when their inputs are identical (fairness
        # ledger), and different where a transfer, cast or layout changed them.
        self.input_sha256 = digest(backend.fed_nhwc(self.inputs))
        self.rss_loaded = rss_mb()
        self.load_s = time.perf_counter() - started
        self.compile_times: dict[str, float] | None = None
        self.compile_report: dict[str, Any] | None = None
        self.first_call_s = self.warmup_s = 0.0
        self.logits: np.ndarray | None = None

    def compile(self, backend: Backend, settings: Mapping[str, Any]) -> None:
        self.compile_times = backend.compile(self.inputs)  # same inputs (shape, dtype, device) as every timed call
        self.compile_report = backend.compile_report()  # what Dynamo compiled for these shapes (torch.compile)
        t0 = time.perf_counter()
        outputs = backend.forward(self.inputs)
        backend.synchronize(outputs)
        self.first_call_s = time.perf_counter() - t0
        self.logits = backend.to_numpy(outputs)
        # The first call above counts as one warm-up iteration; cold-input runs touch every buffer once too.
        buffers = self.buffers
        warmup, warmup_start = int(settings["warmup_iters"]) - 1, time.perf_counter()
        for i in range(max(warmup, len(buffers)) if len(buffers) > 1 else warmup):
            backend.synchronize(backend.forward(buffers[i % len(buffers)]))
        self.warmup_s = time.perf_counter() - warmup_start

    def forward(self, backend: Backend):
        buffers = self.buffers
        return lambda i: backend.forward(buffers[i % len(buffers)])

    def timed_step(self, backend: Backend) -> blocks.Step:
        return self.forward(backend), backend.synchronize


def _cell_part(backend, item, settings, timed, measured, shared, phases) -> dict[str, Any]:
    """One cell's `metrics` and `samples_ms` from its bursts and what its worker's cells share."""
    cell = item.cell
    missing = {**shared["missing"], **timed["missing"]}
    samples_ms = timed["samples_ms"]
    if item.compile_times is None:
        missing["compile_s"] = (
            f"{backend.name} in mode {backend.mode} runs eagerly: no compile step (first_call_s holds the first call)"
        )
    if not np.isfinite(item.logits).all():
        raise FloatingPointError(f"non-finite logits from {cell.label()}")
    images_timed = len(samples_ms) * cell.batch_size
    energy = (shared["energy"] or {}).get(item.step)
    if shared["energy"] is None:
        missing["energy"] = shared["meter"]
    elif energy.get("joules") is None:  # NVML refused a reading the window needed
        missing["energy"], energy = energy["missing"], None
    else:
        energy = {**energy, "joules_per_image": energy["joules"] / images_timed}
    device_memory = dict(shared["device_memory"])
    if "missing" in device_memory:
        missing["device_memory"] = device_memory.pop("missing")
    gpu = shared["gpu"]
    if isinstance(gpu, NvmlDevice):
        device_memory.update(
            nvml_device_used_bytes=gpu.memory_used_bytes(), nvml_process_used_bytes=gpu.own_memory_bytes()
        )
        if gpu.missing:  # NVML queries the driver refused (MIG, containers, boards without the counter)
            missing["nvml"] = "; ".join(f"{query}: {why}" for query, why in gpu.missing.items())
    timing = timing_metrics(samples_ms, cell.batch_size, within_interval=False)
    noisy = timing.pop("noisy")
    isolation = shared["isolation"]
    metrics = {
        **timing,
        # The cell's throughput is over its bursts (see fwbench.scenarios.blocks.summarise); the median-step rate of all
        # its iterations is kept beside it.
        "throughput_img_s_median_step": timing["throughput_img_s"],
        "throughput_img_s": timed["throughput_img_s"],
        "ci95": timed["ci95"],
        "blocks": timed["blocks"],
        "flags": {
            "noisy": noisy,
            "steal": timed["blocks"]["steal_flagged"] > 0,
            "recompiled": shared["recompilations"] > 0,
            "other_gpu_processes": isolation["others_present"] if isolation else False,  # None: undetermined
        },
        "timed_s": timed["timed_s"],
        "stop_reason": "blocks",
        "warmup_iters": int(settings["warmup_iters"]),
        "compile_s": None if item.compile_times is None else sum(item.compile_times.values()),
        "compile_breakdown_s": item.compile_times,
        "recompilations_in_timed_loop": shared["recompilations"],
        # torch.compile: the graphs and graph breaks Dynamo saw compiling this cell's shapes and while the worker was
        # timed (a break there is also a recompilation above); None where the framework compiles whole programs (XLA)
        # or runs eagerly.
        "compile_report": torch_compile.report_sum(item.compile_report, shared["timed_report"]),
        "cold_inputs": item.cold,
        "first_call_s": item.first_call_s,
        "rss_mb": {**shared["rss_mb"], "loaded": item.rss_loaded},
        "device_memory": device_memory,
        "energy": energy,
        "isolation": isolation,
        "input_sha256": item.input_sha256,
        "worker": shared["worker"],
        "logits_checksum": float(np.float64(item.logits.astype(np.float64).sum())),
        "parity_logits": logits.pack(item.logits),  # the parity check's rows (fwbench.scenarios.logits)
        "missing": missing,
        # Where this process's scenario time went (the worker adds start-up and imports): building the model and
        # loading data and inputs (with NVML's isolation check and idle baseline on a GPU), compile, first call,
        # warm-up, the bursts, the time spent waiting while the other variants ran theirs (with the calibration),
        # and what follows (summaries).
        "phases_s": phases,
    }
    return {"metrics": metrics, "samples_ms": samples_ms}
