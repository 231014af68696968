"""The one loader every framework is fed from: same batches, same order, same normalised bytes.

The order of an epoch is a permutation drawn from (seed, epoch) alone, so two frameworks, or a run resumed at epoch
k, see identical batches. Batches are gathered from the memory-mapped shards and normalised by background threads a
few batches ahead; the time the consumer blocked on each batch is recorded, so a training cell can say what fraction
of its step time went to waiting for data.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from fwbench.data.inputs import normalize


@dataclass(frozen=True)
class Batch:
    number: int  # position within the epoch
    images: np.ndarray  # float32 NHWC, normalised
    labels: np.ndarray  # int64
    wait_s: float  # how long the consumer blocked for this batch (0 when it was ready)


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
        self.prefetch, self.workers = prefetch, workers

    def __len__(self) -> int:
        full, rest = divmod(len(self.labels), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def order(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(len(self.labels))
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.labels))

    def batch_indices(self, epoch: int) -> list[np.ndarray]:
        order = self.order(epoch)
        return [order[i * self.batch_size : (i + 1) * self.batch_size] for i in range(len(self))]

    def _make(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return normalize(self.images[index]), self.labels[index]

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """Batches of one epoch in order; with prefetch > 0 they are prepared ahead by background threads."""
        batches = self.batch_indices(epoch)
        if self.prefetch == 0:
            for number, index in enumerate(batches):
                start = time.perf_counter()
                images, labels = self._make(index)
                yield Batch(number, images, labels, time.perf_counter() - start)
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
                    yield Batch(number, images, labels, wait)
                    number += 1
            finally:
                for future in pending:
                    future.cancel()
