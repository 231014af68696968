"""The weights-identical control as the study itself measures it (the fairness ledger's first row).

The parity tests prove the twins right on fresh random weights; a study must also show that its own weights, at its
own resolution and head, give the same logits in every framework. Each framework runs, in a process of its own (no
two frameworks ever share one), the study's weights of every model on the first validation images, through the same
backend path the inference cells time (fp32, threads pinned, compiled where the framework compiles); a second step
compares every framework's logits with PyTorch's. A model a framework cannot run is recorded as missing with the
error, never as zero error.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fwbench.backends import get_backend
from fwbench.data.inputs import batch_of, normalize
from fwbench.data.store import load_split, sha256_file
from fwbench.scenarios.inference import load_weights
from fwbench.scenarios.operations import digest

BASELINE = "torch"
IMAGES = 8  # validation images per model: enough to see any layer disagree, a fraction of a second per model
# The parity tests' bound on eval logits (fp32, relative to the largest |logit|): the control holds below it.
TOLERANCE = 1e-4


def framework_logits(
    framework: str,
    models: Sequence[str],
    weights: Sequence[str | Path],
    data_dir: str | Path,
    *,
    num_classes: int,
    image_size: int,
    threads: int,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(record, logits by model): this framework's fp32 eval logits of every model on the first validation images,
    with the digests of the inputs and weights they came from."""
    backend = get_backend(framework, threads=threads, precision="fp32")
    images, _ = load_split(data_dir, "val")
    batch = normalize(batch_of(images, min(IMAGES, len(images))))
    record: dict[str, Any] = {
        "framework": framework,
        "image_size": image_size,
        "images": len(batch),
        "input_sha256": digest(batch),
        "settings": backend.effective_settings,
        "models": {},
    }
    logits: dict[str, np.ndarray] = {}
    for model, path in zip(models, weights, strict=True):
        entry: dict[str, Any] = {"weights_sha256": sha256_file(path)}
        try:
            backend.build(model, load_weights(path), num_classes=num_classes, image_size=image_size)
            inputs = backend.to_device(batch)
            backend.compile(inputs)
            outputs = backend.forward(inputs)
            backend.synchronize(outputs)
            logits[model] = np.asarray(backend.to_numpy(outputs), dtype=np.float32)
        except Exception as error:  # a model this framework cannot run: recorded, the others still compared
            entry["missing"] = f"{type(error).__name__}: {error}"
        record["models"][model] = entry
    return record, logits


PARITY_COLUMNS = [
    "model",
    "framework",
    "image_size",
    "images",
    "relative_error",
    "max_abs_error",
    "top1_agreement",
    "tolerance",
    "holds",
    "same_weights",
    "same_inputs",
    "missing",
]


def compare(records: dict[str, dict[str, Any]], logits: dict[str, dict[str, np.ndarray]]) -> pd.DataFrame:
    """Every other framework's logits against PyTorch's, per model: the largest difference relative to PyTorch's
    largest |logit| (the parity tests' statistic), the largest absolute difference, and how often the top class
    agrees; and whether both read the same weights and inputs (digests)."""
    rows = []
    if BASELINE not in records:
        return pd.DataFrame(columns=PARITY_COLUMNS)
    reference = records[BASELINE]
    for framework, record in records.items():
        if framework == BASELINE:
            continue
        for model, entry in record["models"].items():
            row = {
                "model": model,
                "framework": framework,
                "image_size": record["image_size"],
                "images": record["images"],
                "tolerance": TOLERANCE,
                "same_weights": entry["weights_sha256"] == reference["models"].get(model, {}).get("weights_sha256"),
                "same_inputs": record["input_sha256"] == reference["input_sha256"],
            }
            missing = entry.get("missing") or reference["models"].get(model, {}).get("missing")
            if missing or model not in logits.get(framework, {}) or model not in logits.get(BASELINE, {}):
                which = framework if entry.get("missing") else BASELINE
                rows.append(row | {"holds": False, "missing": f"{which}: {missing or 'no logits'}"})
                continue
            ours, theirs = logits[framework][model].astype(np.float64), logits[BASELINE][model].astype(np.float64)
            scale = float(np.abs(theirs).max()) or 1.0
            error = float(np.abs(ours - theirs).max())
            row |= {
                "relative_error": error / scale,
                "max_abs_error": error,
                "top1_agreement": float((ours.argmax(1) == theirs.argmax(1)).mean()),
            }
            row["holds"] = bool(row["relative_error"] <= TOLERANCE and row["same_weights"] and row["same_inputs"])
            rows.append(row)
    return pd.DataFrame(rows, columns=PARITY_COLUMNS)
