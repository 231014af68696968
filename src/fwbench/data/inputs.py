"""Turning dataset images into model inputs, done once on the host in NumPy so every framework gets the same bytes."""

from __future__ import annotations

import numpy as np

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def normalize(images_nhwc_uint8: np.ndarray) -> np.ndarray:
    """uint8 NHWC → float32 NHWC with ImageNet mean/std (torchvision's convention)."""
    scaled = np.asarray(images_nhwc_uint8, dtype=np.float32) / np.float32(255.0)
    return (scaled - IMAGENET_MEAN) / IMAGENET_STD


def batch_of(images: np.ndarray, batch_size: int, start: int = 0) -> np.ndarray:
    """`batch_size` consecutive images from `start`, wrapping around when the split is smaller than the batch."""
    if len(images) == 0:
        raise ValueError("cannot build a batch from an empty split")
    index = (start + np.arange(batch_size)) % len(images)
    return np.asarray(images[index])
