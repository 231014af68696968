"""The training recipe both frameworks follow, defined once.

The learning rate of every step is computed here in float64 and handed to each framework's step as a number, so
the schedule cannot differ between optax and torch.optim; Adam's moments, bias correction and epsilon placement are
the same in `torch.optim.Adam` and `optax.scale_by_adam` (eps added after the square root, no eps inside it), and
weight decay is torch's (L2 added to the gradient before Adam), which optax expresses as `add_decayed_weights`
ahead of `scale_by_adam`. The test suite checks one step of each against the other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Recipe:
    lr: float
    betas: tuple[float, float]
    eps: float
    weight_decay: float
    schedule: str  # "cosine" | "constant"
    epochs: int
    seed: int
    # Before each evaluation, BatchNorm statistics recomputed as the average over this many training batches (the
    # epoch's first ones, randomness off); 0 evaluates with the running statistics training left behind.
    bn_recalibration_batches: int = 0

    @classmethod
    def from_config(cls, training: Mapping[str, Any], seed: int) -> Recipe:
        return cls(
            lr=float(training["lr"]),
            betas=(float(training["betas"][0]), float(training["betas"][1])),
            eps=float(training["eps"]),
            weight_decay=float(training["weight_decay"]),
            schedule=str(training["schedule"]),
            epochs=int(training["epochs"]),
            seed=int(seed),
            bn_recalibration_batches=int(training.get("bn_recalibration_batches", 0)),
        )

    def describe(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "betas": list(self.betas),
            "optimizer": "Adam (torch.optim.Adam / optax add_decayed_weights + scale_by_adam)",
            "loss": "cross-entropy, mean over the batch",
        }


def learning_rates(recipe: Recipe, total_steps: int) -> np.ndarray:
    """Learning rate of each step 0..total_steps-1. Cosine decays from `lr` towards 0 over the total steps
    (optax.cosine_decay_schedule with alpha=0: lr * (1 + cos(pi * step / total)) / 2)."""
    if total_steps < 1:
        raise ValueError(f"a training run needs at least one step, got {total_steps}")
    steps = np.arange(total_steps, dtype=np.float64)
    if recipe.schedule == "constant":
        return np.full(total_steps, recipe.lr)
    if recipe.schedule == "cosine":
        return recipe.lr * 0.5 * (1.0 + np.cos(math.pi * steps / total_steps))
    raise ValueError(f"training.schedule = {recipe.schedule!r}: unknown schedule")
