"""Decode, convert and crop every image of a split in parallel worker processes, in a fixed order, into shards.

Workers receive row indices, not image bytes, and build their own reader (a file path list or a Hugging Face split),
so memory stays bounded however large the dataset; `imap` returns results in index order, which is what makes the
shards byte-identical for any worker count.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fwbench.data import store
from fwbench.data.images import Unusable, load_image

BATCH = 256  # images handed to the shard writer at a time
CHUNK = 16  # indices per worker task: large enough to amortise IPC, small enough to keep order cheap


@dataclass(frozen=True)
class SplitSource:
    """What one split holds: a key per item (for the skip list), its label, and a picklable factory building, inside
    each worker, the function from item index to image path or bytes."""

    keys: Sequence[str]
    labels: Sequence[int]
    reader: Callable[[], Callable[[int], bytes | str]]


class PathList:
    """Reader factory for files on disk."""

    def __init__(self, paths: Sequence[str]):
        self.paths = list(paths)

    def __call__(self) -> Callable[[int], str]:
        return self.paths.__getitem__


_worker: dict[str, Any] = {}


def _init_worker(reader_factory, resize_size: int, crop_size: int) -> None:
    _worker.update(read=reader_factory(), resize=resize_size, crop=crop_size)


def _decode(index: int) -> tuple[np.ndarray | None, str]:
    try:
        return load_image(_worker["read"](index), _worker["resize"], _worker["crop"])
    except Unusable as reason:
        return None, str(reason)
    except OSError as error:  # a file that vanished or cannot be opened is skipped like an unreadable image
        return None, f"unreadable file: {error}"


def _results(source: SplitSource, resize_size: int, crop_size: int, workers: int) -> Iterator[tuple]:
    if workers <= 1:
        _init_worker(source.reader, resize_size, crop_size)
        yield from map(_decode, range(len(source.keys)))
        return
    context = multiprocessing.get_context("spawn")  # never fork a process that may hold framework threads
    with context.Pool(workers, initializer=_init_worker, initargs=(source.reader, resize_size, crop_size)) as pool:
        yield from pool.imap(_decode, range(len(source.keys)), chunksize=CHUNK)


def preprocess_split(
    source: SplitSource,
    split: str,
    out_dir,
    *,
    image_size: int,
    resize_size: int,
    workers: int,
    shard_size: int,
    progress: bool = True,
) -> tuple[dict[str, Any], list[dict[str, str]], Counter]:
    """Returns the split's manifest entry, its skipped items with reasons, and the source modes converted."""
    from tqdm import tqdm

    skipped: list[dict[str, str]] = []
    modes: Counter = Counter()

    def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        images, labels = [], []
        results = _results(source, resize_size, image_size, workers)
        bar = tqdm(
            results,
            total=len(source.keys),
            desc=f"preprocess {split}",
            unit="img",
            file=sys.stderr,
            mininterval=2.0,
            disable=not progress,
        )
        for index, (array, note) in enumerate(bar):
            if array is None:
                skipped.append({"split": split, "file": source.keys[index], "reason": note})
                continue
            modes[note] += 1
            images.append(array)
            labels.append(source.labels[index])
            if len(images) == BATCH:
                yield np.stack(images), np.asarray(labels, np.int64)
                images, labels = [], []
        if images:
            yield np.stack(images), np.asarray(labels, np.int64)

    entry = store.write_split(out_dir, split, batches(), shard_size=shard_size)
    if entry["count"] == 0:
        reasons = Counter(s["reason"].split(":")[0] for s in skipped)
        raise ValueError(
            f"dataset split {split!r} has no usable image ({len(source.keys)} candidates; skipped: {dict(reasons)})"
        )
    return entry, skipped, modes
