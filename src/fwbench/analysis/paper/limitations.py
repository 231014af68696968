"""The conclusions' limitations paragraph, generated: what this study lacked, each item read from the same results and
the configuration that produced them (the device, the number of trials, the resolution, the data, missing energy or
memory with the recorded reason, failed and noisy cells, a single training run, how far published figures could be
compared, and the fairness controls the ledger could not check).

It exists apart from the findings (`fwbench.analysis.paper.findings`) because it reads what is missing from a study
rather than what its ratios say: a new kind of limitation is added here alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import escape, join_words, number
from fwbench.analysis.common.names import model_in_text, models_in_text
from fwbench.analysis.common.partners import with_modes
from fwbench.analysis.paper.findings import plural

REFERENCE_RESOLUTION = 224  # torchvision's and the published studies' input size


def _distinct(frame: pd.DataFrame, column: str) -> list[str]:
    return sorted({str(v) for v in frame.get(column, pd.Series(dtype=str)).dropna()})


def limitations(
    inference: pd.DataFrame,
    epochs: pd.DataFrame | None,
    published: pd.DataFrame,
    ledger: pd.DataFrame,
    config: Mapping[str, Any],
) -> list[str]:
    """What the study lacked, each read from the results or the configuration that produced them."""
    items = []
    ok = inference[inference["status"] == "ok"]
    platforms = set(_distinct(ok, "platform"))
    if platforms and platforms <= {"cpu"}:
        cpu = _distinct(ok, "cpu_model")
        items.append(
            f"every cell ran on a CPU ({escape(', '.join(cpu) or 'unnamed')}), so nothing here measures a GPU, where "
            "the published comparisons ran"
        )
    trials = sorted({int(t) for t in ok.get("trials", pd.Series(dtype=float)).dropna()})
    if trials == [1]:
        items.append("each cell ran in a single process, so no ratio can be resolved")
    elif trials:
        items.append(
            f"each cell ran in {trials[0]} processes, so a ratio's paired interval has {trials[0] - 1} degrees of "
            "freedom and only large differences resolve"
        )
    size = int(config["dataset"]["image_size"])
    if size < REFERENCE_RESOLUTION:
        items.append(
            f"images are {size}~px, {number((REFERENCE_RESOLUTION / size) ** 2)}$\\times$ fewer pixels than the "
            f"{REFERENCE_RESOLUTION}~px the models were designed for, so per-call overheads weigh more than at full "
            "size"
        )
    if config["dataset"].get("source") == "synthetic":
        items.append("the dataset is synthetic (generated from the seed), so accuracies say nothing about real images")
    precisions = list(config.get("precisions", []))
    if precisions == ["fp32"]:
        items.append("only fp32 was measured (no TF32 or bf16 cells)")
    energy = _distinct(inference, "energy_missing")
    if energy and ok.get("energy_j_per_image", pd.Series(dtype=float)).isna().all():
        items.append("energy was not measured: " + escape("; ".join(energy)))
    memory = _distinct(inference, "device_memory_missing")
    if memory and ok.get("device_peak_bytes", pd.Series(dtype=float)).isna().all():
        items.append("device memory was not measured (" + escape("; ".join(memory)) + "); host memory was")
    failed = inference[inference["status"] != "ok"]
    failed_training = (
        with_modes(epochs[epochs["status"] != "ok"]).drop_duplicates(["framework", "mode", "model", "batch_size"])
        if epochs is not None and not epochs.empty
        else []
    )
    if len(failed) or len(failed_training):
        items.append(f"{plural(len(failed) + len(failed_training), 'cell')} failed (Section~\\ref{{sec:failures}})")
    noisy = int((ok.get("noisy", pd.Series(dtype=str)).astype(str) == "True").sum())
    if noisy:
        items.append(
            f"{noisy} of {len(ok)} inference cells had a noisy trial (a process whose step times' IQR exceeded 10\\% "
            "of their median)"
        )
    if epochs is not None and not epochs.empty:
        trained = sorted(set(epochs["model"]))
        untrained = [m for m in config.get("models", []) if m not in trained]
        runs = with_modes(epochs).groupby(["framework", "mode", "model", "batch_size"]).ngroups
        text = (
            f"training ran once per framework, mode and model ({plural(runs, 'run')} of "
            f"{plural(int(epochs['epoch'].max()) + 1, 'epoch')}), without an interval"
        )
        if untrained:
            untrained_names = join_words([model_in_text(m) for m in untrained])
            text += (
                f", and only for {escape(join_words(models_in_text(trained)))} ({escape(untrained_names)} not trained)"
            )
        items.append(text)
    if len(published) and not published["absolute_comparable"].astype(bool).all():
        items.append(
            "published figures come from other devices and resolutions, so only their ratios and directions "
            "could be compared"
        )
    missing = ledger[ledger["status"] == "not measured"]["control"].tolist()
    if missing:
        items.append("the ledger could not check " + escape(join_words([c.lower() for c in missing])))
    return items
