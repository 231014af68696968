"""How many images per second the study's loader sustains, with a consumer that does no work.

That is the most the loader can feed any training cell on this machine; the target is three times the fastest
training cell, so that data never becomes what a training cell measures.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fwbench.data.loader import Loader
from fwbench.data.store import load_split
from fwbench.trackers.stats import summary


def _drain(loader: Loader, min_seconds: float) -> tuple[list[float], int, float]:
    """Consume batches (epoch after epoch, each in its own order) for at least `min_seconds` and 3 batches."""
    waits: list[float] = []
    count, epoch, start = 0, 0, time.perf_counter()
    while True:
        for batch in loader.epoch(epoch):
            waits.append(batch.wait_s * 1000.0)
            count += len(batch.labels)
            if len(waits) >= 3 and time.perf_counter() - start >= min_seconds:
                return waits, count, time.perf_counter() - start
        epoch += 1


def measure_loader(
    data_dir: str | Path,
    batch_sizes: Sequence[int],
    loader_config: Mapping[str, Any],
    *,
    seed: int,
    split: str = "train",
) -> dict[str, Any]:
    """Per batch size: the loader's img/s over at least `loader.min_seconds` and 3 batches (epochs follow each
    other as in training, each with its own order), and the consumer's per-batch waits."""
    images, labels = load_split(data_dir, split)
    rows = []
    for batch_size in batch_sizes:
        loader = Loader(
            images,
            labels,
            batch_size,
            seed=seed,
            drop_last=loader_config["drop_last"],
            prefetch=loader_config["prefetch"],
            workers=loader_config["workers"],
        )
        waits, count, seconds = _drain(loader, float(loader_config["min_seconds"]))
        rows.append(
            {
                "batch_size": batch_size,
                "images": count,
                "batches": len(waits),
                "seconds": seconds,
                "img_s": count / seconds,
                "wait_ms": {k: v for k, v in summary(waits).items() if k != "noisy"},
            }
        )
    return {
        "split": split,
        "split_images": int(len(labels)),
        "image_shape": list(images.shape[1:]),
        "loader": dict(loader_config),
        "seed": seed,
        "consumer": "none (the loader alone: the most it can feed)",
        "rows": rows,
    }
