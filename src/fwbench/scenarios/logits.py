"""The logits an inference cell keeps of its first images: the parity check's input, from the timed program itself.

Every inference cell's first call computes the logits of its first warm batch, the first `batch_size` validation
images, in the program its bursts then time. The cell keeps those of the first ROWS images (float32, little-endian,
base64: 8 rows of 1,000 classes are 43 kB of JSON), so that the weights-identical control (fwbench.scenarios.parity)
compares the frameworks' timed programs, in the precision they were timed in, without a job that builds and
compiles every model again (62 s of JAX's on an H200, 71 s on the CPU VM).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import numpy as np

ROWS = 8  # images: enough to see any layer disagree, and to judge whether the logits depend on the image


def pack(logits: np.ndarray, rows: int = ROWS) -> dict[str, Any]:
    """The first `rows` rows of a cell's logits, as the cell's result keeps them."""
    kept = np.ascontiguousarray(np.asarray(logits, dtype="<f4")[:rows])
    return {
        "rows": int(kept.shape[0]),
        "classes": int(kept.shape[1]),
        "float32_le_base64": base64.b64encode(kept.tobytes()).decode("ascii"),
        "what": f"logits of the cell's first {kept.shape[0]} images, from its first call (the timed program)",
    }


def unpack(record: Mapping[str, Any]) -> np.ndarray:
    """The rows `pack` kept; a record whose data does not have its stated shape is refused, naming the mismatch."""
    data = base64.b64decode(str(record["float32_le_base64"]).encode("ascii"), validate=True)
    rows, classes = int(record["rows"]), int(record["classes"])
    if len(data) != rows * classes * 4:
        raise ValueError(f"logits record of {rows}x{classes} float32 holds {len(data)} bytes")
    return np.frombuffer(data, dtype="<f4").reshape(rows, classes).astype(np.float32)
