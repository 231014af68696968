"""Epoch checkpoints written straight to their file, tensor by tensor.

Serialising the whole state into memory first (a BytesIO plus its copy, or one msgpack blob) is a transient of up to
twice the model and optimizer state, of a size that differs between frameworks; streaming keeps it to about one
tensor in both, and the training scenario measures RSS with checkpoint writes left out anyway. The file appears
atomically (temporary file, fsync, rename), so a kill never leaves a half-written checkpoint to resume from.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO

import numpy as np

FORMAT = 2  # 1: in-memory torch.save / flax msgpack; 2: streamed (torch.save to the file, JAX leaves in an .npz)


def write_arrays(handle: BinaryIO, named: Iterable[tuple[str, Any]], to_host: Callable[[Any], np.ndarray]) -> None:
    """An uncompressed zip of `.npy` members, one per (name, array) in order, each moved to the host only when it is
    written; the names, in order, go to `names.json`."""
    names = []
    with zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED) as archive:
        for index, (name, array) in enumerate(named):
            names.append(name)
            with archive.open(f"{index}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asarray(to_host(array), order="C"), allow_pickle=False)
        archive.writestr("names.json", json.dumps(names))


def read_arrays(path: str | os.PathLike, names: list[str], like: list[Any]) -> list[np.ndarray]:
    """The arrays `write_arrays` wrote, checked against the expected names and each template's shape; extension
    dtypes that `.npy` stores as raw bytes (bfloat16) are given back the template's dtype."""
    with zipfile.ZipFile(path) as archive:
        stored = json.loads(archive.read("names.json"))
        if stored != names:
            raise ValueError(
                f"{path}: checkpoint holds {len(stored)} arrays that do not match the state's {len(names)}"
            )
        arrays = []
        for index, template in enumerate(like):
            with archive.open(f"{index}.npy") as member:
                array = np.lib.format.read_array(member, allow_pickle=False)
            dtype = np.dtype(template.dtype)
            if array.dtype != dtype:
                array = array.view(dtype)
            if array.shape != tuple(template.shape):
                raise ValueError(f"{path}: {names[index]} has shape {array.shape}, expected {tuple(template.shape)}")
            arrays.append(array)
    return arrays
