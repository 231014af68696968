"""The conclusions' limitations, read from the results: what this study lacked (the device, the number of trials, the
resolution, the data, missing energy or memory with the recorded reason, failed and noisy cells, a single training
run, how far published figures could be compared, and the fairness controls the ledger could not check).

Each is handed to the conclusions' template (report/templates/conclusions.tex.j2) as a `Limitation`: its kind and
the numbers and names it rests on, never a sentence, so that an author rewords a limitation there. It exists apart
from the findings (`fwbench.analysis.paper.findings`) because it reads what is missing from a study rather than what
its ratios say: a new kind of limitation is added here and in the template.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from fwbench.analysis.common.names import model_name
from fwbench.analysis.common.partners import with_modes
from fwbench.analysis.fairness.ledger import control_in_sentence

REFERENCE_RESOLUTION = 224  # torchvision's and the published studies' input size


@dataclass(frozen=True)
class Limitation:
    """One thing the study lacked: `kind` picks the template's sentence, `values` fill it."""

    kind: str
    values: dict[str, Any] = field(default_factory=dict)


def _distinct(frame: pd.DataFrame, column: str) -> list[str]:
    return sorted({str(v) for v in frame.get(column, pd.Series(dtype=str)).dropna()})


def limitations(
    inference: pd.DataFrame,
    epochs: pd.DataFrame | None,
    published: pd.DataFrame,
    ledger: pd.DataFrame,
    config: Mapping[str, Any],
) -> list[Limitation]:
    """What the study lacked, each read from the results or the configuration that produced them."""
    items = []
    ok = inference[inference["status"] == "ok"]
    platforms = set(_distinct(ok, "platform"))
    if platforms and platforms <= {"cpu"}:
        items.append(Limitation("cpu", {"names": _distinct(ok, "cpu_model")}))
    trials = sorted({int(t) for t in ok.get("trials", pd.Series(dtype=float)).dropna()})
    if trials:
        items.append(Limitation("trials", {"processes": trials[0]}))
    size = int(config["dataset"]["image_size"])
    if size < REFERENCE_RESOLUTION:
        factor = (REFERENCE_RESOLUTION / size) ** 2
        items.append(Limitation("resolution", {"size": size, "reference": REFERENCE_RESOLUTION, "factor": factor}))
    if config["dataset"].get("source") == "synthetic":
        items.append(Limitation("synthetic"))
    if list(config.get("precisions", [])) == ["fp32"]:
        items.append(Limitation("precisions"))
    energy = _distinct(inference, "energy_missing")
    if energy and ok.get("energy_j_per_image", pd.Series(dtype=float)).isna().all():
        items.append(Limitation("energy", {"reasons": energy}))
    memory = _distinct(inference, "device_memory_missing")
    if memory and ok.get("device_peak_bytes", pd.Series(dtype=float)).isna().all():
        items.append(Limitation("memory", {"reasons": memory}))
    failed = inference[inference["status"] != "ok"]
    failed_training = (
        with_modes(epochs[epochs["status"] != "ok"]).drop_duplicates(["framework", "mode", "model", "batch_size"])
        if epochs is not None and not epochs.empty
        else []
    )
    if len(failed) or len(failed_training):
        items.append(Limitation("failed", {"cells": len(failed) + len(failed_training)}))
    noisy = int((ok.get("noisy", pd.Series(dtype=str)).astype(str) == "True").sum())
    if noisy:
        items.append(Limitation("noisy", {"cells": noisy, "of": len(ok)}))
    if epochs is not None and not epochs.empty:
        trained = sorted(set(epochs["model"]))
        items.append(
            Limitation(
                "training",
                {
                    "runs": with_modes(epochs).groupby(["framework", "mode", "model", "batch_size"]).ngroups,
                    "epochs": int(epochs["epoch"].max()) + 1,
                    # display names ("small CNN"): the template's `model` macro gives a common noun its article
                    "trained": [model_name(m) for m in trained],
                    "untrained": [model_name(m) for m in config.get("models", []) if m not in trained],
                },
            )
        )
    if len(published) and not published["absolute_comparable"].astype(bool).all():
        items.append(Limitation("devices"))
    missing = ledger[ledger["status"] == "not measured"]["control"].tolist()
    if missing:
        items.append(Limitation("ledger", {"controls": [control_in_sentence(c) for c in missing]}))
    return items
