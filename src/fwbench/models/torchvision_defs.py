"""The study's torch models: torchvision's own definitions, untouched, built without pretrained weights (weights
come from the study's shared initialisation or a local file, never a hub)."""

from __future__ import annotations

import torchvision


def resnet50(*, num_classes: int, image_size: int):
    del image_size
    return torchvision.models.resnet50(weights=None, num_classes=num_classes)


def vit_b_16(*, num_classes: int, image_size: int):
    return torchvision.models.vit_b_16(weights=None, num_classes=num_classes, image_size=image_size)


def mobilenet_v3_small(*, num_classes: int, image_size: int):
    del image_size
    return torchvision.models.mobilenet_v3_small(weights=None, num_classes=num_classes)


def efficientnet_b0(*, num_classes: int, image_size: int):
    del image_size
    return torchvision.models.efficientnet_b0(weights=None, num_classes=num_classes)
