"""The study's one weight initialisation per model: made once by torch from a seed, stored as numpy, and loaded by
every framework, so no framework ever starts from weights of its own."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from fwbench.io import atomic_write_bytes


def init_weights(model: str, *, num_classes: int, image_size: int, seed: int, out: str | Path) -> None:
    import torch

    from fwbench.models import torch_model, torch_state_dict_numpy

    torch.manual_seed(seed)
    state = torch_state_dict_numpy(torch_model(model, num_classes=num_classes, image_size=image_size))
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **state)
    atomic_write_bytes(out, buffer.getvalue())
