"""The weights-identical control as the study itself measures it (the fairness ledger's first row).

The parity tests prove the twins right on fresh random weights; a study must also show that its own weights, at its
own resolution and head, give the same logits in every framework. Each framework runs, in a process of its own (no
two frameworks ever share one), the study's weights of every model on the first validation images, through the same
backend path the inference cells time, in every precision the study times (threads pinned, compiled where the
framework compiles); a second step compares every framework's logits with PyTorch's in the same precision. A model a
framework cannot run is recorded as missing with the error, never as zero error.

A check that cannot fail proves nothing, so the comparison also records the evidence that it could: how much
PyTorch's logits vary from image to image (`input_dependence`; below MIN_INPUT_DEPENDENCE a twin that ignored its
input would pass) and the error against PyTorch's logits of the same images in another order (`permuted_error`, a
negative control run on every model: it must exceed the tolerance). The control holds for a model only where both
say the check could have failed. The tolerance is the arithmetic's (`TOLERANCES`), read from what each framework
recorded it ran (TF32 in effect, the dtype), not from the precision's name. In float32 it is also at least
REFERENCE_FACTOR times PyTorch's own float32 error against its float64 logits of the same weights and images
(`reference_error`, computed in PyTorch's parity job): the yardstick of the train-step parity tests and the training
step-0 check, so that a model whose weights amplify rounding (EfficientNet-B0's calibrated last stage at 32 px puts
PyTorch's own float32 logits 3.6e-5 of their scale from float64) is judged against its own rounding, not a fixed
bound it nearly fills.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fwbench.backends import get_backend
from fwbench.backends.arithmetic import coarsest_arithmetic as arithmetic
from fwbench.data.inputs import batch_of, normalize
from fwbench.data.loader import to_layout
from fwbench.data.store import load_split, sha256_file
from fwbench.models.calibration import MIN_INPUT_DEPENDENCE, input_dependence
from fwbench.scenarios.inference import load_weights
from fwbench.scenarios.logits import unpack
from fwbench.scenarios.operations import digest

BASELINE = "torch"
IMAGES = 8  # validation images per model: enough to see any layer disagree, a fraction of a second per model
# Bounds on eval logits relative to the largest |logit|, by the arithmetic both frameworks ran. fp32: the parity
# tests' bound. bfloat16: PyTorch's own bf16 logits of the study's kind of weights (seeded, BatchNorm calibrated, 8
# images at 224 px) differ from its fp32 ones by 0.010 (ViT-B/16), 0.030 (MobileNetV3-Small), 0.053
# (EfficientNet-B0) and 0.14 (ResNet-50) of the largest logit (2026-11-28, CPU), and two frameworks rounding
# independently may differ by up to about sqrt(2) times that: 2.5e-1. TF32 keeps three more mantissa bits (10
# against 7), an eighth of bf16's error: 5e-2. Where a permuted batch differs by less than the bound (ResNet-50's
# logits vary by 0.19 of their scale), the row says the check cannot fail rather than passing it.
TOLERANCES = {"fp32": 1e-4, "tf32": 5e-2, "bf16": 2.5e-1}
TOLERANCE = TOLERANCES["fp32"]
# A float32 bound is at least this many times PyTorch's own float32 error against float64 (the module docstring).
REFERENCE_FACTOR = 3
FLOAT64 = "float64"  # the reference's float64 logits, as `logits_key` names them


def logits_key(model: str, precision: str) -> str:
    """A model's logits in one precision, as the .npz names them."""
    return f"{model}@{precision}"


def reference_float64(
    models: Sequence[str],
    weights: Sequence[str | Path],
    data_dir: str | Path,
    *,
    images: int,
    num_classes: int,
    image_size: int,
    threads: int,
) -> dict[str, np.ndarray]:
    """PyTorch's float64 eval logits of every model on the study's weights and its first `images` validation images
    (the images every framework's parity logits are of), by `logits_key`(model, FLOAT64), computed on the CPU: the
    truth against which PyTorch's own float32 error is taken. A model PyTorch cannot run in float64 is left out, and
    its float32 bound stays the fixed one."""
    import torch

    from fwbench.models import torch_model

    torch.set_num_threads(max(1, int(threads)))
    pixels, _ = load_split(data_dir, "val")
    batch = torch.from_numpy(to_layout(normalize(batch_of(pixels, images)), "NCHW"))
    out: dict[str, np.ndarray] = {}
    for model, path in zip(models, weights, strict=True):
        try:
            module = torch_model(model, num_classes=num_classes, image_size=image_size)
            module.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in load_weights(path).items()})
            module = module.double().eval()
            with torch.no_grad():
                out[logits_key(model, FLOAT64)] = module(batch.double()).numpy()
        except Exception as error:  # recorded in the job's log; the fixed bound applies
            print(f"{model}: no float64 reference ({type(error).__name__}: {error})")
    return out


def framework_logits(
    framework: str,
    models: Sequence[str],
    weights: Sequence[str | Path],
    data_dir: str | Path,
    *,
    num_classes: int,
    image_size: int,
    threads: int,
    precisions: Sequence[str] = ("fp32",),
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(record, logits by `logits_key`): this framework's eval logits of every model in every precision on the first
    validation images, with the digests of the inputs and weights they came from and, per precision, the settings
    the framework recorded it ran in (its dtype, where TF32 was in effect)."""
    images, _ = load_split(data_dir, "val")
    batch = normalize(batch_of(images, min(IMAGES, len(images))))
    record: dict[str, Any] = {
        "framework": framework,
        "image_size": image_size,
        "images": len(batch),
        "input_sha256": digest(batch),
        "precisions": {},
    }
    logits: dict[str, np.ndarray] = {}
    for precision in precisions:
        backend = get_backend(framework, threads=threads, precision=precision)
        entries: dict[str, Any] = {}
        for model, path in zip(models, weights, strict=True):
            entry: dict[str, Any] = {"weights_sha256": sha256_file(path)}
            try:
                backend.build(model, load_weights(path), num_classes=num_classes, image_size=image_size)
                inputs = backend.to_device(batch)
                entry["input_sha256"] = digest(backend.fed_nhwc(inputs))  # the bytes this framework was fed
                backend.compile(inputs)
                outputs = backend.forward(inputs)
                backend.synchronize(outputs)
                logits[logits_key(model, precision)] = np.asarray(backend.to_numpy(outputs), dtype=np.float32)
                entry["settings"] = dict(backend.effective_settings)  # what this model's program ran in
            except Exception as error:  # a model this framework cannot run: recorded, the others still compared
                entry["missing"] = f"{type(error).__name__}: {error}"
            entries[model] = entry
        record["precisions"][precision] = {"settings": dict(backend.effective_settings), "models": entries}
    return record, logits


def framework_logits_from_cells(
    framework: str, results: Sequence[Mapping[str, Any]], *, image_size: int
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(record, logits by `logits_key`) as `framework_logits` gives them, taken from the framework's own inference
    cells instead of a job of its own: per model and precision, the logits its timed program computed of the first
    validation images in its first call (fwbench.scenarios.logits), from its cell at the largest batch size that
    was measured (every framework's at the same one where all were, so that they were fed the same batch:
    `input_sha256` is the digest of the bytes that cell was fed), with the weights' digest and the settings the cell
    recorded it ran in. A model whose cells all failed, or that kept no logits, is recorded as missing with the
    reason."""
    chosen: dict[tuple[str, str], Mapping[str, Any]] = {}
    failed: dict[tuple[str, str], str] = {}
    for result in results:
        cell = result["cell"]
        if cell["framework"] != framework:
            continue
        key = (cell["model"], cell["precision"])
        metrics = result.get("metrics") or {}
        if result.get("status") != "ok" or "parity_logits" not in metrics:
            failed.setdefault(key, result.get("reason") or "its cell kept no logits (measured before harness 14)")
            continue
        if key not in chosen or cell["batch_size"] > chosen[key]["cell"]["batch_size"]:
            chosen[key] = result
    rows = {len(unpack(r["metrics"]["parity_logits"])) for r in chosen.values()}
    record: dict[str, Any] = {
        "framework": framework,
        "image_size": image_size,
        "images": min(rows) if rows else 0,
        "source": "the framework's inference cells: the first call of each timed program (fwbench.scenarios.logits)",
        "precisions": {},
    }
    logits: dict[str, np.ndarray] = {}
    for model, precision in sorted(set(chosen) | set(failed), key=lambda k: (k[1], k[0])):
        part = record["precisions"].setdefault(precision, {"settings": {}, "models": {}})
        result = chosen.get((model, precision))
        if result is None:
            part["models"][model] = {"weights_sha256": None, "missing": f"no measured cell: {failed[model, precision]}"}
            continue
        settings = ((result.get("provenance") or {}).get("framework") or {}).get("settings") or {}
        part["settings"] = part["settings"] or dict(settings)
        metrics = result["metrics"]
        part["models"][model] = {
            "weights_sha256": (result.get("inputs") or {}).get("weights_sha256"),
            "input_sha256": metrics.get("input_sha256"),
            "settings": dict(settings),
            "cell": f"{result['cell']['framework']}/{result['cell']['mode']} bs{result['cell']['batch_size']}",
        }
        logits[logits_key(model, precision)] = unpack(metrics["parity_logits"])[: record["images"]]
    return record, logits


def _by_precision(record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A framework's record per precision; a record from before parity ran per precision was fp32 only."""
    if "precisions" in record:
        return record["precisions"]
    return {"fp32": {"settings": record.get("settings") or {}, "models": record["models"]}}


def _logits_of(arrays: Mapping[str, np.ndarray], model: str, precision: str) -> np.ndarray | None:
    """A model's logits in a precision; an .npz from before parity ran per precision holds fp32 under the model."""
    key = logits_key(model, precision)
    if key in arrays:
        return arrays[key]
    return arrays.get(model) if precision == "fp32" else None


PARITY_COLUMNS = [
    "model",
    "framework",
    "precision",
    "arithmetic",
    "image_size",
    "images",
    "relative_error",
    "max_abs_error",
    "top1_agreement",
    "tolerance",
    "reference_error",
    "input_dependence",
    "permuted_error",
    "can_fail",
    "holds",
    "same_weights",
    "same_inputs",
    "missing",
]


def _permuted(logits: np.ndarray) -> np.ndarray:
    """The logits of the same images in another order (each moved by one): what a twin fed permuted images, or one
    that lost track of which image is which, would return."""
    return np.roll(logits, 1, axis=0)


def compare(records: dict[str, dict[str, Any]], logits: dict[str, dict[str, np.ndarray]]) -> pd.DataFrame:
    """Every other framework's logits against PyTorch's, per model and precision: the largest difference relative to
    PyTorch's largest |logit| (the parity tests' statistic), the largest absolute difference, how often the top class
    agrees; whether both read the same weights and were fed the same input bytes (digests); and whether the check
    could fail (PyTorch's logits vary with the image, and the same comparison against PyTorch's logits of the images
    in another order exceeds the tolerance). A model whose logits do not depend on the image does not hold."""
    rows = []
    if BASELINE not in records:
        return pd.DataFrame(columns=PARITY_COLUMNS)
    baseline = records[BASELINE]
    reference = _by_precision(baseline)
    for framework, record in records.items():
        if framework == BASELINE:
            continue
        for precision, part in _by_precision(record).items():
            theirs_part = reference.get(precision, {"settings": {}, "models": {}})
            for model, entry in part["models"].items():
                theirs_entry = theirs_part["models"].get(model, {})
                row = {"model": model, "framework": framework, "precision": precision}
                row |= {
                    "arithmetic": (
                        kind := arithmetic(
                            entry.get("settings") or part["settings"],
                            theirs_entry.get("settings") or theirs_part["settings"],
                        )
                    ),
                    "image_size": record["image_size"],
                    "images": record["images"],
                    "tolerance": TOLERANCES[kind],
                    "same_weights": entry["weights_sha256"] == theirs_entry.get("weights_sha256"),
                    "same_inputs": _fed(entry, record) == _fed(theirs_entry, baseline),
                }
                ours = _logits_of(logits.get(framework, {}), model, precision)
                theirs = _logits_of(logits.get(BASELINE, {}), model, precision)
                missing = entry.get("missing") or theirs_entry.get("missing")
                if missing or ours is None or theirs is None:
                    which = framework if entry.get("missing") else BASELINE
                    rows.append(
                        row | {"holds": False, "can_fail": False, "missing": f"{which}: {missing or 'no logits'}"}
                    )
                    continue
                truth = logits.get(BASELINE, {}).get(logits_key(model, FLOAT64))
                rows.append(row | _agreement(ours, theirs, row, truth))
    return pd.DataFrame(rows, columns=PARITY_COLUMNS)


def _fed(entry: Mapping[str, Any], record: Mapping[str, Any]) -> str | None:
    """The digest of the bytes a framework was fed for a model (read back from its device buffer); a record from
    before that was read names the host batch's."""
    return entry.get("input_sha256") or record.get("input_sha256")


def _agreement(
    ours: np.ndarray, theirs: np.ndarray, row: Mapping[str, Any], truth: np.ndarray | None = None
) -> dict[str, Any]:
    """The error statistics of one model's logits against PyTorch's, and whether the check could fail and held. With
    PyTorch's float64 logits (`truth`) a float32 bound is at least REFERENCE_FACTOR times PyTorch's own error."""
    ours, theirs = ours.astype(np.float64), theirs.astype(np.float64)
    scale = float(np.abs(theirs).max()) or 1.0
    error = float(np.abs(ours - theirs).max())
    measured = truth is not None and truth.shape == theirs.shape
    reference_error = float(np.abs(theirs - truth).max()) / scale if measured else float("nan")
    tolerance = row["tolerance"]
    if measured and row["arithmetic"] == "fp32":
        tolerance = max(tolerance, REFERENCE_FACTOR * reference_error)
    out = {
        "tolerance": tolerance,
        "reference_error": reference_error,
        "relative_error": error / scale,
        "max_abs_error": error,
        "top1_agreement": float((ours.argmax(1) == theirs.argmax(1)).mean()),
        "input_dependence": input_dependence(theirs) if len(theirs) > 1 else 0.0,
        "permuted_error": float(np.abs(ours - _permuted(theirs)).max()) / scale,
    }
    out["can_fail"] = bool(out["input_dependence"] >= MIN_INPUT_DEPENDENCE and out["permuted_error"] > tolerance)
    out["holds"] = bool(
        out["relative_error"] <= tolerance and out["can_fail"] and row["same_weights"] and row["same_inputs"]
    )
    return out
