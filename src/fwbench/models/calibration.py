"""BatchNorm running statistics calibrated on data, so that a model's eval logits depend on its input.

A freshly initialised network in eval mode normalises with running statistics of mean 0 and variance 1, which match
nothing its layers produce: in MobileNetV3-Small and EfficientNet-B0 the activations shrink layer by layer until the
logits are the head's bias, the same for every image (relative spread 2e-8 and exactly 0 in the first GPU study). A
parity check on such logits cannot fail: a twin that ignored its input would pass it. Calibrating the statistics as
the plain average of the batches' own statistics (momentum None, PyTorch's cumulative average) gives every layer the
scale it has in training, and the logits then vary with the image. The study calibrates its starting weights on its
own training images (fwbench.models.weights); the parity tests calibrate their random weights on random batches
(fwbench.models.parity_core). Either way it happens once, in PyTorch, and every framework loads the result.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

# A model's logits depend on its input when, over the images of one batch, some logit moves by more than this share of
# the largest |logit| (the parity tests' error statistic's scale): above float32 rounding of a sum over thousands of
# terms by three orders of magnitude, and far below what calibrated networks show (1e-1 and more).
MIN_INPUT_DEPENDENCE = 1e-3


def input_dependence(logits: np.ndarray) -> float:
    """max over images and classes of |logit - its mean over the images| / max |logit|: 0 when every image gets the
    same logits, the share of the logits' scale that the input moves otherwise."""
    values = np.asarray(logits, dtype=np.float64)
    if values.ndim != 2 or len(values) < 2:
        raise ValueError(f"input dependence needs the logits of at least two images, got shape {values.shape}")
    scale = float(np.abs(values).max())
    spread = float(np.abs(values - values.mean(axis=0, keepdims=True)).max())
    return spread / scale if scale > 0 else 0.0


def batchnorm_modules(module) -> list:
    import torch

    return [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]


def calibrate_batchnorm(module, batches_nchw: Iterable[np.ndarray]) -> int:
    """Replace every BatchNorm's running statistics by the average of its batch statistics over `batches_nchw`
    (train-mode forwards without gradients; dropout and stochastic depth stay off, so the pass is deterministic).
    The module is left in eval mode with its momentum as it was. Returns the number of images seen; 0 and nothing
    changed for a model without BatchNorm (ViT-B/16)."""
    import torch

    norms = batchnorm_modules(module)
    if not norms:
        return 0
    momenta = [m.momentum for m in norms]
    seen = 0
    with torch.no_grad():
        for m in norms:
            m.reset_running_stats()
            m.momentum = None  # cumulative moving average: the plain mean over the batches
        module.eval()
        for m in norms:
            m.train()
        dtype = next(module.parameters()).dtype
        for batch in batches_nchw:
            module(torch.from_numpy(np.ascontiguousarray(batch)).to(dtype))
            seen += len(batch)
        for m, momentum in zip(norms, momenta, strict=True):
            m.momentum = momentum
    module.eval()
    if not seen:
        raise ValueError("BatchNorm calibration got no images")
    return seen
