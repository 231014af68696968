"""Build a study's dataset directory from its config (the entry point the workflow rule and CLI share)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fwbench.data import store, synthetic


def prepare(dataset_config: Mapping[str, Any], out_dir: str | Path) -> dict[str, Any]:
    source = dataset_config["source"]
    if source != "synthetic":
        raise ValueError(f"dataset.source = {source!r}: no preparation implemented for this source")
    args = {
        key: dataset_config[key] for key in ("image_size", "num_classes", "train_size", "val_size", "seed", "noise")
    }
    splits = synthetic.generate(**args)
    return store.write_dataset(
        out_dir,
        splits,
        num_classes=args["num_classes"],
        description={"source": "synthetic", "generator": "fwbench.data.synthetic", **args},
    )


def check_matches(manifest: Mapping[str, Any], dataset_config: Mapping[str, Any], where: str | Path) -> None:
    """Refuse to reuse a dataset directory that was written from different settings."""
    for key, expected in dataset_config.items():
        if key in manifest and manifest[key] != expected:
            raise ValueError(
                f"dataset at {where} was written with dataset.{key} = {manifest[key]!r}, but the config says "
                f"{expected!r}; remove the directory or point --data-dir elsewhere"
            )
