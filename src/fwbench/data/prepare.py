"""Build a study's dataset directory from its config: the one entry point of the workflow rule and the CLI.

Every source ends in the same layout (`fwbench.data.store`) and the same manifest, so nothing downstream knows where
the images came from.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fwbench.data import store, synthetic
from fwbench.data.preprocess import PathList, SplitSource, preprocess_split
from fwbench.io import atomic_write_json

TIMING = "preprocess.json"
SYNTHETIC_KEYS = ("image_size", "num_classes", "train_size", "val_size", "seed", "noise")
GEOMETRY = "torchvision Resize(resize_size) [shorter side, PIL bilinear] + CenterCrop(image_size); EXIF not applied"


def _sources(dataset: Mapping[str, Any], resources: str | Path, offline: bool):
    """(class names, {split: SplitSource}, origin description) for a real source."""
    if dataset["source"] == "imagefolder":
        from fwbench.data.imagefolder import scan

        names, splits, layout = scan(
            dataset["path"], dataset["splits"], val_fraction=dataset["val_fraction"], seed=dataset["seed"]
        )
        sources = {s: SplitSource(f.keys, f.labels, PathList(f.paths)) for s, f in splits.items()}
        return names, sources, {"path": str(dataset["path"]), "layout": layout}
    from functools import partial

    from fwbench.data import hub

    loaded = hub.open_dataset(dataset, resources, offline=offline)
    hub.check_columns(dataset, loaded)
    sources = {}
    for split, name in dataset["splits"].items():
        rows = loaded[name]
        labels = [int(v) for v in rows[dataset["label_column"]]]
        keys = [f"{name}[{i}]" for i in range(len(labels))]
        sources[split] = SplitSource(keys, labels, partial(hub.RowReader, dict(dataset), str(resources), name))
    return hub.class_names(dataset, loaded), sources, hub.describe(dataset, loaded)


def _check_classes(names: list[str], dataset: Mapping[str, Any], where: str) -> None:
    if len(names) != dataset["num_classes"]:
        raise ValueError(
            f"dataset.num_classes = {dataset['num_classes']}, but {where} has {len(names)} classes "
            f"({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}): set dataset.num_classes: {len(names)}"
        )


def prepare(
    dataset: Mapping[str, Any],
    out_dir: str | Path,
    *,
    resources: str | Path = "resources",
    workers: int = 1,
    offline: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Write shards, manifest.json and preprocess.json into `out_dir`; returns the manifest, with the preprocessing
    rate under the key `timing` (kept in its own file: timings differ between runs, the manifest must not)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    store.remove_shards(out_dir)
    (out_dir / TIMING).unlink(missing_ok=True)
    start = time.perf_counter()
    source = dataset["source"]
    if source == "synthetic":
        args = {key: dataset[key] for key in SYNTHETIC_KEYS}
        names = [f"class_{c:03d}" for c in range(args["num_classes"])]
        entries = {
            split: store.write_split(out_dir, split, [arrays], shard_size=dataset["shard_size"])
            for split, arrays in synthetic.generate(**args).items()
        }
        skipped, modes = [], Counter({"RGB": sum(e["count"] for e in entries.values())})
        origin = {"generator": "fwbench.data.synthetic"}
        candidates = sum(e["count"] for e in entries.values())
    else:
        where = f"dataset.path {dataset['path']!r}" if source == "imagefolder" else f"dataset.name {dataset['name']!r}"
        names, sources, origin = _sources(dataset, resources, offline)
        _check_classes(names, dataset, where)
        entries, skipped, modes = {}, [], Counter()
        for split, split_source in sources.items():
            entries[split], split_skipped, split_modes = preprocess_split(
                split_source,
                split,
                out_dir,
                image_size=dataset["image_size"],
                resize_size=dataset["resize_size"] or dataset["image_size"],
                workers=workers,
                shard_size=dataset["shard_size"],
                progress=progress,
            )
            skipped += split_skipped
            modes += split_modes
        candidates = sum(len(s.keys) for s in sources.values())
    labels = {split: store.load_split_labels(out_dir, entry) for split, entry in entries.items()}
    for split, entry in entries.items():
        entry["per_class"] = np.bincount(labels[split], minlength=len(names)).astype(int).tolist()
    totals = np.sum([entry["per_class"] for entry in entries.values()], axis=0)
    empty = [names[c] for c in np.nonzero(totals == 0)[0]]
    if empty:
        reasons = Counter(s["reason"].split(":")[0] for s in skipped)
        raise ValueError(
            f"dataset {source}: class {empty[0]!r} has no usable image"
            + (f" (and {len(empty) - 1} more classes)" if len(empty) > 1 else "")
            + (f"; skipped files: {dict(reasons)}" if reasons else "")
        )
    manifest = store.write_manifest(
        out_dir,
        {
            "source": source,
            "config": dict(dataset),
            "image_size": dataset["image_size"],
            "num_classes": len(names),
            "class_names": names,
            "geometry": None if source == "synthetic" else GEOMETRY,
            "resize_size": None if source == "synthetic" else dataset["resize_size"] or dataset["image_size"],
            "origin": origin,
            "decoder": {"pillow": _pillow_version()},
            "source_modes": dict(sorted(modes.items())),
            "splits": entries,
            "skipped": skipped,
            "skipped_count": {split: sum(s["split"] == split for s in skipped) for split in entries},
        },
    )
    seconds = time.perf_counter() - start
    manifest["timing"] = {
        "seconds": seconds,
        "candidates": candidates,
        "images_per_s": candidates / seconds if seconds > 0 else None,
        "workers": workers,
    }
    atomic_write_json(out_dir / TIMING, manifest["timing"])
    return manifest


def _pillow_version() -> str:
    import PIL

    return PIL.__version__


def check_matches(manifest: Mapping[str, Any], dataset_config: Mapping[str, Any], where: str | Path) -> None:
    """Refuse to reuse a dataset directory that was written from different settings."""
    written = manifest.get("config", {})
    for key, expected in dataset_config.items():
        if key in written and written[key] != expected:
            raise ValueError(
                f"dataset at {where} was written with dataset.{key} = {written[key]!r}, but the config says "
                f"{expected!r}; remove the directory or point --data-dir elsewhere"
            )
