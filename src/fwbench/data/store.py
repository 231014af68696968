"""On-disk dataset layout shared by every source: uint8 NHWC .npy arrays plus a manifest with checksums.

Arrays are memory-mapped on read so that a benchmark process pays only for the images it touches, and the manifest's
sha256 of each array lets a study prove which bytes every cell saw.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np

from fwbench.io import atomic_write_bytes, atomic_write_json, read_json

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
SPLITS = ("train", "val")


def array_files(split: str) -> dict[str, str]:
    return {"images": f"{split}_images.npy", "labels": f"{split}_labels.npy"}


def dataset_files(data_dir: str | Path) -> list[str]:
    files = [name for split in SPLITS for name in array_files(split).values()]
    return [str(Path(data_dir) / name) for name in [*files, MANIFEST]]


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def write_dataset(
    data_dir: str | Path,
    splits: dict[str, tuple[np.ndarray, np.ndarray]],
    *,
    num_classes: int,
    description: dict[str, Any],
) -> dict[str, Any]:
    """Write arrays first and the manifest last, so a manifest always describes complete arrays."""
    data_dir = Path(data_dir)
    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "layout": "NHWC uint8 images, int64 labels",
        "num_classes": num_classes,
        "class_names": [f"class_{c:03d}" for c in range(num_classes)],
        **description,
        "splits": {},
    }
    for split, (images, labels) in splits.items():
        if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
            raise ValueError(f"{split} images must be uint8 NHWC with 3 channels, got {images.dtype} {images.shape}")
        entry: dict[str, Any] = {
            "count": int(len(labels)),
            "shape": list(images.shape),
            "per_class": np.bincount(labels, minlength=num_classes).astype(int).tolist(),
            "sha256": {},
        }
        for kind, array in (("images", images), ("labels", labels)):
            data = _npy_bytes(array)
            name = array_files(split)[kind]
            atomic_write_bytes(data_dir / name, data)
            entry["sha256"][name] = hashlib.sha256(data).hexdigest()
        manifest["splits"][split] = entry
    atomic_write_json(data_dir / MANIFEST, manifest)
    return manifest


def read_manifest(data_dir: str | Path) -> dict[str, Any]:
    path = Path(data_dir) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"no dataset manifest at {path}: run the workflow's dataset rule first")
    return read_json(path)


def load_split(data_dir: str | Path, split: str, *, mmap: bool = True) -> tuple[np.ndarray, np.ndarray]:
    data_dir = Path(data_dir)
    manifest = read_manifest(data_dir)
    if split not in manifest["splits"]:
        raise KeyError(f"dataset at {data_dir} has no split {split!r} (has {sorted(manifest['splits'])})")
    files = array_files(split)
    images = np.load(data_dir / files["images"], mmap_mode="r" if mmap else None, allow_pickle=False)
    labels = np.load(data_dir / files["labels"], allow_pickle=False)
    return images, labels


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
