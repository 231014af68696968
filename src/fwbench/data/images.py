"""One image file in, one uint8 RGB array at the study's resolution out, or the reason it cannot be used.

The geometry is torchvision's evaluation transform on PIL images, `Resize(resize_size)` (shorter side, bilinear,
long side truncated as torchvision does) followed by `CenterCrop(image_size)`, so the shards hold exactly what a
torchvision pipeline would feed a model; a test checks byte equality with torchvision.
"""

from __future__ import annotations

import io
import os
import warnings

import numpy as np
from PIL import Image, UnidentifiedImageError


class Unusable(Exception):
    """An image that is skipped and counted rather than stopping preprocessing; the message is the reason."""


def open_rgb(source: str | os.PathLike | bytes) -> tuple[Image.Image, str]:
    """Decode fully and convert any mode to RGB; returns the image and its original mode."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(source) if isinstance(source, bytes) else source)
            image.load()  # decoding is lazy: a truncated file fails here, not at open()
    except UnidentifiedImageError:
        raise Unusable("not an image (PIL cannot identify the format)") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise Unusable(f"too large to decode safely: {error}") from None
    except (OSError, SyntaxError, ValueError) as error:
        text = str(error)
        kind = "truncated image" if "truncated" in text.lower() else "unreadable image"
        raise Unusable(f"{kind}: {text}") from None
    mode = image.mode
    if mode == "RGB":
        return image, mode
    if mode in ("P", "PA"):  # a palette may carry transparency: expand it, then drop alpha like any RGBA
        image = image.convert("RGBA")
    elif mode.startswith("I") or mode == "F":  # 16/32-bit grey: scale 16-bit to 8-bit, clip the rest
        values = np.asarray(image, dtype=np.float64)
        if mode.startswith("I;16") or values.max(initial=0) > 255:
            values = values / 257.0
        image = Image.fromarray(np.clip(np.round(values), 0, 255).astype(np.uint8), mode="L")
    return image.convert("RGB"), mode  # L, LA, 1, CMYK, YCbCr, RGBA (alpha dropped), ...


def resized_size(width: int, height: int, size: int) -> tuple[int, int]:
    """torchvision's `Resize(size)` output (width, height): the shorter side becomes `size`, the longer is
    truncated, not rounded."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = size, int(size * long / short)
    return (new_short, new_long) if width <= height else (new_long, new_short)


def resize_center_crop(image: Image.Image, resize_size: int, crop_size: int) -> np.ndarray:
    width, height = resized_size(*image.size, resize_size)
    if (width, height) != image.size:
        image = image.resize((width, height), Image.Resampling.BILINEAR)
    top = int(round((height - crop_size) / 2.0))
    left = int(round((width - crop_size) / 2.0))
    array = np.asarray(image.crop((left, top, left + crop_size, top + crop_size)), dtype=np.uint8)
    if array.shape != (crop_size, crop_size, 3):
        raise Unusable(f"crop gave shape {array.shape}")
    return array


def load_image(source: str | os.PathLike | bytes, resize_size: int, crop_size: int) -> tuple[np.ndarray, str]:
    """uint8 HWC RGB array at `crop_size` and the original mode; raises Unusable with the reason."""
    image, mode = open_rgb(source)
    return resize_center_crop(image, resize_size, crop_size), mode
