"""Turning dataset images into model inputs, done once on the host in NumPy so every framework gets the same bytes."""

from __future__ import annotations

import numpy as np

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def normalize(images_nhwc_uint8: np.ndarray) -> np.ndarray:
    """uint8 NHWC → float32 NHWC with ImageNet mean/std, in torchvision's order of operations (ToTensor's /255,
    then Normalize), in place in one float32 buffer because the loader does this for every training batch."""
    images = np.asarray(images_nhwc_uint8)
    out = np.empty(images.shape, dtype=np.float32)
    np.divide(images, np.float32(255.0), out=out, dtype=np.float32)
    np.subtract(out, IMAGENET_MEAN, out=out)
    np.divide(out, IMAGENET_STD, out=out)
    return out


def batch_of(images: np.ndarray, batch_size: int, start: int = 0) -> np.ndarray:
    """`batch_size` consecutive images from `start`, wrapping around when the split is smaller than the batch."""
    if len(images) == 0:
        raise ValueError("cannot build a batch from an empty split")
    index = (start + np.arange(batch_size)) % len(images)
    return np.asarray(images[index])
