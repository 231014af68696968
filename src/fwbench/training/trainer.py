"""The training interface every framework implements (its trainer, built by its backend): what the shared training
loop (fwbench.scenarios.training) asks of a model in training, and the BatchNorm statistics evaluation may use."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import numpy as np

# What BatchNorm normalises with when a trainer evaluates. running: the exponential running statistics training
# left behind (what inference uses). recalibrated: the average over a few training batches computed after the epoch
# (precise BN), which the recipe may ask for because a momentum-0.01 running average lags far behind weights that
# moved in the last few dozen steps. batch: the evaluated batch's own statistics, a diagnostic only.
STATISTICS = ("running", "recalibrated", "batch")


class Trainer(ABC):
    """A model in training with its optimizer state: everything the shared training loop asks of a framework.

    Steps may return before the device has finished; `value` synchronises. Evaluation uses the model's eval mode
    (running BatchNorm statistics, no dropout), as inference does.
    """

    compilations: int = 0
    # The layout (NHWC or NCHW) of the float32 host batches `to_device` takes. The shared loader's threads produce
    # batches in it, so the host-side transpose never falls inside a timed step, for every framework alike.
    input_layout: str = "NHWC"

    @abstractmethod
    def to_device(self, images: np.ndarray, labels: np.ndarray) -> tuple[Any, Any]: ...

    @abstractmethod
    def synchronize(self, handle: Any) -> None: ...

    @abstractmethod
    def compile(self, images: Any, labels: Any) -> dict[str, float] | None:
        """Prepare every function the cell runs for these shapes; the compile/first-call time's breakdown in seconds
        (fwbench.training.firstcall), or None. Trainers that support `loader.drop_last: false` take
        `partial_batches=True` to prepare the masked step too; `train=False` prepares all but the train steps (for a
        check that only probes, evaluates and recalibrates)."""

    @abstractmethod
    def step(self, images: Any, labels: Any, lr: float, step_index: int) -> Any:
        """One optimiser step at learning rate `lr`; returns the batch loss (a device value). A padded partial batch
        comes with `valid=` its real rows, and the loss is their mean."""

    @abstractmethod
    def value(self, loss: Any) -> float: ...

    @abstractmethod
    def evaluate(self, images: Any, labels: Any, valid: int, *, statistics: str = "running") -> tuple[float, int, int]:
        """Sum of losses, top-1 and top-5 hits over the first `valid` rows (the rest is padding), in eval mode.
        `statistics` picks what BatchNorm normalises with (see STATISTICS); no choice touches the trained state."""

    def recalibrate(self, batches: Iterable[Any]) -> bool:
        """Recompute BatchNorm's statistics as the plain average of these batches' own statistics (train mode,
        randomness off, no gradients: torch's cumulative mode, momentum=None), kept apart from the running
        statistics for `evaluate(statistics="recalibrated")`. Returns False for a model without BatchNorm, which
        is what this default says."""
        return False

    @abstractmethod
    def probe(self, images: Any, labels: Any, lr: float) -> dict[str, float]:
        """Without touching the trained state: loss and global gradient norm on this batch with randomness off,
        and the loss on the same batch after one optimiser step at `lr` (the step-0 agreement check)."""

    @abstractmethod
    def save(self, path) -> None: ...

    @abstractmethod
    def load(self, path) -> None: ...
