"""The embedded dataset: seeded, learnable images so the default study runs offline yet accuracy can rise.

Each class owns a prototype made of oriented colour gratings; a sample is its class prototype, randomly shifted
and scaled in contrast, plus Gaussian noise. A classifier must learn orientation, frequency and colour, which a small
CNN does within an epoch or two, while chance stays at 1/num_classes.
"""

from __future__ import annotations

import numpy as np

CHUNK = 256  # images generated per step, bounding peak memory for large resolutions


def _prototypes(rng: np.random.Generator, num_classes: int, size: int) -> np.ndarray:
    yy, xx = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    protos = np.empty((num_classes, size, size, 3), dtype=np.float32)
    for c in range(num_classes):
        image = np.zeros((size, size, 3), dtype=np.float32)
        for _ in range(2):
            angle = rng.uniform(0, np.pi)
            freq = rng.uniform(1.5, 5.0) / size * 2 * np.pi
            phase = rng.uniform(0, 2 * np.pi)
            colour = rng.uniform(-1, 1, size=3).astype(np.float32)
            wave = np.sin(freq * (np.cos(angle) * xx + np.sin(angle) * yy) + phase).astype(np.float32)
            image += wave[..., None] * colour
        image += rng.uniform(-0.5, 0.5, size=3).astype(np.float32)  # class tint
        protos[c] = image / max(1e-6, float(np.abs(image).max()))
    return protos


def _samples(rng: np.random.Generator, protos: np.ndarray, labels: np.ndarray, noise: float) -> np.ndarray:
    count, size = len(labels), protos.shape[1]
    out = np.empty((count, size, size, 3), dtype=np.uint8)
    for start in range(0, count, CHUNK):
        chunk = labels[start : start + CHUNK]
        shifts = rng.integers(0, size, size=(len(chunk), 2))
        contrast = rng.uniform(0.6, 1.0, size=(len(chunk), 1, 1, 1)).astype(np.float32)
        images = np.stack(
            [np.roll(protos[label], tuple(shift), axis=(0, 1)) for label, shift in zip(chunk, shifts, strict=True)]
        )
        images = images * contrast + rng.normal(0.0, noise, size=images.shape).astype(np.float32)
        out[start : start + len(chunk)] = np.clip((images + 1.0) * 127.5, 0, 255).round().astype(np.uint8)
    return out


def generate(
    *, image_size: int, num_classes: int, train_size: int, val_size: int, seed: int, noise: float
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Return {split: (uint8 NHWC images, int64 labels)}; identical for identical arguments."""
    proto_seq, train_seq, val_seq = np.random.SeedSequence(seed).spawn(3)
    protos = _prototypes(np.random.default_rng(proto_seq), num_classes, image_size)
    splits = {}
    for split, count, seq in (("train", train_size, train_seq), ("val", val_size, val_seq)):
        rng = np.random.default_rng(seq)
        labels = rng.permutation(np.arange(count) % num_classes).astype(np.int64)
        splits[split] = (_samples(rng, protos, labels, noise), labels)
    return splits
