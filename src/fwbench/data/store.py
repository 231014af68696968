"""On-disk dataset layout shared by every source: uint8 NHWC `.npy` shards with their labels, and a manifest.

Shards are memory-mapped on read so that a process pays only for the images it touches; the manifest's sha256 of
every shard lets a study prove which bytes every cell saw. The manifest is written last, so its presence means the
shards it lists are complete.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fwbench.io import atomic_write_bytes, atomic_write_json, read_json

MANIFEST = "manifest.json"
FORMAT_VERSION = 2
SPLITS = ("train", "val")
LAYOUT = "NHWC uint8 RGB image shards with int64 label shards"


def shard_files(split: str, index: int) -> dict[str, str]:
    return {"images": f"{split}-{index:05d}-images.npy", "labels": f"{split}-{index:05d}-labels.npy"}


def dataset_files(data_dir: str | Path) -> list[str]:
    """The files a workflow rule declares: the manifest alone, since the shard count depends on the data."""
    return [str(Path(data_dir) / MANIFEST)]


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def remove_shards(data_dir: str | Path) -> None:
    """Drop the manifest and shards of an earlier run, so a smaller dataset cannot inherit stale shards."""
    data_dir = Path(data_dir)
    (data_dir / MANIFEST).unlink(missing_ok=True)
    for split in SPLITS:
        for path in data_dir.glob(f"{split}-*-*.npy"):
            path.unlink()


def write_split(
    data_dir: str | Path, split: str, batches: Iterable[tuple[np.ndarray, np.ndarray]], *, shard_size: int
) -> dict[str, Any]:
    """Write a stream of (uint8 NHWC images, labels) batches as shards of `shard_size` images; return the split's
    manifest entry without per-class counts (the caller knows the classes)."""
    data_dir = Path(data_dir)
    shards: list[dict[str, Any]] = []
    pending_images: list[np.ndarray] = []
    pending_labels: list[np.ndarray] = []
    pending = 0
    shape: tuple[int, ...] | None = None

    def flush(count: int) -> None:
        nonlocal pending_images, pending_labels, pending
        images = np.concatenate(pending_images)
        labels = np.concatenate(pending_labels).astype(np.int64)
        names = shard_files(split, len(shards))
        entry: dict[str, Any] = {"count": count, **names, "sha256": {}}
        for kind, array in (("images", images[:count]), ("labels", labels[:count])):
            data = _npy_bytes(array)
            atomic_write_bytes(data_dir / names[kind], data)
            entry["sha256"][names[kind]] = hashlib.sha256(data).hexdigest()
        shards.append(entry)
        pending_images, pending_labels = [images[count:]], [labels[count:]]
        pending -= count

    for images, labels in batches:
        if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
            raise ValueError(f"{split} images must be uint8 NHWC with 3 channels, got {images.dtype} {images.shape}")
        if shape is not None and images.shape[1:] != shape:
            raise ValueError(f"{split} images change shape from {shape} to {images.shape[1:]}")
        shape = images.shape[1:]
        pending_images.append(images)
        pending_labels.append(np.asarray(labels))
        pending += len(images)
        while pending >= shard_size:
            flush(shard_size)
    if pending:
        flush(pending)
    count = sum(shard["count"] for shard in shards)
    return {"count": count, "shape": [count, *(shape or ())], "shards": shards}


def split_digest(entry: dict[str, Any]) -> str:
    """One sha256 for a whole split: over its shards' digests in order (what the paper's dataset table prints)."""
    digest = hashlib.sha256()
    for shard in entry["shards"]:
        for name in (shard["images"], shard["labels"]):
            digest.update(shard["sha256"][name].encode())
    return digest.hexdigest()


def write_manifest(data_dir: str | Path, manifest: dict[str, Any]) -> dict[str, Any]:
    manifest = {"format_version": FORMAT_VERSION, "layout": LAYOUT, **manifest}
    for entry in manifest["splits"].values():
        entry["sha256"] = split_digest(entry)
    atomic_write_json(Path(data_dir) / MANIFEST, manifest)
    return manifest


def read_manifest(data_dir: str | Path) -> dict[str, Any]:
    path = Path(data_dir) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"no dataset manifest at {path}: run the workflow's dataset rule first")
    manifest = read_json(path)
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"dataset at {data_dir} has format_version {manifest.get('format_version')}, this fwbench reads "
            f"{FORMAT_VERSION}: prepare it again"
        )
    return manifest


class ShardedImages:
    """The images of one split as one array-like over memory-mapped shards: `len`, `shape`, `dtype` and indexing by
    an integer, a slice or an integer array, which gathers across shards and returns an ordinary array."""

    def __init__(self, shards: list[np.ndarray]):
        if not shards:
            raise ValueError("a split needs at least one shard")
        self.shards = shards
        self.offsets = np.cumsum([0] + [len(s) for s in shards])
        self.dtype = shards[0].dtype
        self.shape = (int(self.offsets[-1]), *shards[0].shape[1:])

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return self[np.arange(len(self))] if dtype is None else self[np.arange(len(self))].astype(dtype)

    def __iter__(self) -> Iterator[np.ndarray]:
        for shard in self.shards:
            yield from shard

    def __getitem__(self, index) -> np.ndarray:
        if isinstance(index, (int, np.integer)):
            index = int(index) + (len(self) if index < 0 else 0)
            shard = int(np.searchsorted(self.offsets, index, side="right") - 1)
            return np.asarray(self.shards[shard][index - self.offsets[shard]])
        if isinstance(index, slice):
            index = np.arange(len(self))[index]
        index = np.asarray(index, dtype=np.int64)
        if index.ndim != 1:
            raise IndexError("ShardedImages takes an integer, a slice or a 1-D integer array")
        if len(index) and (index.min() < -len(self) or index.max() >= len(self)):
            raise IndexError(f"index out of range for {len(self)} images")
        index = np.where(index < 0, index + len(self), index)
        out = np.empty((len(index), *self.shape[1:]), dtype=self.dtype)
        shard_of = np.searchsorted(self.offsets, index, side="right") - 1
        for shard in np.unique(shard_of):
            where = np.nonzero(shard_of == shard)[0]
            local = index[where] - self.offsets[shard]
            order = np.argsort(local, kind="stable")  # ascending reads are kinder to a memory map
            out[where[order]] = self.shards[shard][local[order]]
        return out


def load_split(data_dir: str | Path, split: str, *, mmap: bool = True) -> tuple[ShardedImages, np.ndarray]:
    data_dir = Path(data_dir)
    manifest = read_manifest(data_dir)
    if split not in manifest["splits"]:
        raise KeyError(f"dataset at {data_dir} has no split {split!r} (has {sorted(manifest['splits'])})")
    shards = manifest["splits"][split]["shards"]
    images = [np.load(data_dir / s["images"], mmap_mode="r" if mmap else None, allow_pickle=False) for s in shards]
    labels = [np.load(data_dir / s["labels"], allow_pickle=False) for s in shards]
    return ShardedImages(images), np.concatenate(labels)


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_split_labels(data_dir: str | Path, entry: dict[str, Any]) -> np.ndarray:
    """All labels of a split from its (possibly not yet manifested) entry."""
    labels = [np.load(Path(data_dir) / shard["labels"], allow_pickle=False) for shard in entry["shards"]]
    return np.concatenate(labels) if labels else np.zeros(0, np.int64)
