"""The study's one starting point per model: made once, in PyTorch, and loaded by every framework.

Either a seeded random initialisation or a local torchvision weights file (never a hub download). A pretrained
file is adapted the way torchvision adapts it: ViT's position embedding is interpolated to the study's resolution
(torchvision's interpolate_embeddings), and a classification head whose size does not match the study's classes is
replaced by the seeded initialisation's head. What was done is recorded next to the weights, so the paper can say
exactly where every model started, and no framework can start from weights of its own.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from fwbench.data.store import sha256_file
from fwbench.io import atomic_write_bytes, atomic_write_json, read_json
from fwbench.models.registry import spec


def provenance_path(weights_path: str | Path) -> Path:
    return Path(weights_path).with_suffix(".json")


def _adapt_pretrained(name: str, loaded: dict, fresh: dict, *, image_size: int) -> tuple[dict, list[str]]:
    import torch

    adapted, notes = dict(loaded), []
    if name == "vit_b_16" and "encoder.pos_embedding" in adapted:
        wanted = fresh["encoder.pos_embedding"].shape
        if tuple(adapted["encoder.pos_embedding"].shape) != tuple(wanted):
            from torchvision.models.vision_transformer import interpolate_embeddings

            before = tuple(adapted["encoder.pos_embedding"].shape)
            adapted = interpolate_embeddings(image_size, 16, adapted, interpolation_mode="bicubic")
            notes.append(f"encoder.pos_embedding interpolated (bicubic) from {before} to {tuple(wanted)}")
    for key in spec(name).head:
        if key in adapted and tuple(adapted[key].shape) != tuple(fresh[key].shape):
            notes.append(f"{key} {tuple(adapted[key].shape)} replaced by the seeded head {tuple(fresh[key].shape)}")
            adapted[key] = fresh[key]
    return {k: v if isinstance(v, torch.Tensor) else torch.as_tensor(v) for k, v in adapted.items()}, notes


HEAD_INITS = ("torchvision", "fan_in")


def _reinit_head(model: str, module, head_init: str) -> str | None:
    """Apply the study's head-initialisation policy to the seeded module; returns what was done, or None.

    torchvision sizes some heads for ImageNet's 1000 classes: EfficientNet draws its classifier from
    U(+-1/sqrt(num_classes)), so with 10 classes the initial logits are ten times too large (loss 4.8 instead of
    ln 10, gradient norm in the hundreds) and 64 steps from scratch stay near chance. `fan_in` redraws every model's
    head as PyTorch's nn.Linear does (U(+-1/sqrt(in_features)) for weight and bias), from the same seeded stream, so
    it is still one start shared by every framework; the head's gradient keeps the backbone in the step-0 check
    (a zero head would not).
    """
    if head_init == "torchvision":
        return None
    if head_init != "fan_in":
        raise ValueError(f"head_init = {head_init!r}: unknown policy; known: {', '.join(HEAD_INITS)}")
    owner = module.get_submodule(spec(model).head[0].rsplit(".", 1)[0])
    owner.reset_parameters()
    return f"head redrawn as nn.Linear's default, U(+-1/sqrt({owner.in_features}))"


CALIBRATION_BATCH = 16  # images per train-mode forward when BatchNorm statistics are calibrated


def calibration_batches(images_nhwc: np.ndarray, count: int) -> list[np.ndarray]:
    """The first `count` images of `images_nhwc` (uint8, the study's training split) as normalised NCHW batches of
    CALIBRATION_BATCH (the last one at least two images, which train-mode BatchNorm needs)."""
    from fwbench.data.inputs import batch_of, normalize

    count = min(int(count), len(images_nhwc))
    starts = list(range(0, count, CALIBRATION_BATCH))
    sizes = [min(CALIBRATION_BATCH, count - start) for start in starts]
    if len(sizes) > 1 and sizes[-1] < 2:
        sizes = sizes[:-2] + [sizes[-2] + sizes[-1]]
    return [
        np.ascontiguousarray(normalize(batch_of(images_nhwc, size, start=start)).transpose(0, 3, 1, 2))
        for start, size in zip(starts, sizes, strict=False)
        if size >= 2
    ]


def _calibrate(module, model: str, calibration: list[np.ndarray] | None, pretrained: bool) -> dict[str, Any]:
    """BatchNorm statistics calibrated on the study's training images (fwbench.models.calibration), what the record
    says about them. A pretrained file keeps its own statistics: they were learned, and a user fine-tuning it keeps
    them too."""
    from fwbench.models.calibration import batchnorm_modules, calibrate_batchnorm

    if not batchnorm_modules(module):
        return {"bn_statistics": "none (no BatchNorm)"}
    if pretrained:
        return {"bn_statistics": "the pretrained file's"}
    if not calibration:
        return {"bn_statistics": "the initialisation's (mean 0, variance 1; calibration off)"}
    images = calibrate_batchnorm(module, calibration)
    return {"bn_statistics": f"calibrated on {images} training images", "bn_calibration_images": images}


def init_weights(
    model: str,
    *,
    num_classes: int,
    image_size: int,
    seed: int,
    out: str | Path,
    pretrained: str | Path | None = None,
    head_init: str = "torchvision",
    calibration: list[np.ndarray] | None = None,
) -> dict[str, Any]:
    """Write the starting weights (torch layout, .npz) and their provenance (.json beside them). `calibration`:
    normalised NCHW batches of the study's training images on which a seeded start's BatchNorm statistics are
    calibrated (`calibration_batches`), so that its eval logits depend on the image and parity can fail."""
    import torch

    from fwbench.models import torch_model, torch_state_dict_numpy

    torch.manual_seed(seed)
    module = torch_model(model, num_classes=num_classes, image_size=image_size)
    head_note = _reinit_head(model, module, head_init)
    record: dict[str, Any] = {
        "model": model,
        "num_classes": num_classes,
        "image_size": image_size,
        "seed": seed,
        "head_init": head_init,
    }
    if pretrained is None:
        description = f"torchvision initialisation, torch.manual_seed({seed})"
        record.update(source="random", description=description + (f"; {head_note}" if head_note else ""))
    else:
        loaded = torch.load(pretrained, map_location="cpu", weights_only=True)
        if not isinstance(loaded, dict) or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
            raise ValueError(f"pretrained.{model} = {str(pretrained)!r}: not a state_dict of tensors")
        state, notes = _adapt_pretrained(model, loaded, module.state_dict(), image_size=image_size)
        try:
            module.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise ValueError(f"pretrained.{model} = {str(pretrained)!r} does not fit {model}: {exc}") from None
        record.update(
            source="pretrained",
            path=str(pretrained),
            sha256=sha256_file(pretrained),
            adaptations=notes,
            description=f"local file {Path(pretrained).name}" + (f" ({'; '.join(notes)})" if notes else ""),
        )
    record |= _calibrate(module, model, calibration, pretrained is not None)
    record["description"] += f"; BatchNorm statistics: {record['bn_statistics']}"
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **torch_state_dict_numpy(module))
    atomic_write_bytes(out, buffer.getvalue())
    record["weights_sha256"] = sha256_file(out)
    atomic_write_json(provenance_path(out), record)
    return record


def read_provenance(weights_path: str | Path) -> dict[str, Any] | None:
    path = provenance_path(weights_path)
    return read_json(path) if path.exists() else None
