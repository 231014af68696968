"""The one loader every framework is fed from: same batches, same order, same normalised bytes.

The order of an epoch is a permutation drawn from (seed, epoch) alone, so two frameworks, or a run resumed at epoch
k, see identical batches. Batches are gathered from the memory-mapped shards and normalised by background threads a
few batches ahead, in the memory layout the consumer asks for (NHWC, or NCHW for PyTorch: the transpose is a
contiguous copy made here, off the consumer's timed step, for every framework alike); the time the consumer blocked
on each batch is recorded, so a training cell can say what fraction of its step time went to waiting for data.

With `pad_last`, an epoch's last, partial batch (`drop_last: false`) is padded to the full batch by repeating its own
rows cyclically, so every batch has the one shape a compiled step was built for; `Batch.valid` says how many rows
are real, and a trainer's loss is the mean over those rows only.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from fwbench.data.inputs import normalize

LAYOUTS = ("NHWC", "NCHW")


def to_layout(images_nhwc: np.ndarray, layout: str) -> np.ndarray:
    """A normalised NHWC batch in `layout`, C-contiguous (NHWC is returned as it is)."""
    if layout == "NHWC":
        return images_nhwc
    if layout == "NCHW":
        return np.ascontiguousarray(images_nhwc.transpose(0, 3, 1, 2))
    raise ValueError(f"layout {layout!r}: not one of {LAYOUTS}")


def pad_rows(index: np.ndarray, batch_size: int) -> np.ndarray:
    """`index` (at least one row) filled up to `batch_size` by repeating its rows cyclically."""
    return index if len(index) >= batch_size else np.resize(index, batch_size)


@dataclass(frozen=True)
class Batch:
    number: int  # position within the epoch
    images: np.ndarray  # float32, normalised, in the loader's layout (NHWC or NCHW), C-contiguous
    labels: np.ndarray  # int64
    wait_s: float  # how long the consumer blocked for this batch (0 when it was ready)
    valid: int  # rows that are real; the rest (pad_last) repeat them to fill a partial last batch


class Loader:
    def __init__(
        self,
        images,
        labels: np.ndarray,
        batch_size: int,
        *,
        seed: int,
        shuffle: bool = True,
        drop_last: bool = True,
        prefetch: int = 2,
        workers: int = 1,
        layout: str = "NHWC",
        pad_last: bool = False,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if len(images) != len(labels):
            raise ValueError(f"{len(images)} images but {len(labels)} labels")
        if drop_last and len(images) < batch_size:
            raise ValueError(
                f"batch size {batch_size} exceeds the split's {len(images)} images: with loader.drop_last every "
                "batch would be dropped"
            )
        self.images, self.labels = images, np.asarray(labels)
        self.batch_size, self.seed, self.shuffle, self.drop_last = batch_size, seed, shuffle, drop_last
        if layout not in LAYOUTS:
            raise ValueError(f"layout {layout!r}: not one of {LAYOUTS}")
        self.prefetch, self.workers, self.layout, self.pad_last = prefetch, workers, layout, pad_last

    def __len__(self) -> int:
        full, rest = divmod(len(self.labels), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def order(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(len(self.labels))
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.labels))

    def batch_indices(self, epoch: int, *, padded: bool = False) -> list[np.ndarray]:
        """The rows of each batch of `epoch`; with `padded`, a partial last batch filled up as `pad_last` does."""
        order = self.order(epoch)
        batches = [order[i * self.batch_size : (i + 1) * self.batch_size] for i in range(len(self))]
        return [pad_rows(index, self.batch_size) for index in batches] if padded else batches

    def make(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The normalised images (in the loader's layout) and labels of these rows."""
        return to_layout(normalize(self.images[index]), self.layout), self.labels[index]

    def _make(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.make(pad_rows(index, self.batch_size) if self.pad_last else index)

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """Batches of one epoch in order; with prefetch > 0 they are prepared ahead by background threads."""
        batches = self.batch_indices(epoch)
        if self.prefetch == 0:
            for number, index in enumerate(batches):
                start = time.perf_counter()
                images, labels = self._make(index)
                yield Batch(number, images, labels, time.perf_counter() - start, len(index))
            return
        with ThreadPoolExecutor(self.workers, thread_name_prefix="fwbench-loader") as pool:
            pending: deque = deque()
            upcoming = iter(batches)
            try:
                for index in upcoming:
                    pending.append(pool.submit(self._make, index))
                    if len(pending) >= self.prefetch + self.workers - 1:
                        break
                number = 0
                while pending:
                    future = pending.popleft()
                    start = time.perf_counter()
                    images, labels = future.result()
                    wait = time.perf_counter() - start
                    following = next(upcoming, None)
                    if following is not None:
                        pending.append(pool.submit(self._make, following))
                    yield Batch(number, images, labels, wait, len(batches[number]))
                    number += 1
            finally:
                for future in pending:
                    future.cancel()
